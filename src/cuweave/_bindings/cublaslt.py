"""ctypes declarations of cuBLASLt (CUDA 13 headers) and its enums.

Nothing is loaded at import time: the first call of any wrapper loads ``libcublasLt`` through
:func:`cuweave._bindings._loader.load_library` and declares every ``argtypes``/``restype``
once. Wrappers raise :class:`~cuweave._internal.errors.CublasLtError` (status name + hint) for
any status other than ``CUBLAS_STATUS_SUCCESS``.

The hot path does not go through the wrappers: :func:`bare` returns ``cublasLtMatmul`` without
``argtypes`` (the one unconverted-call mechanism, ``_loader.untyped``) so a planned object calls
it with a pre-built argument list and checks the integer status itself.
"""

from __future__ import annotations

import ctypes
import threading
from enum import IntEnum

from .._internal.errors import CublasLtError
from ._loader import load_library, untyped

__all__ = [
    "Operation", "FillMode", "PointerMode", "Order", "BatchMode", "MatrixLayoutAttribute",
    "MatmulDescAttribute", "Epilogue", "Search", "PreferenceAttribute", "ReductionScheme",
    "AlgoCapAttribute", "AlgoConfigAttribute", "MatrixScaleMode", "NumericalImplFlags",
    "MatmulAlgo", "HeuristicResult", "lib", "check", "create", "destroy", "get_version",
    "get_cudart_version", "matmul_desc_create", "matmul_desc_destroy",
    "matmul_desc_set_attribute", "matmul_desc_get_attribute", "matrix_layout_create",
    "matrix_layout_destroy", "matrix_layout_set_attribute", "preference_create",
    "preference_destroy", "preference_set_attribute", "algo_get_heuristic", "algo_get_ids",
    "algo_init", "algo_check", "algo_cap_get_attribute", "algo_config_get_attribute",
    "algo_config_set_attribute", "matmul", "matmul_function", "bare", "ATTRIBUTE_CTYPES",
]


class Operation(IntEnum):
    """``cublasOperation_t``."""

    N = 0
    T = 1
    C = 2


class FillMode(IntEnum):
    """``cublasFillMode_t``."""

    LOWER = 0
    UPPER = 1
    FULL = 2


class PointerMode(IntEnum):
    """``cublasLtPointerMode_t``."""

    HOST = 0
    DEVICE = 1
    DEVICE_VECTOR = 2
    ALPHA_DEVICE_VECTOR_BETA_ZERO = 3
    ALPHA_DEVICE_VECTOR_BETA_HOST = 4


class Order(IntEnum):
    """``cublasLtOrder_t``."""

    COL = 0
    ROW = 1
    COL32 = 2
    COL4_4R2_8C = 3
    COL32_2R_4R4 = 4


class BatchMode(IntEnum):
    """``cublasLtBatchMode_t``."""

    STRIDED = 0
    POINTER_ARRAY = 1


class MatrixLayoutAttribute(IntEnum):
    """``cublasLtMatrixLayoutAttribute_t``."""

    TYPE = 0
    ORDER = 1
    ROWS = 2
    COLS = 3
    LD = 4
    BATCH_COUNT = 5
    STRIDED_BATCH_OFFSET = 6
    PLANE_OFFSET = 7
    BATCH_MODE = 8


class MatmulDescAttribute(IntEnum):
    """``cublasLtMatmulDescAttributes_t``."""

    COMPUTE_TYPE = 0
    SCALE_TYPE = 1
    POINTER_MODE = 2
    TRANSA = 3
    TRANSB = 4
    TRANSC = 5
    FILL_MODE = 6
    EPILOGUE = 7
    BIAS_POINTER = 8
    BIAS_BATCH_STRIDE = 10
    EPILOGUE_AUX_POINTER = 11
    EPILOGUE_AUX_LD = 12
    EPILOGUE_AUX_BATCH_STRIDE = 13
    ALPHA_VECTOR_BATCH_STRIDE = 14
    SM_COUNT_TARGET = 15
    A_SCALE_POINTER = 17
    B_SCALE_POINTER = 18
    C_SCALE_POINTER = 19
    D_SCALE_POINTER = 20
    AMAX_D_POINTER = 21
    EPILOGUE_AUX_DATA_TYPE = 22
    EPILOGUE_AUX_SCALE_POINTER = 23
    EPILOGUE_AUX_AMAX_POINTER = 24
    FAST_ACCUM = 25
    BIAS_DATA_TYPE = 26
    A_SCALE_MODE = 31
    B_SCALE_MODE = 32
    C_SCALE_MODE = 33
    D_SCALE_MODE = 34
    EPILOGUE_AUX_SCALE_MODE = 35
    D_OUT_SCALE_POINTER = 36
    D_OUT_SCALE_MODE = 37
    EMULATION_DESCRIPTOR = 38


