"""Docstring pieces shared by the cuSOLVERDx classes (:mod:`.cusolverdx`, :mod:`._solver_core`).

The constructors of the specialised solvers take the same knobs (precision, execution, sm,
batches per block, ...). Their numpydoc ``Parameters`` entries are written once here
(``ENTRIES``) and put into a class's docstring by ``fill``, where the docstring says
``%(name)s`` on a line of its own (indented like the other entries). The constructor
parameters that several classes share whole (``LU_PARAMETERS``, ...) and the docstrings of
the device methods (``METHODS``) live here too, keeping :mod:`.cusolverdx` to its code. Only
documentation lives here: nothing is checked.
"""

from __future__ import annotations

import textwrap

_WIDTH = 92  # text columns of a description, indented 8 spaces inside a class docstring


def _entry(header: str, text: str) -> str:
    """One numpydoc parameter entry: ``name : type`` then its description, indented for a
    class docstring (the header's own indentation comes from the placeholder's line)."""
    body = textwrap.fill(" ".join(text.split()), _WIDTH, initial_indent=" " * 8,
                         subsequent_indent=" " * 8, break_on_hyphens=False)
    return f"{header}\n{body}"


_RUN_TIME_LD = ("Given here, the leading dimensions are compile-time constants; to choose them "
                "at run time instead (one compiled function for any of them), pass them to the "
                "device methods (``lda=``, ``ldb=``, ...).")

ENTRIES = {
    "precision": _entry(
        "precision : numpy.float32 or numpy.float64",
        "Precision of the computation; with ``data_type='complex'`` the elements are "
        "``complex64`` or ``complex128``."),
    "execution": _entry(
        "execution : {'Block', 'Thread'}",
        "``'Block'``: the threads of one CUDA block work together on ``batches_per_block`` "
        "problems; ``'Thread'``: each thread solves one problem on its own."),
    "sm": _entry(
        "sm : int, str, tuple or ComputeCapability, optional",
        "Target compute capability, e.g. ``90``, ``'sm_90'``, ``(9, 0)`` or "
        "``ComputeCapability(9, 0)``. Default: that of the current CUDA device; given, no GPU "
        "is needed to build the object and read its traits."),
    "arrangement": _entry(
        "arrangement : sequence of 1 or 2 of {'col_major', 'row_major'}, optional",
        "Storage order of A and of B (or C) in shared memory, ``(arr_a, arr_b)``; one value "
        "sets A's only. Default ``('col_major', 'col_major')``."),
    "arrangement_a": _entry(
        "arrangement : {'col_major', 'row_major'}, optional",
        "Storage order of A in shared memory. Default ``'col_major'``."),
    "batches_per_block": _entry(
        "batches_per_block : int or 'suggested', optional",
        "Problems one CUDA block solves side by side (Block execution), or ``'suggested'`` "
        "for cuSOLVERDx's choice. Default 1; cuSOLVERDx advises 1 for matrices of 16 x 16 "
        "and more and ``'suggested'`` for smaller ones."),
    "data_type": _entry(
        "data_type : {'real', 'complex'}, optional",
        "Whether the matrices hold real or complex numbers. Default ``'real'``."),
    "leading_dimensions": _entry(
        "leading_dimensions : sequence of 1 or 2 ints, optional",
        "``(lda, ldb)``, the leading dimensions, in elements, of A and of B (or C); one "
        "value sets ``lda`` only. Default: the rows of a column-major matrix, the columns of "
        "a row-major one. " + _RUN_TIME_LD),
    "leading_dimension": _entry(
        "leading_dimension : int, optional",
        "Leading dimension of A, in elements. Default: the rows of a column-major A, the "
        "columns of a row-major one. Given here it is a compile-time constant; to choose it "
        "at run time instead, pass ``lda=`` to the device method."),
    "block_dim": _entry(
        "block_dim : sequence of 1 to 3 ints or 'suggested', optional",
        "Threads of the CUDA block ``(x, y, z)`` (missing dimensions are 1), or "
        "``'suggested'`` for cuSOLVERDx's suggestion. Default: cuSOLVERDx's default for the "
        "function. Block execution only."),
    "transpose_mode": _entry(
        "transpose_mode : {'non_transposed', 'transposed', 'conj_transposed'}, optional",
        "The operation ``op`` applied to A: none, ``A^T`` or ``A^H``. Default "
        "``'non_transposed'``."),
}


