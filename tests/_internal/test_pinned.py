"""The pool of page-locked result blocks (``cuweave._internal.pinned``) over a fake CUDA, and
downloads into its blocks (the DMA alone, no copy out of the ring). No GPU needed."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from cuweave._internal import cuda, pinned, staging
from cuweave._internal.errors import CudaDriverError, InvalidOptionError
from tests._internal.test_staging import _FakeCuda

MiB = 1 << 20


class _FakeHost(_FakeCuda):
    """test_staging's fake CUDA (a DMA runs when an event after it is waited for), with DMAs
    anywhere (not only through the ring) and records of allocations, frees, registrations."""

    def __init__(self):
        super().__init__()
        self.allocs, self.frees, self.dmas = [], [], []
        self.registered, self.unregistered, self.refuse = [], [], False
        self.locked, self.queries = [], []  # page-locked ranges (ptr, nbytes); driver queries
        self.device = 0

    def host_alloc(self, nbytes):
        self.allocs.append(nbytes)
        return super().host_alloc(nbytes)

    def memcpy_async(self, dst, src, nbytes, stream):
        self.dmas.append((dst, src, nbytes))
        self.queue.append((dst, src, nbytes))

    def host_free(self, ptr):
        self.frees.append(ptr)

    def host_register(self, ptr, nbytes):
        if self.refuse:
            return False
        self.registered.append((ptr, nbytes))
        self.locked.append((ptr, nbytes))
        return True

    def host_unregister(self, ptr):
        self.unregistered.append(ptr)
        self.locked[:] = [(p, n) for p, n in self.locked if p != ptr]

    def page_locked(self, ptr, nbytes):  # in one range registered here or "by someone else"
        self.queries.append(ptr)
        return any(p <= ptr and ptr + nbytes <= p + n for p, n in self.locked)

    def current_device(self):  # None: this thread has no current context
        return self.device

    def set_device(self, device_id):
        self.device = device_id


@pytest.fixture
def fake(monkeypatch):
    f = _FakeHost()
    for name in ("Event", "host_alloc", "host_free", "memcpy_async", "host_register",
                 "host_unregister", "current_device", "set_device", "page_locked"):
        monkeypatch.setattr(cuda, name, getattr(f, name))
    return f


def test_small_results_and_first_requests_get_no_block(fake):
    pool = pinned.PinnedPool(64 * MiB)
    assert pool.take(MiB - 1) is None  # below the minimum: never
    assert pool.take(3 * MiB) is None  # a size class asked for the first time
    x = pool.take(3 * MiB - 5)  # the same class (3 MiB) again: a block
    assert x is not None and x.dtype == np.uint8 and x.shape == (3 * MiB - 5,)
    assert fake.allocs == [3 * MiB] and pool.held == 3 * MiB
    assert pool.owns(x.ctypes.data, x.nbytes) and not pool.owns(x.ctypes.data + 1, 8)


def test_a_dropped_result_gives_its_block_back_for_reuse(fake):
    pool = pinned.PinnedPool(64 * MiB)
    pool.take(2 * MiB)
    x = pool.take(2 * MiB)
    view = x.view(np.float32).reshape(512, 1024).T  # views keep the block alive
    addr = x.ctypes.data
    del x
    gc.collect()
    assert pool.owns(addr, 2 * MiB) and pool.take(2 * MiB).ctypes.data != addr  # still held
    view[...] = 1.0
    del view
    gc.collect()
    y = pool.take(2 * MiB)
    assert y.ctypes.data == addr and len(fake.allocs) == 2  # reused, not allocated again


def test_the_cap_releases_free_blocks_then_refuses(fake):
    pool = pinned.PinnedPool(5 * MiB)
    for n in (2, 3):
        pool.take(n * MiB)
    a = pool.take(2 * MiB)
    b = pool.take(3 * MiB)
    assert pool.held == 5 * MiB
    pool.take(4 * MiB)
    assert pool.take(4 * MiB) is None  # over the cap, nothing free to release
    a_addr = a.ctypes.data
    del a, b
    gc.collect()
    c = pool.take(4 * MiB)  # the free 2 and 3 MiB blocks are released for it
    assert c is not None and sorted(fake.frees) == sorted([a_addr, fake.frees[1]])
    assert len(fake.frees) == 2 and pool.held == 4 * MiB


def test_a_block_dropped_while_the_pool_is_busy_is_filed_later(fake):
    pool = pinned.PinnedPool(64 * MiB)
    pool.take(2 * MiB)
    x = pool.take(2 * MiB)
    addr = x.ctypes.data
    with pool._lock:  # as if the garbage collector dropped it inside take: no deadlock
        del x
        gc.collect()
    assert pool.take(2 * MiB).ctypes.data == addr


def test_a_result_larger_than_the_cap_empties_nothing(fake):
    pool = pinned.PinnedPool(8 * MiB)
    pool.take(4 * MiB)
    x = pool.take(4 * MiB)
    del x
    gc.collect()
    for _ in range(4):  # e.g. a big FFT result and a small matmul result in one loop
        assert pool.take(16 * MiB) is None
        y = pool.take(4 * MiB)
        del y
        gc.collect()
    assert fake.frees == [] and len(fake.allocs) == 1


def test_a_result_that_cannot_fit_beside_live_blocks_empties_nothing(fake):
    pool = pinned.PinnedPool(8 * MiB)
    pool.take(4 * MiB)
    live = pool.take(4 * MiB)  # kept by the user
    pool.take(2 * MiB)
    y = pool.take(2 * MiB)
    del y
    gc.collect()  # a free 2 MiB block; 6 MiB held
    pool.take(6 * MiB)  # the 6 MiB class's first request
    for _ in range(4):
        assert pool.take(6 * MiB) is None  # 4 live + 6 > 8 even with nothing free
        y = pool.take(2 * MiB)
        del y
        gc.collect()
    assert fake.frees == [] and len(fake.allocs) == 2 and live is not None


def test_a_zero_cap_turns_the_pool_off(fake):
    pool = pinned.PinnedPool(0)
    assert pool.take(4 * MiB) is None and pool.take(4 * MiB) is None
    assert fake.allocs == []


def test_a_download_into_a_block_is_one_dma(fake, monkeypatch):
    pool = pinned.PinnedPool(64 * MiB)
    monkeypatch.setattr(pinned, "_POOL", [pool])
    pool.take(2 * MiB)
    dst = pool.take(2 * MiB)
    src = np.random.default_rng(0).integers(0, 256, 2 * MiB, dtype=np.uint8)
    st = staging.Stager(chunk=MiB // 4, capacity=MiB)
    st.download(src.ctypes.data, dst, 0)
    assert fake.dmas == [(dst.ctypes.data, src.ctypes.data, 2 * MiB)]
    assert np.array_equal(dst, src)
    plain = np.empty(2 * MiB, np.uint8)  # an ordinary array: pieces through the ring
    st.download(src.ctypes.data, plain, 0)
    assert len(fake.dmas) == 1 + 8 and np.array_equal(plain, src)
    st.close()


# ---- operands: registered on their third upload -------------------------------------------------
@pytest.fixture
def regs(fake, monkeypatch):
    r = pinned.Registrations(64 * MiB)
    monkeypatch.setattr(pinned, "_REGISTERED", [r])
    return r


_DEVICE: list = []  # device buffers (plain host memory here) the direct uploads write


@pytest.fixture(autouse=True)
def _forget_device_buffers():
    """Each test's destinations go with it (they held their memory for the whole run)."""
    yield
    _DEVICE.clear()


