"""ctypes declarations of the cuTENSOR 2.x entry points cuweave uses (``cutensor.h``).

The library is loaded lazily, on the first call, from (in this order)

1. the file named by the environment variable ``CUWEAVE_CUTENSOR_PATH`` (a path to
   ``libcutensor.so.2``, for machines where the wheel cannot be installed: unpack the library
   anywhere and point the variable at it);
2. cuda-pathfinder (``load_nvidia_dynamic_lib("cutensor")``: the ``cutensor-cu13`` wheel of the
   ``tensor`` extra, a conda environment or the system);
3. the ``cutensor/lib`` folder of any entry of ``sys.path`` (the wheel installed with
   ``pip install --target``), then the system soname.

cuTENSOR needs cuBLASLt (``libcublasLt.so.13``): it is loaded first, through cuweave's own
loader, so that the dynamic linker finds it already mapped.

Every function's ``argtypes``/``restype`` is declared once (:data:`_SIGNATURES`, held to the
header by ``tests/_bindings/test_cutensor_header.py``). The checking wrappers raise
:class:`CutensorError` (status name and a hint). Hot paths call :func:`bare` entry points with
pre-built ctypes arguments.

Compute descriptors (``CUTENSOR_COMPUTE_DESC_32F`` ...) are global constants of the library (a
pointer each): :func:`compute_descriptor` reads them by name.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
from enum import IntEnum

from .._internal.errors import LibraryError, LibraryNotFoundError
from ._loader import load_library, untyped

__all__ = [
    "CutensorError",
    "Status",
    "Operator",
    "Algo",
    "WorksizePreference",
    "OperationDescriptorAttribute",
    "PlanPreferenceAttribute",
    "AutotuneMode",
    "JitMode",
    "CacheMode",
    "PlanAttribute",
    "COMPUTE_DESCRIPTORS",
    "ENV_PATH",
    "library",
    "library_path",
    "is_loadable",
    "compute_descriptor",
    "get_version",
    "create",
    "destroy",
    "create_tensor_descriptor",
    "destroy_tensor_descriptor",
    "create_contraction",
    "create_contraction_trinary",
    "destroy_operation_descriptor",
    "operation_descriptor_get_attribute",
    "create_plan_preference",
    "destroy_plan_preference",
    "plan_preference_set_attribute",
    "plan_preference_get_attribute",
    "estimate_workspace_size",
    "create_plan",
    "destroy_plan",
    "plan_get_attribute",
    "handle_resize_plan_cache",
    "bare",
]

#: environment variable naming ``libcutensor.so.2`` explicitly
ENV_PATH = "CUWEAVE_CUTENSOR_PATH"


class Status(IntEnum):
    """``cutensorStatus_t``."""

    SUCCESS = 0
    NOT_INITIALIZED = 1
    ALLOC_FAILED = 3
    INVALID_VALUE = 7
    ARCH_MISMATCH = 8
    MAPPING_ERROR = 11
    EXECUTION_FAILED = 13
    INTERNAL_ERROR = 14
    NOT_SUPPORTED = 15
    LICENSE_ERROR = 16
    CUBLAS_ERROR = 17
    CUDA_ERROR = 18
    INSUFFICIENT_WORKSPACE = 19
    INSUFFICIENT_DRIVER = 20
    IO_ERROR = 21


class Operator(IntEnum):
    """``cutensorOperator_t`` (element-wise operators; contractions take IDENTITY and CONJ)."""

    OP_IDENTITY = 1
    OP_SQRT = 2
    OP_RELU = 8
    OP_CONJ = 9
    OP_RCP = 10
    OP_SIGMOID = 11
    OP_TANH = 12
    OP_EXP = 22
    OP_LOG = 23
    OP_ABS = 24
    OP_NEG = 25
    OP_SIN = 26
    OP_COS = 27
    OP_TAN = 28
    OP_SINH = 29
    OP_COSH = 30
    OP_ASIN = 31
    OP_ACOS = 32
    OP_ATAN = 33
    OP_ASINH = 34
    OP_ACOSH = 35
    OP_ATANH = 36
    OP_CEIL = 37
    OP_FLOOR = 38
    OP_MISH = 39
    OP_SWISH = 40
    OP_SOFT_PLUS = 41
    OP_SOFT_SIGN = 42
    OP_ADD = 3
    OP_MUL = 5
    OP_MAX = 6
    OP_MIN = 7
    OP_UNKNOWN = 126


class Algo(IntEnum):
    """``cutensorAlgo_t``."""

    DEFAULT_PATIENT = -6
    GETT = -4
    TGETT = -3
    TTGT = -2
    DEFAULT = -1


class WorksizePreference(IntEnum):
    """``cutensorWorksizePreference_t``."""

    WORKSPACE_MIN = 1
    WORKSPACE_DEFAULT = 2
    WORKSPACE_MAX = 3


class OperationDescriptorAttribute(IntEnum):
    """``cutensorOperationDescriptorAttribute_t``."""

    TAG = 0
    SCALAR_TYPE = 1
    FLOPS = 2
    MOVED_BYTES = 3
    PADDING_LEFT = 4
    PADDING_RIGHT = 5
    PADDING_VALUE = 6


class PlanPreferenceAttribute(IntEnum):
    """``cutensorPlanPreferenceAttribute_t``."""

    AUTOTUNE_MODE = 0
    CACHE_MODE = 1
    INCREMENTAL_COUNT = 2
    ALGO = 3
    KERNEL_RANK = 4
    JIT = 5
    GPU_ARCH = 6


class AutotuneMode(IntEnum):
    """``cutensorAutotuneMode_t``."""

    NONE = 0
    INCREMENTAL = 1


class JitMode(IntEnum):
    """``cutensorJitMode_t``."""

    NONE = 0
    DEFAULT = 1


class CacheMode(IntEnum):
    """``cutensorCacheMode_t``."""

    NONE = 0
    PEDANTIC = 1


class PlanAttribute(IntEnum):
    """``cutensorPlanAttribute_t``."""

    REQUIRED_WORKSPACE = 0


#: the compute descriptors the library exports, by their short name (``CUTENSOR_COMPUTE_DESC_``
#: + name is the C symbol)
COMPUTE_DESCRIPTORS = ("16F", "16BF", "TF32", "3XTF32", "32F", "64F", "9X16BF", "8XINT8",
                       "4X16F")


class CutensorError(LibraryError):
    """A cuTENSOR call returned a status other than ``CUTENSOR_STATUS_SUCCESS``.

    Raised by :mod:`cuweave.tensor` on the GPU; also a ``RuntimeError``.

    Parameters
    ----------
    status : int
        The ``cutensorStatus_t`` value returned (kept as ``status``; its name as
        ``status_name``).
    function : str, optional
        The name of the cuTENSOR function that failed (kept as ``function``).
    hint : str or None, optional
        What the user may do about it; ``None`` (the default) uses cuweave's hint for this
        status, if it has one.

    Examples
    --------
    >>> from cuweave.tensor import CutensorError
    >>> CutensorError(15, "cutensorContract").status_name
    'CUTENSOR_STATUS_NOT_SUPPORTED'
    """

    library = "cuTENSOR"
    _names = {int(s): f"CUTENSOR_STATUS_{s.name}" for s in Status}
    _hints = {
        "CUTENSOR_STATUS_NOT_INITIALIZED": "the CUDA driver or context is not usable; check "
        "`python -m cuweave info`",
        "CUTENSOR_STATUS_ALLOC_FAILED": "the GPU is out of memory; free memory or lower "
        "options.memory_limit",
        "CUTENSOR_STATUS_INVALID_VALUE": "a parameter combination is invalid for this "
        "contraction (modes, extents, strides or alignment); see the cuTENSOR documentation",
        "CUTENSOR_STATUS_ARCH_MISMATCH": "this GPU does not support the requested feature "
        "(e.g. a compute type needing a newer architecture, or a plan made on another device)",
        "CUTENSOR_STATUS_NOT_SUPPORTED": "cuTENSOR has no kernel for this combination of dtypes, "
        "compute type, operators and layouts; try another compute type",
        "CUTENSOR_STATUS_INSUFFICIENT_WORKSPACE": "raise options.memory_limit",
        "CUTENSOR_STATUS_INSUFFICIENT_DRIVER": "update the NVIDIA driver",
        "CUTENSOR_STATUS_CUDA_ERROR": "a CUDA call failed (out of memory, or a bad stream or "
        "pointer)",
    }


_vp, _u32, _i32, _i64p, _i32p = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32,
                                 ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32))
_vpp, _u64, _size = ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64, ctypes.c_size_t
_st = ctypes.c_int  # cutensorStatus_t and every other enum are C ints

#: C name -> (restype, argtypes)
_SIGNATURES = {
    "cutensorCreate": (_st, [_vpp]),
    "cutensorDestroy": (_st, [_vp]),
    "cutensorGetVersion": (_size, []),
    "cutensorGetErrorString": (ctypes.c_char_p, [_st]),
    "cutensorHandleResizePlanCache": (_st, [_vp, _u32]),
    "cutensorCreateTensorDescriptor": (_st, [_vp, _vpp, _u32, _i64p, _i64p, _st, _u32]),
    "cutensorDestroyTensorDescriptor": (_st, [_vp]),
    "cutensorCreateContraction": (_st, [_vp, _vpp, _vp, _i32p, _st, _vp, _i32p, _st, _vp, _i32p,
                                        _st, _vp, _i32p, _vp]),
    "cutensorCreateContractionTrinary": (_st, [_vp, _vpp, _vp, _i32p, _st, _vp, _i32p, _st, _vp,
                                               _i32p, _st, _vp, _i32p, _st, _vp, _i32p, _vp]),
    "cutensorDestroyOperationDescriptor": (_st, [_vp]),
    "cutensorOperationDescriptorGetAttribute": (_st, [_vp, _vp, _st, _vp, _size]),
    "cutensorCreatePlanPreference": (_st, [_vp, _vpp, _st, _st]),
    "cutensorDestroyPlanPreference": (_st, [_vp]),
    "cutensorPlanPreferenceGetAttribute": (_st, [_vp, _vp, _st, _vp, _size]),
    "cutensorPlanPreferenceSetAttribute": (_st, [_vp, _vp, _st, _vp, _size]),
    "cutensorPlanGetAttribute": (_st, [_vp, _vp, _st, _vp, _size]),
    "cutensorEstimateWorkspaceSize": (_st, [_vp, _vp, _vp, _st, ctypes.POINTER(_u64)]),
    "cutensorCreatePlan": (_st, [_vp, _vpp, _vp, _vp, _u64]),
    "cutensorDestroyPlan": (_st, [_vp]),
    "cutensorContract": (_st, [_vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _u64, _vp]),
    "cutensorContractTrinary": (_st, [_vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _vp, _u64,
                                      _vp]),
}

_lock = threading.Lock()
_state: dict = {}  # "lib": CDLL, "path": str, "fns": {name: declared function}


def _candidates() -> list[str]:
    found = []
    for entry in sys.path:
        found += sorted(glob.glob(os.path.join(entry or ".", "cutensor", "lib",
                                               "libcutensor.so.2")))
    return found + ["libcutensor.so.2"]


def _load() -> ctypes.CDLL:
    """Load libcutensor once (see the module docstring for the search order)."""
    lib = _state.get("lib")
    if lib is not None:
        return lib
    with _lock:
        lib = _state.get("lib")
        if lib is not None:
            return lib
        try:  # cuTENSOR's dependency, mapped first so the dynamic linker finds it by soname
            load_library("cublasLt")
        except LibraryNotFoundError:
            pass  # loading cuTENSOR below reports what is missing
        errors = []
        env = os.environ.get(ENV_PATH)
        paths = [env] if env else []
        if not env:
            try:
                from cuda.pathfinder import load_nvidia_dynamic_lib

                paths.append(load_nvidia_dynamic_lib("cutensor").abs_path)
            except Exception as e:  # noqa: BLE001 - not installed there: try the others
                errors.append(str(e).splitlines()[0] if str(e) else type(e).__name__)
            paths += _candidates()
        for path in paths:
            if not path:
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                errors.append(str(e))
                continue
            _state["lib"], _state["path"] = lib, path
            _state["fns"] = {}
            return lib
        where = f"{ENV_PATH}={env!r}: " if env else ""
        raise LibraryNotFoundError("cuTENSOR (libcutensor.so.2)", "tensor",
                                   where + "; ".join(errors[-2:]))


def library() -> ctypes.CDLL:
    """The loaded libcutensor (loading it on first use)."""
    return _load()


def library_path() -> str | None:
    """The path libcutensor was loaded from, ``None`` if it is not loaded."""
    return _state.get("path")


def is_loadable() -> bool:
    """Whether libcutensor can be loaded here (loads it)."""
    try:
        _load()
    except LibraryNotFoundError:
        return False
    return True


def _fn(name: str):
    fns = _state.get("fns")
    if fns is None:
        _load()
        fns = _state["fns"]
    fn = fns.get(name)
    if fn is None:
        fn = getattr(_load(), name)
        fn.restype, fn.argtypes = _SIGNATURES[name][0], _SIGNATURES[name][1]
        fns[name] = fn
    return fn


def bare(name: str):
    """The entry point ``name`` without ``argtypes`` (pre-built ctypes arguments only)."""
    return untyped(_load(), name, _SIGNATURES[name][0])


def _check(status: int, function: str) -> None:
    if status:
        raise CutensorError(status, function)


def compute_descriptor(name: str) -> int:
    """The value of the library's ``CUTENSOR_COMPUTE_DESC_<name>`` (an opaque pointer)."""
    if name not in COMPUTE_DESCRIPTORS:
        raise ValueError(f"name must be one of {COMPUTE_DESCRIPTORS}, got {name!r}")
    return ctypes.c_void_p.in_dll(_load(), "CUTENSOR_COMPUTE_DESC_" + name).value or 0