# ----- the specialised classes' constructors and device methods -----------------------------

# The constructor parameters of the LU solvers (the same for both).
LU_PARAMETERS = """
    Parameters
    ----------
    size : sequence of 1 to 3 ints
        ``(M,)`` (as ``(M, M, 1)``), ``(M, N)`` or ``(M, N, K)``: A is M x N, B is N x K (K
        right-hand sides). ``solve`` needs a square A (M == N).
    %(precision)s
    %(execution)s
    %(sm)s
    transpose_mode : {'non_transposed', 'transposed', 'conj_transposed'}, optional
        The system ``solve`` solves: ``A X = B``, ``A^T X = B`` or ``A^H X = B``. Default
        ``'non_transposed'``. The factorization is always of A itself.
    %(arrangement)s
    %(batches_per_block)s
    %(data_type)s
    %(leading_dimensions)s
    %(block_dim)s
"""


# The constructor parameters of the QR and LQ factorizations (the same for both).
ORTHOGONAL_PARAMETERS = """
    Parameters
    ----------
    size : sequence of 1 to 3 ints
        ``(M,)`` (as ``(M, M)``), ``(M, N)`` or ``(M, N, K)`` (K is not used): A is M x N.
    %(precision)s
    %(execution)s
    %(sm)s
    %(arrangement_a)s
    %(batches_per_block)s
    %(data_type)s
    %(leading_dimension)s
    %(block_dim)s
"""


# The constructor parameters of the multiplications by Q (the same for QR's and LQ's).
MULTIPLY_PARAMETERS = """
    Parameters
    ----------
    size : sequence of 1 to 3 ints
        ``(M, N, K)`` (``(M,)`` is ``(M, M, 1)``): C is M x N and Q is made of K
        reflectors (``K <= M`` for ``side='left'``, ``K <= N`` for ``'right'``).
    %(precision)s
    %(execution)s
    side : {'left', 'right'}
        ``'left'``: C becomes ``op(Q) C`` (Q is M x M); ``'right'``: ``C op(Q)`` (Q is
        N x N).
    %(sm)s
    transpose_mode : {'non_transposed', 'transposed', 'conj_transposed'}, optional
        ``op`` applied to Q: none, ``Q^T`` (real data) or ``Q^H``. Default
        ``'non_transposed'``.
    %(arrangement)s
    %(batches_per_block)s
    %(data_type)s
    leading_dimensions : sequence of 1 or 2 ints, optional
        ``(lda, ldc)``, the leading dimensions, in elements, of A and of C; one value sets
        ``lda`` only. Default: the rows of a column-major matrix, the columns of a row-major
        one. Given here they are compile-time constants; to choose them at run time, pass
        ``lda=`` and ``ldc=`` to :meth:`multiply`.
    %(block_dim)s
"""


DEVICE_NOTE = """
Notes
-----
A device function: call it inside a ``@cuda.jit`` kernel launched with :attr:`block_dim`
threads per block (Block execution). Give all of the leading dimensions or none: given,
the run-time form of the function is called, otherwise the compile-time one. On the host it
raises RuntimeError.
"""


# Parameter entries of the device methods that several classes share.
_LDA = """lda : int, optional
    Run-time leading dimension of A, in elements; default: the compile-time ``lda``."""

_LDB = """ldb : int, optional
    Run-time leading dimension of B, in elements; default: the compile-time ``ldb``."""



def _info(when: str) -> str:
    """The ``info`` entry of a device method whose failures are ``when`` (``j`` is 1-based)."""
    text = ("``info_shape`` entries, one per problem of the block (``info[i]`` for problem "
            f"``i``), set on exit to 0 on success, or to ``j > 0`` when {when}")
    return "info : array of int32\n" + textwrap.fill(
        text, 88, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False)

