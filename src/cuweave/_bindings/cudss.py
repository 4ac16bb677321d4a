"""ctypes declarations of the cuDSS entry points cuweave uses (cuDSS 1.0, CUDA 13).

cuDSS is NVIDIA's sparse direct solver. It ships in the ``nvidia-cudss-cu13`` wheel (the
``sparse`` extra of cuweave), about 160 MB, so it is loaded lazily on the first call, under a
lock, from the first place that has it:

1. ``CUWEAVE_CUDSS_PATH``: the path of ``libcudss.so.1`` itself, or of the folder holding it
   (for machines where the wheel cannot be installed: the library is copied there by hand);
2. ``cuda.pathfinder.load_nvidia_dynamic_lib("cudss")``: the installed wheel, the CUDA
   toolkit, or the loader's search path.

A missing library raises :class:`~cuweave._internal.errors.LibraryNotFoundError` naming the
``sparse`` extra and the variable. Enum values are those of ``cudss_data_types.h`` (cuDSS 1.0;
``tests/sparse/test_cudss_headers.py`` compares them with the wheel's header). Every wrapper
checks the returned ``cudssStatus_t`` and raises :class:`CudssError` (status name and hint).
"""

from __future__ import annotations

import ctypes
import ctypes as _c  # the short name of the declarations below
import os
import threading
from enum import IntEnum

from .._internal.errors import LibraryError, LibraryNotFoundError

__all__ = [
    "CudssError", "ConfigParam", "DataParam", "Phase", "Status", "MatrixType",
    "MatrixViewType", "IndexBase", "Layout", "ReorderingAlg", "FactorizationAlg",
    "PivotEpsilonAlg", "SolveAlg", "MatchingAlg", "PivotType", "CONFIG_TYPES", "ENV_PATH",
    "load", "library_path", "version", "check", "raw", "create", "destroy", "config_create",
    "config_destroy", "data_create", "data_destroy", "config_set", "config_get", "data_get",
    "set_stream", "set_threading_layer", "execute", "matrix_create_dn", "matrix_create_csr",
    "matrix_create_batch_dn", "matrix_create_batch_csr", "matrix_destroy",
    "matrix_set_values", "matrix_set_csr_pointers",
]

#: environment variable naming libcudss.so.1 (or its folder) where no wheel is installed
ENV_PATH = "CUWEAVE_CUDSS_PATH"

#: the oldest cuDSS whose enums these declarations match
MIN_VERSION = (1, 0)


class Status(IntEnum):
    """``cudssStatus_t``."""

    SUCCESS = 0
    NOT_INITIALIZED = 1
    ALLOC_FAILED = 2
    INVALID_VALUE = 3
    NOT_SUPPORTED = 4
    EXECUTION_FAILED = 5
    INTERNAL_ERROR = 6
    IR_FAILED = 7


class CudssError(LibraryError):
    """A cuDSS call returned a status other than ``CUDSS_STATUS_SUCCESS``."""

    library = "cuDSS"
    _names = {int(s): f"CUDSS_STATUS_{s.name}" for s in Status}
    _hints = {
        "CUDSS_STATUS_NOT_INITIALIZED": "the CUDA driver or context is not usable; check "
        "`python -m cuweave info`",
        "CUDSS_STATUS_ALLOC_FAILED": "the GPU is out of memory: free memory, or run with "
        "ExecutionCUDA(hybrid_memory_mode_options={'hybrid_memory_mode': True}) to keep the "
        "factors in host memory",
        "CUDSS_STATUS_INVALID_VALUE": "a parameter is invalid for this matrix (type, view, "
        "index or value type, or a config value); see the cuDSS documentation",
        "CUDSS_STATUS_NOT_SUPPORTED": "this combination (matrix type, batching, hybrid mode, "
        "algorithm) is not supported by cuDSS",
        "CUDSS_STATUS_EXECUTION_FAILED": "a GPU kernel failed to launch or run",
        "CUDSS_STATUS_INTERNAL_ERROR": "cuDSS hit an internal error (often out of memory in "
        "a library it calls)",
        "CUDSS_STATUS_IR_FAILED": "iterative refinement did not converge; the matrix may be "
        "singular or badly conditioned",
    }