def get_version() -> int:
    """``cutensorGetVersion()`` (e.g. 20801 for 2.8.1)."""
    return int(_fn("cutensorGetVersion")())


def create() -> int:
    h = ctypes.c_void_p()
    _check(_fn("cutensorCreate")(ctypes.byref(h)), "cutensorCreate")
    return h.value


def destroy(handle: int) -> None:
    _check(_fn("cutensorDestroy")(handle), "cutensorDestroy")


def handle_resize_plan_cache(handle: int, num_entries: int) -> None:
    _check(_fn("cutensorHandleResizePlanCache")(handle, num_entries),
           "cutensorHandleResizePlanCache")


def create_tensor_descriptor(handle: int, extents, strides, data_type: int,
                             alignment: int) -> int:
    n = len(extents)
    ext = (ctypes.c_int64 * max(n, 1))(*extents)
    std = (ctypes.c_int64 * max(n, 1))(*strides)
    d = ctypes.c_void_p()
    _check(_fn("cutensorCreateTensorDescriptor")(handle, ctypes.byref(d), n, ext, std,
                                                 int(data_type), alignment),
           "cutensorCreateTensorDescriptor")
    return d.value


def destroy_tensor_descriptor(desc: int) -> None:
    _check(_fn("cutensorDestroyTensorDescriptor")(desc), "cutensorDestroyTensorDescriptor")


