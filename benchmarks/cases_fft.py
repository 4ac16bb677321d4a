"""cuweave.fft side by side with torch.fft, cupy.fft, nvmath-python (GPU) and scipy.fft (CPU).

GPU cases (complex64): batched 1-D 16384×1024 and 64×2^20 (GB/s = bytes read + written / GPU
time), ``ifft(norm="backward")`` and ``fft(norm="ortho")`` at 16384×1024 (torch spends a second
pass on the scaling, cuweave fuses it), 2-D 4096², 3-D 512³ (256³ with ``--quick``), host µs
per call at 8×256 for a planned ``execute()`` and for the function form, and a convolution with
the filter applied in an epilog callback (and the ``1/n`` fused into the inverse) against
fft → multiply → ifft in torch and CuPy. Every case and every peer fails on its own: the run
goes on, and a missing peer is skipped quietly.
CPU cases: cuweave with ``ExecutionCPU(num_threads=n)`` against ``scipy.fft`` with ``workers=n``
and ``numpy.fft``, n = 1 and 2 (always run; the only cases when there is no GPU).
"""

from __future__ import annotations

import os

import numpy as np
from harness import (
    cpu_time_ms,
    device_sync,
    gpu_times_interleaved,
    host_us_interleaved,
    peer,
)


def run(results, quick: bool) -> None:
    from cuweave._internal import cuda

    if cuda.is_available():
        _gpu_cases(results, quick)
    _cpu_cases(results, quick)


# ---- GPU -------------------------------------------------------------------------------------
def _gbps(nbytes_moved: int, ms: float) -> float:
    return nbytes_moved / (ms * 1e-3) / 1e9


def _throughput(results, case, shape, axes, quick, peers, *, norm=None, inverse=False):
    import cuweave.fft as F

    torch, cupy, nvmath = peers
    iters = 10 if quick else 30
    x = torch.randn(*shape, dtype=torch.complex64, device="cuda")
    moved = 2 * x.numel() * 8
    fn = F.ifft if inverse else F.fft
    impls = {"cuweave": lambda: fn(x, axes=axes, norm=norm)}
    dims = tuple(axes)
    tfn = torch.fft.ifftn if inverse else torch.fft.fftn
    tnorm = norm or ("forward" if inverse else "backward")
    impls["torch"] = lambda: tfn(x, dim=dims, norm=tnorm)
    if cupy is not None:
        xc = cupy.asarray(x)
        cfn = cupy.fft.ifftn if inverse else cupy.fft.fftn
        impls["cupy"] = lambda: cfn(xc, axes=dims, norm=tnorm)
    if nvmath is not None and norm is None:
        nfn = nvmath.fft.ifft if inverse else nvmath.fft.fft
        impls["nvmath-python"] = lambda: nfn(x, axes=list(dims))
    for name, ms in gpu_times_interleaved(impls, iters=iters).items():
        results.add(case=case, impl=name, metric="GB/s", value=_gbps(moved, ms), unit="GB/s",
                    ms=ms)
    target = 1.8 if norm in ("backward", "ortho") and (inverse or norm == "ortho") else 1.0
    for den in ("torch", "cupy", "nvmath-python"):
        results.add_ratio(case=case, metric="GB/s", num="cuweave", den=den,
                          higher_is_better=True, target=target if den == "torch" else None)
    impls.clear()
    torch.cuda.empty_cache()