class Epilogue(IntEnum):
    """``cublasLtEpilogue_t``."""

    DEFAULT = 1
    RELU = 2
    RELU_AUX = 2 | 128
    BIAS = 4
    RELU_BIAS = 2 | 4
    RELU_AUX_BIAS = 2 | 128 | 4
    DRELU = 8 | 128
    DRELU_BGRAD = 8 | 128 | 16
    GELU = 32
    GELU_AUX = 32 | 128
    GELU_BIAS = 32 | 4
    GELU_AUX_BIAS = 32 | 128 | 4
    DGELU = 64 | 128
    DGELU_BGRAD = 64 | 128 | 16
    BGRADA = 256
    BGRADB = 512


class Search(IntEnum):
    """``cublasLtMatmulSearch_t``."""

    BEST_FIT = 0
    LIMITED_BY_ALGO_ID = 1


class PreferenceAttribute(IntEnum):
    """``cublasLtMatmulPreferenceAttributes_t``."""

    SEARCH_MODE = 0
    MAX_WORKSPACE_BYTES = 1
    REDUCTION_SCHEME_MASK = 3
    MIN_ALIGNMENT_A_BYTES = 5
    MIN_ALIGNMENT_B_BYTES = 6
    MIN_ALIGNMENT_C_BYTES = 7
    MIN_ALIGNMENT_D_BYTES = 8
    MAX_WAVES_COUNT = 9
    IMPL_MASK = 12


class ReductionScheme(IntEnum):
    """``cublasLtReductionScheme_t``."""

    NONE = 0
    INPLACE = 1
    COMPUTE_TYPE = 2
    OUTPUT_TYPE = 4
    MASK = 7


class AlgoCapAttribute(IntEnum):
    """``cublasLtMatmulAlgoCapAttributes_t``."""

    SPLITK_SUPPORT = 0
    REDUCTION_SCHEME_MASK = 1
    CTA_SWIZZLING_SUPPORT = 2
    STRIDED_BATCH_SUPPORT = 3
    OUT_OF_PLACE_RESULT_SUPPORT = 4
    UPLO_SUPPORT = 5
    TILE_IDS = 6
    CUSTOM_OPTION_MAX = 7
    CUSTOM_MEMORY_ORDER = 10
    POINTER_MODE_MASK = 11
    EPILOGUE_MASK = 12
    STAGES_IDS = 13
    LD_NEGATIVE = 14
    NUMERICAL_IMPL_FLAGS = 15
    MIN_ALIGNMENT_A_BYTES = 16
    MIN_ALIGNMENT_B_BYTES = 17
    MIN_ALIGNMENT_C_BYTES = 18
    MIN_ALIGNMENT_D_BYTES = 19
    POINTER_ARRAY_BATCH_SUPPORT = 21
    FLOATING_POINT_EMULATION_SUPPORT = 22


class AlgoConfigAttribute(IntEnum):
    """``cublasLtMatmulAlgoConfigAttributes_t``."""

    ID = 0
    TILE_ID = 1
    SPLITK_NUM = 2
    REDUCTION_SCHEME = 3
    CTA_SWIZZLING = 4
    CUSTOM_OPTION = 5
    STAGES_ID = 6
    INNER_SHAPE_ID = 7
    CLUSTER_SHAPE_ID = 8


class MatrixScaleMode(IntEnum):
    """``cublasLtMatmulMatrixScale_t``."""

    SCALAR_32F = 0
    VEC16_UE4M3 = 1
    VEC32_UE8M0 = 2
    OUTER_VEC_32F = 3
    VEC128_32F = 4
    BLK128x128_32F = 5