def _dma(arr):
    """One direct upload attempt of ``arr`` (as a flat uint8 view): whether it was queued."""
    _DEVICE.append(ctypes.create_string_buffer(arr.nbytes))
    return pinned.dma_from(arr.reshape(-1).view(np.uint8), ctypes.addressof(_DEVICE[-1]), 0)


def test_a_buffer_is_registered_on_its_third_upload(fake, regs):
    a = np.ones((1024, 512), np.float32)  # 2 MiB
    assert not _dma(a) and not _dma(a) and fake.registered == [] and fake.dmas == []
    assert _dma(a)  # a view of it: the same buffer
    assert fake.registered == [(a.ctypes.data, a.nbytes)] and regs.held == a.nbytes
    assert _dma(a) and len(fake.registered) == 1  # once
    assert [src for _dst, src, _n in fake.dmas] == [a.ctypes.data] * 2
    assert not _dma(a[:, :0])  # empty: below the minimum


def test_one_upload_leaves_the_array_resizable(fake, regs):
    a = np.ones(MiB, np.float32)
    assert not _dma(a)
    a.resize(2 * MiB, refcheck=False)  # no weak reference before its second upload
    assert a.shape == (2 * MiB,)


def test_new_arrays_at_a_dead_ones_address_are_never_registered_for_it(fake, regs):
    for i in range(9):  # a new array each time (CPython reuses the id and the address)
        a = np.full(2 * MiB, i, np.uint8)
        assert not _dma(a)
        del a
        gc.collect()
    x = np.ones((2048, 1024), np.float32)[:, ::2]  # not dense: a new dense copy per upload
    dev = ctypes.create_string_buffer(x.nbytes)
    st = staging.Stager(chunk=MiB // 2, capacity=MiB)
    for _ in range(6):
        st.upload_many([(x, ctypes.addressof(dev))], 0, direct=True)
        st._drain_busy()
        fake.Event().record().synchronize()
    st.close()
    assert fake.registered == []


def test_counted_buffers_stay_bounded(fake, monkeypatch):
    r = pinned.Registrations(MiB)  # every 2 MiB buffer is over the cap: never counted
    monkeypatch.setattr(pinned, "_REGISTERED", [r])
    keep = [np.zeros(2 * MiB, np.uint8) for _ in range(r._SIGHTINGS + 88)]  # pages untouched
    # one destination for all: no DMA is queued from a buffer over the cap (600 destinations
    # of their own held 1.2 GB for the rest of the test run)
    dst = ctypes.create_string_buffer(2 * MiB)
    for x in keep:
        assert not pinned.dma_from(x.reshape(-1).view(np.uint8), ctypes.addressof(dst), 0)
    assert len(r._sightings) <= r._SIGHTINGS


def test_a_failed_event_wait_still_undoes_the_registration(fake, regs, monkeypatch):
    a = np.ones(MiB, np.float32)
    for _ in range(3):
        _dma(a)

    def fail(self):
        raise CudaDriverError(906, "cuEventSynchronize", name="CUDA_ERROR_CAPTURED_EVENT")

    monkeypatch.setattr(fake.Event, "synchronize", fail)
    ptr = a.ctypes.data
    del a
    gc.collect()
    assert regs.held == 0 and fake.unregistered == [ptr]


def test_an_event_failure_after_a_dma_waits_for_it(fake, regs, monkeypatch):
    a = np.ones(MiB, np.float32)
    for _ in range(3):
        _dma(a)
    synced = []
    monkeypatch.setattr(cuda, "synchronize", lambda s: synced.append(s) or fake.run_until(
        len(fake.queue)))

    def fail(*args, **kw):
        raise CudaDriverError(2, "cuEventCreate", name="CUDA_ERROR_OUT_OF_MEMORY")

    monkeypatch.setattr(cuda, "Event", fail)
    with pytest.raises(CudaDriverError):
        _dma(a)
    assert synced == [0] and fake.done == len(fake.queue)  # no DMA left without an event


def test_a_small_view_never_locks_its_large_owner(fake, regs):
    big = np.zeros(32 * MiB, np.uint8)
    for i in range(4):
        assert not _dma(big[i * MiB:(i + 1) * MiB])
    assert fake.registered == [] and regs.held == 0
    half = big[:16 * MiB]
    assert [_dma(half) for _ in range(3)] == [False, False, True]  # half of it counts
    assert fake.registered == [(big.ctypes.data, big.nbytes)]


def test_a_collected_owner_is_unregistered_after_its_dma_before_its_memory_goes(fake, regs,
                                                                                 monkeypatch):
    a = np.ones(MiB, np.float32)
    ptr = a.ctypes.data
    for _ in range(3):
        _dma(a)
    assert regs.held == a.nbytes and len(fake.queue) > fake.done  # its DMA still queued
    seen = []

    def unregister(p):  # the DMA must be done and the buffer still readable by now
        seen.append((fake.done == len(fake.queue), ctypes.c_float.from_address(ptr).value))
        fake.unregistered.append(p)

    monkeypatch.setattr(cuda, "host_unregister", unregister)
    del a
    gc.collect()
    assert fake.unregistered == [ptr] and seen == [(True, 1.0)] and regs.held == 0


def test_eviction_waits_for_the_dma_of_the_buffer_it_unlocks(fake, monkeypatch):
    monkeypatch.setattr(pinned, "_REGISTERED", [pinned.Registrations(3 * MiB)])
    a = np.full(2 * MiB, 1, np.uint8)
    b = np.full(2 * MiB, 2, np.uint8)
    dev = [ctypes.create_string_buffer(2 * MiB) for _ in range(2)]
    in_flight = []

    def unregister(ptr):  # a queued, not yet run, DMA reading [ptr, ptr + 2 MiB)?
        in_flight.extend(q for q in fake.queue[fake.done:] if ptr <= q[1] < ptr + 2 * MiB)
        fake.unregistered.append(ptr)

    monkeypatch.setattr(cuda, "host_unregister", unregister)
    st = staging.Stager(chunk=MiB // 2, capacity=MiB)
    for _ in range(3):  # the third registers a, then b (which evicts a, its DMA queued)
        st.upload_many([(a, ctypes.addressof(dev[0])), (b, ctypes.addressof(dev[1]))], 0,
                       direct=True)
        st._drain_busy()
        fake.Event().record().synchronize()
    st.close()
    assert fake.unregistered == [a.ctypes.data] and in_flight == []
    assert bytes(dev[0]) == a.tobytes() and bytes(dev[1]) == b.tobytes()


def test_registrations_stay_under_the_cap_least_recently_used_first(fake, regs):
    arrays = [np.zeros(24 * MiB, np.uint8) for _ in range(3)]  # 72 MiB > 64
    for x in arrays[:2]:
        for _ in range(3):
            _dma(x)
    _dma(arrays[0])  # used again: arrays[1] is now the oldest
    assert [_dma(arrays[2]) for _ in range(3)] == [False, False, True]
    assert fake.unregistered == [arrays[1].ctypes.data] and regs.held == 48 * MiB


def test_refused_and_foreign_memory_is_copied(fake, regs):
    fake.refuse = True
    a = np.ones(MiB, np.float32)
    assert not any(_dma(a) for _ in range(3))
    fake.refuse = False
    assert not _dma(a)  # refused once: never asked again
    raw = bytearray(4 * MiB)
    b = np.frombuffer(raw, np.float32)  # memory NumPy does not own
    assert not any(_dma(b) for _ in range(3))
    assert fake.registered == []


def test_memory_page_locked_by_someone_else_is_dma_ed_never_registered(fake, regs):
    raw = bytearray(4 * MiB)
    foreign = np.frombuffer(raw, np.float32)  # e.g. a pinned torch tensor's bytes
    fake.locked.append((foreign.ctypes.data, foreign.nbytes))  # cudaHostAlloc'd elsewhere
    assert _dma(foreign) and _dma(foreign[MiB // 4:])  # every upload, the first one too
    owned = np.ones(MiB, np.float32)  # a NumPy buffer its owner registered itself
    fake.locked.append((owned.ctypes.data, owned.nbytes))
    fake.refuse = True  # (the driver refuses to register a page twice)
    assert all(_dma(owned) for _ in range(4))
    assert fake.registered == [] and regs.held == 0
    src = [q[1] for q in fake.dmas]
    assert src == [foreign.ctypes.data, foreign.ctypes.data + MiB] + [owned.ctypes.data] * 4
    half = np.ones(2 * MiB, np.uint8)  # locked at its start only: not all of it
    fake.locked.append((half.ctypes.data, MiB))
    assert not _dma(half[:2 * MiB - 8])
    two = np.ones(4 * MiB, np.uint8)  # both ends locked, in two allocations: pageable between
    fake.locked += [(two.ctypes.data, MiB), (two.ctypes.data + 3 * MiB, MiB)]
    assert not _dma(two[8:])


@pytest.mark.parametrize("direction", ["upload", "download"])
def test_a_registration_made_during_the_driver_query_is_never_taken_for_foreign(
        fake, regs, monkeypatch, direction):
    """Another thread's third upload of the same array (a shared weight) while this one asks
    the driver whether the array is page-locked: it waits for the lookup and the query, so
    this thread's DMA is either tracked by the registration or made before it exists."""
    import threading

    a = np.ones(2 * MiB, np.uint8)
    _dma(a), _dma(a)  # counted twice: the next upload registers it
    other, real = [], fake.page_locked

    def page_locked(ptr, nbytes):  # the other thread starts in the window the lock covers
        if not other:
            other.append(threading.Thread(target=lambda: _dma(a)))
            other[0].start()
            other[0].join(timeout=0.2)  # it cannot register now: it waits for the lock
        return real(ptr, nbytes)

    monkeypatch.setattr(cuda, "page_locked", page_locked)
    if direction == "upload":  # its bytes through an owner that is not an ndarray
        view = np.ctypeslib.as_array((ctypes.c_uint8 * a.nbytes).from_address(a.ctypes.data))
        queued = _dma(view)
    else:
        dev = ctypes.create_string_buffer(b"\x07" * (2 * MiB), 2 * MiB)
        queued = pinned.dma_into(a, ctypes.addressof(dev), 0)
    other[0].join()
    assert not queued and regs.held == a.nbytes  # pageable when asked; registered after
    pending = []

    def unregister(ptr):  # a DMA of a still queued when it is unlocked?
        pending.extend(q for q in fake.queue[fake.done:]
                       if a.ctypes.data <= q[0] < a.ctypes.data + a.nbytes
                       or a.ctypes.data <= q[1] < a.ctypes.data + a.nbytes)
        fake.unregistered.append(ptr)

    monkeypatch.setattr(cuda, "host_unregister", unregister)
    regs._unregister_oldest()
    assert pending == [] and fake.unregistered == [a.ctypes.data]


def test_downloads_into_page_locked_memory_are_one_dma(fake, regs):
    st = staging.Stager(chunk=MiB // 4, capacity=MiB)
    src = np.random.default_rng(1).integers(0, 256, 2 * MiB, dtype=np.uint8)
    raw = bytearray(2 * MiB)
    foreign = np.frombuffer(raw, np.uint8)  # writable memory NumPy does not own
    fake.locked.append((foreign.ctypes.data, foreign.nbytes))
    st.download(src.ctypes.data, foreign, 0)
    assert fake.dmas == [(foreign.ctypes.data, src.ctypes.data, 2 * MiB)]
    assert np.array_equal(foreign, src)
    target = np.zeros(2 * MiB, np.uint8)  # an in-place target registered by its uploads
    for _ in range(3):
        _dma(target)
    fake.dmas.clear()
    st.download(src.ctypes.data, target.reshape(1024, -1)[:, :].reshape(-1), 0)
    assert fake.dmas == [(target.ctypes.data, src.ctypes.data, 2 * MiB)]
    assert np.array_equal(target, src) and fake.registered == [(target.ctypes.data, 2 * MiB)]
    plain = np.zeros(2 * MiB, np.uint8)  # pageable: pieces through the ring, as before
    fake.dmas.clear()
    st.download(src.ctypes.data, plain, 0)
    assert len(fake.dmas) == 8 and np.array_equal(plain, src)
    st.close()


def test_a_download_into_a_registered_buffer_delays_its_unregistering(fake, regs,
                                                                      monkeypatch):
    target = np.zeros(2 * MiB, np.uint8)
    for _ in range(3):
        _dma(target)
    fake.Event().record().synchronize()  # the uploads done
    dev = ctypes.create_string_buffer(b"\x07" * (2 * MiB), 2 * MiB)
    assert pinned.dma_into(target, ctypes.addressof(dev), 0)  # queued, not run
    pending = []

    def unregister(ptr):  # the download still queued when its buffer is unlocked?
        pending.extend(q for q in fake.queue[fake.done:] if q[0] == ptr)
        fake.unregistered.append(ptr)

    monkeypatch.setattr(cuda, "host_unregister", unregister)
    regs._unregister_oldest()
    assert pending == [] and fake.unregistered == [target.ctypes.data]
    assert (target == 7).all()


def test_bytes_of_a_registered_buffer_reached_through_another_owner_are_tracked(fake, regs):
    a = np.zeros(2 * MiB, np.uint8)
    for _ in range(3):
        _dma(a)
    fake.queries.clear()
    # the same bytes through an owner that is not an ndarray (as torch.from_numpy(a).numpy())
    view = np.ctypeslib.as_array((ctypes.c_uint8 * (2 * MiB)).from_address(a.ctypes.data))
    assert _dma(view)  # found among the registrations by its address
    entry = regs._entries[id(a)]
    assert 0 in entry[3]  # the DMA's event is the registration's: unregistering waits for it
    assert fake.queries == []  # no driver query needed


def test_pool_blocks_are_dma_ed_and_a_zero_cap_registers_nothing(fake, monkeypatch):
    pool = pinned.PinnedPool(64 * MiB)
    monkeypatch.setattr(pinned, "_POOL", [pool])
    monkeypatch.setattr(pinned, "_REGISTERED", [pinned.Registrations(0)])
    pool.take(2 * MiB)
    block = pool.take(2 * MiB)
    assert _dma(block.view(np.float64)[10:])
    a = np.ones(MiB, np.float32)
    assert not any(_dma(a) for _ in range(3)) and fake.registered == []


def test_direct_uploads_dma_page_locked_arrays_and_pipeline_the_rest(fake, regs):
    a = np.arange(MiB // 4, dtype=np.float32)  # 1 MiB
    b = np.arange(MiB // 2, dtype=np.float32)[::-1].copy()
    dev = [ctypes.create_string_buffer(x.nbytes) for x in (a, b)]
    st = staging.Stager(chunk=MiB // 2, capacity=MiB)
    for direct in (False, True, True, True):
        fake.dmas.clear()
        st.upload_many([(a, ctypes.addressof(dev[0])), (b, ctypes.addressof(dev[1]))], 0,
                       direct=direct)
        st._drain_busy()
        fake.Event().record().synchronize()
    # the last upload: a and b registered (their third direct upload), DMA-ed directly
    assert fake.dmas == [(ctypes.addressof(dev[0]), a.ctypes.data, a.nbytes),
                         (ctypes.addressof(dev[1]), b.ctypes.data, b.nbytes)]
    assert bytes(dev[0]) == a.tobytes() and bytes(dev[1]) == b.tobytes()
    st.close()


def test_driver_failures_fall_back_to_ordinary_copies(fake, regs, monkeypatch):
    def fail(*args):
        raise CudaDriverError(2, "cuMemHostAlloc", name="CUDA_ERROR_OUT_OF_MEMORY")

    monkeypatch.setattr(cuda, "host_alloc", fail)
    monkeypatch.setattr(cuda, "host_register", fail)
    pool = pinned.PinnedPool(64 * MiB)
    assert pool.take(2 * MiB) is None and pool.take(2 * MiB) is None and pool.held == 0
    a = np.ones(MiB, np.float32)
    assert not any(_dma(a) for _ in range(4)) and regs.held == 0


def test_undoing_a_registration_waits_for_its_dma_on_every_stream(fake, regs, monkeypatch):
    a = np.ones(MiB, np.float32)
    flat = a.reshape(-1).view(np.uint8)
    dev = ctypes.create_string_buffer(a.nbytes)
    for stream in (1, 1, 1, 2):  # registered on the third; then a DMA on another stream
        pinned.dma_from(flat, ctypes.addressof(dev), stream)
    waited = []
    event_sync = fake.Event.synchronize

    def synchronize(ev):
        waited.append(ev.upto)
        event_sync(ev)

    monkeypatch.setattr(fake.Event, "synchronize", synchronize)
    del a, flat
    gc.collect()
    assert sorted(waited) == [1, 2] and len(fake.unregistered) == 1  # both streams' events


def test_a_collection_on_a_thread_without_a_context_makes_the_device_current(fake, regs):
    a = np.ones(MiB, np.float32)
    for _ in range(3):
        _dma(a)
    fake.device = None  # as on a thread that never touched CUDA
    del a
    gc.collect()
    assert fake.device == 0 and len(fake.unregistered) == 1


@pytest.mark.parametrize("value", ["lots", "-1", "1.5"])
def test_a_bad_limit_is_a_typed_error_at_the_staging_s_first_use(monkeypatch, value):
    monkeypatch.setenv("CUWEAVE_PINNED_OPERANDS_MB", value)
    monkeypatch.setattr(pinned, "_POOL", [])
    monkeypatch.setattr(pinned, "_REGISTERED", [])
    monkeypatch.setattr(staging, "_SHARED", [])
    with pytest.raises(InvalidOptionError, match=r"^CUWEAVE_PINNED_OPERANDS_MB must be a "
                                                 r"non-negative integer \(MiB\), got "):
        staging.shared_stager()  # before any transfer (plan time for matmul)
    assert staging._SHARED == [] and isinstance(InvalidOptionError("x"), ValueError)


def test_the_limits_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("CUWEAVE_PINNED_RESULTS_MB", "0")
    monkeypatch.setenv("CUWEAVE_PINNED_OPERANDS_MB", "3")
    monkeypatch.setattr(pinned, "_POOL", [])
    monkeypatch.setattr(pinned, "_REGISTERED", [])
    pinned.setup()
    assert pinned._POOL[0].cap == 0 and pinned._REGISTERED[0].cap == 3 * MiB
    assert pinned.take(4 * MiB) is None  # off
