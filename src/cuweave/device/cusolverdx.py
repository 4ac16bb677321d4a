"""Dense solvers inside numba kernels (cuSOLVERDx), as nvmath-python 1.0's ``nvmath.device``.

``Solver`` is one cuSOLVERDx function; the specialised classes pair the functions one usually
calls together and name their operands: :class:`CholeskySolver` (``potrf`` + ``potrs``),
:class:`LUSolver` and :class:`LUPivotSolver` (``getrf`` + ``getrs``), :class:`TriangularSolver`
(``trsm``), :class:`QRFactorize`/:class:`LQFactorize` (``geqrf``/``gelqf``),
:class:`QRMultiply`/:class:`LQMultiply` (``unmqr``/``unmlq``) and :class:`LeastSquaresSolver`
(``gels``). Kernels written for ``nvmath.device`` run with the import renamed::

    solver = CholeskySolver((32, 32, 1), np.float32, "Block", "lower",
                            batches_per_block="suggested")
    n_a, n_b = solver.a_size(), solver.b_size()

    @cuda.jit
    def kernel(a, b, info):
        sa = cuda.shared.array(n_a, dtype=solver.value_type)
        ...                                  # load (strides: solver.a_strides())
        solver.factorize(sa, info[cuda.blockIdx.x * solver.batches_per_block:])
        cuda.syncthreads()
        solver.solve(sa, sb)                 # B is overwritten by X

    kernel[blocks, solver.block_dim](a, b, info)

The functions of one object share one launch: the factorization's batches per block and
block dimension (cuSOLVERDx's suggestion or default for it) are given to the solve, which
would otherwise get its own (nvmath-python 1.0 leaves them to each function, and they
differ, e.g. 64 and 32 threads for a 16x16 fp64 Cholesky).

Matrices live in shared memory, ``batches_per_block`` of them one after the other: a
column-major ``rows x cols`` operand with leading dimension ``ld`` has strides
``(ld * cols, 1, ld)`` (batch, row, column), a row-major one ``(ld * rows, ld, 1)``. Every
device method also takes the leading dimensions at run time (``factorize(a, info, lda=40)``;
all of a method's or none). ``info`` (int32, one per problem) reports a non-positive-definite
or singular matrix (``info[i] = j > 0``: the ``j``-th pivot) instead of failing; ``ipiv``
holds 1-based row interchanges.
"""

from __future__ import annotations

import inspect

import numpy as np

from .._internal.errors import InvalidOptionError
from . import _solver_docs
from ._kernel_object import KernelObject, register_kernel_type
from ._solver_core import Solver, compile_solver_execute
from ._solver_options import TRANSPOSE_MODES, choice, normalize_size

__all__ = ["Solver", "CholeskySolver", "LUSolver", "LUPivotSolver", "TriangularSolver",
           "QRFactorize", "LQFactorize", "QRMultiply", "LQMultiply", "LeastSquaresSolver",
           "compile_solver_execute"]

def _strides(shape: tuple, ld: int, order: str) -> tuple:
    rows, cols = shape
    return (ld * cols, 1, ld) if order == "col_major" else (ld * rows, ld, 1)


def _trait(getter, doc: str) -> property:
    """A read-only property of the main :class:`Solver` (``_source``)'s value, documented."""
    return property(lambda self: getter(self._source), doc=doc)


