"""The allocator protocol (:class:`MemoryPointer`, the memory manager base classes), device
allocation in its one order (:func:`allocate`: ``options.allocator`` → the operands' package
pool → cuda.core) and memory limits. The public names live in :mod:`cuweave.memory`.
"""

from __future__ import annotations

import logging
import re
import sys
from abc import ABC, abstractmethod

from .errors import InvalidOptionError
from .registry import adapter

__all__ = [
    "MemoryPointer",
    "BaseCUDAMemoryManager",
    "BaseCUDAMemoryManagerAsync",
    "allocate",
    "check_allocator",
    "parse_memory_limit",
]


class MemoryPointer:
    """Device memory ``size`` bytes at ``device_ptr``, freed once by :meth:`free`.

    What an allocator (:class:`BaseCUDAMemoryManager`, :class:`BaseCUDAMemoryManagerAsync`)
    returns; nvmath-python's ``nvmath.memory.MemoryPointer``.

    Parameters
    ----------
    device_ptr : int
        The device address.
    size : int
        Size in bytes.
    finalizer : callable or None
        Called with no arguments by :meth:`free` (or at garbage collection when never freed).

    Examples
    --------
    >>> freed = []
    >>> p = MemoryPointer(0x1000, 256, finalizer=lambda: freed.append(True))
    >>> p.free()
    >>> freed
    [True]
    >>> p.free()
    Traceback (most recent call last):
    ...
    RuntimeError: The buffer at 0x1000 has already been freed.
    """

    __slots__ = ("device_ptr", "size", "_finalizer", "_owner", "_freed")

    def __init__(self, device_ptr: int, size: int, finalizer=None):
        self.device_ptr = int(device_ptr)
        self.size = int(size)
        self._finalizer = finalizer
        self._owner = None  # an object keeping the memory alive (a wrapped user allocation)
        self._freed = False

    def free(self) -> None:
        """Free the memory (call the finalizer); a second call raises ``RuntimeError``."""
        if self._freed:
            raise RuntimeError(f"The buffer at 0x{self.device_ptr:x} has already been freed.")
        self._freed = True
        fin, self._finalizer = self._finalizer, None
        self._owner = None
        if fin is not None:
            fin()

    def __del__(self):
        try:
            if not self._freed:
                self.free()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"MemoryPointer(device_ptr=0x{self.device_ptr:x}, size={self.size})"


class BaseCUDAMemoryManager(ABC):
    """Synchronous allocator protocol: ``memalloc(size)``, as nvmath-python's.

    Subclass it and pass an instance as the ``allocator`` option of :mod:`cuweave.fft` and
    :mod:`cuweave.linalg.advanced`. ``memalloc`` allocates ``size`` bytes synchronously (or on
    the current stream) and returns an object owning the memory, with the address as
    ``device_ptr``, ``device_pointer`` or ``ptr`` (a :class:`MemoryPointer`, a
    ``cupy.cuda.MemoryPointer``, a numba one...): cuweave keeps it alive while it uses the
    memory and calls its ``free()`` (when it has one) or drops it to release it.

    Parameters
    ----------
    device_id : int
        The device the memory is allocated on.
    logger : logging.Logger, optional

    Examples
    --------
    >>> class Pool(BaseCUDAMemoryManager):
    ...     def memalloc(self, size):
    ...         return MemoryPointer(0x1000, size)  # a real one allocates device memory
    >>> Pool(0, None).memalloc(64)
    MemoryPointer(device_ptr=0x1000, size=64)
    """

    def __init__(self, device_id: int = 0, logger: logging.Logger | None = None):
        self.device_id = device_id
        self.logger = logger if logger is not None else logging.getLogger("cuweave.memory")

    @abstractmethod
    def memalloc(self, size: int):
        """Allocate ``size`` bytes of device memory on ``self.device_id``.

        Parameters
        ----------
        size : int
            The number of bytes to allocate.

        Returns
        -------
        object
            An object owning the memory: a :class:`MemoryPointer`, or any object with the
            address as ``device_ptr``, ``device_pointer`` or ``ptr`` (and, optionally, a
            ``free()`` method that releases it).
        """
        raise NotImplementedError


