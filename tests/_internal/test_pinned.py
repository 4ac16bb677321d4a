"""The pool of page-locked result blocks (``cuweave._internal.pinned``) over a fake CUDA, and
downloads into its blocks (the DMA alone, no copy out of the ring). No GPU needed."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from cuweave._internal import cuda, pinned, staging

MiB = 1 << 20


class _FakeHost:
    """Page-locked memory is plain host memory; a DMA runs when an event after it is waited
    for. Records allocations, frees and DMAs."""

    def __init__(self):
        self.allocs, self.frees, self.dmas, self.queue = [], [], [], []
        self._keep = {}
        fake = self

        class Event:
            def __init__(self, timing=True):
                self.upto = 0

            def record(self, stream=0):
                self.upto = len(fake.queue)
                return self

            def synchronize(self):
                while fake.queue[:self.upto]:
                    dst, src, n = fake.queue.pop(0)
                    ctypes.memmove(dst, src, n)
                    self.upto -= 1

        self.Event = Event

    def host_alloc(self, nbytes):
        buf = ctypes.create_string_buffer(nbytes)
        ptr = ctypes.addressof(buf)
        self._keep[ptr] = buf
        self.allocs.append(nbytes)
        return ptr

    def host_free(self, ptr):
        self.frees.append(ptr)

    def memcpy_async(self, dst, src, nbytes, stream):
        self.dmas.append((dst, src, nbytes))
        self.queue.append((dst, src, nbytes))


@pytest.fixture
def fake(monkeypatch):
    f = _FakeHost()
    for name in ("Event", "host_alloc", "host_free", "memcpy_async"):
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