class _SolverAPI(KernelObject):
    """What the specialised classes share: the knobs and traits of their main :class:`Solver`
    (``_source``), operand shapes and strides, and their device methods inside kernels.

    A subclass names ``_METHODS`` ({method: (attribute of its Solver, positional params)}),
    ``_OPERANDS`` ({operand: (leading-dimension keyword, arrangement index)}, each with an
    ``<operand>_shape``) and ``_CONSTANTS`` (more attributes readable inside kernels).
    """

    _METHODS: dict = {}
    _OPERANDS: dict = {}
    _CONSTANTS: tuple = ()
    _BASE_CONSTANTS = ("m", "n", "k", "size", "lda", "ldb", "leading_dimensions",
                       "batches_per_block", "block_dim", "block_size", "value_type",
                       "precision")

    def _setup(self, source: Solver, **solvers) -> None:
        self._source = source
        for name, solver in solvers.items():
            setattr(self, name, solver)
        register_kernel_type(type(self))

    @staticmethod
    def _make(function, size, precision, execution, knobs: dict, **extra) -> Solver:
        return Solver(function, size, precision, execution, **knobs, **extra)

    @staticmethod
    def _same_launch(first: Solver) -> dict:
        """Knobs that give another function of the object ``first``'s batches per block and
        block dimension: the functions run in one kernel, with one launch and one layout
        (left to cuSOLVERDx, potrf and potrs, getrf and getrs suggest or default to different
        ones)."""
        if first.execution != "Block":
            return {}
        return {"batches_per_block": first.batches_per_block,
                "block_dim": tuple(first.block_dim)}

    # ----- knobs and traits of the main solver (readable inside kernels too) -----------------
    size = _trait(lambda s: s.size, "``(M, N, K)``: the problem size, completed to 3 values.")
    m = _trait(lambda s: s.m, "M, the first value of :attr:`size` (rows of A for most "
                              "functions).")
    n = _trait(lambda s: s.n, "N, the second value of :attr:`size` (columns of A for most "
                              "functions).")
    k = _trait(lambda s: s.k, "K, the third value of :attr:`size` (right-hand sides, columns "
                              "of B, or reflectors).")
    precision = _trait(lambda s: s.precision,
                       "``numpy.float32`` or ``numpy.float64``: the precision of the "
                       "computation.")
    execution = _trait(lambda s: s.execution, "``'Block'`` or ``'Thread'``.")
    sm = _trait(lambda s: s.sm, "Target compute capability, a ``ComputeCapability`` such "
                                "as ``(9, 0)``.")
    arrangement = _trait(lambda s: s.arrangement,
                         "``(A's, B's)`` storage order, each ``'col_major'`` or "
                         "``'row_major'`` (B's stands for C's, or the B/X buffer's).")
    a_arrangement = _trait(lambda s: s.a_arrangement,
                           "Storage order of A: ``'col_major'`` or ``'row_major'``.")
    b_arrangement = _trait(lambda s: s.b_arrangement,
                           "Storage order of the second matrix (B, C or the B/X buffer): "
                           "``'col_major'`` or ``'row_major'``.")
    batches_per_block = _trait(lambda s: s.batches_per_block,
                               "Problems one CUDA block solves (1 for Thread execution).")
    data_type = _trait(lambda s: s.data_type, "``'real'`` or ``'complex'``.")
    leading_dimensions = _trait(lambda s: s.leading_dimensions,
                                "``(lda, ldb)``, the compile-time leading dimensions in "
                                "elements (0 where there is no second matrix).")
    lda = _trait(lambda s: s.lda, "Compile-time leading dimension of A, in elements.")
    ldb = _trait(lambda s: s.ldb, "Compile-time leading dimension of the second matrix (B, C "
                                  "or the B/X buffer), in elements.")
    block_dim = _trait(lambda s: s.block_dim,
                       "Threads of the CUDA block to launch, a ``Dim3`` ``(x, y, z)`` "
                       "(None for Thread execution).")
    block_size = _trait(lambda s: s.block_size,
                        "Threads per block, ``x * y * z`` of :attr:`block_dim` (None for "
                        "Thread execution).")
    value_type = _trait(lambda s: s.value_type,
                        "NumPy type of the matrix elements: ``float32``, ``float64``, "
                        "``complex64`` or ``complex128``.")

    def _solvers(self) -> list[Solver]:
        return [s for s in vars(self).values() if isinstance(s, Solver)]

    # ----- operands ---------------------------------------------------------------------------
    def _operand_strides(self, operand: str, ld) -> tuple:
        ld_name, index = self._OPERANDS[operand]
        if ld is None:
            ld = self.leading_dimensions[index]
        elif isinstance(ld, bool) or not isinstance(ld, (int, np.integer)) or ld <= 0:
            raise InvalidOptionError(f"{ld_name} must be a positive integer, got {ld!r}")
        return _strides(getattr(self, f"{operand}_shape")[1:], int(ld),
                        self.arrangement[index])

    def _operand_size(self, operand: str, ld) -> int:
        return self._operand_strides(operand, ld)[0] * self.batches_per_block

    # ----- inside kernels ---------------------------------------------------------------------
    def _kernel_key(self) -> tuple:
        return (type(self).__name__,) + tuple(s._kernel_key() for s in self._solvers())

    def _kernel_attribute(self, name: str):
        if name in self._BASE_CONSTANTS or name in self._CONSTANTS:
            return getattr(self, name)
        if name in self._METHODS:
            solver_attr, params = self._METHODS[name]
            solver = getattr(self, solver_attr)
            if solver is None:
                raise InvalidOptionError(f"{name} needs a square matrix (m == n), got size "
                                         f"{self.size}")
            from . import _solver_numba

            return _solver_numba.method_function(solver, name, params, self._kernel_key())
        operand, _, what = name.partition("_")
        if operand in self._OPERANDS and what in ("strides", "size"):
            return self._device_helper(operand, what)
        raise AttributeError(name)

    def _device_helper(self, operand: str, what: str):
        from . import _solver_numba

        ld_name, index = self._OPERANDS[operand]
        rows, cols = getattr(self, f"{operand}_shape")[1:]
        key = (self._kernel_key(), operand)
        strides = _solver_numba.strides_function(
            rows, cols, self.leading_dimensions[index], self.arrangement[index] == "col_major",
            ld_name, key)
        if what == "strides":
            return strides
        return _solver_numba.size_function(strides, self.batches_per_block, key)

    def __repr__(self):
        return f"{type(self).__name__}({self._source!r})"


def _keyword_signature(*names: str, keyword_only=()) -> inspect.Signature:
    """``(self, names..., *, keyword_only=None...)``: the signature a method documents (its
    code takes ``*args, **kwargs``)."""
    p = inspect.Parameter
    return inspect.Signature(
        [p("self", p.POSITIONAL_OR_KEYWORD)] + [p(n, p.POSITIONAL_OR_KEYWORD) for n in names]
        + [p(n, p.KEYWORD_ONLY, default=None) for n in keyword_only])


