"""Diagnostic: what a cuFFT JIT callback costs at 16384 FFTs of 1024 complex64 points.

Compares torch's fft / scaled ifft, cuweave without callbacks, with the fused ``norm`` (a store
callback compiled by NVRTC), and with store callbacks written in Python and compiled by
numba-cuda (identity; a filter multiply as in the convolution example). Results of one run are
in ``benchmarks/results/fft_callbacks_probe.md``.

    python benchmarks/probe_fft_callbacks.py      (GPU, torch, numba-cuda)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from harness import gpu_time_ms  # noqa: E402

import cuweave.fft as F  # noqa: E402

B, N = 16384, 1024
NU = np.uint64(N)


def ident(data_out, offset, element, user_info, reserved):
    data_out[offset] = element


def conv(data_out, offset, element, user_info, reserved):
    data_out[offset] = element * user_info[offset % NU]


def conv32(data_out, offset, element, user_info, reserved):
    data_out[offset] = element * user_info[np.uint32(offset) & np.uint32(N - 1)]


def timed(name, fn):
    ms = gpu_time_ms(fn, iters=50, warmup=5)
    gbps = 2 * B * N * 8 / (ms * 1e-3) / 1e9
    print(f"{name:40s} {ms * 1e3:8.1f} us  {gbps:7.0f} GB/s", flush=True)


def planned(x, **plan_kw):
    f = F.FFT(x, axes=(1,))
    f.plan(**plan_kw)
    return f.execute


def main():
    x = torch.randn(B, N, dtype=torch.complex64, device="cuda")
    h = torch.randn(N, dtype=torch.complex64, device="cuda")
    timed("torch.fft.fft", lambda: torch.fft.fft(x))
    timed("torch.fft.ifft (scaled)", lambda: torch.fft.ifft(x))
    timed("cuweave plain", planned(x))
    timed("cuweave norm=ortho (NVRTC store cb)", planned(x, norm="ortho"))
    for label, fn, data in [("numba identity epilog", ident, 0),
                            ("numba conv epilog (u64 %)", conv, h.data_ptr()),
                            ("numba conv epilog (u32 &)", conv32, h.data_ptr())]:
        try:
            cb = F.compile_epilog(fn, "complex64", "complex64")
            timed("cuweave " + label, planned(x, epilog={"ltoir": cb, "data": data}))
        except Exception as e:
            print(label, "failed:", type(e).__name__, e)


if __name__ == "__main__":
    main()
