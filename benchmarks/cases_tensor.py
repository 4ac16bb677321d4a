"""cuweave.tensor (cuTENSOR) vs torch.einsum, cupy.einsum (CuPy's cuTENSOR path) and
nvmath-python, side by side.

The suite (:data:`SUITE`): matrix-like, transpose-heavy, batched, high-order tensor-network and
mixed-precision (half-precision data, float32 compute) contractions. For each, cuweave's planned
:class:`~cuweave.tensor.BinaryContraction` (autotuned) and its function form are timed with CUDA
events against the peers, interleaved; the speedup is over the best peer (target >= 1.0, the
geometric mean >= 1.1). A row "cuweave JIT" (``plan_preference.jit``: a kernel compiled for the
contraction) is reported beside it, not counted in the targets. Then a ternary contraction
against two binary ``torch.einsum`` calls (target >= 1.0), and the function form's host
µs/call on a small contraction against ``torch.einsum``'s (target: at most 1.25x).

CuPy is imported with ``CUPY_ACCELERATORS=cub,cutensor`` (set here unless the environment sets
it) so that ``cupy.einsum`` takes its own cuTENSOR path where CuPy finds libcutensor; the
results say whether it did.
"""

from __future__ import annotations

import math
import os

from harness import gpu_times_interleaved, host_us_interleaved, peer

#: (name, expression, extents by label, dtype); operands are C-contiguous in the labels' order
SUITE = [
    ("matrix fp32", "ij,jk->ik", {"i": 4096, "j": 4096, "k": 4096}, "float32"),
    ("matrix fp64", "ik,kj->ij", {"i": 2048, "j": 2048, "k": 2048}, "float64"),
    ("transpose abcd,dbfe->aecf", "abcd,dbfe->aecf",
     {"a": 48, "b": 48, "c": 48, "d": 48, "e": 48, "f": 48}, "float32"),
    ("transpose ijkl,lkmn->nmji", "ijkl,lkmn->nmji",
     {"i": 40, "j": 40, "k": 40, "l": 40, "m": 40, "n": 40}, "float32"),
    ("batched bij,bjk->bik", "bij,bjk->bik", {"b": 512, "i": 128, "j": 128, "k": 128},
     "float32"),
    ("batched transposed bji,bkj->bik", "bji,bkj->bik", {"b": 256, "i": 192, "j": 192, "k": 192},
     "float32"),
    ("network pqrs,rstu->pqtu", "pqrs,rstu->pqtu",
     {"p": 32, "q": 32, "r": 32, "s": 32, "t": 32, "u": 32}, "complex64"),
    ("network abcdef,defghi->abcghi", "abcdef,defghi->abcghi",
     {"a": 10, "b": 10, "c": 10, "d": 10, "e": 10, "f": 10, "g": 10, "h": 10, "i": 10},
     "float32"),
    ("mixed fp16 mk,kn->mn", "mk,kn->mn", {"m": 8192, "k": 4096, "n": 4096}, "float16"),
    ("mixed bf16 bmk,bkn->bmn", "bmk,bkn->bmn", {"b": 64, "m": 512, "k": 512, "n": 512},
     "bfloat16"),
]
TERNARY = ("ternary bij,bjk,bkl->bil", "bij,bjk,bkl->bil",
           {"b": 64, "i": 256, "j": 64, "k": 256, "l": 64}, "float32")
SMALL = ("host overhead ij,jk->ik 32^3", "ij,jk->ik", {"i": 32, "j": 32, "k": 32}, "float32")


def shapes(expr, extents):
    """Each input's shape for ``expr`` and the label extents."""
    terms = expr.split("->")[0].split(",")
    return [tuple(extents[ch] for ch in t) for t in terms]


def flops(expr, extents) -> float:
    """2 x the product of every extent (a multiply and an add per term)."""
    labels = set(expr.replace(",", "").replace("->", ""))
    return 2.0 * math.prod(extents[ch] for ch in labels)


def _tensors(torch, expr, extents, dtype, seed=0):
    g = torch.Generator("cuda").manual_seed(seed)
    tdt = getattr(torch, dtype)
    return [torch.randn(s, device="cuda", generator=g, dtype=torch.float32).to(tdt)
            if not tdt.is_complex else
            torch.randn(s, device="cuda", generator=g, dtype=tdt)
            for s in shapes(expr, extents)]


def _cupy_with_cutensor():
    """CuPy with its cuTENSOR accelerator asked for, and whether its cuTENSOR loads."""
    os.environ.setdefault("CUPY_ACCELERATORS", "cub,cutensor")
    cp = peer("cupy")
    if cp is None:
        return None, False
    try:
        from cupy_backends.cuda.libs import cutensor as cpt

        cpt.get_version()
        uses = "cutensor" in os.environ.get("CUPY_ACCELERATORS", "")
    except Exception:  # noqa: BLE001 - CuPy without cuTENSOR: its own einsum path
        uses = False
    return cp, uses


def _peers(torch, cp, nvmath, expr, xs):
    impls = {"torch.einsum": lambda: torch.einsum(expr, *xs)}
    if cp is not None and xs[0].dtype != torch.bfloat16:
        ys = [cp.from_dlpack(x) for x in xs]
        impls["cupy.einsum"] = lambda: cp.einsum(expr, *ys)
    if nvmath is not None and len(xs) == 2:
        try:
            obj = nvmath.tensor.BinaryContraction(expr, xs[0], xs[1])
            obj.plan()
            impls["nvmath-python"] = obj.execute
        except Exception as e:  # noqa: BLE001 - a peer that cannot run is reported
            print(f"   nvmath-python: {type(e).__name__}: {e}")
    return impls


