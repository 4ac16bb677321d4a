"""cuweave.device.random (cuRAND's device API in a numba kernel) side by side with
``cupy.random`` (cuRAND's host API).

Case: 2**26 float32 standard normals written to global memory. cuweave: one kernel, each
thread initializes a Philox4_32_10 state (its own subsequence) and writes ``normal4`` values;
CuPy: ``cupy.random.standard_normal`` (its default generator). Metric: Gsamples/s (higher is
better); target: cuweave >= 0.9x CuPy.
"""

from __future__ import annotations

import numpy as np
from harness import gpu_times_interleaved, peer

N = 1 << 26
PER_THREAD = 64          # normals per thread (16 normal4 draws)
THREADS = N // PER_THREAD


def _kernel(random):
    from numba import cuda

    @cuda.jit
    def normals(states, seed, out):
        t = cuda.grid(1)
        if t >= THREADS:
            return
        random.init(seed, t, 0, states[t])
        base = t * 4
        for j in range(PER_THREAD // 4):
            q = random.normal4(states[t])
            k = base + j * THREADS * 4  # consecutive threads write consecutive float4s
            out[k], out[k + 1], out[k + 2], out[k + 3] = q.x, q.y, q.z, q.w

    return normals


def run(results, quick: bool) -> None:
    from numba import cuda

    from cuweave.device import random

    iters = 10 if quick else 50
    random.Compile()
    states = random.StatesPhilox4_32_10(THREADS)
    out = cuda.device_array(N, np.float32)
    launch = _kernel(random)[THREADS // 256, 256]
    launch(states, 1234, out)
    sample = out.copy_to_host()[: 1 << 20]
    case = f"{N} float32 normals"
    impls = {"cuweave": lambda: launch(states, 1234, out)}
    cupy = peer("cupy")
    if cupy is not None:
        impls["cupy.random"] = lambda: cupy.random.standard_normal(N, dtype=cupy.float32)
    times = gpu_times_interleaved(impls, iters=iters, warmup=3)
    for name, ms in times.items():
        extra = {"mean": float(sample.mean()), "std": float(sample.std())} \
            if name == "cuweave" else {}
        results.add(case=case, impl=name, metric="Gsamples/s", value=N / (ms * 1e-3) / 1e9,
                    unit="Gsamples/s", ms=ms, **extra)
    results.add_ratio(case=case, metric="Gsamples/s", num="cuweave", den="cupy.random",
                      higher_is_better=True, target=0.9)