def _operand_methods(cls):
    """``<operand>_strides(*, ld=None)`` and ``<operand>_size(*, ld=None)`` on the host for each
    of ``cls._OPERANDS`` (inside kernels the same names are device functions)."""
    for operand, (ld_name, index) in cls._OPERANDS.items():
        def strides(self, *, _op=operand, _ld=ld_name, **kw):
            return self._operand_strides(_op, _take(kw, _ld))

        def size(self, *, _op=operand, _ld=ld_name, **kw):
            return self._operand_size(_op, _take(kw, _ld))

        strides.__name__, size.__name__ = f"{operand}_strides", f"{operand}_size"
        strides.__doc__, size.__doc__ = _solver_docs.operand_helpers(operand, ld_name, index)
        strides.__signature__ = size.__signature__ = _keyword_signature(keyword_only=(ld_name,))
        setattr(cls, strides.__name__, strides)
        setattr(cls, size.__name__, size)
    return cls


def _take(kw: dict, ld_name: str):
    extra = set(kw) - {ld_name}
    if extra:
        raise InvalidOptionError(f"the only keyword is {ld_name}, got {sorted(extra)}")
    return kw.get(ld_name)


def _device_only(cls_methods: dict, name: str, lds: tuple, doc: str):
    """The host stand-in of device method ``name``: it carries the method's documentation
    (``doc`` and the signature of ``cls_methods[name]``'s parameters, then ``lds`` by keyword)
    and raises when called outside a kernel."""
    def method(self, *args, **kwargs):
        raise RuntimeError(f"{name} is a device function: call it inside a @cuda.jit kernel")

    method.__name__ = name
    method.__doc__ = doc.strip("\n") + "\n" + _solver_docs.DEVICE_NOTE
    method.__signature__ = _keyword_signature(*cls_methods[name][1], keyword_only=lds)
    return method


class _LinearSolver(_SolverAPI):
    """A (M x N) and B (N x K) with one ``info`` per problem."""

    _OPERANDS = {"a": ("lda", 0), "b": ("ldb", 1)}
    _CONSTANTS = ("info_type", "info_shape", "info_strides", "a_shape", "b_shape")

    info_type = property(lambda self: np.int32, doc="``numpy.int32``, the type of ``info``.")
    info_shape = property(lambda self: (self.batches_per_block,),
                          doc="``(batches_per_block,)``: one ``info`` per problem of a block.")
    info_strides = property(lambda self: (1,), doc="``(1,)``, in elements.")
    a_shape = property(lambda self: (self.batches_per_block, self.m, self.n),
                       doc="``(batches_per_block, M, N)``: the A of each problem of a block.")
    b_shape = property(lambda self: (self.batches_per_block, self.n, self.k),
                       doc="``(batches_per_block, N, K)``: the B (and X) of each problem of "
                           "a block.")


@_operand_methods
@_solver_docs.fill
class CholeskySolver(_LinearSolver):
    """Cholesky factorization of Hermitian positive-definite matrices and the solve of
    ``A X = B`` (cuSOLVERDx ``potrf`` and ``potrs``).

    ``factorize`` computes ``A = L L^H`` (``fill_mode='lower'``) or ``A = U^H U``
    (``'upper'``) in place; ``solve`` then overwrites B with X. Both run with the same launch
    (:attr:`block_dim`, :attr:`batches_per_block`).

    Parameters
    ----------
    size : sequence of 1 to 3 ints
        ``(M,)``, ``(M, M)`` or ``(M, M, K)``: A is M x M (N must equal M), B is M x K (K
        right-hand sides, default 1).
    %(precision)s
    %(execution)s
    fill_mode : {'lower', 'upper'}
        The triangle of A that is read and that receives the factor.
    %(sm)s
    %(arrangement)s
    %(batches_per_block)s
    %(data_type)s
    %(leading_dimensions)s
    %(block_dim)s

    Examples
    --------
    >>> import numpy as np
    >>> s = CholeskySolver((32, 32, 4), np.float64, "Block", "lower", sm=90)
    >>> s.a_shape, s.b_shape, s.a_strides(), s.a_size()
    ((1, 32, 32), (1, 32, 4), (1024, 1, 32), 1024)
    """

    _METHODS = {"factorize": ("_factorize", ("a", "info")), "solve": ("_solve", ("a", "b"))}
    _CONSTANTS = _LinearSolver._CONSTANTS

    def __init__(self, size, precision, execution, fill_mode, *, sm=None, arrangement=None,
                 batches_per_block=None, data_type=None, leading_dimensions=None,
                 block_dim=None):
        if fill_mode is None:
            raise InvalidOptionError("fill_mode must be 'upper' or 'lower', got None")
        m, n, _ = normalize_size(size)
        if m != n:
            raise InvalidOptionError(f"size must describe a square A (M == N) for "
                                     f"CholeskySolver, got {size!r}")
        knobs = dict(sm=sm, arrangement=arrangement, batches_per_block=batches_per_block,
                     data_type=data_type, leading_dimensions=leading_dimensions,
                     block_dim=block_dim, fill_mode=fill_mode)
        factorize = self._make("potrf", size, precision, execution, knobs)
        solve = self._make("potrs", size, precision, execution,
                           knobs | self._same_launch(factorize))
        self._setup(solve, _factorize=factorize, _solve=solve)

    fill_mode = property(lambda self: self._solve.fill_mode,
                         doc="``'lower'`` or ``'upper'``: the triangle of A holding A and "
                             "then its factor.")
    factorize = _device_only(_METHODS, "factorize", ("lda",),
                             _solver_docs.METHODS["CholeskySolver.factorize"])
    solve = _device_only(_METHODS, "solve", ("lda", "ldb"),
                             _solver_docs.METHODS["CholeskySolver.solve"])