_TAU_OF_A = """tau : array in shared memory
    ``tau_size`` entries (``tau_shape``, ``tau_type``), set on exit to the scalar factors
    of the Householder reflectors."""

# The docstrings of the device methods, by "<class>.<method>" (the Notes are added to each).
METHODS = {
    "CholeskySolver.factorize": f"""
Cholesky factorization of each problem's A, in place (``potrf``).

Parameters
----------
a : array in shared memory
    The block's matrices A (``a_shape``, strides ``a_strides()``, ``value_type``). On exit
    the ``fill_mode`` triangle holds L or U; the other triangle is not referenced.
{_info("the leading minor of order ``j`` is not positive definite (the factorization "
        "could not be completed).")}
{_LDA}
""",
    "CholeskySolver.solve": f"""
Solve ``A X = B`` for each problem with the factor of :meth:`factorize` (``potrs``).

Parameters
----------
a : array in shared memory
    The factors left in A by :meth:`factorize` (read only).
b : array in shared memory
    The block's right-hand sides B (``b_shape``, strides ``b_strides()``), overwritten by
    the solutions X.
{_LDA}
{_LDB}
""",
    "LUSolver.factorize": f"""
LU factorization without pivoting of each problem's A, in place (``getrf_no_pivot``).

Parameters
----------
a : array in shared memory
    The block's matrices A (``a_shape``, strides ``a_strides()``, ``value_type``),
    overwritten by L (strictly below the diagonal) and U.
{_info("``U(j, j)`` is exactly zero: U is singular.")}
{_LDA}
""",
    "LUSolver.solve": f"""
Solve ``op(A) X = B`` for each problem with the factors of :meth:`factorize`
(``getrs_no_pivot``); needs M == N.

Parameters
----------
a : array in shared memory
    The factors L and U left in A by :meth:`factorize` (read only).
b : array in shared memory
    The block's right-hand sides B (``b_shape``, strides ``b_strides()``), overwritten by
    the solutions X.
{_LDA}
{_LDB}
""",
    "LUPivotSolver.factorize": f"""
LU factorization with partial pivoting of each problem's A, in place
(``getrf_partial_pivot``).

Parameters
----------
a : array in shared memory
    The block's matrices A (``a_shape``, strides ``a_strides()``, ``value_type``),
    overwritten by L (strictly below the diagonal) and U of ``P A = L U``.
ipiv : array of int32
    ``ipiv_size`` entries (``ipiv_shape``), set on exit to the 1-based pivots of each
    problem: its row ``i`` was interchanged with row ``ipiv[i] - 1``.
{_info("``U(j, j)`` is exactly zero: U is singular.")}
{_LDA}
""",
    "LUPivotSolver.solve": f"""
Solve ``op(A) X = B`` for each problem with the factors and pivots of :meth:`factorize`
(``getrs_partial_pivot``); needs M == N.

Parameters
----------
a : array in shared memory
    The factors L and U left in A by :meth:`factorize` (read only).
ipiv : array of int32
    The pivots left by :meth:`factorize` (read only).
b : array in shared memory
    The block's right-hand sides B (``b_shape``, strides ``b_strides()``), overwritten by
    the solutions X.
{_LDA}
{_LDB}
""",
    "TriangularSolver.solve": f"""
Solve ``op(A) X = B`` or ``X op(A) = B`` for each problem, B overwritten by X (``trsm``).

Parameters
----------
a : array in shared memory
    The block's triangular matrices A (``a_shape``, strides ``a_strides()``, ``value_type``;
    read only).
b : array in shared memory
    The block's right-hand sides B (``b_shape``, strides ``b_strides()``), overwritten by
    the solutions X.
{_LDA}
{_LDB}
""",
    "QRFactorize.factorize": f"""
QR factorization of each problem's A, in place (``geqrf``).

Parameters
----------
a : array in shared memory
    The block's matrices A (``a_shape``, strides ``a_strides()``, ``value_type``). On exit
    R is on and above the diagonal, the Householder vectors of Q below it.
{_TAU_OF_A}
{_LDA}
""",
    "LQFactorize.factorize": f"""
LQ factorization of each problem's A, in place (``gelqf``).

Parameters
----------
a : array in shared memory
    The block's matrices A (``a_shape``, strides ``a_strides()``, ``value_type``). On exit
    L is on and below the diagonal, the Householder vectors of Q above it.
{_TAU_OF_A}
{_LDA}
""",
    "_Multiply.multiply": """
Overwrite each problem's C with ``op(Q) C`` (``side='left'``) or ``C op(Q)`` (``'right'``).

Q is the product of the K Householder reflectors stored in A and ``tau`` by the
factorization (``unmqr`` or ``unmlq``).

Parameters
----------
a : array in shared memory
    The reflectors (``a_shape``, strides ``a_strides()``, ``value_type``; read only).
tau : array in shared memory
    Their scalar factors (``tau_shape``; read only).
c : array in shared memory
    The block's matrices C (``c_shape``, strides ``c_strides()``), overwritten by the
    product.
lda : int, optional
    Run-time leading dimension of A, in elements; default: the compile-time ``lda``.
ldc : int, optional
    Run-time leading dimension of C, in elements; default: the compile-time ``ldb``.
""",
    "LeastSquaresSolver.solve": """
Solve the least-squares problem of each problem of the block, in place (``gels``).

Parameters
----------
a : array in shared memory
    The block's matrices A (``a_shape``, strides ``a_strides()``, ``value_type``),
    overwritten by their factorization: QR for a non-transposed A with M >= N or a
    transposed one with M < N, LQ otherwise.
tau : array in shared memory
    ``tau_size`` entries (``tau_shape``), set on exit to the scalars of the reflectors.
b : array in shared memory
    The B/X buffer (``bx_shape``, strides ``bx_strides()``): B on entry (its first
    ``b_shape[1]`` rows), X on exit (its first ``x_shape[1]`` rows).
lda : int, optional
    Run-time leading dimension of A, in elements; default: the compile-time ``lda``.
ldb : int, optional
    Run-time leading dimension of the B/X buffer, in elements; default: the compile-time
    ``ldb``.
""",
}


