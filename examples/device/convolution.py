"""Fused convolution: forward FFT → pointwise filter → inverse FFT in ONE kernel.

The signal is read from global memory once and written once; the spectrum never leaves the
registers (CuPy needs three passes: fft, multiply, ifft).

    python examples/device/convolution.py      (needs a GPU, numba-cuda and nvidia-mathdx)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device import FFT

SIZE, BATCH = 256, 4096


def main() -> float:
    fwd = FFT("c2c", size=SIZE, precision=np.float32, direction="forward",
              elements_per_thread=16, ffts_per_block="suggested")
    # the inverse must use the same data distribution as the forward transform
    inv = FFT("c2c", size=SIZE, precision=np.float32, direction="inverse",
              ffts_per_block=fwd.ffts_per_block, elements_per_thread=fwd.elements_per_thread)
    assert tuple(inv.block_dim) == tuple(fwd.block_dim)

    forward, inverse = fwd.execute, inv.execute
    storage, vt = fwd.storage_size, fwd.value_type
    ept, stride, fpb = fwd.elements_per_thread, fwd.stride, fwd.ffts_per_block
    scale = np.float32(1.0 / SIZE)

    @cuda.jit
    def convolve(signal, spectrum, out):
        thread_data = cuda.local.array(storage, dtype=vt)
        shared = cuda.shared.array(0, dtype=vt)
        row = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        for i in range(ept):
            thread_data[i] = signal[row, cuda.threadIdx.x + i * stride]
        forward(thread_data, shared)
        for i in range(ept):  # frequency k = threadIdx.x + i * stride
            thread_data[i] = thread_data[i] * spectrum[cuda.threadIdx.x + i * stride] * scale
        cuda.syncthreads()  # the inverse FFT reuses the shared memory
        inverse(thread_data, shared)
        for i in range(ept):
            out[row, cuda.threadIdx.x + i * stride] = thread_data[i]

    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZE)) + 1j * rng.standard_normal((BATCH, SIZE))
    taps = np.exp(-np.arange(SIZE) / 8.0)  # a decaying filter kernel
    spectrum = np.fft.fft(taps)
    d_x, d_h = cuda.to_device(x.astype(np.complex64)), cuda.to_device(
        spectrum.astype(np.complex64))
    d_y = cuda.device_array_like(d_x)
    smem = max(fwd.shared_memory_size, inv.shared_memory_size)
    convolve[BATCH // fpb, fwd.block_dim, 0, smem](d_x, d_h, d_y)
    got = d_y.copy_to_host()
    ref = np.fft.ifft(np.fft.fft(x, axis=-1) * spectrum, axis=-1)  # circular convolution
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    print(f"fused convolution of {BATCH} signals of {SIZE}: relative L2 error {err:.2e}")
    assert err < 1e-5
    return err


if __name__ == "__main__":
    main()