class _LU(_LinearSolver):
    _FACTORIZE = _SOLVE = ""

    def __init__(self, size, precision, execution, *, sm=None, transpose_mode="non_transposed",
                 arrangement=None, batches_per_block=None, data_type=None,
                 leading_dimensions=None, block_dim=None):
        if transpose_mode is None:
            raise InvalidOptionError(f"transpose_mode must be one of 'non_transposed', "
                                     f"'transposed', 'conj_transposed', got None for "
                                     f"{type(self).__name__}")
        knobs = dict(sm=sm, arrangement=arrangement, batches_per_block=batches_per_block,
                     data_type=data_type, leading_dimensions=leading_dimensions,
                     block_dim=block_dim)
        factorize = self._make(self._FACTORIZE, size, precision, execution, knobs,
                               transpose_mode="non_transposed")
        solve = (self._make(self._SOLVE, size, precision, execution,
                            knobs | self._same_launch(factorize), transpose_mode=transpose_mode)
                 if factorize.m == factorize.n else None)
        if solve is None:  # validate transpose_mode all the same
            choice(transpose_mode, "transpose_mode", TRANSPOSE_MODES)
        self._transpose_mode = transpose_mode
        self._setup(factorize, _factorize=factorize, _solve=solve)

    transpose_mode = property(lambda self: self._transpose_mode,
                              doc="``op`` of ``solve``: ``'non_transposed'`` (A X = B), "
                                  "``'transposed'`` (A^T X = B) or ``'conj_transposed'`` "
                                  "(A^H X = B).")


@_operand_methods
@_solver_docs.fill
class LUSolver(_LU):
    __doc__ = """LU factorization ``A = L U`` without pivoting (for diagonally dominant
    matrices, say) and the solve of ``op(A) X = B`` (``getrf_no_pivot``,
    ``getrs_no_pivot``).

    ``factorize`` overwrites A with L (below the diagonal, unit diagonal not stored) and U;
    ``solve`` then overwrites B with X. Both run with the same launch.
    """ + _solver_docs.LU_PARAMETERS + """
    Examples
    --------
    >>> import numpy as np
    >>> s = LUSolver((16, 16, 2), np.float32, "Block", sm=90, transpose_mode="transposed")
    >>> s.a_shape, s.b_shape, s.transpose_mode
    ((1, 16, 16), (1, 16, 2), 'transposed')
    """

    _FACTORIZE, _SOLVE = "getrf_no_pivot", "getrs_no_pivot"
    _METHODS = {"factorize": ("_factorize", ("a", "info")), "solve": ("_solve", ("a", "b"))}

    factorize = _device_only(_METHODS, "factorize", ("lda",),
                             _solver_docs.METHODS["LUSolver.factorize"])
    solve = _device_only(_METHODS, "solve", ("lda", "ldb"),
                             _solver_docs.METHODS["LUSolver.solve"])


@_operand_methods
@_solver_docs.fill
class LUPivotSolver(_LU):
    __doc__ = """LU factorization with partial pivoting ``P A = L U`` and the solve of
    ``op(A) X = B`` (``getrf_partial_pivot``, ``getrs_partial_pivot``).

    ``factorize`` overwrites A with L and U and stores ``min(M, N)`` 1-based pivots per
    problem in ``ipiv`` (row ``i`` was interchanged with row ``ipiv[i] - 1``); ``solve`` then
    overwrites B with X. Both run with the same launch.
    """ + _solver_docs.LU_PARAMETERS + """
    Examples
    --------
    >>> import numpy as np
    >>> s = LUPivotSolver((64,), np.float64, "Block", sm=90)
    >>> s.ipiv_shape, s.ipiv_size, s.info_shape
    ((1, 64), 64, (1,))
    """

    _FACTORIZE, _SOLVE = "getrf_partial_pivot", "getrs_partial_pivot"
    _METHODS = {"factorize": ("_factorize", ("a", "ipiv", "info")),
                "solve": ("_solve", ("a", "ipiv", "b"))}
    _CONSTANTS = _LinearSolver._CONSTANTS + ("ipiv_type", "ipiv_shape", "ipiv_strides",
                                             "ipiv_size")

    ipiv_type = property(lambda self: np.int32,
                         doc="``numpy.int32``, the type of the pivots (1-based row indices).")
    ipiv_shape = property(lambda self: (self.batches_per_block, min(self.m, self.n)),
                          doc="``(batches_per_block, min(M, N))``: the pivots of each problem "
                              "of a block.")
    ipiv_strides = property(lambda self: (self.ipiv_shape[1], 1),
                            doc="``(min(M, N), 1)``, in elements.")
    ipiv_size = property(lambda self: self.ipiv_shape[0] * self.ipiv_shape[1],
                         doc="Elements holding the pivots of all problems of a block.")

    factorize = _device_only(_METHODS, "factorize", ("lda",),
                             _solver_docs.METHODS["LUPivotSolver.factorize"])
    solve = _device_only(_METHODS, "solve", ("lda", "ldb"),
                             _solver_docs.METHODS["LUPivotSolver.solve"])


