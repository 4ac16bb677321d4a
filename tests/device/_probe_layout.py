"""Temporary GPU probe (deleted after the run): raw register contents of real block FFTs."""
import numpy as np
from numba import cuda

import cuweave.device as dx

np.set_printoptions(precision=2, suppress=True, linewidth=200)
for t in ("r2c", "c2r"):
    f = dx.FFT(t, 16, np.float32, elements_per_thread=4)
    print(t, f, "in_ept", f.input_ept, "out_ept", f.output_ept, "stride", f.stride,
          "storage", f.storage_size, "in_len", f.input_length, "out_len", f.output_length,
          "block", tuple(f.block_dim), "smem", f.shared_memory_size)
    ex, st, vt, stride, rt = f.execute, f.storage_size, f.value_type, f.stride, f.precision

    @cuda.jit
    def k(x, regs_in, regs_out):
        td = cuda.local.array(st, dtype=vt)
        sm = cuda.shared.array(0, dtype=vt)
        for i in range(st):
            td[i] = x[cuda.threadIdx.x, i]
        for i in range(st):
            regs_in[cuda.threadIdx.x, i] = td[i]
        ex(td, sm)
        for i in range(st):
            regs_out[cuda.threadIdx.x, i] = td[i]

    nthr = f.block_dim[0]
    x = np.zeros((nthr, st), np.complex64)
    # fill registers with distinct values: register i of thread t = (t + i*stride) + 1j*100
    for th in range(nthr):
        for i in range(st):
            x[th, i] = (th + i * stride) + 1j * (100 + th + i * stride)
    ri = cuda.device_array((nthr, st), np.complex64)
    ro = cuda.device_array((nthr, st), np.complex64)
    k[1, f.block_dim, 0, f.shared_memory_size](cuda.to_device(x), ri, ro)
    print("regs in\n", ri.copy_to_host())
    print("regs out\n", ro.copy_to_host())
    real_guess = np.arange(16, dtype=np.float64)
    print("rfft(arange16)", np.fft.rfft(real_guess))
