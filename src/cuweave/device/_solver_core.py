"""``Solver``: one cuSOLVERDx device function (nvmath-python 1.0's ``nvmath.device.Solver``).

A :class:`Solver` is a description (function, size, precision, ...) with libmathdx's traits
(block dimension, suggested batches per block, workspace size; answered without compiling
anything and without a GPU when ``sm`` is given). Inside a numba kernel its traits are
compile-time constants and ``execute(...)`` calls the device function that libmathdx generated
as LTO-IR, linked with cuSOLVERDx's precompiled library (one fatbin) when the kernel is built.
The generated code and the fatbin go to the disk cache (:mod:`._cache`): a second process
builds nothing. The specialised classes (``CholeskySolver``, ...) in :mod:`.cusolverdx` hold one
``Solver`` per function they call.

Code generation costs one NVRTC compilation inside libmathdx: about 2-3 s for the first
description of a process, then about 0.1 s each (2-core development machine).
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from .._internal.errors import InvalidOptionError
from .._internal.logging import get_logger
from . import _cache, _solver_docs
from ._kernel_object import KernelObject, register_kernel_type
from ._solver_options import SolverSpec
from .common_cuda import ComputeCapability, Dim3

__all__ = ["Solver", "compile_solver_execute", "execute_code", "fatbin_code", "is_cached",
           "resolve", "versions", "value_type_of"]

_log = get_logger("device.solver")
_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    """Versions in every cache key of solver code: libmathdx, cuSOLVERDx, the NVRTC that
    libmathdx compiles with (its LTO-IR must not be newer than the nvJitLink linking it), and
    cuweave."""
    from .._version import __version__
    from . import _solver_mathdx

    try:
        from .._bindings.nvrtc import module

        _, major, minor = module().nvrtcVersion()
        nvrtc = f"{major}.{minor}"
    except Exception:  # cuda-bindings without NVRTC: libmathdx found its own
        nvrtc = "unknown"
    return {**_solver_mathdx.versions(), "nvrtc": nvrtc, "cuweave": __version__, "source": 1}


def value_type_of(precision: str, data_type: str):
    """NumPy type of a solver's elements."""
    if data_type == "complex":
        return {"float32": np.complex64, "float64": np.complex128}[precision]
    return np.dtype(precision).type


@functools.lru_cache(maxsize=512)
def resolve(spec: SolverSpec) -> tuple[SolverSpec, dict]:
    """The description the code is generated from (every default and suggestion made
    explicit, as nvmath-python generates it) and its traits."""
    from . import _solver_mathdx

    block = spec.execution == "Block"
    if "suggested" in (spec.batches_per_block, spec.block_dim):
        first = _solver_mathdx.traits(spec.with_(
            batches_per_block=None if spec.batches_per_block == "suggested"
            else spec.batches_per_block,
            block_dim=None if spec.block_dim == "suggested" else spec.block_dim))
        if spec.batches_per_block == "suggested":
            spec = spec.with_(batches_per_block=first["suggested_batches_per_block"])
        if spec.block_dim == "suggested":
            spec = spec.with_(block_dim=tuple(first["suggested_block_dim"]))
    resolved = spec.with_(
        arrangement=spec.arrangements, data_type=spec.data_type or "real",
        batches_per_block=(spec.batches_per_block or 1) if block else None,
        leading_dimensions=spec.resolved_leading_dimensions())
    return resolved, _solver_mathdx.traits(resolved)


def _code_parts(spec: SolverSpec, dynamic_ld: bool) -> list:
    return [list(spec.key()), "solver-execute-dynamic-ld" if dynamic_ld else "solver-execute",
            versions()]