@_operand_methods
@_solver_docs.fill
class TriangularSolver(_SolverAPI):
    """Triangular solve with several right-hand sides (``trsm``): ``op(A) X = B``
    (``side='left'``) or ``X op(A) = B`` (``'right'``), B overwritten by X.

    Parameters
    ----------
    size : sequence of 1 to 3 ints
        ``(M,)`` (as ``(M, M)``), ``(M, N)`` or ``(M, N, K)``: B is M x N; A is M x M for
        ``side='left'``, N x N for ``'right'``.
    %(precision)s
    %(execution)s
    side : {'left', 'right'}
        Where ``op(A)`` stands: ``op(A) X = B`` or ``X op(A) = B``.
    fill_mode : {'lower', 'upper'}
        The triangle of A that holds it; the other one is not referenced.
    diag : {'non_unit', 'unit'}
        ``'unit'``: A's diagonal is taken as ones (not read); ``'non_unit'``: it is read.
    %(transpose_mode)s
    %(sm)s
    %(arrangement)s
    %(batches_per_block)s
    %(data_type)s
    %(leading_dimensions)s
    %(block_dim)s

    Examples
    --------
    >>> import numpy as np
    >>> s = TriangularSolver((8, 3), np.float64, "Block", "right", "upper", "unit", sm=90)
    >>> s.a_shape, s.b_shape, s.b_strides()
    ((1, 3, 3), (1, 8, 3), (24, 1, 8))
    """

    _OPERANDS = {"a": ("lda", 0), "b": ("ldb", 1)}
    _METHODS = {"solve": ("_solve", ("a", "b"))}
    _CONSTANTS = ("a_shape", "b_shape")

    def __init__(self, size, precision, execution, side, fill_mode, diag,
                 transpose_mode="non_transposed", *, sm=None, arrangement=None,
                 batches_per_block=None, data_type=None, leading_dimensions=None,
                 block_dim=None):
        for value, name in ((side, "side"), (fill_mode, "fill_mode"), (diag, "diag")):
            if value is None:
                raise InvalidOptionError(f"{name} must be given for TriangularSolver, got None")
        solve = Solver("trsm", size, precision, execution, sm=sm, side=side,
                       fill_mode=fill_mode, diag=diag, transpose_mode=transpose_mode,
                       arrangement=arrangement, batches_per_block=batches_per_block,
                       data_type=data_type, leading_dimensions=leading_dimensions,
                       block_dim=block_dim)
        self._setup(solve, _solve=solve)

    side = property(lambda self: self._solve.side,
                    doc="``'left'`` (``op(A) X = B``) or ``'right'`` (``X op(A) = B``).")
    fill_mode = property(lambda self: self._solve.fill_mode,
                         doc="``'lower'`` or ``'upper'``: the triangle of A that is read.")
    diag = property(lambda self: self._solve.diag,
                    doc="``'unit'`` (A's diagonal taken as ones) or ``'non_unit'``.")
    transpose_mode = property(lambda self: self._solve.transpose_mode,
                              doc="``op``: ``'non_transposed'``, ``'transposed'`` or "
                                  "``'conj_transposed'``.")

    @property
    def a_shape(self) -> tuple:
        """``(batches_per_block, M, M)`` for ``side='left'``, ``(batches_per_block, N, N)``
        for ``'right'``: the triangular A of each problem of a block."""
        dim = self.m if self.side == "left" else self.n
        return (self.batches_per_block, dim, dim)

    b_shape = property(lambda self: (self.batches_per_block, self.m, self.n),
                       doc="``(batches_per_block, M, N)``: the B (and X) of each problem of "
                           "a block.")
    solve = _device_only(_METHODS, "solve", ("lda", "ldb"),
                             _solver_docs.METHODS["TriangularSolver.solve"])


class _Orthogonal(_SolverAPI):
    """Householder QR/LQ factorization of A (M x N) with ``min(M, N)`` scalars ``tau``."""

    _FUNCTION = ""
    _OPERANDS = {"a": ("lda", 0)}
    _METHODS = {"factorize": ("_factorize", ("a", "tau"))}
    _CONSTANTS = ("a_shape", "tau_type", "tau_shape", "tau_strides", "tau_size")

    def __init__(self, size, precision, execution, *, sm=None, arrangement=None,
                 batches_per_block=None, data_type=None, leading_dimension=None,
                 block_dim=None):
        if arrangement is not None and not isinstance(arrangement, str):
            raise InvalidOptionError(f"arrangement must be 'col_major' or 'row_major', "
                                     f"got {arrangement!r}")
        if leading_dimension is not None and (
                isinstance(leading_dimension, bool) or
                not isinstance(leading_dimension, (int, np.integer))):
            raise InvalidOptionError(f"leading_dimension must be a positive integer, "
                                     f"got {leading_dimension!r}")
        factorize = Solver(
            self._FUNCTION, size, precision, execution, sm=sm,
            arrangement=None if arrangement is None else (arrangement,),
            batches_per_block=batches_per_block, data_type=data_type,
            leading_dimensions=None if leading_dimension is None else (leading_dimension,),
            block_dim=block_dim)
        self._setup(factorize, _factorize=factorize)

    a_shape = property(lambda self: (self.batches_per_block, self.m, self.n),
                       doc="``(batches_per_block, M, N)``: the A of each problem of a block.")
    tau_type = property(lambda self: self.value_type,
                        doc="NumPy type of ``tau``: :attr:`value_type`.")
    tau_shape = property(lambda self: (self.batches_per_block, min(self.m, self.n)),
                         doc="``(batches_per_block, min(M, N))``: the ``tau`` of each "
                             "problem of a block.")
    tau_strides = property(lambda self: (self.tau_shape[1], 1),
                           doc="``(min(M, N), 1)``, in elements.")
    tau_size = property(lambda self: self.tau_shape[0] * self.tau_shape[1],
                        doc="Elements holding the ``tau`` of all problems of a block.")