def _host_overhead(results, peers, quick):
    import cuweave.fft as F

    torch, cupy, nvmath = peers
    calls = 500 if quick else 3000
    x = torch.randn(8, 256, dtype=torch.complex64, device="cuda")
    sync = torch.cuda.synchronize
    f = F.FFT(x, axes=(1,))
    f.plan()
    rows = {"planned execute": {"cuweave": f.execute}, "function form": {
        "cuweave": lambda: F.fft(x, axes=(1,))}}
    rows["planned execute"]["torch"] = rows["function form"]["torch"] = \
        lambda: torch.fft.fft(x, dim=1)
    if nvmath is not None:
        try:
            nf = nvmath.fft.FFT(x, axes=[1])
            nf.plan()
            rows["planned execute"]["nvmath-python"] = nf.execute
            rows["function form"]["nvmath-python"] = lambda: nvmath.fft.fft(x, axes=[1])
        except Exception as e:
            print(f"   nvmath-python planned FFT failed: {e}")
    if cupy is not None:
        xc = cupy.asarray(x)
        rows["function form"]["cupy"] = lambda: cupy.fft.fft(xc, axis=1)
    for kind, impls in rows.items():
        case = f"{kind} 8x256 c64"
        per = {name: calls if "nvmath" not in name else max(calls // 10, 20) for name in impls}
        for name, us in host_us_interleaved(impls, calls=per, sync=sync).items():
            results.add(case=case, impl=name, metric="us/call", value=us, unit="us")
        target = 1.0 if kind == "planned execute" else 1 / 1.5
        results.add_ratio(case=case, metric="us/call", num="cuweave", den="torch",
                          higher_is_better=False, target=target)
        results.add_ratio(case=case, metric="us/call", num="cuweave", den="nvmath-python",
                          higher_is_better=False)
    f.free()


def convolution_impls(torch, cupy, b: int, n: int) -> dict:
    """Convolution of ``b`` signals of ``n`` points by a filter spectrum: cuweave with the filter
    in the inverse's prolog and in the forward's epilog (the ``1/n`` fused either way), torch's
    and CuPy's fft → multiply → ifft. Names -> zero-argument callables."""
    import cuweave.fft as F

    x = torch.randn(b, n, dtype=torch.complex64, device="cuda",
                    generator=torch.Generator(device="cuda").manual_seed(0))
    filt = torch.fft.fft(torch.exp(-torch.arange(n, device="cuda") / 50).to(torch.complex64))
    nu = np.uint64(n)

    def epilog(data_out, offset, element, user_info, reserved):
        data_out[offset] = element * user_info[offset % nu]

    def prolog(data_in, offset, user_info, reserved):
        return data_in[offset] * user_info[offset % nu]

    epi = {"ltoir": F.compile_epilog(epilog, "complex64", "complex64"), "data": filt.data_ptr()}
    pro = {"ltoir": F.compile_prolog(prolog, "complex64", "complex64"), "data": filt.data_ptr()}
    impls = {"cuweave (filter in the inverse's prolog)":
             lambda: F.ifft(F.fft(x, axes=(1,)), axes=(1,), prolog=pro, norm="backward"),
             "cuweave (filter in the forward's epilog)":
             lambda: F.ifft(F.fft(x, axes=(1,), epilog=epi), axes=(1,), norm="backward"),
             "torch": lambda: torch.fft.ifft(torch.fft.fft(x, dim=1) * filt, dim=1)}
    if cupy is not None:
        xc, fc = cupy.asarray(x), cupy.asarray(filt)
        impls["cupy"] = lambda: cupy.fft.ifft(cupy.fft.fft(xc, axis=1) * fc, axis=1)
    return impls


def _conv_callbacks(results, quick, peers):
    """Convolution by a filter spectrum with the filter in a callback and the ``1/n`` fused:
    two passes over memory, against fft → multiply → ifft (+ a scaling pass) in torch and
    CuPy. Two placements: the forward's epilog (``examples/fft/convolution_epilog.py``) and
    the inverse's prolog. cuFFT 12 runs a 16384-point transform with any callback about 60%
    slower than without one (``results/fft_callbacks_probe.md``), so putting both the filter
    and the scale into the inverse pays that once instead of twice."""
    torch, cupy, _ = peers
    b, n = (256, 16384) if quick else (1024, 16384)
    impls = convolution_impls(torch, cupy, b, n)
    ours = [name for name in impls if name.startswith("cuweave")]
    want = impls["torch"]()
    case = f"callback convolution {b}x{n} c64"
    errs = {name: float(torch.linalg.norm(impls[name]() - want) / torch.linalg.norm(want))
            for name in ours}
    for name, ms in gpu_times_interleaved(impls, iters=10 if quick else 30).items():
        results.add(case=case, impl=name, metric="ms", value=ms, unit="ms",
                    **({"rel_err": errs[name]} if name in errs else {}))
    for num in ours:
        for den in ("cupy", "torch"):
            results.add_ratio(case=case, metric="ms", num=num, den=den, higher_is_better=False,
                              target=1.0 if den == "cupy" else None)


def _guarded(label, fn, *args, **kwargs) -> None:
    """Run one case; a failure is printed and the run goes on."""
    try:
        fn(*args, **kwargs)
    except Exception as e:
        print(f"   {label} failed: {type(e).__name__}: {e}")


def _gpu_cases(results, quick):
    torch = peer("torch")
    if torch is None or not torch.cuda.is_available():
        print("   torch with CUDA is missing: GPU FFT cases skipped")
        return
    cupy, nvmath = peer("cupy"), peer("nvmath")
    peers = (torch, cupy, nvmath)
    m = 256 if quick else 512
    throughput = [
        # 16384 transforms of 1024 points (the batch is the first axis)
        ("1-D 16384x1024 c64", (16384, 1024), (1,), {}),
        ("1-D 64x2^20 c64", (64, 1 << 20), (1,), {}),
        ("ifft norm=backward 16384x1024", (16384, 1024), (1,),
         {"norm": "backward", "inverse": True}),
        ("fft norm=ortho 16384x1024", (16384, 1024), (1,), {"norm": "ortho"}),
        ("2-D 4096^2 c64", (4096, 4096), (0, 1), {}),
        (f"3-D {m}^3 c64", (m, m, m), (0, 1, 2), {}),
    ]
    for case, shape, axes, kw in throughput:
        _guarded(case, _throughput, results, case, shape, axes, quick, peers, **kw)
    _guarded("host overhead", _host_overhead, results, peers, quick)
    _guarded("callback convolution", _conv_callbacks, results, quick, peers)
    device_sync()


# ---- CPU -------------------------------------------------------------------------------------
CPU_CASES = [
    ("CPU C2C 1-D 256x4096 c64", "fft", (256, 4096), np.complex64, (1,)),
    ("CPU R2C 2-D 1024^2 f64", "rfft", (1024, 1024), np.float64, (0, 1)),
    ("CPU C2C 3-D 64^3 c128", "fft", (64, 64, 64), np.complex128, (0, 1, 2)),
]
#: seconds each implementation runs untimed before its timed calls in every round: an idle
#: core of a virtual machine takes milliseconds to wake and come up to speed, which would
#: otherwise land on whichever implementation follows a single-threaded one
WARM_S = 0.02


def _cpu_impls(kind, x, axes, threads):
    import scipy.fft as sfft

    import cuweave.fft as F
    from cuweave.fft._cpu_backends import backend_name

    space = F.ExecutionCPU(num_threads=threads)
    ours = getattr(F, kind)
    theirs = sfft.fftn if kind == "fft" else sfft.rfftn
    numpy_fn = np.fft.fftn if kind == "fft" else np.fft.rfftn
    return {f"cuweave ({backend_name()})": lambda: ours(x, axes=axes, execution=space),
            "scipy.fft": lambda: theirs(x, axes=axes, workers=threads),
            "numpy.fft": lambda: numpy_fn(x, axes=axes)}


def _busy_s():
    """``(CPU seconds all processes spent busy, CPU seconds this process spent)`` so far, or
    ``None`` where ``/proc/stat`` is missing: the difference over a case is the other
    processes' load, recorded with the case (``other_cores``) to show a contaminated run."""
    import resource

    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK"), ru.ru_utime + ru.ru_stime


def _cpu_cases(results, quick):
    """cuweave's CPU FFTs (MKL with the ``cpu-fft`` extra, else pocketfft) against scipy.fft
    with the same worker count and numpy.fft (one thread), at 1 and 2 threads. Rounds
    interleave the implementations (the machine may be shared), one block each: :data:`WARM_S`
    of untimed calls, then the timed ones. Each case records the other processes' load."""
    import time

    rng = np.random.default_rng(0)
    cases = CPU_CASES[:2] if quick else CPU_CASES
    for threads in (1, 2):
        for name, kind, shape, dtype, axes in cases:
            x = rng.standard_normal(shape)
            if np.dtype(dtype).kind == "c":
                x = x + 1j * rng.standard_normal(shape)
            x = x.astype(dtype)
            case = f"{name}, {threads} thread{'s' if threads > 1 else ''}"
            impls = _cpu_impls(kind, x, axes, threads)
            times = {k: [] for k in impls}
            t0, b0 = time.perf_counter(), _busy_s()
            for _ in range(3 if quick else 7):
                for impl, fn in impls.items():
                    end = time.perf_counter() + WARM_S
                    while time.perf_counter() < end:
                        fn()
                    times[impl].append(cpu_time_ms(fn, iters=5, warmup=0))
            b1, wall = _busy_s(), time.perf_counter() - t0
            other = None if b0 is None else round(max(
                0.0, ((b1[0] - b0[0]) - (b1[1] - b0[1])) / wall), 3)  # clock ticks: ±0.03
            for impl, ts in times.items():
                results.add(case=case, impl=impl, metric="ms", value=float(np.median(ts)),
                            unit="ms", threads=threads, other_cores=other)
            ours = next(iter(impls))
            results.add_ratio(case=case, metric="ms", num=ours, den="scipy.fft",
                              higher_is_better=False, target=1.3)
            results.add_ratio(case=case, metric="ms", num=ours, den="numpy.fft",
                              higher_is_better=False)
