"""Hello world: a batch of FFTs computed inside your own numba CUDA kernel.

Each CUDA block computes ``fft.ffts_per_block`` FFTs of 256 points; each thread holds
``fft.elements_per_thread`` values in registers, spaced ``fft.stride`` apart.

    python examples/device/hello_fft.py      (needs a GPU, numba-cuda and nvidia-mathdx)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device import FFT

SIZE, BATCH = 256, 1024


def main() -> float:
    fft = FFT("c2c", size=SIZE, precision=np.float32, direction="forward",
              elements_per_thread=16, ffts_per_block="suggested")
    print("valid elements_per_thread:", fft.valid("elements_per_thread"))
    print(fft, "block_dim", tuple(fft.block_dim), "shared memory", fft.shared_memory_size, "B")

    execute, storage, vt = fft.execute, fft.storage_size, fft.value_type
    ept, stride, fpb = fft.elements_per_thread, fft.stride, fft.ffts_per_block

    @cuda.jit
    def batched_fft(data):
        thread_data = cuda.local.array(storage, dtype=vt)
        shared = cuda.shared.array(0, dtype=vt)
        row = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        for i in range(ept):
            thread_data[i] = data[row, cuda.threadIdx.x + i * stride]
        execute(thread_data, shared)
        for i in range(ept):
            data[row, cuda.threadIdx.x + i * stride] = thread_data[i]

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((BATCH, SIZE)) + 1j * rng.standard_normal((BATCH, SIZE)))
    d = cuda.to_device(x.astype(np.complex64))
    assert BATCH % fpb == 0, "every block must hold ffts_per_block full FFTs"
    batched_fft[BATCH // fpb, fft.block_dim, 0, fft.shared_memory_size](d)
    got = d.copy_to_host()
    ref = np.fft.fft(x, axis=-1)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    print(f"{BATCH} FFTs of {SIZE} points: relative L2 error vs numpy.fft = {err:.2e}")
    assert err < 1e-5
    return err


if __name__ == "__main__":
    main()
