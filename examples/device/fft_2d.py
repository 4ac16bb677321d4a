"""A 2-D FFT from two block-FFT kernels: along rows (contiguous), then along columns.

    python examples/device/fft_2d.py      (needs a GPU, numba-cuda and nvidia-mathdx)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device import FFT

ROWS, COLS = 100, 256


def line_fft_kernel(fft, along_rows: bool):
    """A kernel applying ``fft`` to every row (``along_rows``) or every column of a 2-D array."""
    execute, storage, vt = fft.execute, fft.storage_size, fft.value_type
    ept, stride, fpb = fft.elements_per_thread, fft.stride, fft.ffts_per_block

    @cuda.jit
    def kernel(data):
        thread_data = cuda.local.array(storage, dtype=vt)
        shared = cuda.shared.array(0, dtype=vt)
        line = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        for i in range(ept):
            k = cuda.threadIdx.x + i * stride
            thread_data[i] = data[line, k] if along_rows else data[k, line]
        execute(thread_data, shared)
        for i in range(ept):
            k = cuda.threadIdx.x + i * stride
            if along_rows:
                data[line, k] = thread_data[i]
            else:
                data[k, line] = thread_data[i]

    return kernel


def main() -> float:
    row_fft = FFT("c2c", size=COLS, precision=np.float64)  # one FFT per block (default)
    col_fft = FFT("c2c", size=ROWS, precision=np.float64)
    rows_k, cols_k = line_fft_kernel(row_fft, True), line_fft_kernel(col_fft, False)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, COLS)) + 1j * rng.standard_normal((ROWS, COLS))
    d = cuda.to_device(x)
    rows_k[ROWS // row_fft.ffts_per_block, row_fft.block_dim, 0, row_fft.shared_memory_size](d)
    cols_k[COLS // col_fft.ffts_per_block, col_fft.block_dim, 0, col_fft.shared_memory_size](d)
    got = d.copy_to_host()
    ref = np.fft.fft2(x)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    print(f"2-D FFT {ROWS}x{COLS} complex128: relative L2 error vs numpy.fft.fft2 = {err:.2e}")
    assert err < 1e-12
    return err


if __name__ == "__main__":
    main()