@_operand_methods
@_solver_docs.fill
class QRFactorize(_Orthogonal):
    __doc__ = """QR factorization ``A = Q R`` by Householder reflections (``geqrf``).

    ``factorize`` leaves R in the upper triangle of A and the ``min(M, N)`` reflectors that
    make Q below it, with their scalars in ``tau``; :class:`QRMultiply` applies Q.
    """ + _solver_docs.ORTHOGONAL_PARAMETERS + """
    Examples
    --------
    >>> import numpy as np
    >>> s = QRFactorize((12, 5), np.float64, "Block", sm=90)
    >>> s.a_shape, s.tau_shape, s.a_strides()
    ((1, 12, 5), (1, 5), (60, 1, 12))
    """

    _FUNCTION = "geqrf"

    factorize = _device_only(_Orthogonal._METHODS, "factorize", ("lda",),
                             _solver_docs.METHODS["QRFactorize.factorize"])


@_operand_methods
@_solver_docs.fill
class LQFactorize(_Orthogonal):
    __doc__ = """LQ factorization ``A = L Q`` by Householder reflections (``gelqf``).

    ``factorize`` leaves L in the lower triangle of A and the ``min(M, N)`` reflectors that
    make Q above it, with their scalars in ``tau``; :class:`LQMultiply` applies Q.
    """ + _solver_docs.ORTHOGONAL_PARAMETERS + """
    Examples
    --------
    >>> import numpy as np
    >>> s = LQFactorize((4, 9), np.float32, "Block", sm=90, arrangement="row_major")
    >>> s.a_shape, s.tau_shape, s.a_strides()
    ((1, 4, 9), (1, 4), (36, 9, 1))
    """

    _FUNCTION = "gelqf"

    factorize = _device_only(_Orthogonal._METHODS, "factorize", ("lda",),
                             _solver_docs.METHODS["LQFactorize.factorize"])


class _Multiply(_SolverAPI):
    """``op(Q) C`` (``side='left'``) or ``C op(Q)`` (``'right'``), Q given by K reflectors in
    A and ``tau``; C (M x N) is overwritten. ``multiply(a, tau, c, lda=None, ldc=None)``."""

    _FUNCTION = ""
    _OPERANDS = {"a": ("lda", 0), "c": ("ldc", 1)}
    _METHODS = {"multiply": ("_multiply", ("a", "tau", "c"))}
    _CONSTANTS = ("a_shape", "c_shape", "tau_type", "tau_shape", "tau_strides", "tau_size")

    def __init__(self, size, precision, execution, side, *, sm=None,
                 transpose_mode="non_transposed", arrangement=None, batches_per_block=None,
                 data_type=None, leading_dimensions=None, block_dim=None):
        if side is None:
            raise InvalidOptionError(f"side must be 'left' or 'right', got None for "
                                     f"{type(self).__name__}")
        if transpose_mode is None:
            raise InvalidOptionError(f"transpose_mode must be given for "
                                     f"{type(self).__name__}, got None")
        multiply = Solver(self._FUNCTION, size, precision, execution, sm=sm, side=side,
                          transpose_mode=transpose_mode, arrangement=arrangement,
                          batches_per_block=batches_per_block, data_type=data_type,
                          leading_dimensions=leading_dimensions, block_dim=block_dim)
        self._setup(multiply, _multiply=multiply)

    side = property(lambda self: self._multiply.side,
                    doc="``'left'`` (``op(Q) C``) or ``'right'`` (``C op(Q)``).")
    transpose_mode = property(lambda self: self._multiply.transpose_mode,
                              doc="``op`` applied to Q: ``'non_transposed'``, "
                                  "``'transposed'`` or ``'conj_transposed'``.")
    c_shape = property(lambda self: (self.batches_per_block, self.m, self.n),
                       doc="``(batches_per_block, M, N)``: the C of each problem of a block.")
    tau_type = property(lambda self: self.value_type,
                        doc="NumPy type of ``tau``: :attr:`value_type`.")
    tau_shape = property(lambda self: (self.batches_per_block, self.k),
                         doc="``(batches_per_block, K)``: the ``tau`` of each problem of a "
                             "block.")
    tau_strides = property(lambda self: (self.tau_shape[1], 1), doc="``(K, 1)``, in elements.")
    tau_size = property(lambda self: self.tau_shape[0] * self.tau_shape[1],
                        doc="Elements holding the ``tau`` of all problems of a block.")
    multiply = _device_only(_METHODS, "multiply", ("lda", "ldc"),
                             _solver_docs.METHODS["_Multiply.multiply"])