class NumericalImplFlags(IntEnum):
    """``cublasLtNumericalImplFlags_t`` bits (``CUBLASLT_NUMERICAL_IMPL_FLAGS_*``)."""

    FMA = 0x01
    HMMA = 0x02
    IMMA = 0x04
    DMMA = 0x08
    ACCUMULATOR_16F = 0x01 << 8
    ACCUMULATOR_32F = 0x02 << 8
    ACCUMULATOR_64F = 0x04 << 8
    ACCUMULATOR_32I = 0x08 << 8
    INPUT_16F = 0x01 << 16
    INPUT_16BF = 0x02 << 16
    INPUT_TF32 = 0x04 << 16
    INPUT_32F = 0x08 << 16
    INPUT_64F = 0x10 << 16
    INPUT_8I = 0x20 << 16
    INPUT_8F_E4M3 = 0x40 << 16
    INPUT_8F_E5M2 = 0x80 << 16
    GAUSSIAN = 0x01 << 32


class MatmulAlgo(ctypes.Structure):
    """``cublasLtMatmulAlgo_t`` (64 opaque bytes, trivially serializable)."""

    _fields_ = [("data", ctypes.c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    """``cublasLtMatmulHeuristicResult_t``."""

    _fields_ = [
        ("algo", MatmulAlgo),
        ("workspaceSize", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("wavesCount", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


_i32, _u32, _i64, _u64 = ctypes.c_int32, ctypes.c_uint32, ctypes.c_int64, ctypes.c_uint64
_vp = ctypes.c_void_p

#: ctypes type of each attribute's value, as documented in ``cublasLt.h``.
ATTRIBUTE_CTYPES = {
    MatrixLayoutAttribute: {
        "TYPE": _u32, "ORDER": _i32, "ROWS": _u64, "COLS": _u64, "LD": _i64,
        "BATCH_COUNT": _i32, "STRIDED_BATCH_OFFSET": _i64, "PLANE_OFFSET": _i64,
        "BATCH_MODE": _u32,
    },
    MatmulDescAttribute: {
        "COMPUTE_TYPE": _i32, "SCALE_TYPE": _i32, "POINTER_MODE": _i32, "TRANSA": _i32,
        "TRANSB": _i32, "TRANSC": _i32, "FILL_MODE": _i32, "EPILOGUE": _u32,
        "BIAS_POINTER": _vp, "BIAS_BATCH_STRIDE": _i64, "EPILOGUE_AUX_POINTER": _vp,
        "EPILOGUE_AUX_LD": _i64, "EPILOGUE_AUX_BATCH_STRIDE": _i64,
        "ALPHA_VECTOR_BATCH_STRIDE": _i64, "SM_COUNT_TARGET": _i32, "A_SCALE_POINTER": _vp,
        "B_SCALE_POINTER": _vp, "C_SCALE_POINTER": _vp, "D_SCALE_POINTER": _vp,
        "AMAX_D_POINTER": _vp, "EPILOGUE_AUX_DATA_TYPE": _i32,
        "EPILOGUE_AUX_SCALE_POINTER": _vp, "EPILOGUE_AUX_AMAX_POINTER": _vp,
        "FAST_ACCUM": ctypes.c_int8, "BIAS_DATA_TYPE": _i32, "A_SCALE_MODE": _i32,
        "B_SCALE_MODE": _i32, "C_SCALE_MODE": _i32, "D_SCALE_MODE": _i32,
        "EPILOGUE_AUX_SCALE_MODE": _i32, "D_OUT_SCALE_POINTER": _vp,
        "D_OUT_SCALE_MODE": _i32, "EMULATION_DESCRIPTOR": _vp,
    },
    PreferenceAttribute: {
        "SEARCH_MODE": _u32, "MAX_WORKSPACE_BYTES": _u64, "REDUCTION_SCHEME_MASK": _u32,
        "MIN_ALIGNMENT_A_BYTES": _u32, "MIN_ALIGNMENT_B_BYTES": _u32,
        "MIN_ALIGNMENT_C_BYTES": _u32, "MIN_ALIGNMENT_D_BYTES": _u32,
        "MAX_WAVES_COUNT": ctypes.c_float, "IMPL_MASK": _u64,
    },
    AlgoCapAttribute: {
        "SPLITK_SUPPORT": _i32, "REDUCTION_SCHEME_MASK": _u32, "CTA_SWIZZLING_SUPPORT": _u32,
        "STRIDED_BATCH_SUPPORT": _i32, "OUT_OF_PLACE_RESULT_SUPPORT": _i32,
        "UPLO_SUPPORT": _i32, "CUSTOM_OPTION_MAX": _i32, "CUSTOM_MEMORY_ORDER": _i32,
        "POINTER_MODE_MASK": _u32, "EPILOGUE_MASK": _u32, "LD_NEGATIVE": _i32,
        "NUMERICAL_IMPL_FLAGS": _u64, "MIN_ALIGNMENT_A_BYTES": _u32,
        "MIN_ALIGNMENT_B_BYTES": _u32, "MIN_ALIGNMENT_C_BYTES": _u32,
        "MIN_ALIGNMENT_D_BYTES": _u32, "POINTER_ARRAY_BATCH_SUPPORT": _i32,
        "FLOATING_POINT_EMULATION_SUPPORT": _i32,
    },
    AlgoConfigAttribute: {
        "ID": _i32, "TILE_ID": _u32, "SPLITK_NUM": _i32, "REDUCTION_SCHEME": _u32,
        "CTA_SWIZZLING": _u32, "CUSTOM_OPTION": _u32, "STAGES_ID": _u32,
        "INNER_SHAPE_ID": ctypes.c_uint16, "CLUSTER_SHAPE_ID": ctypes.c_uint16,
    },
}

_P = ctypes.POINTER
_st = ctypes.c_size_t
#: name -> (restype, argtypes); handles and descriptors are passed as void pointers.
_SIGNATURES = {
    "cublasLtCreate": (ctypes.c_int, [_P(_vp)]),
    "cublasLtDestroy": (ctypes.c_int, [_vp]),
    "cublasLtGetVersion": (_st, []),
    "cublasLtGetCudartVersion": (_st, []),
    "cublasLtGetStatusName": (ctypes.c_char_p, [ctypes.c_int]),
    "cublasLtMatmulDescCreate": (ctypes.c_int, [_P(_vp), ctypes.c_int, ctypes.c_int]),
    "cublasLtMatmulDescDestroy": (ctypes.c_int, [_vp]),
    "cublasLtMatmulDescSetAttribute": (ctypes.c_int, [_vp, ctypes.c_int, _vp, _st]),
    "cublasLtMatmulDescGetAttribute": (ctypes.c_int, [_vp, ctypes.c_int, _vp, _st, _P(_st)]),
    "cublasLtMatrixLayoutCreate": (ctypes.c_int, [_P(_vp), ctypes.c_int, _u64, _u64, _i64]),
    "cublasLtMatrixLayoutDestroy": (ctypes.c_int, [_vp]),
    "cublasLtMatrixLayoutSetAttribute": (ctypes.c_int, [_vp, ctypes.c_int, _vp, _st]),
    "cublasLtMatmulPreferenceCreate": (ctypes.c_int, [_P(_vp)]),
    "cublasLtMatmulPreferenceDestroy": (ctypes.c_int, [_vp]),
    "cublasLtMatmulPreferenceSetAttribute": (ctypes.c_int, [_vp, ctypes.c_int, _vp, _st]),
    "cublasLtMatmulAlgoGetHeuristic": (
        ctypes.c_int,
        [_vp, _vp, _vp, _vp, _vp, _vp, _vp, ctypes.c_int, _P(HeuristicResult),
         _P(ctypes.c_int)],
    ),
    "cublasLtMatmulAlgoGetIds": (
        ctypes.c_int,
        [_vp, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
         ctypes.c_int, ctypes.c_int, _P(ctypes.c_int), _P(ctypes.c_int)],
    ),
    "cublasLtMatmulAlgoInit": (
        ctypes.c_int,
        [_vp, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
         ctypes.c_int, ctypes.c_int, _P(MatmulAlgo)],
    ),
    "cublasLtMatmulAlgoCheck": (
        ctypes.c_int, [_vp, _vp, _vp, _vp, _vp, _vp, _P(MatmulAlgo), _P(HeuristicResult)],
    ),
    "cublasLtMatmulAlgoCapGetAttribute": (
        ctypes.c_int, [_P(MatmulAlgo), ctypes.c_int, _vp, _st, _P(_st)],
    ),
    "cublasLtMatmulAlgoConfigSetAttribute": (
        ctypes.c_int, [_P(MatmulAlgo), ctypes.c_int, _vp, _st],
    ),
    "cublasLtMatmulAlgoConfigGetAttribute": (
        ctypes.c_int, [_P(MatmulAlgo), ctypes.c_int, _vp, _st, _P(_st)],
    ),
    "cublasLtMatmul": (
        ctypes.c_int,
        [_vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _P(MatmulAlgo), _vp, _st,
         _vp],
    ),
}

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    """The cuBLASLt library with every declared function's argtypes set (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            cdll = load_library("cublasLt")
            for name, (restype, argtypes) in _SIGNATURES.items():
                fn = getattr(cdll, name)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib = cdll
    return _lib


def bare(name: str):
    """``name`` without ``argtypes`` (:func:`~cuweave._bindings._loader.untyped`): for calls
    with pre-built ctypes arguments only (the planned ``cublasLtMatmul``)."""
    return untyped(lib(), name, _SIGNATURES[name][0])


def check(status: int, function: str) -> None:
    """Raise :class:`CublasLtError` unless ``status`` is ``CUBLAS_STATUS_SUCCESS``."""
    if status:
        raise CublasLtError(status, function)


def _call(name: str, *args) -> None:
    check(getattr(lib(), name)(*args), name)


def _value(enum_cls, attr, value):
    """Wrap ``value`` in the ctypes type documented for ``attr`` (ctypes objects pass through)."""
    if isinstance(value, ctypes._SimpleCData | ctypes.Array | ctypes.Structure):
        return value
    return ATTRIBUTE_CTYPES[enum_cls][enum_cls(attr).name](value)


# ---------------------------------------------------------------------------- handle, version


def create() -> int:
    """``cublasLtCreate`` → handle (int)."""
    h = _vp()
    _call("cublasLtCreate", ctypes.byref(h))
    return h.value or 0


def destroy(handle: int) -> None:
    """``cublasLtDestroy``."""
    _call("cublasLtDestroy", handle)


def get_version() -> int:
    """``cublasLtGetVersion`` (e.g. 130102 for 13.1.2)."""
    return int(lib().cublasLtGetVersion())


def get_cudart_version() -> int:
    """``cublasLtGetCudartVersion``."""
    return int(lib().cublasLtGetCudartVersion())


# ---------------------------------------------------------------------------- descriptors


def matmul_desc_create(compute_type: int, scale_type: int) -> int:
    """``cublasLtMatmulDescCreate``."""
    d = _vp()
    _call("cublasLtMatmulDescCreate", ctypes.byref(d), int(compute_type), int(scale_type))
    return d.value or 0


def matmul_desc_destroy(desc: int) -> None:
    _call("cublasLtMatmulDescDestroy", desc)


def matmul_desc_set_attribute(desc: int, attr: int, value) -> None:
    """Set a matmul descriptor attribute; plain Python values get the documented C type."""
    v = _value(MatmulDescAttribute, attr, value)
    _call("cublasLtMatmulDescSetAttribute", desc, int(attr), ctypes.byref(v), ctypes.sizeof(v))


def matmul_desc_get_attribute(desc: int, attr: int):
    """Read a matmul descriptor attribute as a Python value."""
    v = ATTRIBUTE_CTYPES[MatmulDescAttribute][MatmulDescAttribute(attr).name]()
    written = _st()
    _call("cublasLtMatmulDescGetAttribute", desc, int(attr), ctypes.byref(v), ctypes.sizeof(v),
          ctypes.byref(written))
    return v.value


def matrix_layout_create(data_type: int, rows: int, cols: int, ld: int) -> int:
    """``cublasLtMatrixLayoutCreate`` (column order unless ORDER is set afterwards)."""
    d = _vp()
    _call("cublasLtMatrixLayoutCreate", ctypes.byref(d), int(data_type), rows, cols, ld)
    return d.value or 0


def matrix_layout_destroy(layout: int) -> None:
    _call("cublasLtMatrixLayoutDestroy", layout)


def matrix_layout_set_attribute(layout: int, attr: int, value) -> None:
    v = _value(MatrixLayoutAttribute, attr, value)
    _call("cublasLtMatrixLayoutSetAttribute", layout, int(attr), ctypes.byref(v),
          ctypes.sizeof(v))


def preference_create() -> int:
    d = _vp()
    _call("cublasLtMatmulPreferenceCreate", ctypes.byref(d))
    return d.value or 0


def preference_destroy(pref: int) -> None:
    _call("cublasLtMatmulPreferenceDestroy", pref)


def preference_set_attribute(pref: int, attr: int, value) -> None:
    v = _value(PreferenceAttribute, attr, value)
    _call("cublasLtMatmulPreferenceSetAttribute", pref, int(attr), ctypes.byref(v),
          ctypes.sizeof(v))


# ---------------------------------------------------------------------------- algorithms


def algo_get_heuristic(handle, desc, a, b, c, d, pref, requested: int) -> list[HeuristicResult]:
    """``cublasLtMatmulAlgoGetHeuristic`` → successful results, best first."""
    results = (HeuristicResult * requested)()
    count = ctypes.c_int(0)
    _call("cublasLtMatmulAlgoGetHeuristic", handle, desc, a, b, c, d, pref, requested, results,
          ctypes.byref(count))
    return [results[i] for i in range(count.value) if results[i].state == 0]


def algo_get_ids(handle, compute_type, scale_type, a_type, b_type, c_type, d_type,
                 requested: int = 128) -> list[int]:
    """``cublasLtMatmulAlgoGetIds``: ids of algorithms for this type combination."""
    ids = (ctypes.c_int * requested)()
    count = ctypes.c_int(0)
    _call("cublasLtMatmulAlgoGetIds", handle, int(compute_type), int(scale_type), int(a_type),
          int(b_type), int(c_type), int(d_type), requested, ids, ctypes.byref(count))
    return list(ids[: count.value])


def algo_init(handle, compute_type, scale_type, a_type, b_type, c_type, d_type,
              algo_id: int) -> MatmulAlgo:
    """``cublasLtMatmulAlgoInit``."""
    algo = MatmulAlgo()
    _call("cublasLtMatmulAlgoInit", handle, int(compute_type), int(scale_type), int(a_type),
          int(b_type), int(c_type), int(d_type), int(algo_id), ctypes.byref(algo))
    return algo


def algo_check(handle, desc, a, b, c, d, algo: MatmulAlgo) -> HeuristicResult:
    """``cublasLtMatmulAlgoCheck`` → the result record (workspace size, waves)."""
    res = HeuristicResult()
    _call("cublasLtMatmulAlgoCheck", handle, desc, a, b, c, d, ctypes.byref(algo),
          ctypes.byref(res))
    return res


def algo_cap_get_attribute(algo: MatmulAlgo, attr: int):
    """Read a capability; array capabilities (TILE_IDS, STAGES_IDS) return a list."""
    attr = AlgoCapAttribute(attr)
    written = _st()
    if attr in (AlgoCapAttribute.TILE_IDS, AlgoCapAttribute.STAGES_IDS):
        _call("cublasLtMatmulAlgoCapGetAttribute", ctypes.byref(algo), int(attr), None, 0,
              ctypes.byref(written))
        n = written.value // 4
        buf = (_u32 * max(n, 1))()
        _call("cublasLtMatmulAlgoCapGetAttribute", ctypes.byref(algo), int(attr), buf,
              ctypes.sizeof(buf), ctypes.byref(written))
        return list(buf[:n])
    v = ATTRIBUTE_CTYPES[AlgoCapAttribute][attr.name]()
    _call("cublasLtMatmulAlgoCapGetAttribute", ctypes.byref(algo), int(attr), ctypes.byref(v),
          ctypes.sizeof(v), ctypes.byref(written))
    return v.value


def algo_config_get_attribute(algo: MatmulAlgo, attr: int) -> int:
    attr = AlgoConfigAttribute(attr)
    v = ATTRIBUTE_CTYPES[AlgoConfigAttribute][attr.name]()
    written = _st()
    _call("cublasLtMatmulAlgoConfigGetAttribute", ctypes.byref(algo), int(attr),
          ctypes.byref(v), ctypes.sizeof(v), ctypes.byref(written))
    return int(v.value)


def algo_config_set_attribute(algo: MatmulAlgo, attr: int, value: int) -> None:
    attr = AlgoConfigAttribute(attr)
    v = ATTRIBUTE_CTYPES[AlgoConfigAttribute][attr.name](int(value))
    _call("cublasLtMatmulAlgoConfigSetAttribute", ctypes.byref(algo), int(attr),
          ctypes.byref(v), ctypes.sizeof(v))


# ---------------------------------------------------------------------------- matmul


def matmul_function():
    """The raw ``cublasLtMatmul`` ctypes function (argtypes declared; returns the status)."""
    return lib().cublasLtMatmul


def matmul(handle, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout, d, d_layout, algo,
           workspace, workspace_size, stream) -> None:
    """``cublasLtMatmul`` with status checking (the planned hot path calls the raw function)."""
    check(lib().cublasLtMatmul(handle, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout,
                               d, d_layout, algo, workspace, workspace_size, stream),
          "cublasLtMatmul")