class ConfigParam(IntEnum):
    """``cudssConfigParam_t``."""

    REORDERING_ALG = 0
    FACTORIZATION_ALG = 1
    SOLVE_ALG = 2
    MATCHING_ALG = 3
    SOLVE_MODE = 4
    IR_N_STEPS = 5
    IR_TOL = 6
    PIVOT_TYPE = 7
    PIVOT_THRESHOLD = 8
    PIVOT_EPSILON = 9
    MAX_LU_NNZ = 10
    HYBRID_MEMORY_MODE = 11
    HYBRID_DEVICE_MEMORY_LIMIT = 12
    USE_CUDA_REGISTER_MEMORY = 13
    HOST_NTHREADS = 14
    HYBRID_EXECUTE_MODE = 15
    PIVOT_EPSILON_ALG = 16
    ND_NLEVELS = 17
    UBATCH_SIZE = 18
    UBATCH_INDEX = 19
    USE_SUPERPANELS = 20
    DEVICE_COUNT = 21
    DEVICE_INDICES = 22
    SCHUR_MODE = 23
    DETERMINISTIC_MODE = 24
    ND_UBFACTOR = 25
    EMULATION_MANTISSA_BIT_COUNT = 26
    FORCE_NONSYMMETRIC_MATCHING = 27
    DOWNCAST_FACTORS = 28
    MEMORY_OPTIMIZATION_SETTING = 29


class DataParam(IntEnum):
    """``cudssDataParam_t``."""

    INFO = 0
    LU_NNZ = 1
    NPIVOTS = 2
    INERTIA = 3
    PERM_REORDER_ROW = 4
    PERM_REORDER_COL = 5
    PERM_ROW = 6
    PERM_COL = 7
    DIAG = 8
    USER_PERM = 9
    HYBRID_DEVICE_MEMORY_MIN = 10
    COMM_DEVICE = 11
    COMM_HOST = 12
    MEMORY_ESTIMATES = 13
    PERM_MATCHING = 14
    SCALE_ROW = 15
    SCALE_COL = 16
    NSUPERPANELS = 17
    USER_SCHUR_INDICES = 18
    SCHUR_SHAPE = 19
    SCHUR_MATRIX = 20
    USER_ND_PARTITION_TREE = 21
    ND_PARTITION_TREE = 22
    USER_HOST_INTERRUPT = 23
    IR_N_STEPS = 24
    UBATCH_MASK = 25
    FLOPS = 26


class Phase(IntEnum):
    """``cudssPhase_t`` (bit flags)."""

    REORDERING = 1
    SYMBOLIC_FACTORIZATION = 2
    ANALYSIS = 3
    FACTORIZATION = 4
    REFACTORIZATION = 8
    SOLVE_FWD_PERM = 16
    SOLVE_FWD = 32
    SOLVE_DIAG = 64
    SOLVE_BWD = 128
    SOLVE_BWD_PERM = 256
    SOLVE_REFINEMENT = 512
    SOLVE = 1008


class MatrixType(IntEnum):
    """``cudssMatrixType_t``: what the solver may assume about the matrix."""

    GENERAL = 0
    SYMMETRIC = 1
    HERMITIAN = 2
    SPD = 3
    HPD = 4


class MatrixViewType(IntEnum):
    """``cudssMatrixViewType_t``: which part of a symmetric/Hermitian matrix is read."""

    FULL = 0
    LOWER = 1
    UPPER = 2


class IndexBase(IntEnum):
    """``cudssIndexBase_t``."""

    ZERO = 0
    ONE = 1


class Layout(IntEnum):
    """``cudssLayout_t``."""

    COL_MAJOR = 0
    ROW_MAJOR = 1


class ReorderingAlg(IntEnum):
    """``cudssReorderingAlg_t``."""

    DEFAULT = 0
    BTF_COLAMD = 1
    COLAMD = 2
    AMD = 3
    NESTED_DISSECTION = 4
    NONE = 5


class FactorizationAlg(IntEnum):
    """``cudssFactorizationAlg_t``."""

    DEFAULT = 0
    MULTIBLOCK = 1
    GENERAL = 2


class PivotEpsilonAlg(IntEnum):
    """``cudssPivotEpsilonAlg_t``."""

    DEFAULT = 0
    SCALED = 1
    STATIC = 2


