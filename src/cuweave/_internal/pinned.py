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

Operands are uploaded from page-locked memory directly (:func:`dma_from`) when their bytes
lie in a pool block (a result used as the next operand) or in a NumPy buffer uploaded
before: a buffer of at least ``_MIN`` bytes is registered with the driver
(``cuMemHostRegister``, which costs about one copy of it) on its third upload, so a loop
over the same host arrays copies them twice and then only DMAs, and an array uploaded once or
twice never pays for a registration. Only uploads that cover at least
half of the buffer count (a small view of a large array never locks all of it). A first
upload is counted without touching the array; from the second, the array is followed by a
weak reference, and a registered one has a weak reference whose callback undoes the
registration when the array is collected, before NumPy frees the memory. NumPy refuses to
resize an array that has weak references: an array uploaded twice cannot be resized in place
while it lives. ``ndarray.__setstate__`` is the one way NumPy swaps the buffer of a live array
regardless (it frees the old one): called on a registered array, the driver's registration of
the old pages outlives them, and a new buffer at the same address would be uploaded from them.
Nothing can see that happen; it is a documented limit, as for any ``cudaHostRegister``-ed
memory. A registration is undone only after the last DMA from it is done, and the least
recently used ones are undone to keep at most ``CUWEAVE_PINNED_OPERANDS_MB`` MiB (default
1024; 0 turns registering off) locked. A buffer the driver refuses (a page shared with a
registered one, memory it cannot lock) is copied as before, and so is everything when the
driver refuses page-locked memory altogether.

Memory page-locked by someone else (torch's ``pin_memory``, CuPy's pinned memory, the user's
own ``cudaHostRegister``), which the driver reports (:func:`.cuda.page_locked`: both ends of
the bytes in one page-locked allocation), is DMA-ed too, from (uploads) and into (downloads:
an in-place target, a result the caller handed over); so is a download into a buffer
registered here, whose DMA is tracked as the uploads' are. Such a transfer is queued only
where the caller waits for its stream before returning, which is what makes it safe for
memory cuweave does not own: the caller's arrays are alive and unchanged until then.

Page-locked memory belongs to the CUDA context: like CuPy's and torch's pinned memory, the
pool's blocks (and the results in them) do not survive a reset of the primary context
(``cudaDeviceReset``, ``numba.cuda.close()``).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict, deque

import numpy as np

from . import cuda
from .errors import CudaDriverError, CudaUnavailableError, InvalidOptionError