def _modes(modes):
    return (ctypes.c_int32 * max(len(modes), 1))(*modes)


def create_contraction(handle, a, modes_a, op_a, b, modes_b, op_b, c, modes_c, op_c, d, modes_d,
                       compute) -> int:
    desc = ctypes.c_void_p()
    _check(_fn("cutensorCreateContraction")(
        handle, ctypes.byref(desc), a, _modes(modes_a), int(op_a), b, _modes(modes_b), int(op_b),
        c, _modes(modes_c), int(op_c), d, _modes(modes_d), compute), "cutensorCreateContraction")
    return desc.value


def create_contraction_trinary(handle, a, modes_a, op_a, b, modes_b, op_b, c, modes_c, op_c,
                               d, modes_d, op_d, e, modes_e, compute) -> int:
    desc = ctypes.c_void_p()
    _check(_fn("cutensorCreateContractionTrinary")(
        handle, ctypes.byref(desc), a, _modes(modes_a), int(op_a), b, _modes(modes_b), int(op_b),
        c, _modes(modes_c), int(op_c), d, _modes(modes_d), int(op_d), e, _modes(modes_e),
        compute), "cutensorCreateContractionTrinary")
    return desc.value


def destroy_operation_descriptor(desc: int) -> None:
    _check(_fn("cutensorDestroyOperationDescriptor")(desc), "cutensorDestroyOperationDescriptor")


