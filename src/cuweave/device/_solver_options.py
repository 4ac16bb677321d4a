"""Knobs of the cuSOLVERDx device solvers: validation and the immutable description.

A :class:`SolverSpec` is one cuSOLVERDx function with every knob nvmath-python 1.0's
``nvmath.device.Solver`` takes (function, size, precision, execution, sm, arrangement,
transpose mode, side, diag, fill mode, batches per block, data type, leading dimensions, block
dimension, job). Building one validates everything, without side effects, and raises a typed
error naming the knob; nothing here loads a library. The enums carry libmathdx's C values
(``libcusolverdx.h``).

Examples
--------
>>> import numpy as np
>>> spec = SolverSpec.from_knobs("potrf", (32,), np.float32, "Block", sm=90, fill_mode="lower")
>>> spec.size, spec.precision, spec.default_leading_dimensions()
((32, 32, 1), 'float32', (32, 32))
"""

from __future__ import annotations

import dataclasses
from enum import IntEnum

import numpy as np

from .._internal.errors import InvalidOptionError
from ._options import normalize_sm

__all__ = ["Function", "Api", "DataType", "SolverArrangement", "SolverTransposeMode",
           "FillMode", "Side", "Diag", "Job", "FUNCTIONS", "PRECISION_CODES", "EXECUTION_CODES",
           "SolverSpec", "choice", "normalize_size"]


class Function(IntEnum):  # cusolverdxFunction
    GETRF_NO_PIVOT, GETRS_NO_PIVOT, POTRF, POTRS, TRSM = range(5)
    GETRF_PARTIAL_PIVOT, GETRS_PARTIAL_PIVOT, GEQRF, UNMQR, GELQF, UNMLQ = range(5, 11)
    POSV, GESV_NO_PIVOT, GESV_PARTIAL_PIVOT, GELS, UNGQR, UNGLQ = range(11, 17)
    GTSV_NO_PIVOT, HTEV, HEEV = range(17, 20)


class Api(IntEnum):  # cusolverdxApi: leading dimensions fixed at compile time, or given
    SMEM, SMEM_DYNAMIC_LD = 0, 1


class DataType(IntEnum):  # cusolverdxType
    REAL, COMPLEX = 0, 1


class SolverArrangement(IntEnum):  # cusolverdxArrangement
    COL_MAJOR, ROW_MAJOR = 0, 1


class SolverTransposeMode(IntEnum):  # cusolverdxTransposeMode
    NON_TRANSPOSED, TRANSPOSED, CONJ_TRANSPOSED = 0, 1, 2


class FillMode(IntEnum):  # cusolverdxFillMode
    UPPER, LOWER = 0, 1


class Side(IntEnum):  # cusolverdxSide
    LEFT, RIGHT = 0, 1


class Diag(IntEnum):  # cusolverdxDiag
    UNIT, NON_UNIT = 0, 1


class Job(IntEnum):  # cusolverdxJob
    NO_VECTORS, ALL_VECTORS, MULTIPLY_VECTORS, OVERWRITE_VECTORS = 0, 1, 2, 3


# nvmath-python's function names and what each computes
FUNCTIONS = {
    "potrf": "Cholesky factorization",
    "potrs": "linear solve after a Cholesky factorization",
    "posv": "Cholesky factorization and solve",
    "getrf_no_pivot": "LU factorization without pivoting",
    "getrs_no_pivot": "linear solve after an LU factorization without pivoting",
    "gesv_no_pivot": "LU factorization without pivoting and solve",
    "getrf_partial_pivot": "LU factorization with partial pivoting",
    "getrs_partial_pivot": "linear solve after an LU factorization with partial pivoting",
    "gesv_partial_pivot": "LU factorization with partial pivoting and solve",
    "geqrf": "QR factorization",
    "unmqr": "multiplication by Q of a QR factorization",
    "ungqr": "generation of Q of a QR factorization",
    "gelqf": "LQ factorization",
    "unmlq": "multiplication by Q of an LQ factorization",
    "unglq": "generation of Q of an LQ factorization",
    "trsm": "triangular solve with several right-hand sides",
    "gels": "least squares (QR or LQ) solve",
    "gtsv_no_pivot": "tridiagonal solve without pivoting",
    "htev": "eigenvalues of a Hermitian tridiagonal matrix",
    "heev": "eigenvalues of a Hermitian matrix",
}
PRECISION_CODES = {"float32": 5, "float64": 6}  # commondxPrecision
EXECUTION_CODES = {"Thread": 0, "Block": 1}     # commondxExecution
ARRANGEMENTS = ("col_major", "row_major")
TRANSPOSE_MODES = ("non_transposed", "transposed", "conj_transposed")
FILL_MODES, SIDES, DIAGS, DATA_TYPES = ("upper", "lower"), ("left", "right"), \
    ("unit", "non_unit"), ("real", "complex")

