"""Allocator protocol and allocation from the user's own memory pool.

Outputs and workspaces come from the operands' package allocator (torch's caching allocator,
CuPy's memory pool) unless ``options.allocator`` is given; otherwise from the device's
``cuda.core`` memory resource (a stream-ordered pool).
"""

from __future__ import annotations

import re
import sys
from abc import ABC, abstractmethod

from .errors import InvalidOptionError

__all__ = [
    "MemoryPointer",
    "BaseCUDAMemoryManager",
    "BaseCUDAMemoryManagerAsync",
    "parse_memory_limit",
    "allocate",
    "package_stream",
    "on_stream",
]


class MemoryPointer:
    """Device memory ``size`` bytes at ``device_ptr``; ``finalizer()`` (if any) frees it once.

    Parameters
    ----------
    device_ptr : int
        The device address.
    size : int
        Size in bytes.
    finalizer : callable or None
        Called with no arguments by :meth:`free` (and at garbage collection).

    Examples
    --------
    >>> freed = []
    >>> p = MemoryPointer(0x1000, 256, finalizer=lambda: freed.append(True))
    >>> p.free(); p.free()
    >>> freed
    [True]
    """

    __slots__ = ("device_ptr", "size", "_finalizer", "_owner")

    def __init__(self, device_ptr: int, size: int, finalizer=None):
        self.device_ptr = int(device_ptr)
        self.size = int(size)
        self._finalizer = finalizer
        self._owner = None

    def free(self) -> None:
        fin, self._finalizer = self._finalizer, None
        self._owner = None
        if fin is not None:
            fin()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"MemoryPointer(device_ptr=0x{self.device_ptr:x}, size={self.size})"


class BaseCUDAMemoryManager(ABC):
    """Synchronous allocator protocol: ``memalloc(size) -> MemoryPointer``."""

    @abstractmethod
    def memalloc(self, size: int) -> MemoryPointer:
        raise NotImplementedError


class BaseCUDAMemoryManagerAsync(ABC):
    """Stream-ordered allocator protocol: ``memalloc_async(size, stream) -> MemoryPointer``.

    ``stream`` is the resolved stream handle (an ``int``).
    """

    @abstractmethod
    def memalloc_async(self, size: int, stream) -> MemoryPointer:
        raise NotImplementedError


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_LIMIT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%|[kmgt]i?b|b)?\s*$", re.IGNORECASE)


def parse_memory_limit(value, total: int | None = None) -> int:
    """Bytes allowed by ``value``: an int, ``"1GiB"``/``"500 MB"``, or ``"80%"`` of ``total``.

    Examples
    --------
    >>> parse_memory_limit("1GiB"), parse_memory_limit(4096), parse_memory_limit("50%", 1000)
    (1073741824, 4096, 500)
    """
    expected = "an int number of bytes, a size string like '1GiB', or a percentage like '80%'"
    if isinstance(value, bool):
        raise InvalidOptionError(f"memory_limit must be {expected}, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise InvalidOptionError(f"memory_limit must be non-negative, got {value!r}")
        return value
    if isinstance(value, float) and 0 < value <= 1:
        value = f"{value * 100}%"
    if not isinstance(value, str) or not (m := _LIMIT_RE.match(value)):
        raise InvalidOptionError(f"memory_limit must be {expected}, got {value!r}")
    number, unit = float(m.group(1)), (m.group(2) or "").lower()
    if unit == "%":
        if not 0 < number <= 100:
            raise InvalidOptionError(f"memory_limit percentage must be in (0, 100], got {value!r}")
        if total is None:
            raise InvalidOptionError("memory_limit as a percentage needs the device memory size")
        return int(total * number / 100)
    return int(number * _UNITS[unit])


def package_stream(package: str, stream: int, device_id: int):
    """A context manager making ``stream`` current in ``package`` (torch/CuPy), or ``None``
    when it already is. Allocating inside it orders the pool's memory on ``stream``: the pool
    hands out no block still in use by pending work on another stream."""
    if package == "torch":
        torch = sys.modules["torch"]
        if torch.cuda.current_stream(device_id).cuda_stream == stream:
            return None
        s = (torch.cuda.default_stream(device_id) if stream == 0 else
             torch.cuda.ExternalStream(stream, device=torch.device("cuda", device_id)))
        return torch.cuda.stream(s)
    if package == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device_id):
            if cupy.cuda.get_current_stream().ptr == stream:
                return None
        return cupy.cuda.ExternalStream(stream, device_id) if stream else \
            cupy.cuda.Stream.null
    return None


def on_stream(package: str, stream: int, device_id: int, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with ``stream`` current in ``package`` (see package_stream)."""
    ctx = package_stream(package, stream, device_id)
    if ctx is None:
        return fn(*args, **kwargs)
    with ctx:
        return fn(*args, **kwargs)


def _torch_alloc(nbytes: int, device_id: int, stream: int) -> MemoryPointer:
    torch = sys.modules["torch"]
    t = on_stream("torch", stream, device_id, torch.empty, nbytes, dtype=torch.uint8,
                  device=torch.device("cuda", device_id))
    ptr = MemoryPointer(t.data_ptr(), nbytes)
    ptr._owner = t  # freed when the pointer (and the tensor) are dropped
    return ptr


def _cupy_alloc(nbytes: int, device_id: int, stream: int) -> MemoryPointer:
    cupy = sys.modules["cupy"]
    with cupy.cuda.Device(device_id):
        mem = on_stream("cupy", stream, device_id, cupy.cuda.alloc, nbytes)
    ptr = MemoryPointer(mem.ptr, nbytes)
    ptr._owner = mem
    return ptr


def _core_alloc(nbytes: int, device_id: int, stream: int) -> MemoryPointer:
    from cuda.core import Stream

    from . import cuda

    dev = cuda.core_device(device_id)
    s = Stream.from_handle(stream) if stream else dev.default_stream
    buf = dev.allocate(nbytes, stream=s)

    def fin(buf=buf, s=s):
        buf.close(s)

    return MemoryPointer(int(buf.handle), nbytes, fin)


def allocate(nbytes: int, *, package: str | None, device_id: int, stream: int,
             allocator=None) -> MemoryPointer:
    """Allocate ``nbytes`` of device memory ordered on ``stream`` from the user's pool."""
    nbytes = max(int(nbytes), 1)
    if allocator is not None:
        if hasattr(allocator, "memalloc_async"):
            return allocator.memalloc_async(nbytes, stream)
        if hasattr(allocator, "memalloc"):
            return allocator.memalloc(nbytes)
        raise InvalidOptionError(
            "allocator must implement memalloc(size) or memalloc_async(size, stream), "
            f"got {allocator!r}"
        )
    if package == "torch" and "torch" in sys.modules:
        return _torch_alloc(nbytes, device_id, stream)
    if package == "cupy" and "cupy" in sys.modules:
        return _cupy_alloc(nbytes, device_id, stream)
    return _core_alloc(nbytes, device_id, stream)
