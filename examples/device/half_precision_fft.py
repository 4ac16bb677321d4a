"""Half-precision FFTs inside your own numba kernel, the kernel referring to the FFT object.

In half precision cuFFTDx computes two FFTs at once: each ``fft.value_type`` element is a
``float16x4`` holding ``(re0, re1, im0, im1)`` of FFT pair ``(2p, 2p + 1)``
(``fft.implicit_type_batching == 2``).

    python examples/device/half_precision_fft.py   (needs a GPU, numba-cuda and nvidia-mathdx)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device import FFT, float16x4

SIZE, BATCH = 256, 64


def main() -> float:
    fft = FFT(fft_type="c2c", size=SIZE, precision=np.float16, direction="forward",
              ffts_per_block=4)

    @cuda.jit
    def batched_fft(data):  # data: (BATCH, SIZE, 2) float16, re/im last
        thread_data = cuda.local.array(fft.storage_size, dtype=fft.value_type)
        shared_mem = cuda.shared.array(0, dtype=fft.value_type)
        r0 = 2 * (cuda.blockIdx.x * fft.block_dim.y + cuda.threadIdx.y)
        r1 = r0 + 1
        for i in range(fft.elements_per_thread):
            k = cuda.threadIdx.x + i * fft.stride
            thread_data[i] = float16x4(data[r0, k, 0], data[r1, k, 0],
                                       data[r0, k, 1], data[r1, k, 1])
        fft.execute(thread_data, shared_mem)
        for i in range(fft.elements_per_thread):
            k = cuda.threadIdx.x + i * fft.stride
            v = thread_data[i]
            data[r0, k, 0], data[r1, k, 0], data[r0, k, 1], data[r1, k, 1] = v.x, v.y, v.z, v.w

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((BATCH, SIZE)) + 1j * rng.standard_normal((BATCH, SIZE))) * 0.1
    halves = np.stack([x.real, x.imag], axis=-1).astype(np.float16)
    d = cuda.to_device(halves)
    batched_fft[BATCH // fft.ffts_per_block, fft.block_dim, 0, fft.shared_memory_size](d)
    out = d.copy_to_host().astype(np.float64)
    got = out[..., 0] + 1j * out[..., 1]
    ref = np.fft.fft(halves[..., 0].astype(np.float64) + 1j * halves[..., 1], axis=-1)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    print(f"{BATCH} half-precision FFTs of {SIZE}: relative L2 error vs numpy.fft = {err:.2e}")
    assert err < 1e-2
    return err


if __name__ == "__main__":
    main()