def suite(res, torch, cp, nvmath, quick):
    from cuweave.tensor import BinaryContraction, ContractionJitMode, binary_contraction

    ratios = []
    iters = 5 if quick else 20
    for name, expr, extents, dtype in SUITE[:3] if quick else SUITE:
        xs = _tensors(torch, expr, extents, dtype)
        obj = BinaryContraction(expr, *xs)
        obj.autotune(iterations=4)
        impls = {"cuweave": obj.execute,
                 "cuweave function form": lambda e=expr, a=xs[0], b=xs[1]:
                 binary_contraction(e, a, b)}
        jit = None
        if not quick:  # cuTENSOR's JIT: a kernel compiled for this contraction at plan time
            try:
                jit = BinaryContraction(expr, *xs)
                jit.plan_preference.jit = ContractionJitMode.DEFAULT
                jit.plan()
                impls["cuweave JIT"] = jit.execute
            except Exception as e:  # noqa: BLE001 - reported, the other rows stand
                print(f"   cuweave JIT: {type(e).__name__}: {e}")
        impls.update(_peers(torch, cp, nvmath, expr, xs))
        times = gpu_times_interleaved(impls, iters=iters)
        fl = flops(expr, extents)
        for impl, ms in times.items():
            res.add(case=name, impl=impl, metric="TFLOP/s", value=fl / (ms * 1e-3) / 1e12,
                    unit="TFLOP/s", ms=ms)
        peers = {k: v for k, v in times.items() if not k.startswith("cuweave")}
        best = min(peers, key=peers.get)
        ratio = peers[best] / times["cuweave"]
        ratios.append(ratio)
        res.add(case=name, impl=f"cuweave vs best peer ({best})", metric="speedup",
                value=ratio, unit="x", target=1.0)
        if "cuweave JIT" in times:
            res.add(case=name, impl=f"cuweave JIT vs best peer ({best})", metric="speedup",
                    value=peers[best] / times["cuweave JIT"], unit="x")
            jit.free()
        obj.free()
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        res.add(case="suite geometric mean", impl="cuweave vs best peer", metric="speedup",
                value=geo, unit="x", target=1.1)


def ternary(res, torch, quick):
    from cuweave.tensor import TernaryContraction, binary_contraction

    name, expr, extents, dtype = TERNARY
    xs = _tensors(torch, expr, extents, dtype)
    obj = TernaryContraction(expr, *xs)
    obj.autotune(iterations=4)
    first, second = "bij,bjk->bik", "bik,bkl->bil"
    impls = {"cuweave": obj.execute,
             "two torch.einsum": lambda: torch.einsum(second, torch.einsum(first, xs[0], xs[1]),
                                                      xs[2]),
             # what a pairwise route would cost (data for choosing one by measurement)
             "cuweave two binary": lambda: binary_contraction(
                 second, binary_contraction(first, xs[0], xs[1]), xs[2])}
    times = gpu_times_interleaved(impls, iters=5 if quick else 20)
    fl = flops(first, extents) + flops(second, extents)
    for impl, ms in times.items():
        res.add(case=name, impl=impl, metric="TFLOP/s", value=fl / (ms * 1e-3) / 1e12,
                unit="TFLOP/s", ms=ms)
    res.add(case=name, impl="cuweave vs two torch.einsum", metric="speedup",
            value=times["two torch.einsum"] / times["cuweave"], unit="x", target=1.0)
    obj.free()


def host_overhead(res, torch, quick):
    from cuweave.tensor import binary_contraction

    name, expr, extents, dtype = SMALL
    a, b = _tensors(torch, expr, extents, dtype)
    impls = {"cuweave function form": lambda: binary_contraction(expr, a, b),
             "torch.einsum": lambda: torch.einsum(expr, a, b)}
    us = host_us_interleaved(impls, calls=500 if quick else 2000,
                             sync=torch.cuda.synchronize)
    for impl, v in us.items():
        res.add(case=name, impl=impl, metric="host", value=v, unit="us/call")
    res.add(case=name, impl="cuweave / torch.einsum host time", metric="ratio",
            value=us["cuweave function form"] / us["torch.einsum"], unit="x", target_max=1.25)


def run(results, quick: bool) -> None:
    torch = peer("torch")
    if torch is None or not torch.cuda.is_available():
        print("   torch with CUDA is needed")
        return
    cp, cupy_cutensor = _cupy_with_cutensor()
    nvmath = peer("nvmath")
    if nvmath is not None:
        try:
            import nvmath.tensor  # noqa: F401
        except Exception as e:  # noqa: BLE001
            print(f"   nvmath.tensor unavailable: {e}")
            nvmath = None
    from cuweave._bindings import cutensor

    results.meta["cutensor"] = {"version": cutensor.get_version(),
                                "path": cutensor.library_path()}
    results.meta["cupy_einsum_cutensor"] = cupy_cutensor
    torch.backends.cuda.matmul.allow_tf32 = False  # like with like: COMPUTE_32F
    suite(results, torch, cp, nvmath, quick)
    ternary(results, torch, quick)
    host_overhead(results, torch, quick)
