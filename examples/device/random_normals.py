"""Random numbers inside your own numba kernel with cuRAND's device API (cuweave.device.random).

Each thread owns a Philox4_32_10 state (its own subsequence), draws normals four at a time and
estimates E[exp(Z)] = exp(1/2) for Z ~ N(0, 1): no random numbers go through global memory.

    python examples/device/random_normals.py   (needs a GPU, numba-cuda and nvidia-curand)
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from cuweave.device import random

THREADS, DRAWS = 64 * 256, 256


def main() -> float:
    states = random.StatesPhilox4_32_10(THREADS)

    @cuda.jit
    def estimate(states, seed, partial):
        i = cuda.grid(1)
        if i >= states.shape[0]:
            return
        random.init(seed, i, 0, states[i])
        total = 0.0
        for _ in range(DRAWS // 4):
            z = random.normal4(states[i])
            total += math.exp(z.x) + math.exp(z.y) + math.exp(z.z) + math.exp(z.w)
        partial[i] = total / DRAWS

    partial = cuda.device_array(THREADS, np.float64)
    estimate[THREADS // 256, 256](states, 2024, partial)
    value = float(partial.copy_to_host().mean())
    print(f"E[exp(Z)] from {THREADS * DRAWS} in-kernel normals: {value:.5f} "
          f"(exact {math.exp(0.5):.5f})")
    assert abs(value - math.exp(0.5)) < 5e-3
    return value


if __name__ == "__main__":
    main()
