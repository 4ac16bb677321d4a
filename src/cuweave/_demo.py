"""``python -m cuweave demo``: the advanced matmul flow end to end, on the GPU or the CPU.

NumPy data from ``np.random`` → :class:`~cuweave.linalg.advanced.Matmul` with the
``RELU_BIAS`` epilog → plan, autotune, execute, ``reset_operands``, execute again; then an FFT
round trip (``fft`` → ``ifft`` with ``norm="backward"``) on the same execution space. Prints
where it ran and which library did the work, the error against a float64 NumPy reference and
the time against what a user would otherwise call for the same work: plain NumPy for the
matmul (``max(a @ b + bias, 0)`` in float32); for the FFT ``scipy.fft`` with the same number of
threads on the CPU, torch.fft (else CuPy) on the GPU, copies included. One line per step.

The library is shown at its best on the machine it runs on: on a GPU the tensor-core compute
type ``COMPUTE_32F_FAST_16F`` (inputs rounded to float16, float32 accumulation); on the CPU
``COMPUTE_32F``, NumPy's BLAS with the fused epilog (a FAST_16F rounding pass would only add
work there).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

__all__ = ["main"]


def _reference(a, b, bias):
    return np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias[:, None], 0.0)


def _rel_err(x, ref) -> float:
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-30))


def _median_ms(*fns, reps: int = 7) -> list[float]:
    """Median wall ms of each function over ``reps`` rounds after one warm-up call each, the
    functions called in turn within every round (a machine's drift hits them alike)."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(reps):
        for fn, t in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return [sorted(t)[len(t) // 2] * 1e3 for t in times]


def _blas_name() -> str:
    """NumPy's BLAS library and its thread count, as threadpoolctl sees them."""
    from threadpoolctl import threadpool_info

    for i in threadpool_info():
        if i.get("user_api") == "blas":
            return f"{i.get('internal_api')}, {i.get('num_threads')} threads"
    return "unknown BLAS"


def _gpu_fft_rival(x):
    """What a GPU user would otherwise call for the round trip of host array ``x``: torch.fft
    (else CuPy's) with the copies to the device and back; ``(name, function)`` or ``None``."""
    try:
        import torch

        if torch.cuda.is_available():
            def run():
                t = torch.from_numpy(x).cuda()
                return torch.fft.ifft(torch.fft.fft(t, dim=1), dim=1).cpu().numpy()
            return "torch.fft", run
    except ImportError:
        pass
    try:
        import cupy

        def run():
            return cupy.asnumpy(cupy.fft.ifft(cupy.fft.fft(cupy.asarray(x), axis=1), axis=1))
        return "cupy.fft", run
    except ImportError:
        return None


def _fft_round_trip(rng, execution, say) -> float:
    """Forward and inverse FFT of a batch of signals; returns the round-trip error.

    The time is compared with what a user would otherwise call for the same work: on the CPU
    ``scipy.fft`` with as many ``workers`` as cuweave's threads, on the GPU torch.fft (else
    CuPy) with the same copies to the device and back.
    """
    import scipy.fft

    import cuweave.fft as cfft
    from cuweave import ExecutionCPU

    x = (rng.standard_normal((64, 4096)) + 1j * rng.standard_normal((64, 4096))).astype(
        np.complex64)
    on_cpu = execution == "cpu"
    ex = ExecutionCPU() if on_cpu else "cuda"
    y = cfft.fft(x, axes=[1], execution=ex)
    e_fwd = _rel_err(y, np.fft.fft(x.astype(np.complex128), axis=1))
    z = cfft.ifft(y, axes=[1], execution=ex, norm="backward")
    e_rt = _rel_err(z, x)

    def mine():
        return cfft.ifft(cfft.fft(x, axes=[1], execution=ex), axes=[1], execution=ex,
                         norm="backward")

    if on_cpu:
        from cuweave.fft import _cpu_backends

        threads = ex.threads
        library = {"mkl": "MKL DFTI", "pocketfft": "SciPy's pocketfft"}[
            _cpu_backends.backend_name()] + f", {threads} threads"
        rival = (f"scipy.fft (pocketfft, workers={threads})",
                 lambda: scipy.fft.ifft(scipy.fft.fft(x, axis=1, workers=threads), axis=1,
                                        workers=threads))
    else:
        library = "cuFFT, host arrays copied in and out"
        rival = _gpu_fft_rival(x)
    if rival is None:
        (t_cw,) = _median_ms(mine)
        versus = "(no torch or CuPy here to compare with)"
    else:
        t_cw, t_other = _median_ms(mine, rival[1])
        versus = f"vs {rival[0]} {t_other:.2f} ms for the same work"
    say(f"fft round trip 64x4096 complex64 on {library}: forward error {e_fwd:.1e}, "
        f"round-trip error {e_rt:.1e}, {t_cw:.2f} ms {versus}")
    return max(e_fwd, e_rt)


_DESCRIPTION = """\
The advanced matmul flow end to end: a Matmul with the RELU_BIAS epilog is planned,
autotuned, executed, given a new operand and executed again; then an FFT round trip. It runs
on the GPU when one is usable, else on the CPU, and prints where it ran, which library did the
work, the error against a float64 NumPy reference and the time against what you would
otherwise call for the same work (NumPy for the matmul; scipy.fft with the same threads on the
CPU, torch.fft or CuPy on the GPU, for the FFT)."""


def main(argv=None) -> int:
    """Run the demo; returns a process exit status (0 when the results check out)."""
    parser = argparse.ArgumentParser(prog="python -m cuweave demo", description=_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    parser.add_argument("--execution", choices=["auto", "cuda", "cpu"], default="auto",
                        help="where to run: auto (the GPU when one is usable, else the CPU; "
                             "the default), cuda or cpu")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random data (0)")
    args = parser.parse_args(argv)
    if args.size < 1:
        parser.error(f"--size must be a positive int, got {args.size}")
    from cuweave._internal import cuda

    if args.execution == "cuda" and not cuda.is_available():
        print("cuweave demo: --execution cuda needs a usable CUDA GPU, and here "
              f"{cuda.unavailable_reason()}; run `python -m cuweave demo` (or --execution cpu) "
              "to run on the CPU, and `python -m cuweave info` to see what was found",
              file=sys.stderr)
        return 2
    from cuweave import CuweaveError

    try:
        return _run(args, on_gpu=args.execution == "cuda" or (
            args.execution == "auto" and cuda.is_available()))
    except CuweaveError as e:  # a library or set-up failure: one line, not a traceback
        print(f"cuweave demo: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def _run(args, on_gpu: bool) -> int:
    from cuweave.linalg.advanced import Matmul, MatmulComputeType, MatmulEpilog

    n = args.size
    rng = np.random.default_rng(args.seed)
    step = iter(range(1, 9))

    def say(msg):
        print(f"[{next(step)}/8] {msg}", flush=True)

    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    say(f"data: a, b {n}x{n} float32 and bias ({n},) from np.random")
    execution = None if args.execution == "auto" else args.execution
    compute = (MatmulComputeType.COMPUTE_32F_FAST_16F if on_gpu else
               MatmulComputeType.COMPUTE_32F)
    options = {"compute_type": compute}
    with Matmul(a, b, options=options, execution=execution) as mm:
        t0 = time.perf_counter()
        mm.plan(epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias})
        space = mm.execution_space
        where = "the CPU (no usable GPU)" if space == "cpu" and execution is None else space
        library = f"NumPy's BLAS ({_blas_name()})" if space == "cpu" else "cuBLASLt"
        say(f"plan: RELU_BIAS with {compute.name} on {where} with {library}, "
            f"{len(mm.algorithms)} algorithm(s) in {(time.perf_counter() - t0) * 1e3:.1f} ms")
        t0 = time.perf_counter()
        mm.autotune(iterations=3)
        say(f"autotune: {(time.perf_counter() - t0) * 1e3:.1f} ms"
            + (" (a no-op on the CPU)" if space == "cpu" else ""))
        r1 = mm.execute()
        t_cw, t_np = _median_ms(mm.execute, lambda: np.maximum(a @ b + bias[:, None], 0))
        e1 = _rel_err(r1, _reference(a, b, bias))
        say(f"execute: relative error vs float64 NumPy {e1:.2e}, {t_cw:.2f} ms")
        a2 = rng.standard_normal((n, n), dtype=np.float32)
        mm.reset_operands(a=a2)
        say("reset_operands: new a of the same layout")
        r2 = mm.execute()
        e2 = _rel_err(r2, _reference(a2, b, bias))
        say(f"execute again: relative error {e2:.2e}")
    ratio = t_np / t_cw
    say(f"time: cuweave {t_cw:.2f} ms vs NumPy {t_np:.2f} ms for the same float32 work: "
        f"{ratio:.2f}x NumPy's speed on {where}"
        + (" (both on NumPy's BLAS; cuweave fuses the bias and ReLU into one pass)"
           if space == "cpu" else " (host arrays in and out: the transfers are included)"))
    e3 = _fft_round_trip(rng, space, say)
    ok = e1 < 1e-2 and e2 < 1e-2 and e3 < 1e-4
    print("demo " + ("OK" if ok else "FAILED: error above 1e-2"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
