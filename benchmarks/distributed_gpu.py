"""cuweave.distributed on GPUs (NCCL all-to-all + per-rank cuFFT/cuBLASLt) vs one GPU.

    mpiexec -n 2 python3 benchmarks/distributed_gpu.py [--fft-n 1024] [--gemm-n 32768]

Cases, each timed as the mean of ``--reps`` runs after ``--warmup`` (plans, NCCL setup), the
processes synchronized by a device sync and an MPI barrier around the timed loop (the slowest
process's time is reported):

- (a) 3-D complex64 FFT of N^3, forward then inverse. Distributed: ``Slab.X`` in, forward to
  ``Slab.Y`` and inverse back to ``Slab.X`` (``redistribute=False``: one exchange each way),
  plus the same with ``redistribute=True`` (two exchanges each way). One GPU: cuweave.fft and
  torch.fft.fftn/ifftn of the whole array on process 0.
- the exchange alone: ``redistribute`` of the complex64 slab Slab.X -> Slab.Y (GB/s = bytes this
  process sends / time).
- (b) bf16 GEMM M = N = K. Distributed: A on ``Slab.X`` (rows), B on ``Slab.Y`` (columns), the
  result on ``Slab.X``: each process gathers B (NCCL) and multiplies its rows. One GPU:
  cuweave.linalg.advanced.matmul and torch.matmul of the whole problem on process 0.

Prints a markdown table on process 0. Needs torch with CUDA (and mpi4py); one GPU per process.
"""

from __future__ import annotations

import argparse
import time

import torch
from mpi4py import MPI

import cuweave.distributed as dist
from cuweave import fft as cfft
from cuweave.distributed.distribution import Slab
from cuweave.linalg.advanced import matmul as cmatmul

COMM = MPI.COMM_WORLD
RANK, P = COMM.Get_rank(), COMM.Get_size()


def timed(fn, reps: int, warmup: int, everyone: bool = True) -> float:
    """Mean ms per call of ``fn`` (the slowest process's when ``everyone``)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    if everyone:
        COMM.Barrier()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    if everyone:
        COMM.Barrier()
    ms = (time.perf_counter() - t0) * 1e3 / reps
    return COMM.allreduce(ms, op=MPI.MAX) if everyone else ms


def one_gpu(fn, reps, warmup) -> float | None:
    """``fn`` timed on process 0 alone while the others wait; the result on process 0."""
    ms = timed(fn, reps, warmup, everyone=False) if RANK == 0 else None
    COMM.Barrier()
    return ms


def fft_case(n: int, reps: int, warmup: int, rows: list) -> None:
    shape = (n, n, n)
    dev = torch.cuda.current_device()
    local = torch.randn(Slab.X.shape(RANK, shape), dtype=torch.complex64, device=dev)

    def fwd_inv(red):
        opts = {"redistribute": red}
        b = dist.fft.fft(local, distribution=Slab.X, options=opts)
        return dist.fft.ifft(b, distribution=Slab.X if red else Slab.Y, options=opts)

    t_one_x = timed(lambda: fwd_inv(False), reps, warmup)
    t_two_x = timed(lambda: fwd_inv(True), reps, warmup)
    t_ex = timed(lambda: dist.distribution.redistribute(local, Slab.X, Slab.Y), reps, warmup)
    sent = local.numel() * local.element_size() * (P - 1) / P
    local = None  # freed before the one-GPU runs
    torch.cuda.empty_cache()
    t_cw = t_torch = None
    if RANK == 0:
        whole = torch.randn(shape, dtype=torch.complex64, device=dev)
        t_cw = timed(lambda: cfft.ifft(cfft.fft(whole)), reps, warmup, everyone=False)
        t_torch = timed(lambda: torch.fft.ifftn(torch.fft.fftn(whole)), reps, warmup,
                        everyone=False)
        del whole
        torch.cuda.empty_cache()
    COMM.Barrier()
    label = f"c64 FFT {n}^3 fwd+inv"
    rows.append((label + ", Slab.X->Y->X (1 exchange each)", t_cw, t_torch, t_one_x))
    rows.append((label + ", redistribute=True (2 exchanges each)", t_cw, t_torch, t_two_x))
    rows.append((f"exchange alone: c64 slab Slab.X->Slab.Y, {sent / 2**30:.2f} GiB sent per "
                 f"process ({sent / (t_ex * 1e-3) / 1e9:.0f} GB/s)", None, None, t_ex))


def gemm_case(n: int, reps: int, warmup: int, rows: list) -> None:
    dev = torch.cuda.current_device()
    gshape = (n, n)
    a = torch.randn(Slab.X.shape(RANK, gshape), dtype=torch.bfloat16, device=dev)
    b = torch.randn(Slab.Y.shape(RANK, gshape), dtype=torch.bfloat16, device=dev)
    dists = [Slab.X, Slab.Y, Slab.X]
    t_dist = timed(lambda: dist.linalg.advanced.matmul(a, b, distributions=dists), reps, warmup)
    a = b = None  # freed before the one-GPU runs
    torch.cuda.empty_cache()
    t_cw = t_torch = None
    if RANK == 0:
        wa = torch.randn(gshape, dtype=torch.bfloat16, device=dev)
        wb = torch.randn(gshape, dtype=torch.bfloat16, device=dev)
        t_cw = timed(lambda: cmatmul(wa, wb), reps, warmup, everyone=False)
        t_torch = timed(lambda: torch.matmul(wa, wb), reps, warmup, everyone=False)
        del wa, wb
        torch.cuda.empty_cache()
    COMM.Barrier()
    rows.append((f"bf16 GEMM {n}^3 (A rows, B columns -> D rows)", t_cw, t_torch, t_dist,
                 2.0 * n ** 3))


def fmt(ms):
    return "-" if ms is None else f"{ms:.2f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fft-n", type=int, default=1024)
    p.add_argument("--gemm-n", type=int, default=32768)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--skip", choices=["fft", "gemm"], action="append", default=[])
    args = p.parse_args()
    ndev = torch.cuda.device_count()
    device = RANK % ndev
    torch.cuda.set_device(device)
    dist.initialize(device, COMM, backends=["nccl"])
    rows: list = []
    if "fft" not in args.skip:
        fft_case(args.fft_n, args.reps, args.warmup, rows)
    if "gemm" not in args.skip:
        gemm_case(args.gemm_n, args.reps, args.warmup, rows)
    if RANK == 0:
        names = [torch.cuda.get_device_name(d) for d in sorted({r % ndev for r in range(P)})]
        print(f"\n{P} processes on {len(names)} GPU(s) ({', '.join(sorted(set(names)))}); "
              f"torch {torch.__version__}; mean of {args.reps} after {args.warmup} warm-up; ms")
        print(f"\n| case | 1 GPU cuweave | 1 GPU torch | {P} GPUs cuweave.distributed | "
              "speed-up vs 1 GPU cuweave |")
        print("|---|---:|---:|---:|---:|")
        for row in rows:
            case, one, tor, many = row[:4]
            extra = ""
            if len(row) > 4:
                flops = row[4]
                extra = f" ({flops / (many * 1e-3) / 1e12:.0f} TFLOP/s)"
                case += f"; 1 GPU cuweave {flops / (one * 1e-3) / 1e12:.0f} TFLOP/s"
            speed = "-" if one is None else f"{one / many:.2f}x"
            print(f"| {case} | {fmt(one)} | {fmt(tor)} | {fmt(many)}{extra} | {speed} |")
    dist.finalize()


if __name__ == "__main__":
    main()
