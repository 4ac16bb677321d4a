"""Probe: what a split-K first choice of cuBLASLt's heuristics costs small planned matmuls.

``Matmul.plan()`` without autotuning takes the first algorithm of cuBLASLt's heuristics for a
workspace of at most 32 MiB. For some small fp32 products that is a split-K algorithm whose
partial sums are reduced by a second kernel: one more launch per call, where the call is
host-bound. This probe measures, for square fp32 products of 64 to 1024 and two LLM-shaped
bf16 ones, the first choice under the 32 MiB cap beside the first choice under a 4 MiB cap
(``memory_limit``), each planned as a ``Matmul`` and timed round-robin: GPU time of queued
``execute()`` calls and host µs per call. Rows report each choice's ``split_k``.

    python benchmarks/probe_split_k.py [--out DIR]

Writes ``DIR/split_k_probe.{json,md,png}`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from harness import (  # noqa: E402
    gpu_times_interleaved,
    host_us_interleaved,
    probe_main,
)

CAPS = {"32 MiB cap (default)": None, "4 MiB cap": {"memory_limit": 4 << 20}}
SQUARES = (64, 128, 256, 512, 1024)
LLM_SHAPES = ((64, 4096, 11008), (128, 8192, 28672))  # (tokens, out, in): x @ W.T, bf16


def _case(res, torch, m, n, k, dtype) -> None:
    from cuweave.linalg.advanced import Matmul

    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(n, k, device="cuda", dtype=dtype).T
    plans = {}
    for label, options in CAPS.items():
        mm = Matmul(a, b, options=options)
        mm.plan()
        plans[label] = mm
    case = f"{m}x{n}x{k} {str(dtype).removeprefix('torch.')}"
    impls = {label: mm.execute for label, mm in plans.items()}
    gpu = gpu_times_interleaved(impls, iters=50, rounds=5)
    host = host_us_interleaved(impls, calls=1000, sync=torch.cuda.synchronize, rounds=5)
    for label, mm in plans.items():
        alg = mm.algorithms[0]
        meta = dict(algorithm_id=alg.algorithm_id, split_k=alg.split_k,
                    reduction_scheme=alg.reduction_scheme, workspace=alg.workspace_size)
        impl = f"{label}, split_k {alg.split_k}"
        res.add(case=case, impl=impl, metric="GPU us/call", value=gpu[label] * 1e3, unit="us",
                **meta)
        res.add(case=case, impl=impl, metric="host us/call", value=host[label], unit="us",
                **meta)
        mm.free()


def _cases(res, torch) -> None:
    for n in SQUARES:
        _case(res, torch, n, n, n, torch.float32)
    for m, n, k in LLM_SHAPES:
        _case(res, torch, m, n, k, torch.bfloat16)


def main(argv=None) -> int:
    return probe_main(__doc__, "split_k_probe", _cases, argv)


if __name__ == "__main__":
    sys.exit(main())
