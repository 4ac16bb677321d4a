"""In-process A/B of per-call host cost: an earlier cuweave, imported as the package
``cwbefore``, against the working tree's ``cuweave``: interleaved call blocks on the same arrays
in the same CUDA context; medians of the per-round ratios (separate processes differ by up to
40% on the GPU machine, so they cannot settle a few percent).

Make the earlier tree (its imports are relative, so a renamed copy works), then run on the GPU
machine with ``src`` and the wheels on PYTHONPATH::

    git worktree add /tmp/before <commit>
    mkdir -p gpu-check-out/ab/before/pkg
    cp -r /tmp/before/src/cuweave gpu-check-out/ab/before/pkg/cwbefore
    python3 scripts/ab_percall.py    # BEFORE_PKG=gpu-check-out/ab/before/pkg by default
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.environ.get("BEFORE_PKG", os.path.join("gpu-check-out", "ab", "before",
                                                              "pkg")))
import cupy  # noqa: E402
import torch  # noqa: E402
from cwbefore.fft import FFT as FFT0  # noqa: E402
from cwbefore.fft import fft as fft0  # noqa: E402
from cwbefore.linalg.advanced import Matmul as Matmul0  # noqa: E402
from cwbefore.linalg.advanced import matmul as matmul0  # noqa: E402

from cuweave.fft import FFT, fft  # noqa: E402
from cuweave.linalg.advanced import Matmul, matmul  # noqa: E402


def block(fn, calls=2000):
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) / calls * 1e6


def ab(after, before, rounds=16):
    """(before µs, after µs, median of after/before per round), alternating which goes first."""
    for f in (after, before, after, before):
        block(f, 300)
    torch.cuda.synchronize()
    ra, rb, ratios = [], [], []
    for r in range(rounds):
        pair = [(before, rb), (after, ra)] if r % 2 else [(after, ra), (before, rb)]
        for f, acc in pair:
            acc.append(block(f))
            torch.cuda.synchronize()
        ratios.append(ra[-1] / rb[-1])
    return statistics.median(rb), statistics.median(ra), statistics.median(ratios)


def operands(pkg):
    if pkg == "torch":
        return (torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda"),
                torch.randn(4096, dtype=torch.complex64, device="cuda"))
    a = cupy.random.standard_normal((64, 64), dtype=cupy.float32)
    return a, a.copy(), cupy.random.standard_normal(4096).astype(cupy.complex64)


def main():
    res = {}
    for pkg in ("torch", "cupy"):
        a, b, x = operands(pkg)
        m1, m0 = Matmul(a, b), Matmul0(a, b)
        m1.plan()
        m0.plan()
        res[f"{pkg} planned execute fp32 64²"] = ab(m1.execute, m0.execute)
        res[f"{pkg} matmul() fp32 64²"] = ab(lambda a=a, b=b: matmul(a, b),
                                             lambda a=a, b=b: matmul0(a, b))
        f1, f0 = FFT(x), FFT0(x)
        f1.plan()
        f0.plan()
        res[f"{pkg} planned FFT execute c64 4096"] = ab(f1.execute, f0.execute)
        res[f"{pkg} fft() c64 4096"] = ab(lambda x=x: fft(x), lambda x=x: fft0(x))
        for obj in (m1, m0, f1, f0):
            obj.free()
    print(f"{'case':36s} {'before µs':>10s} {'after µs':>10s} {'median ratio':>13s}")
    for k, (before, after, r) in res.items():
        print(f"{k:36s} {before:10.2f} {after:10.2f} {r:13.3f}")
    with open(os.path.join(os.environ.get("OUT", "."), "ab_percall.json"), "w") as fh:
        json.dump(res, fh)


if __name__ == "__main__":
    main()
