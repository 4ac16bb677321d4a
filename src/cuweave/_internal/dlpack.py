"""DLPack in both directions, with ctypes only (no dependency).

``import_capsule(x, stream)`` reads any ``__dlpack__`` producer into a plain description;
``export_capsule(...)`` makes a capsule for cuweave's own :class:`DeviceArray`.
"""

from __future__ import annotations

import ctypes
import threading

from .errors import InvalidOperandError

__all__ = ["DLPackView", "import_dlpack", "export_capsule", "KDL_CPU", "KDL_CUDA"]

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13

# (code, bits) -> canonical name; DLPack 1.1 type codes
_CODES = {
    (0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
    (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
    (2, 16): "float16", (2, 32): "float32", (2, 64): "float64",
    (4, 16): "bfloat16", (5, 32): "complex32", (5, 64): "complex64", (5, 128): "complex128",
    (6, 8): "bool", (10, 8): "float8_e4m3fn", (12, 8): "float8_e5m2",
}
_BY_NAME = {v: k for k, v in _CODES.items()}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)
]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
        ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor),
    ]


_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


#: dlpack.h's DLPACK_FLAG_BITMASK_READ_ONLY (a DLManagedTensorVersioned's flags)
READ_ONLY = 1 << 0


class DLPackView:
    """What a DLPack capsule describes; ``capsule`` must stay alive while ``ptr`` is used."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "device_type", "device_id", "capsule",
                 "readonly")

    def __init__(self, ptr, shape, strides, dtype, device_type, device_id, capsule,
                 readonly=False):
        self.ptr, self.shape, self.strides, self.dtype = ptr, shape, strides, dtype
        self.device_type, self.device_id, self.capsule = device_type, device_id, capsule
        #: DLPack 1.x's DLPACK_FLAG_BITMASK_READ_ONLY: the memory must not be written
        self.readonly = readonly


def import_dlpack(x, name: str = "operand", stream: int | None = None) -> DLPackView:
    """Describe ``x`` through its ``__dlpack__`` without consuming the capsule."""
    try:
        capsule = x.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:
        capsule = x.__dlpack__(stream=stream) if stream is not None else x.__dlpack__()
    cname = _api.PyCapsule_GetName(capsule)
    addr = _api.PyCapsule_GetPointer(capsule, cname)
    readonly = False
    if cname == b"dltensor_versioned":
        managed = DLManagedTensorVersioned.from_address(addr)
        t, readonly = managed.dl_tensor, bool(managed.flags & READ_ONLY)
    elif cname == b"dltensor":
        t = DLManagedTensor.from_address(addr).dl_tensor
    else:
        raise InvalidOperandError(f"{name} must export a DLPack capsule, got one named {cname!r}")
    key = (t.dtype.code, t.dtype.bits)
    if key not in _CODES or t.dtype.lanes != 1:
        raise InvalidOperandError(
            f"{name} dtype must be a supported DLPack type, got code={t.dtype.code} "
            f"bits={t.dtype.bits} lanes={t.dtype.lanes}"
        )
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(ndim))
    else:  # NULL strides mean C-contiguous
        acc, rev = 1, []
        for s in reversed(shape):
            rev.append(acc)
            acc *= s
        strides = tuple(reversed(rev))
    ptr = (t.data or 0) + t.byte_offset
    return DLPackView(ptr, shape, strides, _CODES[key], t.device.device_type,
                      t.device.device_id, capsule, readonly)


# ---- export -----------------------------------------------------------------------------
_live: dict[int, tuple] = {}
_live_lock = threading.Lock()


@_DELETER
def _deleter(addr):
    with _live_lock:
        _live.pop(addr, None)


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_NAMES = {True: b"dltensor_versioned", False: b"dltensor"}


# raw-pointer variants: the destructor runs at refcount 0 and must not touch the refcount
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule_addr):
    for name in _NAMES.values():  # still named -> never consumed: release it ourselves
        if _raw_is_valid(capsule_addr, name):
            with _live_lock:
                _live.pop(_raw_get_pointer(capsule_addr, name), None)
            return


def export_capsule(owner, ptr: int, shape, strides, dtype: str, device_type: int,
                   device_id: int, versioned: bool):
    """A DLPack capsule viewing ``ptr``; ``owner`` is kept alive until the consumer is done."""
    code, bits = _BY_NAME[dtype]
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_arr = (ctypes.c_int64 * max(ndim, 1))(*strides)
    managed = (DLManagedTensorVersioned if versioned else DLManagedTensor)()
    t = managed.dl_tensor
    t.data = ptr
    t.device = DLDevice(device_type, device_id)
    t.ndim = ndim
    t.dtype = DLDataType(code, bits, 1)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    managed.deleter = _deleter
    if versioned:
        managed.version = DLPackVersion(1, 0)
        managed.flags = 0
    addr = ctypes.addressof(managed)
    with _live_lock:
        _live[addr] = (managed, shape_arr, strides_arr, owner)
    destructor = ctypes.cast(_capsule_destructor, ctypes.c_void_p)
    return _api.PyCapsule_New(addr, _NAMES[versioned], destructor)