def operation_descriptor_get_attribute(handle, desc, attr, ctype):
    """The attribute ``attr`` read into a new ``ctype`` value."""
    buf = ctype()
    _check(_fn("cutensorOperationDescriptorGetAttribute")(
        handle, desc, int(attr), ctypes.byref(buf), ctypes.sizeof(buf)),
        "cutensorOperationDescriptorGetAttribute")
    return buf.value


def create_plan_preference(handle: int, algo: int, jit_mode: int) -> int:
    p = ctypes.c_void_p()
    _check(_fn("cutensorCreatePlanPreference")(handle, ctypes.byref(p), int(algo), int(jit_mode)),
           "cutensorCreatePlanPreference")
    return p.value


def destroy_plan_preference(pref: int) -> None:
    _check(_fn("cutensorDestroyPlanPreference")(pref), "cutensorDestroyPlanPreference")


def plan_preference_set_attribute(handle, pref, attr, value: int) -> None:
    buf = ctypes.c_int32(int(value))  # every plan-preference attribute is a 32-bit enum/int
    _check(_fn("cutensorPlanPreferenceSetAttribute")(
        handle, pref, int(attr), ctypes.byref(buf), ctypes.sizeof(buf)),
        "cutensorPlanPreferenceSetAttribute")


def plan_preference_get_attribute(handle, pref, attr) -> int:
    buf = ctypes.c_int32()
    _check(_fn("cutensorPlanPreferenceGetAttribute")(
        handle, pref, int(attr), ctypes.byref(buf), ctypes.sizeof(buf)),
        "cutensorPlanPreferenceGetAttribute")
    return buf.value


def estimate_workspace_size(handle, desc, pref, worksize_pref) -> int:
    out = ctypes.c_uint64()
    _check(_fn("cutensorEstimateWorkspaceSize")(handle, desc, pref, int(worksize_pref),
                                                ctypes.byref(out)),
           "cutensorEstimateWorkspaceSize")
    return out.value


def create_plan(handle, desc, pref, workspace_limit: int) -> int:
    p = ctypes.c_void_p()
    _check(_fn("cutensorCreatePlan")(handle, ctypes.byref(p), desc, pref, workspace_limit),
           "cutensorCreatePlan")
    return p.value


def destroy_plan(plan: int) -> None:
    _check(_fn("cutensorDestroyPlan")(plan), "cutensorDestroyPlan")


def plan_get_attribute(handle, plan, attr) -> int:
    out = ctypes.c_uint64()  # REQUIRED_WORKSPACE: uint64_t
    _check(_fn("cutensorPlanGetAttribute")(handle, plan, int(attr), ctypes.byref(out),
                                           ctypes.sizeof(out)), "cutensorPlanGetAttribute")
    return out.value
