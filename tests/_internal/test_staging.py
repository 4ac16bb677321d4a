"""The pinned ring of host transfers (``cuweave._internal.staging``) over a fake CUDA: region
alignment, wrapping, populating download destinations (no GPU needed)."""

from __future__ import annotations

import ctypes
import mmap
import resource
import sys

import numpy as np
import pytest

from cuweave._internal import cuda, staging


class _FakeCuda:
    """Pinned memory is plain host memory; a DMA is queued and runs when an event recorded
    after it is waited for (like a busy device), so the ring's waits are exercised."""

    def __init__(self):
        self.queue = []  # (dst, src, nbytes) in stream order
        self.done = 0
        self.keep = []
        self.bases = []
        self.offsets = []  # (offset in the arena, bytes) of each DMA's host side
        fake = self

        class Event:
            def __init__(self, timing=True):
                self.upto = 0

            def record(self, stream=0):
                self.upto = len(fake.queue)
                return self

            def synchronize(self):
                fake.run_until(self.upto)

        self.Event = Event

    def run_until(self, upto):
        while self.done < upto:
            dst, src, n = self.queue[self.done]
            ctypes.memmove(dst, src, n)
            self.done += 1

    def host_alloc(self, nbytes):
        buf = ctypes.create_string_buffer(nbytes + 4096)  # a page-aligned arena, as the driver's
        base = -(-ctypes.addressof(buf) // 4096) * 4096
        self.keep.append(buf)
        self.bases.append((base, nbytes))
        return base

    def memcpy_async(self, dst, src, nbytes, stream):
        self.queue.append((dst, src, nbytes))
        base, size = self.bases[-1]  # the arena in use when it was queued
        ptr = src if base <= src < base + size else dst
        assert base <= ptr and ptr + nbytes <= base + size, "a piece outside the arena"
        self.offsets.append((ptr - base, nbytes))

    def device(self, nbytes):
        buf = ctypes.create_string_buffer(max(nbytes, 1))
        self.keep.append(buf)
        return ctypes.addressof(buf)



@pytest.fixture
def fake(monkeypatch):
    f = _FakeCuda()
    for name in ("Event", "host_alloc", "memcpy_async"):
        monkeypatch.setattr(cuda, name, getattr(f, name))
    monkeypatch.setattr(cuda, "host_free", lambda ptr: None)
    monkeypatch.setattr(cuda, "page_locked", lambda ptr, nbytes: False)  # all pageable
    return f


def _bytes(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


@pytest.mark.parametrize(("chunk", "align"), [(8192, 4096), (1000, 8), (6144, 2048)])
def test_regions_start_aligned_whatever_the_previous_size(fake, chunk, align):
    st = staging.Stager(chunk=chunk, capacity=8 * chunk, threads=False)
    sizes = [5, 3 * chunk + 1, 17, 2 * chunk, 1]
    srcs = [_bytes(n, n) for n in sizes]
    devs = [fake.device(n) for n in sizes]
    for src, dev in zip(srcs, devs):
        st.upload(src, dev, 0)
    offsets = fake.offsets
    assert len(offsets) == sum(-(-n // chunk) for n in sizes)
    assert all(off % align == 0 for off, _ in offsets)
    outs = [np.zeros(n, np.uint8) for n in sizes]
    for dev, out in zip(devs, outs):
        st.download(dev, out, 0)
    st.close()
    for src, out in zip(srcs, outs):
        assert np.array_equal(src, out)


def test_a_transfer_that_fills_the_arena_wraps_onto_whole_pieces(fake):
    chunk = 8192
    st = staging.Stager(chunk=chunk, capacity=4 * chunk, threads=False)
    st.upload(_bytes(4 * chunk, 0), fake.device(4 * chunk), 0)  # the arena at full size
    st.upload(_bytes(100, 0), fake.device(100), 0)  # leaves the ring one page in
    src = _bytes(4 * chunk, 1)
    dev = fake.device(src.size)
    start = len(fake.queue)
    st.upload(src, dev, 0)
    offsets = fake.offsets[start:]
    # from the next page to the end, then from the start: no piece straddles the end
    assert offsets[0] == (4096, chunk)
    assert [off for off, _ in offsets[3:]] == [0]
    out = np.zeros_like(src)
    st.download(dev, out, 0)
    st.close()
    assert np.array_equal(out, src)


@pytest.mark.parametrize("enabled", [True, False])
def test_threaded_downloads_populate_each_piece_of_the_destination(fake, monkeypatch, enabled):
    monkeypatch.setattr(staging, "_THREAD_MIN", 0)
    monkeypatch.setattr(staging, "_PREFAULT", enabled)
    seen = []
    monkeypatch.setattr(staging, "populate", lambda addr, n: seen.append((addr, n)) or True)
    chunk = 4096
    src = _bytes(3 * chunk + 100, 2)
    dev = fake.device(src.size)
    st = staging.Stager(chunk=chunk, capacity=2 * chunk, threads=True)
    st.upload(src, dev, 0)
    assert seen == []  # uploads read the user's pages: nothing to populate
    out = np.zeros_like(src)
    st.download(dev, out, 0)
    st.close()
    assert np.array_equal(out, src)
    base = out.ctypes.data
    want = [(base + off, min(chunk, src.size - off)) for off in range(0, src.size, chunk)]
    assert sorted(seen) == (want if enabled else [])


def test_inline_downloads_populate_nothing(fake, monkeypatch):
    seen = []
    monkeypatch.setattr(staging, "populate", lambda addr, n: seen.append((addr, n)) or True)
    src = _bytes(5000, 3)
    dev = fake.device(src.size)
    st = staging.Stager(chunk=4096, threads=True)  # below _THREAD_MIN: the calling thread
    st.upload(src, dev, 0)
    out = np.zeros_like(src)
    st.download(dev, out, 0)
    st.close()
    assert np.array_equal(out, src) and seen == []


# ---- populate ---------------------------------------------------------------------------------


def _recording_madvise(monkeypatch, result=0, errno=0):
    calls = []

    def fn(addr, nbytes, advice):
        calls.append((addr, nbytes, advice))
        ctypes.set_errno(errno)
        return result

    monkeypatch.setattr(staging, "_MADVISE", [fn])
    return calls


@pytest.mark.parametrize(("addr", "nbytes", "want"), [
    (4096, 3 * 4096, (4096, 3 * 4096)),
    (4097, 3 * 4096, (8192, 2 * 4096)),  # the partial pages at both ends are left out
    (4095, 4096, None),  # no whole page inside
    (8192, 100, None),
])
def test_populate_covers_the_whole_pages_inside_the_range(monkeypatch, addr, nbytes, want):
    calls = _recording_madvise(monkeypatch)
    done = staging.populate(addr, nbytes)
    if want is None:
        assert calls == [] and not done
    else:
        assert calls == [(*want, 23)] and done


def test_populate_stops_trying_on_a_kernel_without_populate_write(monkeypatch):
    _recording_madvise(monkeypatch, result=-1, errno=22)  # EINVAL
    assert not staging.populate(0, 1 << 20)
    assert staging._MADVISE == [None]
    assert not staging.populate(0, 1 << 20)


def test_populate_failing_on_one_range_keeps_trying_others(monkeypatch):
    calls = _recording_madvise(monkeypatch, result=-1, errno=12)  # ENOMEM: not mapped
    assert not staging.populate(0, 1 << 20)
    assert not staging.populate(0, 1 << 20)
    assert len(calls) == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise is Linux's")
def test_populate_keeps_contents_and_maps_the_pages():
    n = 64 * 4096
    with mmap.mmap(-1, n) as m:  # anonymous, page-aligned, not touched yet
        view = np.frombuffer(m, np.uint8)
        view[:4096] = 7  # one page with contents that must survive
        addr = view.ctypes.data
        done = staging.populate(addr, n)
        assert np.all(view[:4096] == 7) and not view[4096:].any()
        if not done:
            pytest.skip("this kernel has no MADV_POPULATE_WRITE")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        ctypes.memset(addr + 4096, 1, n - 4096)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        del view
    assert faults < 32  # 63 pages were written: without populating, one fault each
