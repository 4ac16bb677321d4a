"""The allocator protocol (:class:`MemoryPointer`, the memory manager base classes) and memory
limits. Allocation itself (``options.allocator`` → the package's pool → cuda.core) is
:func:`cuweave._internal.packages.allocate`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

from .errors import InvalidOptionError

__all__ = [
    "MemoryPointer",
    "BaseCUDAMemoryManager",
    "BaseCUDAMemoryManagerAsync",
    "parse_memory_limit",
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
