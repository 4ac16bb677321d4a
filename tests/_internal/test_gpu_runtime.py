"""CUDA runtime helpers, allocation from the user's pool, staging, streams (GPU only)."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave._internal import cuda
from cuweave._internal.packages import allocate, resolve_stream
from cuweave._internal.staging import Stager

pytestmark = pytest.mark.gpu


def test_device_queries():
    assert cuda.device_count() >= 1
    major, minor = cuda.compute_capability(0)
    assert major >= 5 and cuda.multiprocessor_count(0) > 0
    assert cuda.total_memory(0) > 2**30 and cuda.device_name(0)


@pytest.mark.parametrize("nbytes", [1, 1000, (8 << 20) + 17, 3 * (8 << 20)])
def test_stager_round_trip(nbytes):
    cuda.set_device(0)
    drv = cuda.driver()
    dptr = cuda.check(drv.cuMemAlloc(nbytes))
    try:
        src = np.random.default_rng(nbytes).integers(0, 255, nbytes, dtype=np.uint8)
        dst = np.zeros_like(src)
        st = Stager(chunk=1 << 20)
        st.upload(src, int(dptr), 0)
        st.download(int(dptr), dst, 0)
        st.close()
        assert np.array_equal(src, dst)
    finally:
        cuda.check(drv.cuMemFree(dptr))


def test_stager_non_contiguous_host_arrays():
    cuda.set_device(0)
    drv = cuda.driver()
    x = np.random.default_rng(0).standard_normal((64, 48))[::2, ::3]
    dptr = cuda.check(drv.cuMemAlloc(x.size * 8))
    try:
        st = Stager()
        st.upload(x, int(dptr), 0)
        out = np.empty((32, 16))
        st.download(int(dptr), out, 0)
        assert np.array_equal(out, np.ascontiguousarray(x))
    finally:
        cuda.check(drv.cuMemFree(dptr))


def test_torch_and_cupy_streams_and_pools():
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    assert resolve_stream(s).ptr == s.cuda_stream
    with torch.cuda.stream(s):
        assert resolve_stream(None, package="torch").ptr == s.cuda_stream
    before = torch.cuda.memory_allocated()
    p = allocate(1 << 20, package="torch", device_id=0, stream=s.cuda_stream)
    assert torch.cuda.memory_allocated() >= before + (1 << 20)  # from torch's pool
    p.free()
    del p
    cp = pytest.importorskip("cupy")
    cs = cp.cuda.Stream()
    assert resolve_stream(cs).ptr == cs.ptr
    with cs:
        assert resolve_stream(None, package="cupy").ptr == cs.ptr
    used = cp.get_default_memory_pool().used_bytes()
    q = allocate(1 << 20, package="cupy", device_id=0, stream=cs.ptr)
    assert cp.get_default_memory_pool().used_bytes() >= used + (1 << 20)
    q.free()


def test_cupy_stream_context_is_the_stream_and_warns_of_nothing():
    """An allocation ordered on a CuPy stream that is not current goes through CuPy's stream
    protocol (CuPy 14 deprecates ExternalStream); the stream made current is that stream."""
    import warnings

    cp = pytest.importorskip("cupy")
    from cuweave._internal.packages import CUPY

    cs = cp.cuda.Stream(non_blocking=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        ctx = CUPY.stream_context(cs.ptr, 0)
        with ctx:
            assert cp.cuda.get_current_stream().ptr == cs.ptr
        q = allocate(1 << 20, package="cupy", device_id=0, stream=cs.ptr)
    q.free()
    cs.synchronize()  # the wrapping stream did not destroy the user's stream
    assert cp.cuda.get_current_stream().ptr != cs.ptr


def test_docstring_cupy_allocator_allocates_on_the_stream():
    """cuweave.memory's example allocator: the workspace comes through it, ordered on the
    stream it is handed (made current by Stream.from_external); results of CuPy operands
    come from CuPy's pool, as nvmath-python's do (H200 2026-12-02: one workspace of 1 MiB,
    handed stream 0 at plan time; the first run on the user's stream waits for it)."""
    cp = pytest.importorskip("cupy")
    from cuweave.linalg.advanced import matmul
    from cuweave.memory import BaseCUDAMemoryManagerAsync

    seen = []

    class CupyAllocator(BaseCUDAMemoryManagerAsync):  # as in cuweave.memory's docstring
        def memalloc_async(self, size, stream):
            with cp.cuda.Stream.from_external(stream):
                seen.append((int(stream.handle), cp.cuda.get_current_stream().ptr))
                return cp.cuda.alloc(size)

    if not hasattr(cp.cuda.Stream, "from_external"):
        pytest.skip("CuPy < 14 has no Stream.from_external")
    cs = cp.cuda.Stream(non_blocking=True)
    with cs:
        a = cp.arange(256 * 256, dtype=cp.float32).reshape(256, 256) / 65536
        out = matmul(a, a, options={"allocator": CupyAllocator(0, None)})
        assert cp.allclose(out, a @ a, rtol=1e-5)
    assert seen and all(handle == current for handle, current in seen)


def test_cuda_core_stream_and_default_pool():
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    assert resolve_stream(s).ptr == int(s.handle)
    p = allocate(4096, package=None, device_id=0, stream=int(s.handle))
    src = np.arange(512, dtype=np.float64)  # must outlive the asynchronous copy
    cuda.memcpy_async(p.device_ptr, src.ctypes.data, 4096, int(s.handle))
    cuda.synchronize(int(s.handle))
    out = np.zeros(512)
    cuda.memcpy(out.ctypes.data, p.device_ptr, 4096)
    assert np.array_equal(out, np.arange(512))
    p.free()


def test_events_time_work():
    start, end = cuda.Event(), cuda.Event()
    start.record(0)
    end.record(0)
    end.synchronize()
    assert start.elapsed_ms(end) >= 0.0


def test_torch_stream_zero_is_torchs_default_stream():
    """Stream handle 0 (what cuBLASLt and cuFFT get for torch's default stream) is run on as
    torch's default stream, also while another stream is current: torch's ExternalStream(0)
    would be a different stream."""
    torch = pytest.importorskip("torch")
    from cuweave._internal.packages import TORCH

    seen = []
    side = torch.cuda.Stream()
    for ctx in (None, side):
        if ctx is None:
            TORCH.on_stream(0, 0, lambda: seen.append(torch.cuda.current_stream().cuda_stream))
        else:
            with torch.cuda.stream(ctx):
                TORCH.on_stream(0, 0, lambda: seen.append(
                    torch.cuda.current_stream().cuda_stream))
    assert seen == [0, 0]
