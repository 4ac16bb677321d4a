"""Page-locked memory for the host results of GPU runs, pooled.

A run on host operands ends with a download of its result. Into a new pageable array that is a
DMA into the pinned staging ring plus a host copy out of it (and, for a new array, the kernel
mapping and zeroing every page first); into page-locked memory it is the DMA alone.
:func:`take` hands out results in page-locked blocks that go back to the pool when the last
array using them is dropped, so a loop that makes results of one size reuses the same blocks.

Rules, so that pinned memory stays a bounded cache:

* only results of at least ``_MIN`` bytes, in size classes of whole MiB;
* a size class gets a block only when it is asked for the second time (a one-shot result does
  not pay ``cuMemHostAlloc``, which costs more than mapping the pages of a pageable array);
* at most ``CUWEAVE_PINNED_RESULTS_MB`` MiB (default 256) held in all, live or free: when a new
  block would pass that, free blocks of other sizes are released first; when it still would,
  the result is an ordinary array (:func:`take` returns None). ``CUWEAVE_PINNED_RESULTS_MB=0``
  turns the pool off.

The arrays are ordinary NumPy arrays whose ``base`` owns the block.
"""

from __future__ import annotations

import os
import threading
from collections import deque

import numpy as np

from . import cuda

__all__ = ["owns", "take", "PinnedPool"]

_MIN = 1 << 20  # bytes: smaller results are copied out of the ring as before
_GRAIN = 1 << 20  # size classes: whole MiB


class _Block:
    """One pooled block; gives itself back when the last array over it is dropped."""

    __slots__ = ("ptr", "size", "pool")

    def __init__(self, ptr: int, size: int, pool: PinnedPool):
        self.ptr, self.size, self.pool = ptr, size, pool

    @property
    def __array_interface__(self):
        return {"data": (self.ptr, False), "shape": (self.size,), "typestr": "|u1",
                "version": 3}

    def __del__(self):
        self.pool._give_back(self.ptr, self.size)


class PinnedPool:
    """Page-locked blocks by size class, at most ``cap`` bytes held (see the module docstring)."""

    def __init__(self, cap: int):
        self.cap = int(cap)
        self.held = 0  # bytes allocated from the driver, live or free
        self._free: dict[int, list[int]] = {}  # size class -> free block pointers
        self._live: dict[int, int] = {}  # block pointer -> size class, while an array holds it
        self._seen: set[int] = set()  # size classes asked for once
        # blocks whose arrays were dropped, filed by the next take: a drop may happen inside
        # take itself (the garbage collector runs at any allocation), so it takes no lock
        self._returned: deque = deque()
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray | None:
        """A flat uint8 array of ``nbytes`` in a pooled block, or None (see the rules)."""
        if nbytes < _MIN or self.cap <= 0:
            return None
        size = -(-nbytes // _GRAIN) * _GRAIN
        with self._lock:
            self._file_returned()
            free = self._free.get(size)
            if free:
                ptr = free.pop()
            else:
                if size not in self._seen:
                    self._seen.add(size)
                    return None
                if self.held + size > self.cap:
                    self._release_free()
                if self.held + size > self.cap:
                    return None
                ptr = cuda.host_alloc(size)
                self.held += size
            self._live[ptr] = size
        return np.asarray(_Block(ptr, size, self))[:nbytes]

    def owns(self, addr: int, nbytes: int) -> bool:
        """Whether ``[addr, addr + nbytes)`` lies at the start of a block of this pool that an
        array holds (or held: a dropped block is filed free by the next :meth:`take`)."""
        size = self._live.get(addr)
        return size is not None and nbytes <= size

    def _give_back(self, ptr: int, size: int) -> None:
        self._returned.append((ptr, size))  # atomic: no lock (see __init__)

    def _file_returned(self) -> None:
        """Move the dropped blocks to the free lists (under the lock)."""
        while self._returned:
            ptr, size = self._returned.popleft()
            if self._live.pop(ptr, None) is not None:
                self._free.setdefault(size, []).append(ptr)

    def _release_free(self) -> None:
        """Free every free block (under the lock, dropped ones filed)."""
        for size, ptrs in self._free.items():
            for ptr in ptrs:
                cuda.host_free(ptr)
                self.held -= size
        self._free.clear()


_POOL = [PinnedPool(int(os.environ.get("CUWEAVE_PINNED_RESULTS_MB", 256)) << 20)]


def take(nbytes: int) -> np.ndarray | None:
    """:meth:`PinnedPool.take` of the process's pool."""
    return _POOL[0].take(nbytes)


def owns(addr: int, nbytes: int) -> bool:
    """:meth:`PinnedPool.owns` of the process's pool."""
    return _POOL[0].owns(addr, nbytes)
