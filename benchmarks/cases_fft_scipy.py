"""scipy.fft with cuweave's backend, side by side with cupyx.scipy.fft's backend and torch.fft.

GPU cases on CuPy arrays through ``scipy.fft`` (each call under ``scipy.fft.set_backend`` of
its backend, so both backends pay SciPy's dispatch alike; torch.fft is called directly on a
tensor sharing the same memory): batched 1-D C2C 16384×1024 forward and inverse (SciPy's
default ``norm`` scales the inverse: cuweave fuses it, CuPy and torch spend a pass on it), R2C
and C2R, ``n`` zero-padding 1000 → 1024, a transform along axis 0, 2-D 4096², 3-D 512³ (256³
with ``--quick``), and host µs per call at 8×256. NumPy cases: SciPy's CPU transform
(``workers=1`` and all cores) against the backend's GPU route (staged copies included) at
2**16, 2**17 (the size rule's threshold) and 2**20 points.

GPU timing (:func:`_gpu_times`): rounds interleave the implementations, each round in a rotated
order. ``ms`` (the targets) is GPU time alone: a spin kernel holds the stream while the host
queues ``iters`` calls (about 4 ms of GPU work, at least 20 calls), so the span between the
events holds back-to-back transforms and no host time (a span whose spin ran out before the
calls were queued is measured again with a longer spin). ``ms live`` is the same number of
calls queued onto an idle GPU, host time included where it shows. With
``CUWEAVE_BENCH_KERNELS=1`` each GPU case also lists the kernels every implementation ran
(names, count, mean µs; torch.profiler's CUPTI trace, which sees every library's kernels) in
the results' ``meta["kernels"]``, and ``meta["cufft_libraries"]`` names the libcufft files
mapped into the process.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time

import numpy as np
from harness import cpu_time_ms, device_sync, host_us_interleaved, peer

CUWEAVE = "cuweave (scipy backend)"
CUPYX = "cupyx.scipy.fft"


def run(results, quick: bool) -> None:
    from cuweave._internal import cuda

    if not cuda.is_available():
        print("   no usable GPU: scipy backend cases skipped (NumPy arrays stay on SciPy)")
        return
    torch, cupy = peer("torch"), peer("cupy")
    if cupy is None:
        print("   CuPy is missing: scipy backend cases skipped")
        return
    _guarded("GPU cases", _gpu_cases, results, quick, torch, cupy)
    _guarded("host overhead", _host_overhead, results, quick, torch, cupy)
    _guarded("NumPy cases", _numpy_cases, results, quick)
    device_sync()


def _guarded(label, fn, *args) -> None:
    try:
        fn(*args)
    except Exception as e:
        print(f"   {label} failed: {type(e).__name__}: {e}")


def _backends():
    import cupyx.scipy.fft as cufft
    import scipy.fft as sfft

    import cuweave.fft as F

    return sfft, {CUWEAVE: F.scipy_backend, CUPYX: cufft}


def _via(sfft, backend, name, x, kw):
    fn = getattr(sfft, name)

    def call():
        with sfft.set_backend(backend):
            return fn(x, **kw)

    return call


def _cases(m):
    # (case, scipy name, shape, dtype, scipy kwargs, torch call on tensor t)
    return [
        ("fft 16384x1024 c64", "fft", (16384, 1024), "complex64", {},
         lambda tf, t: tf.fft(t)),
        ("ifft 16384x1024 c64 (norm=backward)", "ifft", (16384, 1024), "complex64", {},
         lambda tf, t: tf.ifft(t)),
        ("rfft 16384x1024 f32", "rfft", (16384, 1024), "float32", {},
         lambda tf, t: tf.rfft(t)),
        ("irfft 16384x513 c64 -> 1024", "irfft", (16384, 513), "complex64", {},
         lambda tf, t: tf.irfft(t)),
        ("fft n=1024 of 16384x1000 c64 (padding)", "fft", (16384, 1000), "complex64",
         {"n": 1024}, lambda tf, t: tf.fft(t, n=1024)),
        ("fft axis=0 1024x16384 c64", "fft", (1024, 16384), "complex64", {"axis": 0},
         lambda tf, t: tf.fft(t, dim=0)),
        ("fft2 4096^2 c64", "fft2", (4096, 4096), "complex64", {},
         lambda tf, t: tf.fft2(t)),
        (f"fftn {m}^3 c64", "fftn", (m, m, m), "complex64", {},
         lambda tf, t: tf.fftn(t)),
        (f"rfftn {m}^3 f32", "rfftn", (m, m, m), "float32", {},
         lambda tf, t: tf.rfftn(t)),
    ]


def _random(cupy, shape, dtype):
    rs = cupy.random.RandomState(0)
    x = rs.standard_normal(shape, dtype=np.float32 if dtype in ("float32", "complex64")
                           else np.float64)
    if dtype.startswith("complex"):
        x = x + 1j * rs.standard_normal(shape, dtype=x.dtype)
    return x.astype(dtype)


def _gpu_cases(results, quick, torch, cupy):
    sfft, backends = _backends()
    kernels = os.environ.get("CUWEAVE_BENCH_KERNELS") == "1" and torch is not None
    if kernels:
        results.meta["kernels"] = {}
    timer = _Timer(cupy, rounds=3 if quick else 7)
    for case, name, shape, dtype, kw, tcall in _cases(256 if quick else 512):
        try:
            x = _random(cupy, shape, dtype)
            impls = {label: _via(sfft, b, name, x, kw) for label, b in backends.items()}
            if torch is not None:
                t = torch.from_dlpack(x)
                impls["torch.fft"] = lambda tcall=tcall, t=t: tcall(torch.fft, t)
            ours, ref = impls[CUWEAVE](), impls[CUPYX]()
            err = float(cupy.linalg.norm(ours - ref) / cupy.linalg.norm(ref))
            same = ours.dtype == ref.dtype and ours.shape == ref.shape
            del ours, ref
            times, info = timer.times(impls)
            for label, (ms, live) in times.items():
                extra = {"rel_err_vs_cupyx": err, "same_dtype_shape": bool(same)} \
                    if label == CUWEAVE else {}
                results.add(case=case, impl=label, metric="ms", value=ms, unit="ms",
                            **extra, **info)
                results.add(case=case, impl=label, metric="ms live", value=live, unit="ms")
            results.add_ratio(case=case, metric="ms", num=CUWEAVE, den=CUPYX,
                              higher_is_better=False, target=0.95)
            results.add_ratio(case=case, metric="ms", num=CUWEAVE, den="torch.fft",
                              higher_is_better=False, target=1.0)
            for den in (CUPYX, "torch.fft"):
                if CUWEAVE in times and den in times:
                    results.add(case=case, impl=f"{CUWEAVE} vs {den} (live)",
                                metric="speedup", value=times[den][1] / times[CUWEAVE][1],
                                unit="x")
            if kernels:
                results.meta["kernels"][case] = _kernel_summary(torch, impls)
        except Exception as e:
            print(f"   {case} failed: {type(e).__name__}: {e}")
        finally:
            impls = x = t = None
            cupy.get_default_memory_pool().free_all_blocks()
            if torch is not None:
                torch.cuda.empty_cache()
    results.meta["cufft_libraries"] = _mapped("libcufft")


_SPIN = r"""
extern "C" __global__ void cuweave_bench_spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"""


class _Timer:
    """GPU ms per call of several implementations on the legacy default stream (where CuPy,
    torch and cuweave run here): see the module docstring."""

    def __init__(self, cupy, *, rounds: int, span_ms: float = 4.0, min_iters: int = 20,
                 max_iters: int = 400):
        self.cupy, self.rounds, self.span_ms = cupy, rounds, span_ms
        self.min_iters, self.max_iters = min_iters, max_iters
        self._spin = cupy.RawKernel(_SPIN, "cuweave_bench_spin")
        self.spin_us = 2000.0  # grows when a span finds the spin already over

    def spin(self, us: float) -> None:
        self._spin((1,), (1,), (self.cupy.uint64(int(us * 1e3)),))

    def _span(self, fn, iters: int, blocked: bool) -> tuple[float, bool]:
        """(ms per call over ``iters`` queued calls, whether the GPU ran dry while queueing)."""
        cupy = self.cupy
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        cupy.cuda.Device().synchronize()
        if blocked:
            self.spin(self.spin_us)
        start.record()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        end.record()
        queued_us = (time.perf_counter() - t0) * 1e6
        dry = blocked and start.done  # the spin was over before every call was queued
        end.synchronize()
        if dry:
            self.spin_us = min(max(2 * self.spin_us, 1.5 * queued_us), 2e5)
        return cupy.cuda.get_elapsed_time(start, end) / iters, dry

    def times(self, impls: dict) -> tuple[dict, dict]:
        """``{name: (ms, ms live)}`` and facts about the measurement."""
        ok = {}
        for name, fn in impls.items():
            try:
                for _ in range(3):
                    fn()
            except Exception as e:
                print(f"   {name} failed: {type(e).__name__}: {e}")
                continue
            ok[name] = fn
        first = next(iter(ok.values()))
        est, _ = self._span(first, 3, blocked=False)
        iters = max(self.min_iters, min(self.max_iters, math.ceil(self.span_ms / max(est, 1e-4))))
        self.spin_us = max(self.spin_us, 60.0 * iters)
        blocked = {n: [] for n in ok}
        live = {n: [] for n in ok}
        retries = 0
        names = list(ok)
        for r in range(self.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                for _ in range(4):  # a span whose spin ran out is measured again
                    ms, dry = self._span(ok[name], iters, blocked=True)
                    if not dry:
                        break
                    retries += 1
                blocked[name].append(ms)
                live[name].append(self._span(ok[name], iters, blocked=False)[0])
        out = {n: (statistics.median(blocked[n]), statistics.median(live[n])) for n in ok}
        info = {"iters": iters, "rounds": self.rounds, "spin_retries": retries,
                "spread_pct": round(100 * max((max(v) - min(v)) / statistics.median(v)
                                              for v in blocked.values()), 2)}
        return out, info


def _kernel_summary(torch, impls: dict, calls: int = 10) -> dict:
    """{implementation: [[kernel name, count per call, mean us], ...]} from a CUPTI trace."""
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for name, fn in impls.items():
        try:
            fn()
            device_sync()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    fn()
                device_sync()
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "trace.json")
                prof.export_chrome_trace(path)
                with open(path) as f:
                    events = json.load(f).get("traceEvents", [])
            per: dict = {}
            for e in events:
                if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                    per.setdefault(e.get("name", "?"), []).append(float(e.get("dur", 0)))
            out[name] = [[k[:160], len(v) / calls, round(sum(v) / len(v), 3)]
                         for k, v in sorted(per.items(), key=lambda kv: -sum(kv[1]))]
            for k, n, us in out[name]:
                print(f"     {name:26s} {n:5.2f}x {us:9.3f} us  {k[:90]}")
        except Exception as e:
            out[name] = f"{type(e).__name__}: {e}"
    return out


def _mapped(fragment: str) -> list:
    """Files whose path contains ``fragment`` mapped into this process (Linux)."""
    try:
        with open("/proc/self/maps") as f:
            return sorted({line.split()[-1] for line in f
                           if fragment in line and "/" in line.split()[-1]})
    except OSError:
        return []


def _host_overhead(results, quick, torch, cupy):
    sfft, backends = _backends()
    x = _random(cupy, (8, 256), "complex64")
    impls = {label: _via(sfft, b, "fft", x, {}) for label, b in backends.items()}
    if torch is not None:
        t = torch.from_dlpack(x)
        impls["torch.fft"] = lambda: torch.fft.fft(t)
    case = "host: fft 8x256 c64"
    calls = 300 if quick else 2000
    for label, us in host_us_interleaved(impls, calls=calls, sync=device_sync).items():
        results.add(case=case, impl=label, metric="us/call", value=us, unit="us")
    results.add_ratio(case=case, metric="us/call", num=CUWEAVE, den=CUPYX,
                      higher_is_better=False)
    results.add_ratio(case=case, metric="us/call", num=CUWEAVE, den="torch.fft",
                      higher_is_better=False)


def _numpy_cases(results, quick):
    """The size rule's evidence: SciPy on the CPU against the GPU route (copies included),
    which the rule's threshold is lifted for here."""
    import scipy.fft as sfft

    import cuweave.fft as F

    rng = np.random.default_rng(0)
    cores = os.cpu_count() or 1
    backend = F.scipy_backend
    for rows in (64, 128, 1024):
        x = (rng.standard_normal((rows, 1024)) + 1j * rng.standard_normal((rows, 1024)))
        x = x.astype(np.complex64)
        case = f"NumPy fft {rows}x1024 c64"

        def ours(x=x):
            keep, backend.numpy_gpu_min_elements = backend.numpy_gpu_min_elements, 0
            try:
                with sfft.set_backend(backend):
                    return sfft.fft(x)
            finally:
                backend.numpy_gpu_min_elements = keep

        route = CUWEAVE + " (GPU route)"
        err = float(np.linalg.norm(ours() - sfft.fft(x)) / np.linalg.norm(sfft.fft(x)))
        impls = {route: ours,
                 "scipy.fft workers=1": lambda x=x: sfft.fft(x, workers=1),
                 f"scipy.fft workers={cores}": lambda x=x: sfft.fft(x, workers=cores)}
        times = {k: [] for k in impls}
        for _ in range(3 if quick else 7):
            for label, fn in impls.items():
                times[label].append(cpu_time_ms(fn, iters=5, warmup=1))
        for label, ts in times.items():
            extra = {"rel_err_vs_scipy": err} if label == route else {}
            results.add(case=case, impl=label, metric="ms", value=float(np.median(ts)),
                        unit="ms", **extra)
        for den in ("scipy.fft workers=1", f"scipy.fft workers={cores}"):
            results.add_ratio(case=case, metric="ms", num=route, den=den,
                              higher_is_better=False)
