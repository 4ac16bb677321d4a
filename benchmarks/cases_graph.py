"""CUDA graphs of planned cuweave objects: host time per operation of a replayed graph.

Case: a chain of 10 planned small matmuls (128³ fp16, each ``Matmul`` writing in place into a
preallocated output that the next one reads), captured once into a CUDA graph by
``torch.cuda.graph``, by CuPy's stream capture and by cuda.core's graph builder, then
replayed. The same 10 calls run eagerly (``Matmul.execute()``, in place) and as torch's own
``torch.mm(out=)`` (eager and graphed) for comparison. Likewise 10 planned small FFTs
(C2C complex64, 64 × 256 points, in place).

Metrics: ``host us/op``: wall time of back-to-back launches (graph replays, or eager calls)
before any synchronization, per operation (10 per launch); ``GPU us/op``: CUDA events
around queued launches, per operation. Target (issue 16): a replayed graph of 10 planned
small matmuls costs <= 5 us of host time per op (the row ``vs 5 us/op budget`` is
5 / host us/op: >= 1 meets it).
"""

from __future__ import annotations

import statistics
import time
import traceback

from harness import gpu_times_interleaved, peer

COUNT = 10
BUDGET_US = 5.0


def _host_us_per_op(launch, sync, *, launches: int, rounds: int) -> float:
    """Median over ``rounds`` of the wall time of ``launches`` back-to-back ``launch()``
    calls (host only: the synchronization after them is not timed), per operation."""
    spans = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(launches):
            launch()
        spans.append((time.perf_counter() - t0) / launches / COUNT * 1e6)
        sync()
    return statistics.median(spans)


def _report(res, case, impls, sync, stream, quick):
    """Host and GPU time per op of each implementation (warmed up, interleaved rounds)."""
    for fn in impls.values():
        for _ in range(3):
            fn()
    sync()
    rounds = 5 if quick else 9
    host = {}
    for _ in range(rounds):  # round-robin: host drift hits every implementation alike
        for name, fn in impls.items():
            host.setdefault(name, []).append(
                _host_us_per_op(fn, sync, launches=20 if quick else 50, rounds=1))
    gpu = gpu_times_interleaved(impls, iters=20, warmup=2, rounds=3 if quick else 5,
                                stream=stream)
    for name in impls:
        us = statistics.median(host[name])
        res.add(case=case, impl=name, metric="host us/op", value=us, unit="us")
        if name in gpu:
            res.add(case=case, impl=name, metric="GPU us/op", value=gpu[name] * 1e3 / COUNT,
                    unit="us")
        if "graph" in name and name.startswith("cuweave"):
            res.add(case=case, impl=f"{name} vs {BUDGET_US:g} us/op budget", metric="speedup",
                    value=BUDGET_US / us, unit="x", target=1.0)


# ---- matmul chains -----------------------------------------------------------------------------
def _matmul_chain(xp, n, dtype):
    """10 planned in-place Matmuls: out[i] = x[i] @ w[i], x[i + 1] = out[i]."""
    from cuweave.linalg.advanced import Matmul

    def randn(*shape):
        if xp.__name__ == "torch":
            return xp.randn(*shape, device="cuda", dtype=dtype) / n ** 0.5
        return (xp.random.standard_normal(shape) / n ** 0.5).astype(dtype)

    x0 = randn(n, n)
    ws = [randn(n, n) for _ in range(COUNT)]
    outs = [xp.empty((n, n), dtype=dtype) if xp.__name__ != "torch" else
            xp.empty(n, n, device="cuda", dtype=dtype) for _ in range(COUNT)]
    mms, prev = [], x0
    for w, out in zip(ws, outs):
        mm = Matmul(prev, w, out, beta=0.0, options={"inplace": True})
        mm.plan()
        mms.append(mm)
        prev = out
    return x0, ws, outs, mms


def _eager(mms):
    def run(stream=None):
        for mm in mms:
            mm.execute(stream=stream)

    return run


