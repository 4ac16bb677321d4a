"""Host ↔ device transfers through a pinned ring buffer, pipelined in chunks on several threads.

A :class:`Stager` owns one page-locked arena (grown on demand up to ``capacity`` bytes).
Transfers are cut into ``chunk``-byte pieces, each placed in the arena at the ring's current
position:

* upload: worker threads copy pieces of the host array into the arena (``ctypes.memmove``
  releases the GIL, so the copies run in parallel), and the calling thread queues the DMA of
  each piece on the stream as soon as its copy is done — in order, while later pieces are
  still being copied. :meth:`Stager.upload_many` pipelines several arrays in one go (the
  second array's host copies overlap the first one's DMA).
* download: the DMA of every piece is queued first; each piece's copy out of the arena is
  handed to a worker as soon as its DMA is done, so copying overlaps the remaining DMA.

A region of the arena is reused only after the DMA reading it (upload) or the host copy out
of it (download) has finished; the host waits for exactly those. Regions start on page
boundaries (whatever size the previous transfer had), so every DMA reads or writes whole
pages of the arena. Small transfers (below ``_THREAD_MIN`` bytes in total) are copied on the
calling thread.

A download's destination is often a new array whose pages the kernel has not mapped yet (a
fresh result): the copy out of the arena would then take a page fault per page, after the DMA,
on the critical path. Its pages are populated (``madvise(MADV_POPULATE_WRITE)``, Linux 5.14+)
by the copy threads as soon as the DMA is queued, while the device still computes or copies;
the copies then write into mapped pages. Elsewhere nothing is done
(``CUWEAVE_PREFAULT=0`` turns it off).

A download into page-locked memory (a block of :mod:`.pinned`, a result made for it; a buffer
registered there; memory page-locked by someone else, torch's ``pin_memory`` or CuPy's pinned
memory) is the DMA alone; so is an upload (``direct=True``) of an array in page-locked memory.

Registering a user's array in place (``cuMemHostRegister``) costs about as much as copying its
pages once (the driver walks and locks every page) plus an unregister, so for one-shot
transfers it never wins over a pipelined copy into an already-pinned arena: :mod:`.pinned`
registers only arrays uploaded again and again (its third upload).
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import threading
from collections import deque

import numpy as np

from . import cuda, pinned

__all__ = ["Stager", "host_bytes", "populate", "shared_stager"]

_CHUNK = 2 << 20  # bytes per piece
_CAPACITY = 32 << 20  # largest pinned arena of one Stager
_THREAD_MIN = 1 << 20  # transfers below this many bytes are copied on the calling thread
_ALIGN = 4096  # arena regions start on this boundary (a divisor of it when the chunk is smaller)
#: populate the pages of threaded downloads' destinations ahead of the copies (module docstring)
_PREFAULT = os.environ.get("CUWEAVE_PREFAULT", "1") != "0"
_MADV_POPULATE_WRITE = 23  # Linux 5.14+, the generic value (x86-64, arm64, ...)
_PAGE = 4096
_MADVISE: list = []  # [libc madvise] once looked up; [None] where it is unusable
_POOL: list = []
_POOL_LOCK = threading.Lock()
_memmove = ctypes.memmove


def _pool():
    """The process's copy threads (created on first use; ``CUWEAVE_COPY_THREADS`` bounds it)."""
    if not _POOL:
        with _POOL_LOCK:
            if not _POOL:
                from concurrent.futures import ThreadPoolExecutor

                n = int(os.environ.get("CUWEAVE_COPY_THREADS", 0)) or min(8, os.cpu_count() or 1)
                _POOL.append(ThreadPoolExecutor(max_workers=max(n, 1),
                                                thread_name_prefix="cuweave-copy"))
    return _POOL[0]