_OPERAND_NAMES = {"a": "A", "b": "B", "c": "C", "bx": "the B/X buffer"}


def operand_helpers(operand: str, ld_name: str, index: int) -> tuple[str, str]:
    """Docstrings of ``<operand>_strides`` and ``<operand>_size`` (keyword ``ld_name``; the
    compile-time value is ``leading_dimensions[index]``)."""
    what = _OPERAND_NAMES[operand]
    ld_entry = (f"{ld_name} : int, optional\n"
                f"    Leading dimension of {what}, in elements, to lay it out with (a run-time "
                f"one, as\n    given to the device methods); default: the compile-time one, "
                f"``leading_dimensions[{index}]``.")
    strides = (
        f"Strides, in elements, of {what} in shared memory: ``(batch, row, column)``.\n\n"
        f"Column-major: ``({ld_name} * columns, 1, {ld_name})``; row-major: "
        f"``({ld_name} * rows, {ld_name}, 1)``\n(rows and columns from "
        f"``{operand}_shape``). Inside a kernel too.\n\n"
        f"Parameters\n----------\n{ld_entry}\n\n"
        f"Returns\n-------\ntuple of 3 ints\n    The strides of the problem (batch), row "
        f"and column dimensions.\n")
    size = (
        f"Elements of shared memory holding {what} for all problems of the block.\n\n"
        f"That is ``{operand}_strides()[0] * batches_per_block``. Inside a kernel too.\n\n"
        f"Parameters\n----------\n{ld_entry}\n\n"
        f"Returns\n-------\nint\n    The size in elements (of ``value_type``), not bytes.\n")
    return strides, size


def fill(cls):
    """Class decorator: replace the ``%(name)s`` placeholders of ``cls``'s docstring by the
    shared parameter entries of :data:`ENTRIES`."""
    cls.__doc__ = cls.__doc__ % ENTRIES
    return cls