@_operand_methods
@_solver_docs.fill
class QRMultiply(_Multiply):
    __doc__ = """Multiplication by Q of a QR factorization (``unmqr``); A is M x K
    (``side='left'``) or N x K (``'right'``).

    A holds the reflectors only, its problems ``a_strides()[0]`` apart: for a column-major
    QR of M < N that is not :class:`QRFactorize`'s stride, so with several problems per block
    copy the reflectors into this layout before ``multiply`` (cuSOLVERDx reads them at its
    own stride).
    """ + _solver_docs.MULTIPLY_PARAMETERS + """
    Examples
    --------
    >>> import numpy as np
    >>> s = QRMultiply((12, 3, 5), np.float64, "Block", "left", sm=90)
    >>> s.a_shape, s.c_shape, s.tau_shape
    ((1, 12, 5), (1, 12, 3), (1, 5))
    """

    _FUNCTION = "unmqr"

    @property
    def a_shape(self) -> tuple:
        """``(batches_per_block, M, K)`` for ``side='left'``, ``(batches_per_block, N, K)``
        for ``'right'``: the reflectors of each problem of a block."""
        rows = self.m if self.side == "left" else self.n
        return (self.batches_per_block, rows, self.k)


@_operand_methods
@_solver_docs.fill
class LQMultiply(_Multiply):
    __doc__ = """Multiplication by Q of an LQ factorization (``unmlq``); A is K x M
    (``side='left'``) or K x N (``'right'``).

    A holds the reflectors only, its problems ``a_strides()[0]`` apart: for a row-major LQ
    of M > N that is not :class:`LQFactorize`'s stride, so with several problems per block
    copy the reflectors into this layout before ``multiply`` (cuSOLVERDx reads them at its
    own stride).
    """ + _solver_docs.MULTIPLY_PARAMETERS + """
    Examples
    --------
    >>> import numpy as np
    >>> f = LQFactorize((7, 4), np.float64, "Block", sm=90, arrangement="row_major",
    ...                 batches_per_block=2)
    >>> m = LQMultiply((7, 4, 4), np.float64, "Block", "right", sm=90,
    ...                arrangement=("row_major", "row_major"), batches_per_block=2,
    ...                transpose_mode="transposed")
    >>> f.a_strides(), m.a_strides()
    ((28, 4, 1), (16, 4, 1))
    """

    _FUNCTION = "unmlq"

    @property
    def a_shape(self) -> tuple:
        """``(batches_per_block, K, M)`` for ``side='left'``, ``(batches_per_block, K, N)``
        for ``'right'``: the reflectors of each problem of a block."""
        cols = self.m if self.side == "left" else self.n
        return (self.batches_per_block, self.k, cols)


@_operand_methods
@_solver_docs.fill
class LeastSquaresSolver(_SolverAPI):
    """Least squares ``min ||op(A) X - B||`` by QR (or LQ) of A, M x N (``gels``).

    B (``b_shape``) and X (``x_shape``) share one ``max(M, N) x K`` buffer per problem
    (``bx_strides``, ``bx_size``; ``ldb >= max(M, N)``): ``solve`` overwrites A with its
    factorization and the buffer with X. With M < N (or ``op(A)`` wide) X is the solution
    of least norm.

    Parameters
    ----------
    size : sequence of 1 to 3 ints
        ``(M,)``, ``(M, N)`` or ``(M, N, K)``: A is M x N, with K right-hand sides (default
        1).
    %(precision)s
    %(execution)s
    %(sm)s
    %(transpose_mode)s
    %(arrangement)s
    %(batches_per_block)s
    %(data_type)s
    %(leading_dimensions)s
    %(block_dim)s

    Examples
    --------
    >>> import numpy as np
    >>> s = LeastSquaresSolver((48, 16, 2), np.float32, "Block", sm=90)
    >>> s.b_shape, s.x_shape, s.bx_strides(), s.tau_shape
    ((1, 48, 2), (1, 16, 2), (96, 1, 48), (1, 16))
    """

    _OPERANDS = {"a": ("lda", 0), "bx": ("ldb", 1)}
    _METHODS = {"solve": ("_solve", ("a", "tau", "b"))}
    _CONSTANTS = ("a_shape", "b_shape", "x_shape", "bx_shape", "tau_type", "tau_shape",
                  "tau_strides", "tau_size")

    def __init__(self, size, precision, execution, *, sm=None, transpose_mode="non_transposed",
                 arrangement=None, batches_per_block=None, data_type=None,
                 leading_dimensions=None, block_dim=None):
        solve = Solver("gels", size, precision, execution, sm=sm,
                       transpose_mode=transpose_mode, arrangement=arrangement,
                       batches_per_block=batches_per_block, data_type=data_type,
                       leading_dimensions=leading_dimensions, block_dim=block_dim)
        self._setup(solve, _solve=solve)

    transpose_mode = property(lambda self: self._solve.transpose_mode,
                              doc="``op`` applied to A: ``'non_transposed'``, "
                                  "``'transposed'`` or ``'conj_transposed'``.")
    a_shape = property(lambda self: (self.batches_per_block, self.m, self.n),
                       doc="``(batches_per_block, M, N)``: the A of each problem of a block.")

    @property
    def b_shape(self) -> tuple:
        """``(batches_per_block, rows, K)``: the B of each problem of a block, with M rows
        (N for a transposed A), inside the B/X buffer."""
        rows = self.m if self.transpose_mode == "non_transposed" else self.n
        return (self.batches_per_block, rows, self.k)

    @property
    def x_shape(self) -> tuple:
        """``(batches_per_block, rows, K)``: the X of each problem of a block, with N rows
        (M for a transposed A), inside the B/X buffer."""
        rows = self.n if self.transpose_mode == "non_transposed" else self.m
        return (self.batches_per_block, rows, self.k)

    bx_shape = property(lambda self: (self.batches_per_block, max(self.m, self.n), self.k),
                        doc="``(batches_per_block, max(M, N), K)``: the B/X buffer of each "
                            "problem of a block.")
    tau_type = property(lambda self: self.value_type,
                        doc="NumPy type of ``tau``: :attr:`value_type`.")
    tau_shape = property(lambda self: (self.batches_per_block, min(self.m, self.n)),
                         doc="``(batches_per_block, min(M, N))``: the ``tau`` of each "
                             "problem of a block.")
    tau_strides = property(lambda self: (self.tau_shape[1], 1),
                           doc="``(min(M, N), 1)``, in elements.")
    tau_size = property(lambda self: self.tau_shape[0] * self.tau_shape[1],
                        doc="Elements holding the ``tau`` of all problems of a block.")
    solve = _device_only(_METHODS, "solve", ("lda", "ldb"),
                             _solver_docs.METHODS["LeastSquaresSolver.solve"])


