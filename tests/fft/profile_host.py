"""Host cost per call of cuweave.fft's GPU path with CUDA stubbed out (no GPU needed).

Usage: ``PYTHONPATH=src:. python tests/fft/profile_host.py [--native] [--profile]``

``--native`` compiles a stand-in libcufft (needs ``cc``) so ctypes argument conversion is
real; otherwise cuFFT calls are Python no-ops. Outputs are torch CPU tensors, so torch.empty
costs the CPU allocator, not the CUDA caching allocator: compare runs, not absolute numbers
with a GPU.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import timeit

import torch

import cuweave.fft as F
from tests.fakes.cufft import build_native, fake_cuda


def _us(fn, number=20000, repeat=7) -> float:
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--native", action="store_true")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    native = build_native(tempfile.mkdtemp()) if args.native else None
    x = torch.randn(8, 256, dtype=torch.complex64)
    shape, dt, dev = (8, 256), torch.complex64, torch.device("cpu")
    with fake_cuda(native):
        f = F.FFT(x, axes=(1,))
        f.plan()
        rows = {
            "torch.empty(8, 256) alone": lambda: torch.empty(*shape, dtype=dt, device=dev),
            "FFT.execute()": f.execute,
            "fft(x, axes=(1,))": lambda: F.fft(x, axes=(1,)),
            "ifft(x, axes=(1,), norm='backward')": lambda: F.ifft(x, axes=(1,),
                                                                  norm="backward"),
        }
        for name, fn in rows.items():
            print(f"{name:40s} {_us(fn):7.3f} us/call")
        if args.profile:
            for name in ("FFT.execute()", "fft(x, axes=(1,))"):
                fn = rows[name]
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(20000):
                    fn()
                prof.disable()
                print(f"---- {name}")
                pstats.Stats(prof).sort_stats("tottime").print_stats(12)
        f.free()


if __name__ == "__main__":
    main()
