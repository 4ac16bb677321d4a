"""CUDA graph capture of planned objects: ``Matmul.execute`` and ``FFT.execute`` captured by
``torch.cuda.graph``, CuPy's stream capture and cuda.core's graph builder, replayed with new data
written into the same input buffers.

The CPU tests hold the rules that make capture possible to the recording fakes: the FFT work
area and input copy are allocated at plan time, and a run on a capturing stream records,
waits and allocates nothing. The GPU tests (``-m gpu``) capture and replay for real.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.references import rel_l2

# ---- the rules, under the recording fakes (CPU) ------------------------------------------------


def test_matmul_run_on_a_capturing_stream_orders_nothing(monkeypatch):
    from cuweave.linalg.advanced import Matmul
    from cuweave.linalg.advanced._function import plan_cache
    from tests.fakes.cublaslt import FakeGPU

    gpu = FakeGPU().install(monkeypatch)
    try:
        a, b = gpu.tensor(64, 32), gpu.tensor(32, 48)
        allocs = []
        real_alloc = gpu._alloc
        monkeypatch.setattr("cuweave._internal.resources.allocate",
                            lambda n, **kw: allocs.append(n) or real_alloc(n, **kw))
        mm = Matmul(a, b)
        mm.plan(stream=0)  # the workspace: allocated now, on stream 0
        n_alloc, n_wait = len(allocs), len(gpu.waits)
        gpu.capturing.add(7)
        mm.execute(stream=7)  # captured: no event on stream 0, no wait, no allocation
        mm.execute(stream=7)
        assert len(gpu.matmul_calls) == 2 and gpu.matmul_calls[-1][15] == 7
        assert (len(allocs), len(gpu.waits)) == (n_alloc, n_wait)
        gpu.capturing.clear()  # the capture ended: an eager run on 7 is ordered after 0
        mm.execute(stream=7)
        assert gpu.waits[n_wait:] == [(7, 0)]
        mm.free()
    finally:
        plan_cache.clear()


@pytest.mark.parametrize("kind", ["C2C", "C2R"])
def test_fft_buffers_are_allocated_at_plan_time_and_capture_orders_nothing(monkeypatch, kind):
    torch = pytest.importorskip("torch")
    import cuweave.fft as F
    from tests.fakes.cufft import fake_cuda

    with fake_cuda() as fake:
        fake.workspace = 4096
        dtype = torch.complex64
        x = torch.zeros(8, 33 if kind == "C2R" else 64, dtype=dtype)
        f = F.FFT(x, axes=[1], options={"fft_type": kind})
        f.plan()
        allocs = [e for e in fake.log if e[0] == "alloc"]
        # the work area, and for C2R the copy of the input cuFFT overwrites
        assert len(allocs) == (2 if kind == "C2R" else 1)
        assert fake.calls["cufftSetWorkArea"] == 1
        n = len(fake.log)
        fake.stream = 9  # torch's current stream: capturing
        fake.capturing.add(9)
        f.execute()
        f.execute()
        kinds = [e[0] for e in fake.log[n:]]
        assert "alloc" not in kinds and "record" not in kinds and "wait" not in kinds
        assert len(fake.execs) == 2 and fake.set_streams[-1][1] == 9
        fake.capturing.clear()
        f.execute()  # after the capture: ordered after the plan's stream again
        assert [e[0] for e in fake.log[n:]].count("wait") == 1
        f.free()


# ---- the GPU: capture, write new inputs, replay --------------------------------------------------
APIS = ["torch", "cupy", "cuda.core"]


def _packages(api):
    """(array package, capture API): cuda.core captures CuPy operands."""
    if api == "torch":
        return pytest.importorskip("torch")
    return pytest.importorskip("cupy")


def _randn(xp, shape, dtype, seed, hermitian=False):
    """Random data on the device; ``hermitian``: the half spectrum of real data (a C2R
    input whose result is defined), ``shape`` its half-spectrum shape."""
    rng = np.random.default_rng(seed)
    if hermitian:
        n = 2 * (shape[-1] - 1)
        host = np.fft.rfft(rng.standard_normal(shape[:-1] + (n,)), axis=-1)
    else:
        host = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            host = host + 1j * rng.standard_normal(shape)
    host = host.astype(dtype)
    if xp.__name__ == "torch":
        return xp.from_numpy(host).cuda()
    return xp.asarray(host)


def _host(x):
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return x.get()


def _write(dst, src) -> None:
    """New data into the captured input buffer (same memory)."""
    if hasattr(dst, "copy_"):
        dst.copy_(src)
    else:
        dst[...] = src


def _device_sync(xp) -> None:
    if xp.__name__ == "torch":
        xp.cuda.synchronize()
    else:
        xp.cuda.Device().synchronize()


def _capture(api, xp, fn):
    """Capture ``fn(stream)`` (``stream`` None: the package's current stream is the capturing
    one); returns ``(what fn returned, replay)``. Data written before a replay is ordered by
    a device synchronization in the tests."""
    if api == "torch":
        g = xp.cuda.CUDAGraph()
        with xp.cuda.graph(g):
            out = fn(None)
        return out, lambda: (g.replay(), xp.cuda.synchronize())
    if api == "cupy":
        s = xp.cuda.Stream(non_blocking=True)
        with s:
            s.begin_capture()
            try:
                out = fn(None)
            finally:
                g = s.end_capture()
        return out, lambda: (g.launch(s), s.synchronize())
    from cuda.core import Device

    dev = Device()
    dev.set_current()
    st = dev.create_stream()
    gb = st.create_graph_builder()
    gb.begin_building()
    try:
        out = fn(gb)
    finally:
        gb.end_building()
    graph = gb.complete()
    return out, lambda: (graph.launch(st), st.sync())


def _warm(mode, xp, fn) -> None:
    """Before capture: nothing (planned objects need no warm-up run), or one eager run on
    another stream than the capturing one."""
    if mode == "none":
        return
    if xp.__name__ == "torch":
        side = xp.cuda.Stream()
        with xp.cuda.stream(side):
            fn(None)
    else:
        side = xp.cuda.Stream(non_blocking=True)
        with side:
            fn(None)
    _device_sync(xp)


@pytest.mark.gpu
@pytest.mark.parametrize("warm", ["none", "eager elsewhere"])
@pytest.mark.parametrize("inplace", [False, True], ids=["fresh result", "in place"])
@pytest.mark.parametrize("api", APIS)
def test_matmul_capture_replays_new_data(api, inplace, warm):
    from cuweave.linalg.advanced import Matmul

    xp = _packages(api)
    a, b = _randn(xp, (96, 64), np.float32, 1), _randn(xp, (64, 80), np.float32, 2)
    bias = _randn(xp, (96,), np.float32, 3)
    c = _randn(xp, (96, 80), np.float32, 4) if inplace else None
    kw = {"beta": 0.0, "options": {"inplace": True}} if inplace else {}
    mm = Matmul(a, b, c, **kw)
    if inplace:  # into the preallocated, row-major c
        mm.plan()
    else:  # a bias of length M: a column-major result from the package's pool
        mm.plan(epilog="relu_bias", epilog_inputs={"bias": bias})

    def run(stream):
        return mm.execute(stream=stream)

    _warm(warm, xp, run)
    out, replay = _capture(api, xp, run)
    if inplace:
        assert out is c
    for seed in (10, 20):  # new data in the same buffers, then replay
        _write(a, _randn(xp, (96, 64), np.float32, seed))
        _write(b, _randn(xp, (64, 80), np.float32, seed + 1))
        _device_sync(xp)
        replay()
        ref = _host(a).astype(np.float64) @ _host(b)
        if not inplace:
            ref = np.maximum(ref + _host(bias)[:, None], 0)
        assert rel_l2(_host(out), ref) < 1e-5, seed
    mm.free()


@pytest.mark.gpu
@pytest.mark.parametrize("warm", ["none", "eager elsewhere"])
@pytest.mark.parametrize("kind", ["C2C", "C2C in place", "R2C", "C2R"])
@pytest.mark.parametrize("api", APIS)
def test_fft_capture_replays_new_data(api, kind, warm):
    import cuweave.fft as F

    xp = _packages(api)
    shape = (16, 65) if kind == "C2R" else (16, 128)
    dtype = np.float32 if kind == "R2C" else np.complex64
    herm = kind == "C2R"
    x = _randn(xp, shape, dtype, 5, herm)
    options = {"fft_type": kind.split()[0], "inplace": kind.endswith("in place")}
    f = F.FFT(x, axes=[1], options=options)
    f.plan()
    inverse = kind == "C2R"

    def run(stream):
        return f.execute(direction="inverse" if inverse else None, stream=stream)

    _warm(warm, xp, run)
    if options["inplace"]:  # the warm-up transformed x in place: start again from data
        _write(x, _randn(xp, shape, dtype, 5))
        _device_sync(xp)
    out, replay = _capture(api, xp, run)
    for seed in (30, 40):
        new = _randn(xp, shape, dtype, seed, herm)
        _write(x, new)
        _device_sync(xp)
        replay()
        src = _host(new).astype(np.complex128 if dtype == np.complex64 else np.float64)
        if kind == "R2C":
            ref = np.fft.rfft(src, axis=1)
        elif kind == "C2R":
            ref = np.fft.irfft(src, n=128, axis=1) * 128  # unnormalized, as cuFFT
        else:
            ref = np.fft.fft(src, axis=1)
        assert rel_l2(_host(x if options["inplace"] else out), ref) < 1e-5, seed
    f.free()


@pytest.mark.gpu
def test_function_forms_capture_after_a_first_call():
    """``matmul``/``fft`` plan on their first call; captured afterwards, a cache hit runs."""
    torch = pytest.importorskip("torch")
    import cuweave.fft as F
    from cuweave.linalg.advanced import matmul

    a, b = _randn(torch, (64, 32), np.float32, 1), _randn(torch, (32, 48), np.float32, 2)
    x = _randn(torch, (8, 256), np.complex64, 3)
    matmul(a, b), F.fft(x, axes=[1])  # planned and cached
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        d = matmul(a, b)
        y = F.fft(x, axes=[1])
    a.copy_(_randn(torch, (64, 32), np.float32, 7))
    x.copy_(_randn(torch, (8, 256), np.complex64, 8))
    g.replay()
    torch.cuda.synchronize()
    assert rel_l2(_host(d), _host(a).astype(np.float64) @ _host(b)) < 1e-5
    assert rel_l2(_host(y), np.fft.fft(_host(x).astype(np.complex128), axis=1)) < 1e-5