# Which functions take which optional knob (cuSOLVERDx's operators per function).
_TRANSPOSE = frozenset({"getrf_no_pivot", "getrs_no_pivot", "gesv_no_pivot",
                        "getrf_partial_pivot", "getrs_partial_pivot", "gesv_partial_pivot",
                        "geqrf", "gelqf", "unmqr", "unmlq", "gels", "trsm"})
_FACTORIZATIONS = frozenset({"geqrf", "gelqf", "getrf_no_pivot", "getrf_partial_pivot"})
_SIDE = frozenset({"unmqr", "unmlq", "trsm"})
_FILL = frozenset({"potrf", "potrs", "posv", "trsm", "heev"})
_DIAG = frozenset({"trsm"})
_JOBS = {"htev": ("no_vectors", "all_vectors", "multiply_vectors"),
         "heev": ("no_vectors", "overwrite_vectors")}


def choice(value, name: str, allowed) -> str:
    """``value`` if it is one of the strings ``allowed``, else InvalidOptionError."""
    if not isinstance(value, str) or value not in allowed:
        raise InvalidOptionError(f"{name} must be one of {', '.join(map(repr, allowed))}, "
                                 f"got {value!r}")
    return value


def _positive_ints(value, name: str, lo: int, hi: int) -> tuple:
    ok = (isinstance(value, (tuple, list)) and lo <= len(value) <= hi and
          all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0
              for v in value))
    if not ok:
        raise InvalidOptionError(f"{name} must be a sequence of {lo} to {hi} positive integers, "
                                 f"got {value!r}")
    return tuple(int(v) for v in value)


def normalize_size(size) -> tuple:
    """``(m, n, k)`` of nvmath-python's ``(M,)``, ``(M, N)`` or ``(M, N, K)``."""
    dims = _positive_ints(size, "size", 1, 3)
    return {1: (dims[0], dims[0], 1), 2: (*dims, 1), 3: dims}[len(dims)]


def _precision(value) -> str:
    try:
        name = np.dtype(value).name
    except TypeError:
        name = None
    if name not in PRECISION_CODES:
        raise InvalidOptionError(f"precision must be numpy.float32 or numpy.float64, "
                                 f"got {value!r}")
    return name


def _batches(value, execution: str):
    if value is None or value == "suggested":
        if value == "suggested" and execution != "Block":
            raise InvalidOptionError("batches_per_block applies to execution='Block' only, "
                                     "got 'suggested' with execution='Thread'")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidOptionError(f"batches_per_block must be a positive integer or "
                                 f"'suggested', got {value!r}")
    if execution != "Block":
        raise InvalidOptionError(f"batches_per_block applies to execution='Block' only, "
                                 f"got {value!r} with execution={execution!r}")
    return int(value)


def _block_dim(value, execution: str):
    if value is None:
        return None
    if execution != "Block":
        raise InvalidOptionError(f"block_dim applies to execution='Block' only, got {value!r}")
    if value == "suggested":
        return value
    dims = _positive_ints(value, "block_dim", 1, 3)
    return dims + (1,) * (3 - len(dims))


def _function_knobs(function, transpose_mode, side, diag, fill_mode, job) -> None:
    """Each optional knob only where the function takes it, and every required one given."""
    given = {"transpose_mode": (transpose_mode, _TRANSPOSE), "side": (side, _SIDE),
             "diag": (diag, _DIAG), "fill_mode": (fill_mode, _FILL), "job": (job, _JOBS)}
    for name, (value, takers) in given.items():
        if value is not None and function not in takers:
            raise InvalidOptionError(
                f"{name} is not a knob of function {function!r} (it applies to "
                f"{', '.join(sorted(takers))}), got {value!r}")
        if value is None and function in takers and name != "transpose_mode":
            raise InvalidOptionError(f"{name} must be given for function {function!r}, "
                                     f"got None")
    if function in _FACTORIZATIONS and transpose_mode not in (None, "non_transposed"):
        raise InvalidOptionError(f"transpose_mode must be 'non_transposed' for function "
                                 f"{function!r}, got {transpose_mode!r}")
    if job is not None:
        choice(job, "job", _JOBS[function])