class SolveAlg(IntEnum):
    """``cudssSolveAlg_t``."""

    DEFAULT = 0
    GENERAL = 1


class MatchingAlg(IntEnum):
    """``cudssMatchingAlg_t``."""

    NONE = 0
    MAX_DIAG_COUNT = 1
    MAX_MIN_DIAG = 2
    MAX_MIN_DIAG_ALT = 3
    MAX_DIAG_SUM = 4
    MAX_DIAG_PRODUCT = 5
    AUTO = 6


class PivotType(IntEnum):
    """``cudssPivotType_t`` (member names as nvmath-python spells them)."""

    PIVOT_AUTO = 0
    PIVOT_NONE = 1
    PIVOT_GLOBAL_COL = 2
    PIVOT_GLOBAL_ROW = 3
    PIVOT_DIAGONAL = 4
    PIVOT_LOCAL_BLOCK = 5
    PIVOT_BUNCH_KAUFMAN = 6


#: the C type of each configuration value cuweave reads or writes (cuDSS documentation)
CONFIG_TYPES = {
    ConfigParam.REORDERING_ALG: _c.c_int,
    ConfigParam.FACTORIZATION_ALG: _c.c_int,
    ConfigParam.SOLVE_ALG: _c.c_int,
    ConfigParam.MATCHING_ALG: _c.c_int,
    ConfigParam.SOLVE_MODE: _c.c_int,
    ConfigParam.IR_N_STEPS: _c.c_int,
    ConfigParam.IR_TOL: _c.c_double,
    ConfigParam.PIVOT_TYPE: _c.c_int,
    ConfigParam.PIVOT_THRESHOLD: _c.c_double,
    ConfigParam.PIVOT_EPSILON: _c.c_double,
    ConfigParam.MAX_LU_NNZ: _c.c_int64,
    ConfigParam.HYBRID_MEMORY_MODE: _c.c_int,
    ConfigParam.HYBRID_DEVICE_MEMORY_LIMIT: _c.c_int64,
    ConfigParam.USE_CUDA_REGISTER_MEMORY: _c.c_int,
    ConfigParam.HOST_NTHREADS: _c.c_int,
    ConfigParam.HYBRID_EXECUTE_MODE: _c.c_int,
    ConfigParam.PIVOT_EPSILON_ALG: _c.c_int,
    ConfigParam.ND_NLEVELS: _c.c_int,
    ConfigParam.USE_SUPERPANELS: _c.c_int,
    ConfigParam.DETERMINISTIC_MODE: _c.c_int,
}

_vp = _c.c_void_p
_i64 = _c.c_int64
_i = _c.c_int
_sizep = _c.POINTER(_c.c_size_t)

# name -> argtypes; restype is always cudssStatus_t (int)
_SIGNATURES: dict[str, tuple] = {
    "cudssGetProperty": (_i, _c.POINTER(_i)),
    "cudssCreate": (_c.POINTER(_vp),),
    "cudssDestroy": (_vp,),
    "cudssSetStream": (_vp, _vp),
    "cudssSetThreadingLayer": (_vp, _c.c_char_p),
    "cudssConfigCreate": (_c.POINTER(_vp),),
    "cudssConfigDestroy": (_vp,),
    "cudssDataCreate": (_vp, _c.POINTER(_vp)),
    "cudssDataDestroy": (_vp, _vp),
    "cudssConfigSet": (_vp, _i, _vp, _c.c_size_t),
    "cudssConfigGet": (_vp, _i, _vp, _c.c_size_t, _sizep),
    "cudssDataSet": (_vp, _vp, _i, _vp, _c.c_size_t),
    "cudssDataGet": (_vp, _vp, _i, _vp, _c.c_size_t, _sizep),
    "cudssExecute": (_vp, _i, _vp, _vp, _vp, _vp, _vp),
    "cudssMatrixCreateDn": (_c.POINTER(_vp), _i64, _i64, _i64, _vp, _i, _i),
    "cudssMatrixCreateCsr": (_c.POINTER(_vp), _i64, _i64, _i64, _vp, _vp, _vp, _vp, _i, _i, _i,
                             _i, _i, _i),
    "cudssMatrixCreateBatchDn": (_c.POINTER(_vp), _i64, _vp, _vp, _vp, _vp, _i, _i, _i),
    "cudssMatrixCreateBatchCsr": (_c.POINTER(_vp), _i64, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _i,
                                  _i, _i, _i, _i, _i),
    "cudssMatrixDestroy": (_vp,),
    "cudssMatrixSetValues": (_vp, _vp),
    "cudssMatrixSetCsrPointers": (_vp, _vp, _vp, _vp, _vp),
}

