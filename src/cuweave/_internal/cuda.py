"""Lazy CUDA runtime helpers over ``cuda.bindings.driver`` (and ``cuda.core`` where it helps).

Nothing here imports CUDA at module import time, so ``import cuweave`` works on machines with no
driver. ``is_available()`` answers, once per process, whether a CUDA device is usable.
"""

from __future__ import annotations

import threading
from functools import cache

from .errors import CudaDriverError, CudaUnavailableError

__all__ = [
    "driver",
    "check",
    "is_available",
    "unavailable_reason",
    "device_count",
    "set_device",
    "core_device",
    "current_device",
    "compute_capability",
    "device_name",
    "driver_version",
    "total_memory",
    "synchronize",
    "settle",
    "memcpy_async",
    "memcpy",
    "stream_wait_event",
    "host_alloc",
    "host_free",
    "host_register",
    "host_unregister",
    "pointer_space",
    "page_locked",
    "Event",
]

_lock = threading.Lock()
_state: dict = {}


def driver():
    """The ``cuda.bindings.driver`` module, with ``cuInit`` done (raises CudaUnavailableError)."""
    drv = _state.get("driver")
    if drv is not None:
        return drv
    with _lock:
        if "driver" in _state:
            return _state["driver"]
        try:
            from cuda.bindings import driver as drv
        except ImportError as e:
            _state["reason"] = "cuda-bindings is not installed (pip install 'cuweave[cu13]')"
            raise CudaUnavailableError(_state["reason"]) from e
        try:
            (err,) = drv.cuInit(0)
        except Exception as e:  # libcuda.so missing: no driver
            _state["reason"] = f"the CUDA driver could not be loaded ({e})"
            raise CudaUnavailableError(_state["reason"]) from e
        if int(err) != 0:
            _state["reason"] = f"cuInit failed with {_err_name(drv, err)} (no usable GPU/driver)"
            raise CudaUnavailableError(_state["reason"])
        _state["driver"] = drv
        return drv


def _err_name(drv, err) -> str:
    try:
        e, name = drv.cuGetErrorName(err)
        return name.decode() if int(e) == 0 else str(int(err))
    except Exception:
        return str(err)


def check(result, function: str = ""):
    """Unpack a ``cuda.bindings`` result tuple, raising :class:`CudaDriverError` on failure."""
    err = result[0]
    if int(err) != 0:
        drv = _state.get("driver")
        name = _err_name(drv, err) if drv is not None else getattr(err, "name", str(err))
        raise CudaDriverError(int(err), function, name=name)
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def is_available() -> bool:
    """``True`` when cuda-bindings imports, the driver initializes and a device exists."""
    ok = _state.get("available")
    if ok is None:
        try:
            ok = device_count() > 0
            if not ok:
                _state["reason"] = "no CUDA device was found"
        except CudaUnavailableError:
            ok = False
        _state["available"] = ok
    return ok


def unavailable_reason() -> str | None:
    """Why CUDA is not usable (``None`` when it is)."""
    return None if is_available() else _state.get("reason", "unknown")


def device_count() -> int:
    drv = driver()
    return int(check(drv.cuDeviceGetCount(), "cuDeviceGetCount"))


def require(device_id: int = 0) -> None:
    """Raise :class:`CudaUnavailableError` unless device ``device_id`` is usable."""
    if not is_available():
        raise CudaUnavailableError(
            f"CUDA execution was requested but CUDA is not usable: {unavailable_reason()}; "
            "use execution='cpu'"
        )
    n = device_count()
    if not 0 <= device_id < n:
        raise CudaUnavailableError(f"device_id must be in [0, {n}), got {device_id!r}")


@cache
def _primary_context(device_id: int):
    drv = driver()
    dev = check(drv.cuDeviceGet(device_id), "cuDeviceGet")
    return check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")


def current_device() -> int | None:
    """The device of the calling thread's current context, or ``None`` when there is none."""
    drv = driver()
    err, dev = drv.cuCtxGetDevice()
    return int(dev) if int(err) == 0 else None


def set_device(device_id: int) -> None:
    """Make ``device_id``'s primary context current on this thread (no-op when it already is)."""
    drv = driver()
    if current_device() == device_id:
        return
    check(drv.cuCtxSetCurrent(_primary_context(device_id)), "cuCtxSetCurrent")


_tls = threading.local()


def core_device(device_id: int = 0):
    """The ``cuda.core.Device`` for ``device_id``, made current on this thread (cached)."""
    devs = getattr(_tls, "devices", None)
    if devs is None:
        devs = _tls.devices = {}
    dev = devs.get(device_id)
    if dev is None:
        from cuda.core import Device

        dev = Device(device_id)
        dev.set_current()
        devs[device_id] = dev
    elif current_device() != device_id:
        dev.set_current()
    return dev


def _attribute(device_id: int, attr_name: str) -> int:
    drv = driver()
    attr = getattr(drv.CUdevice_attribute, attr_name)
    return int(check(drv.cuDeviceGetAttribute(attr, device_id), "cuDeviceGetAttribute"))