def execute_code(spec: SolverSpec, dynamic_ld: bool = False) -> dict:
    """``{'symbol', 'ltoir'}`` of a resolved description's device function (disk-cached)."""
    from . import _solver_mathdx

    def build(key):
        ltoir, symbol = _solver_mathdx.compile_execute(spec, dynamic_ld)
        if _log.isEnabledFor(10):
            _log.debug("generated %s (%d bytes of LTO-IR)", symbol, len(ltoir))
        return {"traits": None, "symbol": symbol, "ltoir": ltoir}

    return _cache.cached(_code_parts(spec, dynamic_ld), build)


def is_cached(spec: SolverSpec, dynamic_ld: bool = False) -> bool:
    return _cache.load(_cache.make_key(_code_parts(spec, dynamic_ld))) is not None


def fatbin_code() -> dict:
    """cuSOLVERDx's device library (``{'ltoir': fatbin bytes}``, disk-cached)."""
    from . import _solver_mathdx

    def build(key):
        return {"traits": None, "symbol": "cusolverdx-universal-fatbin",
                "ltoir": _solver_mathdx.universal_fatbin()}

    return _cache.cached(["cusolverdx-fatbin", versions()], build)


def _check_nvbug_5288270(spec: SolverSpec) -> None:
    from . import _solver_mathdx as mx

    if mx.nvbug_5288270(spec) and not mx.nvbug_5288270_ignored():
        raise mx.UnsupportedSolverError(
            "function 'gesv_no_pivot' with data_type 'real' on sm 120 is refused (NVBUG "
            "5288270: CUDA 12.8, 12.9 and 13.0 could miscompile it under register pressure); "
            f"set {mx.NVBUG_5288270_VARIABLES[0]} to build it anyway and check its results")


_KERNEL_ATTRIBUTES = frozenset({
    "m", "n", "k", "size", "batches_per_block", "lda", "ldb", "leading_dimensions",
    "block_dim", "block_size", "workspace_size", "value_type", "precision", "info_type",
    "ipiv_type", "tau_type",
})