_lock = threading.Lock()
_funcs: dict[str, object] = {}
_path: list[str] = []


def _candidates_from_env() -> list[str]:
    value = os.environ.get(ENV_PATH, "").strip()
    if not value:
        return []
    if os.path.isdir(value):
        return [os.path.join(value, n) for n in ("libcudss.so.1", "libcudss.so.0", "libcudss.so")
                if os.path.exists(os.path.join(value, n))] or [os.path.join(value,
                                                                            "libcudss.so.1")]
    return [value]


#: libraries libcudss.so.1 links against (loaded first, globally, so that a libcudss found
#: outside the wheel layout resolves them from the NVIDIA wheels)
DEPENDENCIES = ("cublasLt", "cublas", "nvrtc")


def _preload_dependencies() -> None:
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        return
    for name in DEPENDENCIES:
        try:
            load_nvidia_dynamic_lib(name)
        except Exception:  # the loader's own search may still find it
            pass


def _open() -> tuple[ctypes.CDLL, str]:
    errors = []
    candidates = _candidates_from_env()
    if candidates:
        _preload_dependencies()
    for path in candidates:
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path
        except OSError as e:
            errors.append(f"{ENV_PATH}={path}: {e}")
    if os.environ.get(ENV_PATH, "").strip():
        raise LibraryNotFoundError("cuDSS (libcudss.so.1)", "sparse", "; ".join(errors))
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        found = load_nvidia_dynamic_lib("cudss")
        path = found.abs_path
        lib = ctypes.CDLL(path) if path else ctypes.CDLL(None, handle=found._handle_uint)
        return lib, path or "<loaded by the process>"
    except ImportError as e:
        errors.append(f"cuda-pathfinder is not installed ({e})")
    except Exception as e:  # DynamicLibNotFoundError and friends
        errors.append(str(e).splitlines()[0] if str(e) else type(e).__name__)
    raise LibraryNotFoundError(
        "cuDSS (libcudss.so.1)", "sparse",
        "; ".join(errors) + f"; or set {ENV_PATH} to the path of libcudss.so.1")


def load() -> dict[str, object]:
    """Load libcudss and declare every signature (once per process); checks the version."""
    if _funcs:
        return _funcs
    with _lock:
        if _funcs:
            return _funcs
        lib, path = _open()
        table = {}
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes = list(argtypes)
            fn.restype = _c.c_int
            table[name] = fn
        got = _property(table, 0), _property(table, 1), _property(table, 2)
        if got[:2] < MIN_VERSION:
            raise LibraryNotFoundError(
                "cuDSS", "sparse", f"cuweave needs cuDSS >= {MIN_VERSION[0]}.{MIN_VERSION[1]} "
                f"(its enums changed in 1.0), found {'.'.join(map(str, got))} at {path}")
        _path.append(path)
        _funcs.update(table)
    return _funcs


def _property(table, which: int) -> int:
    v = _c.c_int()
    check(table["cudssGetProperty"](which, _c.byref(v)), "cudssGetProperty")
    return v.value


def library_path() -> str | None:
    """Where libcudss was loaded from, or ``None`` before the first use."""
    return _path[0] if _path else None


def version() -> tuple[int, int, int]:
    """(major, minor, patch) of the loaded cuDSS."""
    table = load()
    return _property(table, 0), _property(table, 1), _property(table, 2)


def check(status: int, function: str) -> None:
    """Raise :class:`CudssError` if ``status`` is not ``CUDSS_STATUS_SUCCESS``."""
    if status:
        raise CudssError(status, function)


def raw(name: str):
    """The declared ctypes function ``name`` (for callers that check the status themselves)."""
    return load()[name]


def _call(name: str, *args) -> None:
    check(load()[name](*args), name)


def _new(name: str, *args) -> int:
    out = _vp()
    _call(name, _c.byref(out), *args)
    return out.value