@cache
def compute_capability(device_id: int = 0) -> tuple[int, int]:
    return (
        _attribute(device_id, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
        _attribute(device_id, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
    )


@cache
def multiprocessor_count(device_id: int = 0) -> int:
    return _attribute(device_id, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")


@cache
def l2_cache_size(device_id: int = 0) -> int:
    return _attribute(device_id, "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE")


@cache
def device_name(device_id: int = 0) -> str:
    drv = driver()
    raw = check(drv.cuDeviceGetName(256, device_id), "cuDeviceGetName")
    return raw.split(b"\0", 1)[0].decode()


@cache
def total_memory(device_id: int = 0) -> int:
    drv = driver()
    return int(check(drv.cuDeviceTotalMem(device_id), "cuDeviceTotalMem"))


def driver_version() -> int:
    drv = driver()
    return int(check(drv.cuDriverGetVersion(), "cuDriverGetVersion"))


def synchronize(stream: int) -> None:
    """Block until all work queued on stream handle ``stream`` is done."""
    drv = driver()
    check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize")


def memcpy_async(dst: int, src: int, nbytes: int, stream: int) -> None:
    """Asynchronous copy between any two pointers (unified addressing decides the direction)."""
    if nbytes:
        drv = driver()
        check(drv.cuMemcpyAsync(dst, src, nbytes, stream), "cuMemcpyAsync")


def settle(stream: int) -> None:
    """Wait for ``stream`` on an error path (a failed run whose direct uploads may still read
    the user's host arrays); a failure of the wait itself is ignored: the error being raised
    is the one the caller sees."""
    try:
        synchronize(stream)
    except Exception:  # noqa: BLE001
        pass


def stream_wait_event(stream: int, event: Event) -> None:
    """``stream`` waits (on the device) for the work ``event`` was recorded after."""
    check(driver().cuStreamWaitEvent(stream, event._h, 0), "cuStreamWaitEvent")


def is_capturing(stream: int) -> bool:
    """Whether ``stream`` is capturing a CUDA graph (its work is recorded, not run)."""
    drv = driver()
    status = check(drv.cuStreamIsCapturing(stream), "cuStreamIsCapturing")
    return int(status) != int(drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)


def memcpy(dst: int, src: int, nbytes: int) -> None:
    if nbytes:
        drv = driver()
        check(drv.cuMemcpy(dst, src, nbytes), "cuMemcpy")


def host_alloc(nbytes: int) -> int:
    """Page-locked host memory (portable); free with :func:`host_free`."""
    drv = driver()
    flags = drv.CU_MEMHOSTALLOC_PORTABLE
    return int(check(drv.cuMemHostAlloc(max(nbytes, 1), flags), "cuMemHostAlloc"))


def host_free(ptr: int) -> None:
    drv = driver()
    check(drv.cuMemFreeHost(ptr), "cuMemFreeHost")


def host_register(ptr: int, nbytes: int) -> bool:
    """Page-lock the existing host memory ``[ptr, ptr + nbytes)`` (portable); False where the
    driver refuses (e.g. a page already registered, memory it cannot lock)."""
    drv = driver()
    return int(drv.cuMemHostRegister(ptr, nbytes, drv.CU_MEMHOSTREGISTER_PORTABLE)[0]) == 0


def host_unregister(ptr: int) -> None:
    drv = driver()
    check(drv.cuMemHostUnregister(ptr), "cuMemHostUnregister")


def pointer_space(ptr: int) -> tuple[str | None, int | None]:
    """Where ``ptr`` points as the driver sees it: ``("device", ordinal)``, ``("managed",
    ordinal)``, ``("pinned", None)`` (page-locked host memory, device-accessible), or ``(None,
    None)`` for memory CUDA does not know (pageable host memory, a bad address)."""
    drv = driver()
    A = drv.CUpointer_attribute
    err, kind = drv.cuPointerGetAttribute(A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr)
    if err != drv.CUresult.CUDA_SUCCESS:
        return (None, None)
    err, managed = drv.cuPointerGetAttribute(A.CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr)
    err2, ordinal = drv.cuPointerGetAttribute(A.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    ordinal = int(ordinal) if err2 == drv.CUresult.CUDA_SUCCESS else None
    if err == drv.CUresult.CUDA_SUCCESS and managed:
        return ("managed", ordinal)
    if int(kind) == int(drv.CUmemorytype.CU_MEMORYTYPE_DEVICE):
        return ("device", ordinal)
    if int(kind) == int(drv.CUmemorytype.CU_MEMORYTYPE_HOST):
        return ("pinned", None)
    return (None, None)


def page_locked(ptr: int, nbytes: int) -> bool:
    """Whether the host bytes ``[ptr, ptr + nbytes)`` lie in one page-locked allocation the
    driver knows (``cuMemHostAlloc``'d or registered, by anyone): the first byte's memory is
    host memory and the last byte has the same buffer id (one allocation holds both ends, so
    every byte between them)."""
    drv = driver()
    A, ok = drv.CUpointer_attribute, drv.CUresult.CUDA_SUCCESS
    err, kind = drv.cuPointerGetAttribute(A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr)
    if err != ok or int(kind) != int(drv.CUmemorytype.CU_MEMORYTYPE_HOST):
        return False
    err, first = drv.cuPointerGetAttribute(A.CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr)
    err2, last = drv.cuPointerGetAttribute(A.CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr + nbytes - 1)
    return err == ok and err2 == ok and int(first) == int(last)


class Event:
    """A CUDA event for timing (``record(stream)``, ``elapsed_ms(other)``, ``synchronize()``)."""

    __slots__ = ("_h",)

    def __init__(self, timing: bool = True):
        drv = driver()
        flags = 0 if timing else drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
        self._h = check(drv.cuEventCreate(flags), "cuEventCreate")

    def record(self, stream: int = 0) -> Event:
        check(driver().cuEventRecord(self._h, stream), "cuEventRecord")
        return self

    def synchronize(self) -> None:
        check(driver().cuEventSynchronize(self._h), "cuEventSynchronize")

    def elapsed_ms(self, end: Event) -> float:
        return float(check(driver().cuEventElapsedTime(self._h, end._h), "cuEventElapsedTime"))

    def __del__(self):
        h = getattr(self, "_h", None)
        drv = _state.get("driver")
        if h is not None and drv is not None:
            try:
                drv.cuEventDestroy(h)
            except Exception:
                pass