@_solver_docs.fill
class Solver(KernelObject):
    """One cuSOLVERDx device function (``potrf``, ``getrs_partial_pivot``, ``gels``, ...).

    Parameters
    ----------
    function : str
        The cuSOLVERDx function, by nvmath-python's name: ``'potrf'``, ``'potrs'``,
        ``'posv'`` (Cholesky), ``'getrf_no_pivot'``, ``'getrs_no_pivot'``,
        ``'gesv_no_pivot'``, ``'getrf_partial_pivot'``, ``'getrs_partial_pivot'``,
        ``'gesv_partial_pivot'`` (LU), ``'geqrf'``, ``'unmqr'``, ``'ungqr'``, ``'gelqf'``,
        ``'unmlq'``, ``'unglq'`` (QR, LQ), ``'trsm'`` (triangular solve), ``'gels'`` (least
        squares), ``'gtsv_no_pivot'`` (tridiagonal solve), ``'htev'`` and ``'heev'``
        (eigenvalues).
    size : sequence of 1 to 3 ints
        ``(M,)`` (as ``(M, M, 1)``), ``(M, N)`` (as ``(M, N, 1)``) or ``(M, N, K)``; what M,
        N and K count depends on the function (cuSOLVERDx's documentation of it says).
    %(precision)s
    %(execution)s
    %(sm)s
    arrangement : sequence of 1 or 2 of {'col_major', 'row_major'}, optional
        Storage order of A and of B in shared memory, ``(arr_a, arr_b)``; one value sets A's
        only. Default ``('col_major', 'col_major')``.
    transpose_mode : {'non_transposed', 'transposed', 'conj_transposed'}, optional
        The operation ``op`` applied to A (Q for ``unmqr``, ``unmlq``): none, ``A^T`` or
        ``A^H``. Taken by the LU functions, ``geqrf``, ``gelqf``, ``unmqr``, ``unmlq``,
        ``trsm`` and ``gels`` (the factorizations ``getrf_*``, ``geqrf`` and ``gelqf`` only
        as ``'non_transposed'``), refused by the others; default: cuSOLVERDx's,
        ``'non_transposed'``.
    side : {'left', 'right'}, optional
        Where A (or Q) stands in the product or the solve; required by ``unmqr``,
        ``unmlq`` and ``trsm``, refused by the others.
    diag : {'non_unit', 'unit'}, optional
        Whether A's diagonal is read or taken as ones; required by ``trsm``, refused by the
        others.
    fill_mode : {'lower', 'upper'}, optional
        The triangle of A that is read (and written); required by the Cholesky functions,
        ``trsm`` and ``heev``, refused by the others.
    %(batches_per_block)s
    %(data_type)s
    leading_dimensions : sequence of 1 or 2 ints, optional
        ``(lda, ldb)``, the compile-time leading dimensions, in elements, of A and of B; one
        value sets ``lda`` only. Default: the rows of a column-major matrix, the columns of a
        row-major one. The run-time form of ``execute`` takes them as arguments instead.
    %(block_dim)s
    job : str, optional
        What the eigenvalue functions compute: ``'no_vectors'``, ``'all_vectors'`` or
        ``'multiply_vectors'`` for ``htev``, ``'no_vectors'`` or ``'overwrite_vectors'``
        for ``heev``; refused by the others.

    Notes
    -----
    Inside a ``@cuda.jit`` kernel, ``execute(...)`` takes the function's arguments in
    cuSOLVERDx's order: arrays in shared memory (``value_type`` elements; ``int32`` for
    ``info`` and ``ipiv``) and, for the run-time leading-dimension form, an integer after
    each matrix (``potrf``: ``execute(a, info)`` or ``execute(a, lda, info)``). Launch Block
    solvers with ``block_dim`` threads.

    Examples
    --------
    >>> import numpy as np
    >>> s = Solver("potrf", (32,), np.float32, "Block", sm=90, fill_mode="lower")
    >>> s.size, s.lda, s.batches_per_block, s.value_type
    ((32, 32, 1), 32, 1, <class 'numpy.float32'>)
    """

    def __init__(self, function, size, precision, execution, *, sm=None, arrangement=None,
                 transpose_mode=None, side=None, diag=None, fill_mode=None,
                 batches_per_block=None, data_type=None, leading_dimensions=None,
                 block_dim=None, job=None):
        if sm is None:
            from ._options import default_sm

            sm = default_sm()
        spec = SolverSpec.from_knobs(
            function, size, precision, execution, sm=sm, arrangement=arrangement,
            transpose_mode=transpose_mode, side=side, diag=diag, fill_mode=fill_mode,
            batches_per_block=batches_per_block, data_type=data_type,
            leading_dimensions=leading_dimensions, block_dim=block_dim, job=job)
        _check_nvbug_5288270(spec)
        self._spec = spec
        self._resolved, self._traits = resolve(spec)
        register_kernel_type(Solver)

    # ----- knobs ------------------------------------------------------------------------------
    function = property(lambda self: self._spec.function,
                        doc="The cuSOLVERDx function, e.g. ``'potrf'``.")
    size = property(lambda self: self._spec.size,
                    doc="``(M, N, K)``: the problem size, completed to 3 values.")
    m = property(lambda self: self._spec.size[0],
                 doc="M, the first value of :attr:`size` (rows of A for most functions).")
    n = property(lambda self: self._spec.size[1],
                 doc="N, the second value of :attr:`size` (columns of A for most functions).")
    k = property(lambda self: self._spec.size[2],
                 doc="K, the third value of :attr:`size` (right-hand sides, columns of B, or "
                     "reflectors).")
    execution = property(lambda self: self._spec.execution, doc="``'Block'`` or ``'Thread'``.")
    transpose_mode = property(lambda self: self._spec.transpose_mode,
                              doc="``'non_transposed'``, ``'transposed'`` or "
                                  "``'conj_transposed'``; None where not given.")
    side = property(lambda self: self._spec.side,
                    doc="``'left'`` or ``'right'``; None where not given.")
    diag = property(lambda self: self._spec.diag,
                    doc="``'unit'`` or ``'non_unit'``; None where not given.")
    fill_mode = property(lambda self: self._spec.fill_mode,
                         doc="``'lower'`` or ``'upper'``; None where not given.")
    job = property(lambda self: self._spec.job,
                   doc="The eigenvalue job (``heev``, ``htev``), e.g. ``'no_vectors'``; None "
                       "where not given.")
    data_type = property(lambda self: self._resolved.data_type,
                         doc="``'real'`` or ``'complex'``.")
    arrangement = property(lambda self: self._resolved.arrangement,
                           doc="``(A's, B's)`` storage order, each ``'col_major'`` or "
                               "``'row_major'``.")
    a_arrangement = property(lambda self: self._resolved.arrangement[0],
                             doc="Storage order of A: ``'col_major'`` or ``'row_major'``.")
    b_arrangement = property(lambda self: self._resolved.arrangement[1],
                             doc="Storage order of B: ``'col_major'`` or ``'row_major'``.")
    leading_dimensions = property(lambda self: self._resolved.leading_dimensions,
                                  doc="``(lda, ldb)``, the compile-time leading dimensions in "
                                      "elements (0 where the function has no such matrix).")
    lda = property(lambda self: self._resolved.leading_dimensions[0],
                   doc="Compile-time leading dimension of A, in elements.")
    ldb = property(lambda self: self._resolved.leading_dimensions[1],
                   doc="Compile-time leading dimension of B, in elements (0 where the "
                       "function has no B).")

    @property
    def precision(self):
        """``numpy.float32`` or ``numpy.float64``: the precision of the computation."""
        return np.dtype(self._spec.precision).type

    @property
    def sm(self) -> ComputeCapability:
        """Target compute capability, a ``ComputeCapability`` such as ``(9, 0)``."""
        return ComputeCapability(self._spec.sm // 100, (self._spec.sm // 10) % 10)

    @property
    def batches_per_block(self) -> int:
        """Problems per block (1 for Thread solvers: one per thread)."""
        return self._resolved.batches_per_block or 1

    # ----- traits -----------------------------------------------------------------------------
    @property
    def block_dim(self) -> Dim3 | None:
        """Threads of the block (cuSOLVERDx's, or those given); None for Thread solvers (one
        problem per thread, any block), as Thread FFTs report it."""
        bd = self._traits["block_dim"]
        return Dim3(*bd) if bd is not None else None

    @property
    def block_size(self) -> int | None:
        """Threads per block, ``x * y * z`` of :attr:`block_dim`; None for Thread solvers."""
        if self.block_dim is None:
            return None
        x, y, z = self.block_dim
        return x * y * z

    @property
    def workspace_size(self) -> int:
        """Workspace in elements of :attr:`value_type` (``heev``), not bytes."""
        return int(self._traits["workspace_size"])

    @property
    def value_type(self):
        """NumPy type of the matrix elements: ``float32``, ``float64``, ``complex64`` or
        ``complex128``."""
        return value_type_of(self._spec.precision, self.data_type)

    info_type = property(lambda self: np.int32, doc="Type of ``info`` (int32).")
    ipiv_type = property(lambda self: np.int32, doc="Type of pivots (int32, 1-based).")
    tau_type = property(lambda self: self.value_type, doc="Type of ``tau``.")

    # ----- code -------------------------------------------------------------------------------
    def _generate(self, dynamic_ld: bool = False) -> dict:
        """Generate (or load) this function's code; returns ``{'symbol', 'ltoir'}``."""
        return execute_code(self._resolved, dynamic_ld)

    def execute(self, *args):
        """Call the device function (only inside a ``@cuda.jit`` kernel; see the Notes).

        Parameters
        ----------
        *args : arrays and ints
            The function's arguments in cuSOLVERDx's order: arrays in shared memory
            (``value_type`` elements; ``int32`` for ``info`` and ``ipiv``) and, for the
            run-time leading-dimension form, each matrix followed by its leading dimension,
            e.g. ``execute(a, info)`` or ``execute(a, lda, info)`` for ``potrf``.

        Notes
        -----
        On the host it raises RuntimeError.
        """
        raise RuntimeError("Solver.execute is a device function: call it inside a @cuda.jit "
                           "kernel")

    # ----- inside kernels ---------------------------------------------------------------------
    def _kernel_key(self) -> tuple:
        return self._resolved.key()

    def _kernel_attribute(self, name: str):
        if name in _KERNEL_ATTRIBUTES:
            return getattr(self, name)
        if name == "execute":
            from . import _solver_numba

            return _solver_numba.execute_function(self)
        raise AttributeError(name)

    def __repr__(self):
        s = self._resolved
        knobs = ", ".join(f"{k}={getattr(s, k)!r}" for k in
                          ("transpose_mode", "side", "diag", "fill_mode", "job")
                          if getattr(s, k) is not None)
        return (f"Solver({s.function!r}, size={s.size}, precision={s.precision}, "
                f"execution={s.execution!r}, sm={s.sm // 10}, data_type={s.data_type!r}, "
                f"arrangement={s.arrangement}, leading_dimensions={s.leading_dimensions}"
                f"{', ' + knobs if knobs else ''}, batches_per_block={self.batches_per_block}, "
                f"block_dim={self.block_dim and tuple(self.block_dim)})")


def compile_solver_execute(solver: Solver, code_type=None,
                           execution_api: str = "compiled_leading_dim"):
    """Generate the LTO-IR of a solver's device function, to link into kernels of one's own
    (nvmath-python's ``compile_solver_execute``).

    Parameters
    ----------
    solver : Solver
        The function to compile.
    code_type : CodeType, optional
        The target: an object with ``cc`` (e.g. :class:`~cuweave.device.CodeType`) whose
        compute capability must be the solver's ``sm``, of kind ``'lto'``. Default: the
        solver's ``sm``.
    execution_api : {'compiled_leading_dim', 'runtime_leading_dim'}, optional
        The form of the function: leading dimensions fixed at compile time (the solver's
        ``lda``, ``ldb``) or passed as arguments after each matrix. Default
        ``'compiled_leading_dim'``.

    Returns
    -------
    tuple
        ``(code, symbol)``: ``code`` has ``code_type`` and ``data`` (the LTO-IR bytes);
        ``symbol`` is the device function's mangled name to declare and call.

    Notes
    -----
    The code goes to the disk cache; generating it needs libmathdx (and NVRTC) but no GPU.
    """
    from .common_cuda import CodeType

    apis = ("compiled_leading_dim", "runtime_leading_dim")
    if execution_api not in apis:
        raise InvalidOptionError(f"execution_api must be one of {apis}, got {execution_api!r}")
    if not isinstance(solver, Solver):
        raise InvalidOptionError(f"solver must be a Solver, got {solver!r}")
    if code_type is not None:
        cc = getattr(code_type, "cc", code_type)
        if not isinstance(cc, tuple) or tuple(cc[:2]) != tuple(solver.sm[:2]):
            raise InvalidOptionError(f"code_type must target the solver's sm {solver.sm}, "
                                     f"got {code_type!r}")
        if getattr(code_type, "kind", "lto") != "lto":
            raise InvalidOptionError(f"code_type must be of kind 'lto', got {code_type!r}")
    code = solver._generate(execution_api == "runtime_leading_dim")
    return _Code(CodeType("lto", solver.sm), bytes(code["ltoir"])), code["symbol"]


class _Code:
    """Generated device code: ``code_type`` and ``data`` (bytes), as nvmath-python's
    ``Code``."""

    __slots__ = ("code_type", "data")

    def __init__(self, code_type, data: bytes):
        self.code_type, self.data = code_type, data

    @property
    def size(self) -> int:
        return len(self.data)

    def __repr__(self):
        return f"Code(code_type={self.code_type!r}, {len(self.data)} bytes)"