__all__ = ["owns", "take", "dma_from", "dma_into", "setup", "PinnedPool", "Registrations"]

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
        size = -(-nbytes // _GRAIN) * _GRAIN
        if nbytes < _MIN or size > self.cap:  # (a result that never fits empties nothing)
            return None
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
                    free = sum(sz * len(ptrs) for sz, ptrs in self._free.items())
                    if self.held - free + size > self.cap:  # live blocks leave no room
                        return None
                    self._release_free()
                try:
                    ptr = cuda.host_alloc(size)
                except CudaDriverError:  # out of page-locked memory: an ordinary array
                    return None
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
                self.held -= size
                try:
                    cuda.host_free(ptr)
                except CudaDriverError:  # e.g. the context was reset: nothing left to free
                    pass
        self._free.clear()


class Registrations:
    """NumPy buffers registered with the driver, least recently used first (see the module
    docstring); at most ``cap`` bytes.

    A buffer's first upload is counted without touching the array; from its second, the array
    is followed by a weak reference (so a new array that took a dead one's ``id`` and address
    is never taken for it: it gets no registration before its own second upload), and once
    registered by one whose callback undoes the registration. Every direct DMA from a
    registered buffer records an event on its stream, and a registration is undone only once
    the last DMA from it on every stream is done (eviction, the owner collected), so no queued
    copy ever reads memory that went back to being pageable.
    """

    _SIGHTINGS = 512  # buffers whose uploads are counted at a time
    _STREAMS = 8  # streams whose last DMA from a buffer is remembered

    def __init__(self, cap: int):
        self.cap = int(cap)
        self.held = 0
        # id(owner) -> [weakref to owner, ptr, nbytes, {stream: event after the last DMA from
        # it on that stream}, device current at registration]; most recently used last
        self._entries: OrderedDict = OrderedDict()
        # (id(owner), ptr, nbytes) -> 1 (one upload seen), a weak reference to the array (two
        # seen), or None (refused by the driver, or larger than the cap)
        self._sightings: OrderedDict = OrderedDict()
        # reentrant: an owner's collection (its weakref callback, which must undo the
        # registration before NumPy frees the buffer) may run inside dma() at any allocation
        self._lock = threading.RLock()

    def dma(self, owner: np.ndarray, whole: bool, dst: int, src: int, nbytes: int,
            stream: int) -> bool:
        """Queue the DMA of ``[src, src + nbytes)`` (inside ``owner``'s buffer) to ``dst`` on
        ``stream`` if the buffer is registered, registering it on its third upload
        (``whole``: the upload covers most of the buffer; a small view of a large
        buffer never registers it). False: not queued, the caller copies."""
        ptr, size, key = owner.ctypes.data, owner.nbytes, id(owner)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and (entry[0]() is not owner or entry[1] != ptr or
                                      entry[2] != size):
                self._forget(key)  # not this array's registration any more
                entry = None
            if entry is None:
                if not (whole and self._count(owner, key, ptr, size)):
                    return False
                entry = self._register(owner, key, ptr, size)
                if entry is None:
                    return False
            self._entries.move_to_end(key)
            self._queue(entry, dst, src, nbytes, stream)
            return True

    def dma_locked(self, owner, host: int, dst: int, src: int, nbytes: int,
                   stream: int) -> bool:
        """Queue the DMA ``src -> dst`` of ``nbytes`` on ``stream`` if its host side ``[host,
        host + nbytes)`` is page-locked: inside a buffer registered here (tracked as every DMA
        of a registration is: a download into it, or bytes reached through an object NumPy
        does not own), or page-locked by someone else (torch's ``pin_memory``, CuPy's pinned
        memory, the user's own ``cudaHostRegister``), as the driver reports. ``owner``: the
        NumPy array owning the bytes, or None (found among the registrations by address).
        False: not queued, the caller copies. The caller waits for ``stream`` before the host
        memory may change or go."""
        end = host + nbytes
        # one hold of the lock: a registration made between the lookup and the driver's
        # answer would otherwise be taken for someone else's, its DMA left untracked
        with self._lock:
            if owner is not None:
                entry = self._entries.get(id(owner))
                if entry is not None and not (entry[0]() is owner and entry[1] <= host
                                              and end <= entry[1] + entry[2]):
                    entry = None
            else:
                # a snapshot: a collection (its callback re-enters the lock) may drop entries
                entry = next((e for e in list(self._entries.values())
                              if e[1] <= host and end <= e[1] + e[2] and e[0]() is not None),
                             None)
            if entry is not None:
                self._queue(entry, dst, src, nbytes, stream)
                return True
            try:
                locked = cuda.page_locked(host, nbytes)
            except (CudaDriverError, CudaUnavailableError):  # the driver cannot tell: copied
                locked = False
            if locked:
                cuda.memcpy_async(dst, src, nbytes, stream)
            return locked

    def _queue(self, entry, dst: int, src: int, nbytes: int, stream: int) -> None:
        """Queue a DMA to or from the registered buffer of ``entry`` and record an event
        after it on ``stream`` (the registration is undone only after it; under the lock)."""
        cuda.memcpy_async(dst, src, nbytes, stream)
        try:
            event = cuda.Event(timing=False).record(stream)
        except BaseException:  # nothing would stand for this DMA: wait for it now
            cuda.settle(stream)
            raise
        events = entry[3]  # on each stream, an event after the last DMA on it there
        events.pop(stream, None)
        events[stream] = event
        while len(events) > self._STREAMS:  # the oldest stream's DMA: long done, surely
            events.pop(next(iter(events))).synchronize()

    def _count(self, owner, key, ptr, size) -> bool:
        """Count an upload of an unregistered buffer; True on the one that registers it, the
        third (the first is recorded as a number, the second as a weak reference, the third
        is the same live array again)."""
        seen = self._sightings
        sk = (key, ptr, size)
        v = seen.pop(sk, 0)
        if v is not None and size <= self.cap and not isinstance(v, int) and v() is owner:
            return True
        if v is None or size > self.cap:  # refused before, or never fits
            seen[sk] = None
        elif v == 1:
            seen[sk] = weakref.ref(owner, self._unseen(sk))
        else:  # new, or a weak reference to a dead array (its callback not run yet)
            seen[sk] = 1
        while len(seen) > self._SIGHTINGS:
            seen.popitem(last=False)
        return False

    def _unseen(self, sk):
        def drop(ref):  # the followed array was collected: forget its uploads
            with self._lock:
                if self._sightings.get(sk) is ref:
                    del self._sightings[sk]

        return drop

    def _register(self, owner, key, ptr, size):
        while self.held + size > self.cap:
            self._unregister_oldest()
        try:
            ok = cuda.host_register(ptr, size)
        except CudaDriverError:
            ok = False
        if not ok:
            self._sightings[(key, ptr, size)] = None  # copied from now on, never asked again
            return None
        self.held += size
        # the device current now: a collection on a thread with no context makes it current
        # to wait and unregister (what an uncurrent thread's driver calls would refuse)
        entry = self._entries[key] = [weakref.ref(owner, self._collected(key)), ptr, size, {},
                                      cuda.current_device()]
        return entry

    def _collected(self, key):
        def drop(_ref):  # runs before NumPy frees the buffer
            try:
                with self._lock:
                    self._forget(key)
            except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone
                pass

        return drop

    def _forget(self, key) -> None:
        """Undo a registration once the last DMA from it is done (under the lock)."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        self.held -= entry[2]
        try:
            if entry[4] is not None and cuda.current_device() is None:
                cuda.set_device(entry[4])
        except CudaDriverError:
            pass
        for event in entry[3].values():  # every stream's last DMA from it done
            try:
                event.synchronize()
            except CudaDriverError:  # e.g. a captured stream's: nothing queued to wait for
                pass
        try:
            cuda.host_unregister(entry[1])
        except CudaDriverError:  # e.g. the context is gone: nothing left to undo
            pass

    def _unregister_oldest(self) -> None:
        for key in list(self._entries):  # a snapshot: a collection may drop entries meanwhile
            if key in self._entries:
                self._forget(key)
                return
        raise AssertionError("held bytes without a registration")  # pragma: no cover


_POOL: list = []  # the process's PinnedPool, made by setup()
_REGISTERED: list = []  # the process's Registrations, made by setup()
_SETUP_LOCK = threading.Lock()


def _limit_bytes(name: str, default_mb: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default_mb << 20
    try:
        mb = int(raw)
    except ValueError:
        mb = -1
    if mb < 0:
        raise InvalidOptionError(f"{name} must be a non-negative integer (MiB), got {raw!r}")
    return mb << 20


def setup() -> None:
    """Make the process's pool and registry from ``CUWEAVE_PINNED_RESULTS_MB`` and
    ``CUWEAVE_PINNED_OPERANDS_MB`` (a bad value raises :class:`InvalidOptionError` naming it);
    the staging calls it when it is first used, before any transfer."""
    if _POOL and _REGISTERED:
        return
    with _SETUP_LOCK:
        if not _POOL:
            _POOL.append(PinnedPool(_limit_bytes("CUWEAVE_PINNED_RESULTS_MB", 256)))
        if not _REGISTERED:
            _REGISTERED.append(Registrations(_limit_bytes("CUWEAVE_PINNED_OPERANDS_MB", 1024)))


def take(nbytes: int) -> np.ndarray | None:
    """:meth:`PinnedPool.take` of the process's pool."""
    setup()
    return _POOL[0].take(nbytes)


def owns(addr: int, nbytes: int) -> bool:
    """:meth:`PinnedPool.owns` of the process's pool."""
    return bool(_POOL) and _POOL[0].owns(addr, nbytes)


def _owner(arr: np.ndarray):
    """The object at the end of ``arr``'s chain of views: the NumPy array owning the bytes, a
    pool block, or a foreign owner (a torch tensor, a mapping, ...)."""
    owner = arr
    while isinstance(owner, np.ndarray) and not owner.flags.owndata and owner.base is not None:
        owner = owner.base
    return owner


def dma_from(arr: np.ndarray, dst: int, stream: int) -> bool:
    """Queue the DMA of the dense host array ``arr``'s bytes (``arr`` a flat view of them) to
    ``dst`` on ``stream`` straight from page-locked memory, where they lie in a pool block, in
    a NumPy buffer registered now (see the module docstring; this counts as an upload of it)
    or in memory page-locked by someone else. False: nothing queued, the caller copies. The
    caller waits for ``stream`` before the array may change or go."""
    nbytes = arr.nbytes
    if nbytes < _MIN:
        return False
    owner, src = _owner(arr), arr.ctypes.data
    if isinstance(owner, _Block):
        cuda.memcpy_async(dst, src, nbytes, stream)
        return True
    setup()
    registrations = _REGISTERED[0]
    if isinstance(owner, np.ndarray) and owner.flags.owndata:
        if registrations.cap > 0 and registrations.dma(owner, 2 * nbytes >= owner.nbytes, dst,
                                                       src, nbytes, stream):
            return True
        known = owner  # not registered here: only the driver can know it page-locked
    else:
        known = None  # torch's or CuPy's memory, a mapping: maybe registered here too
    return registrations.dma_locked(known, src, dst, src, nbytes, stream)


def dma_into(arr: np.ndarray, src: int, stream: int) -> bool:
    """Queue the DMA of ``arr.nbytes`` device bytes at ``src`` into the dense host array
    ``arr`` (a flat view of its bytes) on ``stream`` where ``arr`` lies in page-locked memory
    (a pool block, a buffer registered here, memory page-locked by someone else; a download
    never counts towards registering). False: nothing queued, the caller copies through the
    ring. The caller waits for ``stream``."""
    nbytes, dst = arr.nbytes, arr.ctypes.data
    if owns(dst, nbytes):
        cuda.memcpy_async(dst, src, nbytes, stream)
        return True
    if nbytes < _MIN:
        return False
    setup()
    owner = _owner(arr)
    owned = isinstance(owner, np.ndarray) and owner.flags.owndata
    return _REGISTERED[0].dma_locked(owner if owned else None, dst, dst, src, nbytes, stream)
