"""cuweave.tensor's CPU path vs ``numpy.einsum(optimize=True)`` (and opt_einsum where
installed), on the GPU suite of ``cases_tensor.py`` scaled to a CPU (same expressions, dtypes
and aspect; extents shrunk so that each case takes milliseconds on two cores).

cuweave runs the function form with ``execution="cpu"``; every implementation is checked
against a float64 einsum first, then timed in interleaved rounds (the machine is shared);
value = median (the "best time" rows and the "best rounds" ratio: the fastest round, what an
unshared machine sees). Target: speedup >= 1.0 on each case.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
from cases_tensor import SUITE, TERNARY, flops, shapes
from harness import cpu_time_ms, peer

#: each case's extents divided by this on the CPU (the tensor-network cases stay as they are)
SCALE = {"matrix fp32": 4, "matrix fp64": 2, "transpose abcd,dbfe->aecf": 2,
         "transpose ijkl,lkmn->nmji": 2, "batched bij,bjk->bik": 2,
         "batched transposed bji,bkj->bik": 2, "network pqrs,rstu->pqtu": 2,
         "network abcdef,defghi->abcghi": 1, "mixed fp16 mk,kn->mn": 8,
         "mixed bf16 bmk,bkn->bmn": 2, TERNARY[0]: 2}


def _arrays(expr, extents, dtype, rng):
    out = []
    for s in shapes(expr, extents):
        x = rng.standard_normal(s)
        if dtype.startswith("complex"):
            x = x + 1j * rng.standard_normal(s)
        if dtype == "bfloat16":
            import ml_dtypes

            out.append(x.astype(ml_dtypes.bfloat16))
        else:
            out.append(x.astype(dtype))
    return out


def _check(fn, ref, label):
    got = np.asarray(fn()).astype(ref.dtype)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    if not err < 3e-2:
        raise AssertionError(f"{label}: relative L2 error {err:.3g}")


def run(results, quick: bool) -> None:
    from cuweave.tensor import binary_contraction, ternary_contraction

    oe = peer("opt_einsum")
    rng = np.random.default_rng(0)
    iters, rounds = (2, 2) if quick else (3, 11)
    cases = list(SUITE[:3] if quick else SUITE) + [TERNARY]
    for name, expr, extents, dtype in cases:
        div = SCALE.get(name, 1)
        ext = {k: max(1, v // div) for k, v in extents.items()}
        xs = _arrays(expr, ext, dtype, rng)
        wide = [x.astype(np.complex128 if dtype.startswith("complex") else np.float64)
                for x in xs]
        ref = np.einsum(expr, *wide, optimize=True)
        fn = ternary_contraction if len(xs) == 3 else binary_contraction
        impls = {"cuweave": lambda f=fn, e=expr, a=xs: f(e, *a, execution="cpu"),
                 "numpy.einsum(optimize=True)": lambda e=expr, a=xs: np.einsum(e, *a,
                                                                               optimize=True)}
        if oe is not None:
            impls["opt_einsum.contract"] = lambda e=expr, a=xs: oe.contract(e, *a)
        for label, f in list(impls.items()):
            try:
                _check(f, ref, label)
            except Exception as err:  # noqa: BLE001 - a peer that fails is reported, dropped
                print(f"   {name} {label}: {type(err).__name__}: {err}")
                if label == "cuweave":
                    raise
                del impls[label]
        times = {k: [] for k in impls}
        for r in range(rounds):
            order = list(impls.items())
            for label, f in order if r % 2 == 0 else order[::-1]:
                times[label].append(cpu_time_ms(f, iters=iters, warmup=1))
        case = f"{name} [{'x'.join(str(v) for v in ext.values())}] {dtype}"
        fl = flops(expr, ext)
        for label, ts in times.items():
            ms = statistics.median(ts)
            results.add(case=case, impl=label, metric="time", value=ms, unit="ms",
                        gflops=fl / (ms * 1e-3) / 1e9)
            results.add(case=case, impl=label, metric="best time", value=min(ts), unit="ms")
        results.add_ratio(case=case, metric="time", num="cuweave",
                          den="numpy.einsum(optimize=True)", higher_is_better=False, target=1.0)
        # the fastest round of each: what an unshared machine sees (the median carries the
        # neighbours' load on a shared one)
        best = {k: min(v) for k, v in times.items()}
        results.add(case=case, impl="cuweave vs numpy.einsum(optimize=True), best rounds",
                    metric="ratio", value=best["numpy.einsum(optimize=True)"] / best["cuweave"],
                    unit="x")
        if "opt_einsum.contract" in times:
            results.add_ratio(case=case, metric="time", num="cuweave",
                              den="opt_einsum.contract", higher_is_better=False)
    sp = [r["value"] for r in results.rows if r["metric"] == "speedup" and
          r["impl"].endswith("numpy.einsum(optimize=True)")]
    if sp:
        results.add(case="suite geometric mean", impl="cuweave vs numpy.einsum(optimize=True)",
                    metric="speedup", value=math.exp(sum(map(math.log, sp)) / len(sp)),
                    unit="x", target=1.0)