def _torch_graph(torch, fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # torch's own ops want a warm-up; cuweave's do not
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def matmul_torch(res, torch, quick, n=128):
    dtype = torch.float16
    x0, ws, outs, mms = _matmul_chain(torch, n, dtype)
    eager = _eager(mms)

    def torch_mm():
        prev = x0
        for w, out in zip(ws, outs):
            torch.mm(prev, w, out=out)
            prev = out

    replay = _torch_graph(torch, eager)
    replay()
    torch.cuda.synchronize()
    ref = x0.float()
    for w in ws:
        ref = (ref.half().float() @ w.float()).half().float()
    err = float((outs[-1].float() - ref).norm() / ref.norm())
    print(f"   torch graph replay: relative error of the chain {err:.2e}")
    case = f"{COUNT} chained matmuls {n}³ fp16 (torch operands)"
    impls = {"cuweave Matmul.execute() eager": eager,
             "cuweave torch.cuda.graph replay": replay,
             "torch.mm eager": torch_mm,
             "torch.mm torch.cuda.graph replay": _torch_graph(torch, torch_mm)}
    _report(res, case, impls, torch.cuda.synchronize, torch.cuda.current_stream(), quick)
    for mm in mms:
        mm.free()


def matmul_cupy(res, cupy, quick, n=128):
    import numpy as np

    x0, ws, outs, mms = _matmul_chain(cupy, n, np.float16)
    eager = _eager(mms)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        try:
            eager()
        finally:
            g = s.end_capture()
    impls = {"cuweave Matmul.execute() eager": lambda: _on(s, eager),
             "cuweave CuPy graph launch": lambda: g.launch(s)}
    try:
        from cuda.core import Device, Stream

        dev = Device()
        dev.set_current()
        core_stream = dev.create_stream()
        gb = core_stream.create_graph_builder()
        gb.begin_building()
        try:
            eager(gb)
        finally:
            gb.end_building()
        graph = gb.complete()
        on_s = Stream.from_handle(s.ptr)  # launched where the others run (one event timing)
        impls["cuweave cuda.core graph launch"] = lambda: graph.launch(on_s)
    except Exception:
        traceback.print_exc()
    case = f"{COUNT} chained matmuls {n}³ fp16 (CuPy operands)"
    _report(res, case, impls, s.synchronize, s, quick)
    for mm in mms:
        mm.free()


def _on(stream, fn):
    with stream:
        fn()


# ---- FFTs ----------------------------------------------------------------------------------------
def fft_torch(res, torch, quick, batch=64, n=256):
    import cuweave.fft as F

    xs = [torch.randn(batch, n, device="cuda", dtype=torch.complex64) for _ in range(COUNT)]
    ffts = []
    for x in xs:
        f = F.FFT(x, axes=[1], options={"inplace": True})
        f.plan()
        ffts.append(f)

    def eager():
        for f in ffts:
            f.execute()

    def torch_fft():
        for x in xs:
            torch.fft.fft(x, dim=1)

    case = f"{COUNT} FFTs C2C complex64 {batch}x{n} in place (torch operands)"
    impls = {"cuweave FFT.execute() eager": eager,
             "cuweave torch.cuda.graph replay": _torch_graph(torch, eager),
             "torch.fft.fft eager": torch_fft,
             "torch.fft.fft torch.cuda.graph replay": _torch_graph(torch, torch_fft)}
    _report(res, case, impls, torch.cuda.synchronize, torch.cuda.current_stream(), quick)
    for f in ffts:
        f.free()


def run(results, quick: bool) -> None:
    torch, cupy = peer("torch"), peer("cupy")
    parts = []
    if torch is not None and torch.cuda.is_available():
        parts += [(matmul_torch, torch), (fft_torch, torch)]
    if cupy is not None:
        parts.append((matmul_cupy, cupy))
    if not parts:
        print("   torch with CUDA or CuPy is needed for the graph benchmarks; skipped")
    for part, pkg in parts:
        try:
            part(results, pkg, quick)
        except Exception:
            traceback.print_exc()
