"""``python -m cuweave demo``: the advanced matmul flow end to end, on the GPU or the CPU.

NumPy data from ``np.random`` → :class:`~cuweave.linalg.advanced.Matmul` with the
``RELU_BIAS`` epilog → plan, autotune, execute, ``reset_operands``, execute again; then an FFT
round trip (``fft`` → ``ifft`` with ``norm="backward"``) on the same execution space. Prints
where it ran, the error against a NumPy reference and the time against plain NumPy doing the
same work (``max(a @ b + bias, 0)`` in float32), one progress line per step.

The library is shown at its best on the machine it runs on: on a GPU the tensor-core compute
type ``COMPUTE_32F_FAST_16F`` (inputs rounded to float16, float32 accumulation); on the CPU
``COMPUTE_32F``, NumPy's BLAS with the fused epilog (a FAST_16F rounding pass would only add
work there).
"""

from __future__ import annotations

import argparse
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


def _fft_round_trip(rng, execution, say) -> float:
    """Forward and inverse FFT of a batch of signals; returns the round-trip error."""
    import cuweave.fft as cfft

    x = (rng.standard_normal((64, 4096)) + 1j * rng.standard_normal((64, 4096))).astype(
        np.complex64)
    ex = "cpu" if execution == "cpu" else "cuda"
    y = cfft.fft(x, axes=[1], execution=ex)
    e_fwd = _rel_err(y, np.fft.fft(x.astype(np.complex128), axis=1))
    z = cfft.ifft(y, axes=[1], execution=ex, norm="backward")
    e_rt = _rel_err(z, x)
    t_cw, t_np = _median_ms(
        lambda: cfft.ifft(cfft.fft(x, axes=[1], execution=ex), axes=[1], execution=ex,
                          norm="backward"),
        lambda: np.fft.ifft(np.fft.fft(x, axis=1), axis=1))
    say(f"fft round trip 64x4096 complex64 on {ex}: forward error {e_fwd:.1e}, round-trip "
        f"error {e_rt:.1e}, {t_cw:.2f} ms vs NumPy {t_np:.2f} ms")
    return max(e_fwd, e_rt)


def main(argv=None) -> int:
    """Run the demo; returns a process exit status (0 when the results check out)."""
    parser = argparse.ArgumentParser(prog="python -m cuweave demo",
                                     description="cuweave advanced matmul demo")
    parser.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    parser.add_argument("--execution", choices=["auto", "cuda", "cpu"], default="auto")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

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
    from cuweave._internal import cuda

    on_gpu = args.execution == "cuda" or (args.execution == "auto" and cuda.is_available())
    compute = (MatmulComputeType.COMPUTE_32F_FAST_16F if on_gpu else
               MatmulComputeType.COMPUTE_32F)
    options = {"compute_type": compute}
    with Matmul(a, b, options=options, execution=execution) as mm:
        t0 = time.perf_counter()
        mm.plan(epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias})
        where = "the CPU (no usable GPU)" if mm.execution_space == "cpu" and \
            execution is None else mm.execution_space
        say(f"plan: RELU_BIAS with {compute.name} on {where}, "
            f"{len(mm.algorithms)} algorithm(s) in {(time.perf_counter() - t0) * 1e3:.1f} ms")
        t0 = time.perf_counter()
        mm.autotune(iterations=3)
        say(f"autotune: {(time.perf_counter() - t0) * 1e3:.1f} ms"
            + (" (a no-op on the CPU)" if mm.execution_space == "cpu" else ""))
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
        space = mm.execution_space
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