def host_bytes(arr: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a dense host array in its own memory order (copies if not dense)."""
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        arr = np.ascontiguousarray(arr)
    return arr.reshape(-1, order="A").view(np.uint8)


def _madvise():
    """libc's ``madvise`` (a ctypes function that releases the GIL), or None off Linux."""
    if not _MADVISE:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(None, use_errno=True).madvise
                fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
                fn.restype = ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _MADVISE.append(fn)
    return _MADVISE[0]


def populate(addr: int, nbytes: int) -> bool:
    """Map the whole pages inside ``[addr, addr + nbytes)`` for writing, without changing their
    contents (``MADV_POPULATE_WRITE``); the partial pages at the ends are left to the copy.

    Returns whether the kernel did it. A kernel without ``MADV_POPULATE_WRITE`` (``EINVAL``)
    disables further attempts; other failures (memory the call cannot populate: a read-only
    or special mapping) are ignored: the copy then faults the pages in as before.
    """
    fn = _madvise()
    if fn is None:
        return False
    start = -(-addr // _PAGE) * _PAGE
    end = (addr + nbytes) // _PAGE * _PAGE
    if end <= start:
        return False
    if fn(start, end - start, _MADV_POPULATE_WRITE) == 0:
        return True
    if ctypes.get_errno() == 22:  # EINVAL: this kernel has no MADV_POPULATE_WRITE
        _MADVISE[0] = None
    return False


class _Done:
    """A waiter that is already satisfied (inline copies)."""

    @staticmethod
    def result():
        return None


class Stager:
    """Pinned ring buffer for pipelined transfers; call :meth:`close` (or drop) to free it.

    Parameters
    ----------
    chunk : int
        Bytes per piece (the unit of pipelining and of threading).
    capacity : int
        Largest arena in bytes; transfers larger than that wrap around the ring.
    threads : bool
        Use the copy threads for transfers of at least ``_THREAD_MIN`` bytes.
    """

    def __init__(self, chunk: int = _CHUNK, capacity: int = _CAPACITY, threads: bool = True):
        self._chunk = int(chunk)
        self._capacity = max(int(capacity), self._chunk)
        self._align = math.gcd(self._chunk, _ALIGN)  # whole pieces stay back to back
        self._threads = threads
        self._base = 0
        self._size = 0
        self._pos = 0
        self._busy: deque = deque()  # (start, end, waiter with .result() or .synchronize())
        self._events: list = []  # free events
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ arena
    def _ensure(self, need: int) -> None:
        want = min(max(need, 1), self._capacity)
        if self._size >= want:
            return
        self._drain_busy()
        if self._base:
            cuda.host_free(self._base)
            self._base = self._size = 0
        want = -(-want // 4096) * 4096
        self._base = cuda.host_alloc(want)
        self._size, self._pos = want, 0

    def _reserve(self, m: int, pending: deque, advance) -> int:
        """Arena offset for ``m`` bytes; waits for (and ``advance``-s) the users of the region."""
        start = self._pos
        if start + m > self._size:
            start = 0
        end = start + m
        while pending and any(s < end and start < e for s, e, _ in pending):
            advance(pending.popleft())
        if any(s < end and start < e for s, e, _ in self._busy):
            keep = deque()
            for s, e, w in self._busy:
                if s < end and start < e:
                    _wait(w)
                    self._recycle(w)
                else:
                    keep.append((s, e, w))
            self._busy = keep
        align = self._align
        self._pos = min(-(-end // align) * align, self._size)
        return start

    def _event(self, stream: int):
        ev = self._events.pop() if self._events else cuda.Event(timing=False)
        return ev.record(stream)

    def _recycle(self, w) -> None:
        if isinstance(w, cuda.Event):
            self._events.append(w)

    def _drain_busy(self) -> None:
        busy, self._busy = self._busy, deque()
        for _, _, w in busy:
            _wait(w)
            self._recycle(w)

    def _pieces(self, n: int):
        return ((off, min(self._chunk, n - off)) for off in range(0, n, self._chunk))

    def _submit(self, threaded: bool, dst: int, src: int, m: int):
        if threaded:
            return _pool().submit(_memmove, dst, src, m)
        _memmove(dst, src, m)
        return _Done

    # ------------------------------------------------------------------ transfers
    def upload(self, src: np.ndarray, dst_ptr: int, stream: int, direct: bool = False) -> None:
        """Copy the bytes of the dense host array ``src`` (own memory order) to ``dst_ptr``."""
        self.upload_many([(src, dst_ptr)], stream, direct)

    def upload_many(self, items, stream: int, direct: bool = False) -> None:
        """Upload ``[(host array, device pointer), ...]`` in one pipeline (in list order).

        Returns once every piece is queued on ``stream`` (the DMA may still be running; the
        arena regions stay reserved until it is done). ``direct``: the caller waits for
        ``stream`` before the host arrays may change or go (a run that downloads its result
        does): arrays in page-locked memory (:func:`.pinned.dma_from`) are then DMA-ed from
        where they are instead.
        """
        flats = [(host_bytes(src), dst) for src, dst in items]
        if direct:  # page-locked arrays: their DMA queued here and now
            flats = [(flat, dst) for flat, dst in flats
                     if not pinned.dma_from(flat, dst, stream)]
        total = sum(f.size for f, _ in flats)
        if total == 0:
            return
        threaded = self._threads and total >= _THREAD_MIN
        pending: deque = deque()  # (start, end, (future, dst, m)) copied, DMA not queued

        def advance(entry):
            start, end, (fut, dst, m) = entry
            fut.result()
            cuda.memcpy_async(dst, self._base + start, m, stream)
            self._busy.append((start, end, self._event(stream)))

        with self._lock:
            self._ensure(total)
            for flat, dst in flats:
                src = flat.ctypes.data
                for off, m in self._pieces(flat.size):
                    start = self._reserve(m, pending, advance)
                    fut = self._submit(threaded, self._base + start, src + off, m)
                    pending.append((start, start + m, (fut, dst + off, m)))
                    while pending and _ready(pending[0][2][0]):
                        advance(pending.popleft())
            while pending:
                advance(pending.popleft())

    def download(self, src_ptr: int, dst: np.ndarray, stream: int) -> None:
        """Copy device bytes at ``src_ptr`` into the dense host array ``dst``; returns when done."""
        if not (dst.flags.c_contiguous or dst.flags.f_contiguous):
            tmp = np.empty(dst.shape, dst.dtype, order="C")
            self.download(src_ptr, tmp, stream)
            dst[...] = tmp
            return
        data = dst.reshape(-1, order="A").view(np.uint8)
        n = data.size
        if n == 0:
            return
        if pinned.dma_into(data, src_ptr, stream):  # page-locked already: the DMA writes it
            with self._lock:
                ev = self._event(stream)
                ev.synchronize()
                self._events.append(ev)
            return
        threaded = self._threads and n >= _THREAD_MIN
        base_dst = data.ctypes.data
        pending: deque = deque()  # (start, end, (event, dst, m)): DMA queued, not copied out

        def advance(entry):
            start, end, (ev, out, m) = entry
            ev.synchronize()
            self._events.append(ev)
            self._busy.append((start, end, self._submit(threaded, out, self._base + start, m)))

        with self._lock:
            self._ensure(n)
            pre = ()
            if threaded and _PREFAULT:  # queued before the copies: runs while the device works
                pool = _pool()
                pre = [pool.submit(populate, base_dst + off, m) for off, m in self._pieces(n)]
            for off, m in self._pieces(n):
                start = self._reserve(m, pending, advance)
                cuda.memcpy_async(self._base + start, src_ptr + off, m, stream)
                pending.append((start, start + m, (self._event(stream), base_dst + off, m)))
            while pending:
                advance(pending.popleft())
            self._drain_busy()
            for fut in pre:  # done by now (queued before the copies): nothing outlives the call
                fut.result()

    def close(self) -> None:
        with self._lock:
            try:
                self._drain_busy()
            except Exception:
                pass
            base, self._base, self._size, self._events = self._base, 0, 0, []
        if base:
            try:
                cuda.host_free(base)
            except Exception:
                pass

    def __del__(self):
        self.close()


def _ready(fut) -> bool:
    return fut is _Done or fut.done()


def _wait(w) -> None:
    if isinstance(w, cuda.Event):
        w.synchronize()
    else:
        w.result()


_SHARED: list = []


def shared_stager() -> Stager:
    """One process-wide :class:`Stager` (bounds the pinned memory of cached plans); its first
    use also reads the limits of :mod:`.pinned` (a bad one raises before any transfer)."""
    if not _SHARED:
        pinned.setup()
        with _POOL_LOCK:
            if not _SHARED:
                _SHARED.append(Stager())
    return _SHARED[0]
