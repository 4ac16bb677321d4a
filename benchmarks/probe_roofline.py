"""Probe: how close the peers of two device targets run to the H200's memory bandwidth.

Two device targets ask cuweave to beat a peer that is itself memory-bound: the standalone block
FFT (65536 FFTs of 256 complex64: every element read once and written once) against cuFFT, and
100,000 batched 64^3 GEMMs (A and B read, C written) against cuBLAS's batched GEMM. No kernel
moves those bytes faster than the device copies them, so this probe times, round-robin in one
run, each peer beside an elementwise kernel moving exactly the same bytes the same way:

* FFT: ``cupy.fft.fft`` / ``torch.fft.fft`` (out of place) beside ``dst.copy_(src)``;
* batched GEMM: ``torch.bmm`` (fp16 and fp64) beside ``torch.add(a, b, out=c)`` on the same
  three arrays (two read, one written).

    python benchmarks/probe_roofline.py [--out DIR]

Writes ``DIR/roofline_probe.{json,md,png}`` (default ``benchmarks/results``). GB/s counts the
bytes read + written once.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from harness import gpu_times_interleaved, peer, probe_main  # noqa: E402

FFT_BATCH, FFT_N = 65536, 256  # as cases_device_fft
GEMM_BATCH, GEMM_N = 100_000, 64  # as cases_device_matmul
ROUNDS = 9


def _record(res, case, times, nbytes, peers, roofline):
    for name, ms in times.items():
        res.add(case=case, impl=name, metric="GB/s", value=nbytes / (ms * 1e-3) / 1e9,
                unit="GB/s", ms=ms)
    for name in peers:
        res.add_ratio(case=case, metric="GB/s", num=name, den=roofline, higher_is_better=True)


def fft_case(res, torch, cupy) -> None:
    x = torch.randn(FFT_BATCH, FFT_N, dtype=torch.complex64, device="cuda")
    y = torch.empty_like(x)
    impls = {"copy (same bytes)": lambda: y.copy_(x),
             "torch.fft.fft": lambda: torch.fft.fft(x)}
    if cupy is not None:
        cx = cupy.asarray(x)
        impls["cupy.fft.fft"] = lambda: cupy.fft.fft(cx)
    times = gpu_times_interleaved(impls, iters=100, warmup=5, rounds=ROUNDS)
    nbytes = 2 * x.numel() * x.element_size()
    _record(res, f"{FFT_BATCH} FFTs of {FFT_N} c64", times, nbytes,
            [n for n in impls if "fft" in n], "copy (same bytes)")


def gemm_case(res, torch, dtype) -> None:
    shape = (GEMM_BATCH, GEMM_N, GEMM_N)
    a = torch.randn(shape, dtype=dtype, device="cuda")
    b = torch.randn(shape, dtype=dtype, device="cuda")
    c = torch.empty(shape, dtype=dtype, device="cuda")
    impls = {"add (same bytes)": lambda: torch.add(a, b, out=c),
             "torch.bmm": lambda: torch.bmm(a, b, out=c)}
    times = gpu_times_interleaved(impls, iters=20, warmup=3, rounds=ROUNDS)
    nbytes = 3 * c.numel() * c.element_size()
    name = str(dtype).removeprefix("torch.")
    _record(res, f"{GEMM_BATCH} GEMMs {GEMM_N}^3 {name}", times, nbytes, ["torch.bmm"],
            "add (same bytes)")


def _cases(res, torch) -> None:
    fft_case(res, torch, peer("cupy"))
    for dtype in (torch.float16, torch.float64):
        gemm_case(res, torch, dtype)


def main(argv=None) -> int:
    return probe_main(__doc__, "roofline_probe", _cases, argv)


if __name__ == "__main__":
    sys.exit(main())