@dataclasses.dataclass(frozen=True)
class SolverSpec:
    """One cuSOLVERDx device function, as described (``None``: cuSOLVERDx's default)."""

    function: str
    size: tuple                      # (m, n, k)
    precision: str                   # 'float32' or 'float64'
    execution: str                   # 'Block' or 'Thread'
    sm: int                          # 900 for sm_90
    arrangement: tuple | None = None
    transpose_mode: str | None = None
    side: str | None = None
    diag: str | None = None
    fill_mode: str | None = None
    batches_per_block: int | str | None = None
    data_type: str | None = None
    leading_dimensions: tuple | None = None
    block_dim: tuple | str | None = None
    job: str | None = None

    @classmethod
    def from_knobs(cls, function, size, precision, execution, *, sm, arrangement=None,
                   transpose_mode=None, side=None, diag=None, fill_mode=None,
                   batches_per_block=None, data_type=None, leading_dimensions=None,
                   block_dim=None, job=None) -> SolverSpec:
        """Validate nvmath-python's knobs (``sm`` required here: the caller resolves the
        current device's)."""
        choice(function, "function", tuple(FUNCTIONS))
        dims = normalize_size(size)
        precision = _precision(precision)
        choice(execution, "execution", tuple(EXECUTION_CODES))
        if arrangement is not None:
            if isinstance(arrangement, str) or not isinstance(arrangement, (tuple, list)) or \
                    len(arrangement) not in (1, 2):
                raise InvalidOptionError(f"arrangement must be a sequence of 1 or 2 of "
                                         f"'col_major'/'row_major', got {arrangement!r}")
            for i, a in enumerate(arrangement):
                choice(a, f"arrangement[{i}]", ARRANGEMENTS)
            arrangement = tuple(arrangement)
        for value, name, allowed in ((transpose_mode, "transpose_mode", TRANSPOSE_MODES),
                                     (side, "side", SIDES), (diag, "diag", DIAGS),
                                     (fill_mode, "fill_mode", FILL_MODES),
                                     (data_type, "data_type", DATA_TYPES)):
            if value is not None:
                choice(value, name, allowed)
        _function_knobs(function, transpose_mode, side, diag, fill_mode, job)
        if leading_dimensions is not None:
            leading_dimensions = _positive_ints(leading_dimensions, "leading_dimensions", 1, 2)
        return cls(function=function, size=dims, precision=precision, execution=execution,
                   sm=normalize_sm(sm), arrangement=arrangement, transpose_mode=transpose_mode,
                   side=side, diag=diag, fill_mode=fill_mode,
                   batches_per_block=_batches(batches_per_block, execution),
                   data_type=data_type, leading_dimensions=leading_dimensions,
                   block_dim=_block_dim(block_dim, execution), job=job)

    # ----- derived ----------------------------------------------------------------------------
    @property
    def is_complex(self) -> bool:
        return self.data_type == "complex"

    @property
    def arrangements(self) -> tuple:
        """``(A's, B's)`` storage orders (column-major where not given)."""
        given = self.arrangement or ()
        return tuple(given) + ("col_major",) * (2 - len(given))

    def default_leading_dimensions(self) -> tuple:
        """cuSOLVERDx's leading dimensions ``(lda, ldb)`` when none is given: the rows of a
        column-major matrix, the columns of a row-major one (0: the function has no such
        matrix)."""
        m, n, k = self.size
        arr_a, arr_b = self.arrangements

        def ld(rows, cols, order):
            return rows if order == "col_major" else cols

        f = self.function
        if f in ("potrf", "potrs", "posv") or f.startswith(("getr", "gesv")):
            return ld(m, n, arr_a), ld(n, k, arr_b)
        if f == "trsm":
            return (m if self.side == "left" else n), ld(m, n, arr_b)
        if f in ("geqrf", "gelqf", "ungqr", "unglq", "htev", "heev"):
            return ld(m, n, arr_a), 0
        q = m if self.side == "left" else n  # the order of Q in unmqr/unmlq
        if f == "unmqr":
            return ld(q, k, arr_a), ld(m, n, arr_b)
        if f == "unmlq":
            return ld(k, q, arr_a), ld(m, n, arr_b)
        if f == "gels":  # B and X share one max(m, n) x k buffer
            return ld(m, n, arr_a), ld(max(m, n), k, arr_b)
        return 0, ld(n, k, arr_b)  # gtsv_no_pivot: B only

    def resolved_leading_dimensions(self) -> tuple:
        """The leading dimensions in effect: those given, the defaults for the rest."""
        default = self.default_leading_dimensions()
        given = self.leading_dimensions or ()
        return tuple(given) + default[len(given):]

    def with_(self, **changes) -> SolverSpec:
        return dataclasses.replace(self, **changes)

    def key(self) -> tuple:
        """A hashable, printable tuple of every knob (part of cache keys and numba type names)."""
        return ("solver",) + tuple(getattr(self, f.name) for f in dataclasses.fields(self))