def create() -> int:
    """``cudssCreate``: a library handle on the current device."""
    return _new("cudssCreate")


def destroy(handle: int) -> None:
    _call("cudssDestroy", handle)


def config_create() -> int:
    return _new("cudssConfigCreate")


def config_destroy(config: int) -> None:
    _call("cudssConfigDestroy", config)


def data_create(handle: int) -> int:
    out = _vp()
    _call("cudssDataCreate", handle, _c.byref(out))
    return out.value


def data_destroy(handle: int, data: int) -> None:
    _call("cudssDataDestroy", handle, data)


def config_set(config: int, param: ConfigParam, value) -> None:
    """Set the configuration value ``param`` (converted to its C type)."""
    ctype = CONFIG_TYPES[param]
    v = ctype(value)
    _call("cudssConfigSet", config, int(param), _c.byref(v), _c.sizeof(v))


def config_get(config: int, param: ConfigParam):
    """The configuration value ``param`` as a Python number."""
    v = CONFIG_TYPES[param]()
    written = _c.c_size_t()
    _call("cudssConfigGet", config, int(param), _c.byref(v), _c.sizeof(v), _c.byref(written))
    return v.value


def data_get(handle: int, data: int, param: DataParam, address: int, nbytes: int) -> int:
    """Read the data value ``param`` into ``nbytes`` of host memory at ``address``; returns the
    bytes written."""
    written = _c.c_size_t()
    _call("cudssDataGet", handle, data, int(param), address, nbytes, _c.byref(written))
    return written.value


def set_stream(handle: int, stream: int) -> None:
    _call("cudssSetStream", handle, stream or None)


def set_threading_layer(handle: int, path: str | None) -> None:
    """``cudssSetThreadingLayer`` (``None``: the library named by ``CUDSS_THREADING_LIB``)."""
    _call("cudssSetThreadingLayer", handle, path.encode() if path else None)


def execute(handle: int, phase: int, config: int, data: int, a: int, x: int, b: int) -> None:
    _call("cudssExecute", handle, int(phase), config, data, a, x, b)


def matrix_create_dn(nrows: int, ncols: int, ld: int, values: int, value_type: int,
                     layout: Layout = Layout.COL_MAJOR) -> int:
    return _new("cudssMatrixCreateDn", nrows, ncols, ld, values or None, int(value_type),
                int(layout))


def matrix_create_csr(nrows, ncols, nnz, row_start, col_indices, values, index_type,
                      value_type, mtype, mview, base=IndexBase.ZERO) -> int:
    """A CSR matrix (3-array form: ``row_end`` is NULL). ``index_type`` serves as both the
    offset and the index type."""
    return _new("cudssMatrixCreateCsr", nrows, ncols, nnz, row_start, None, col_indices,
                values, int(index_type), int(index_type), int(value_type), int(mtype),
                int(mview), int(base))


def matrix_create_batch_dn(count, nrows, ncols, ld, values, index_type, value_type,
                           layout: Layout = Layout.COL_MAJOR) -> int:
    """A batch of dense matrices: ``nrows``/``ncols``/``ld`` are host arrays of
    ``index_type``, ``values`` a device array of pointers."""
    return _new("cudssMatrixCreateBatchDn", count, nrows, ncols, ld, values,
                int(index_type), int(value_type), int(layout))


def matrix_create_batch_csr(count, nrows, ncols, nnz, row_start, col_indices, values,
                            index_type, value_type, mtype, mview, base=IndexBase.ZERO) -> int:
    """A batch of CSR matrices: sizes are host arrays of ``index_type``, the three pointer
    arguments device arrays of pointers."""
    return _new("cudssMatrixCreateBatchCsr", count, nrows, ncols, nnz, row_start, None,
                col_indices, values, int(index_type), int(index_type), int(value_type),
                int(mtype), int(mview), int(base))


def matrix_destroy(matrix: int) -> None:
    _call("cudssMatrixDestroy", matrix)


def matrix_set_values(matrix: int, values: int) -> None:
    _call("cudssMatrixSetValues", matrix, values)


def matrix_set_csr_pointers(matrix: int, row_start: int, col_indices: int, values: int) -> None:
    _call("cudssMatrixSetCsrPointers", matrix, row_start, None, col_indices, values)