# ---------------------------------------------------------------------------------------------
# Warming the disk cache
# ---------------------------------------------------------------------------------------------

_CLASSES = {c.__name__: c for c in (Solver, CholeskySolver, LUSolver, LUPivotSolver,
                                    TriangularSolver, QRFactorize, LQFactorize, QRMultiply,
                                    LQMultiply, LeastSquaresSolver)}
# In one process, code generation pays NVRTC's start (2-3 s) once, then about 0.1 s per
# function: processes help only for many functions, each given a share of them.
_PER_PROCESS = 16


def is_solver_config(kw: dict) -> bool:
    """Whether a :func:`~cuweave.device.warm_cache` config describes a solver: it names its
    class (``solver=CholeskySolver`` or ``'CholeskySolver'``) or a cuSOLVERDx ``function``."""
    from ._solver_options import FUNCTIONS

    return "solver" in kw or (isinstance(kw.get("function"), str) and
                              kw["function"] in FUNCTIONS)


def _build(kw: dict):
    kw = dict(kw)
    cls = kw.pop("solver", Solver)
    if isinstance(cls, str):
        if cls not in _CLASSES:
            raise InvalidOptionError(f"solver must be one of {sorted(_CLASSES)}, got {cls!r}")
        cls = _CLASSES[cls]
    if cls not in _CLASSES.values():
        raise InvalidOptionError(f"solver must be one of {sorted(_CLASSES)}, got {cls!r}")
    return cls(**kw)


def _generate_worker(specs: list) -> str | None:
    """Process-pool worker: the code of resolved descriptions into the disk cache; returns an
    error text or None (the parent raises it, typed, when a kernel needs that code)."""
    from ._solver_core import execute_code, fatbin_code

    errors = []
    try:
        fatbin_code()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    for spec in specs:
        try:
            execute_code(spec)
        except Exception as e:
            errors.append(f"{spec.function}: {type(e).__name__}: {e}")
    return "; ".join(errors) or None


def warm_solver_cache(configs, max_workers=None) -> list:
    """Build several solvers (see :func:`cuweave.device.warm_cache`), generating the
    compile-time-leading-dimension code of every function they call that the disk cache lacks
    (and cuSOLVERDx's fatbin); returns the objects in order. A config is the keyword arguments
    of :class:`Solver`, or of the class named by its ``solver`` key."""
    from ._parallel import with_sm

    built = [_build(kw) for kw in with_sm(configs)]  # validates everything first
    generate_missing(built, max_workers)
    return built


def generate_missing(objects, max_workers=None) -> None:
    """Generate the code of every function of the solver ``objects`` missing from the disk
    cache: in this process when there are few, else shared out among worker processes."""
    import os

    from .._internal.logging import get_logger
    from ._parallel import generate_in_processes
    from ._solver_core import execute_code, fatbin_code, is_cached

    missing = {}
    for obj in objects:
        for s in ([obj] if isinstance(obj, Solver) else obj._solvers()):
            if not is_cached(s._resolved):
                missing.setdefault(s._resolved.key(), s._resolved)
    specs = list(missing.values())
    if not specs:
        return
    workers = min(max_workers or os.cpu_count() or 1, -(-len(specs) // _PER_PROCESS))
    if workers <= 1:
        fatbin_code()
        for s in specs:
            execute_code(s)
        return
    chunks = [specs[i::workers] for i in range(workers)]
    for error in generate_in_processes(_generate_worker, chunks, workers, "device solver"):
        if error:
            get_logger("device.solver").warning("warm_solver_cache: %s", error)