class BaseCUDAMemoryManagerAsync(ABC):
    """Stream-ordered allocator protocol: ``memalloc_async(size, stream)``, as nvmath-python's.

    ``stream`` is a ``cuda.core`` ``Stream`` (its ``handle`` is the ``CUstream``); the memory
    must be usable in stream order on it. The returned object follows
    :class:`BaseCUDAMemoryManager`'s rules.

    Parameters
    ----------
    device_id : int
        The device the memory is allocated on.
    logger : logging.Logger, optional

    Examples
    --------
    >>> class Pool(BaseCUDAMemoryManagerAsync):
    ...     def memalloc_async(self, size, stream):
    ...         return MemoryPointer(0x2000, size)  # a real one allocates on ``stream``
    >>> Pool(0, None).memalloc_async(64, None).size
    64
    """

    def __init__(self, device_id: int = 0, logger: logging.Logger | None = None):
        self.device_id = device_id
        self.logger = logger if logger is not None else logging.getLogger("cuweave.memory")

    @abstractmethod
    def memalloc_async(self, size: int, stream):
        """Allocate ``size`` bytes of device memory on ``self.device_id``, ordered on ``stream``.

        Parameters
        ----------
        size : int
            The number of bytes to allocate.
        stream : cuda.core.Stream
            The stream the memory is used on; it must be usable in stream order there.

        Returns
        -------
        object
            An object owning the memory, as for :meth:`BaseCUDAMemoryManager.memalloc`.
        """
        raise NotImplementedError


def check_allocator(allocator, name: str = "allocator"):
    """``allocator`` if it is ``None`` or has ``memalloc``/``memalloc_async``, else raise."""
    if (allocator is None or callable(getattr(allocator, "memalloc_async", None))
            or callable(getattr(allocator, "memalloc", None))):
        return allocator
    raise InvalidOptionError(
        f"{name} must be a BaseCUDAMemoryManager or BaseCUDAMemoryManagerAsync (an object with "
        f"memalloc(size) or memalloc_async(size, stream)), got {allocator!r}")


def _core_stream(handle: int, device_id: int):
    """The ``cuda.core`` Stream for ``handle`` on ``device_id``.

    The handle is passed through as it is, 0 included: an allocator sees the stream the
    packages call their default one (torch's and CuPy's default streams have handle 0), where
    cuda.core's ``default_stream`` would be the legacy stream's 0x1, which torch refuses
    ("invalid StreamId1")."""
    from cuda.core import Stream as CoreStream

    try:
        return CoreStream.from_handle(int(handle))
    except Exception:  # a cuda.core that does not wrap the null stream
        if handle:
            raise
        from . import cuda

        return cuda.core_device(device_id).default_stream


def _adopt(obj, nbytes: int, allocator) -> MemoryPointer:
    """A user allocator's result as a :class:`MemoryPointer` (its ``free()`` frees ``obj``
    once: through ``obj.free()`` when it has one, else by dropping the reference)."""
    if isinstance(obj, MemoryPointer):
        return obj
    for attr in ("device_ptr", "device_pointer", "ptr"):
        ptr = getattr(obj, attr, None)
        if isinstance(ptr, int) and not isinstance(ptr, bool):
            break
    else:
        raise InvalidOptionError(
            f"allocator {allocator!r} must return an object with an int device_ptr, "
            f"device_pointer or ptr attribute, got {obj!r}")
    fin = getattr(obj, "free", None)
    mem = MemoryPointer(ptr, getattr(obj, "size", nbytes) or nbytes,
                        fin if callable(fin) else None)
    mem._owner = obj
    return mem


def allocate(nbytes: int, *, package: str | None, device_id: int, stream: int,
             allocator=None) -> MemoryPointer:
    """``nbytes`` of device memory ordered on ``stream`` (a handle), from, in this order:
    ``allocator`` (the options' own: ``memalloc_async(size, cuda.core Stream)``, else
    ``memalloc(size)``), the pool of ``package`` (when the user has imported it), or the
    device's cuda.core memory resource."""
    nbytes = max(int(nbytes), 1)
    if allocator is not None:
        check_allocator(allocator)
        if callable(getattr(allocator, "memalloc_async", None)):
            obj = allocator.memalloc_async(nbytes, _core_stream(stream, device_id))
        else:
            obj = allocator.memalloc(nbytes)
        return _adopt(obj, nbytes, allocator)
    ad = adapter(package)
    if ad.name not in sys.modules:
        ad = adapter(None)  # the generic one: cuda.core's memory resource
    return ad.allocate_bytes(nbytes, device_id, stream)


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
