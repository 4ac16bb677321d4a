"""CPU matmul + fused epilog vs the NumPy a user would write (float32, 2-core CI box).

Cases: RELU_BIAS and GELU_BIAS at 1024³ and M×N×K = 2048×2048×512; bias of length M added to
every column. Peers: ``np.maximum(a @ b + bias, 0)`` and the tanh-GELU written the plain way,
plus ``a @ b`` alone (the floor: the GEMM without any epilog). cuweave runs through the public
``matmul(..., execution="cpu")`` when it exists, else through the CPU kernel it calls
(``_cpu.execute_cpu`` in the lt frame, result column-major so the bias is along lt rows).
Implementations are timed in interleaved rounds (the machine is shared); value = median.
"""

from __future__ import annotations

import statistics

import numpy as np
from harness import cpu_time_ms

SHAPES = [(1024, 1024, 1024), (2048, 2048, 512)]


def _numpy_relu_bias(a, b, bias):
    return np.maximum(a @ b + bias, 0)


def _numpy_gelu_bias(a, b, bias):
    y = a @ b + bias
    return 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y**3)))


def _cuweave_fn(epilog, a, b, bias):
    """(label, callable) computing the fused product with cuweave on the CPU."""
    try:
        from cuweave.linalg.advanced import matmul

        def public():
            return matmul(a, b, epilog=epilog, epilog_inputs={"bias": bias},
                          execution="cpu")

        public()  # probe: the public API takes execution="cpu"
        return "cuweave", public
    except Exception:
        pass
    from cuweave._bindings.library_types import ComputeType
    from cuweave.linalg.advanced._cpu import execute_cpu

    m, n = a.shape[0], b.shape[1]
    d = np.empty((n, m), np.float32).T  # column-major: bias along lt rows, no transposition
    dtypes = {"a": "float32", "b": "float32", "c": None, "d": "float32"}
    bias_row = bias.reshape(1, m)

    def kernel():
        execute_cpu(a[None], b[None], None, d[None], alpha=1.0, beta=0.0, epilog=epilog,
                    bias=bias_row, dtypes=dtypes, compute_type=ComputeType.COMPUTE_32F)
        return d

    return "cuweave (_cpu kernel)", kernel


def _check(fn, ref, label):
    got = np.asarray(fn(), dtype=np.float64)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    if not err < 1e-5:
        raise AssertionError(f"{label}: relative L2 error {err:.3g}")


def run(results, quick: bool) -> None:
    rng = np.random.default_rng(0)
    iters, rounds = (2, 2) if quick else (5, 3)
    for m, n, k in SHAPES:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        bias = rng.standard_normal((m, 1), dtype=np.float32)
        for epilog, np_fn in (("RELU_BIAS", _numpy_relu_bias), ("GELU_BIAS", _numpy_gelu_bias)):
            case = f"float32 {m}x{n}x{k} {epilog}"
            label, cw = _cuweave_fn(epilog, a, b, bias)
            ref = np_fn(a.astype(np.float64), b.astype(np.float64), bias.astype(np.float64))
            _check(cw, ref, label)
            impls = {label: cw, "numpy": lambda f=np_fn, x=a, y=b, z=bias: f(x, y, z),
                     "numpy a @ b only (floor)": lambda x=a, y=b: x @ y}
            times = {name: [] for name in impls}
            for _ in range(rounds):
                for name, fn in impls.items():
                    times[name].append(cpu_time_ms(fn, iters=iters, warmup=1))
            for name, ts in times.items():
                results.add(case=case, impl=name, metric="time", value=statistics.median(ts),
                            unit="ms", flops=2.0 * m * n * k)
            results.add_ratio(case=case, metric="time", num=label, den="numpy",
                              higher_is_better=False, target=1.0)
