"""LLM-layer GEMMs: cuweave's planned, autotuned ``Matmul`` vs the best of torch, side by side.

Twenty bf16 products of the linear layers of a 7B-class model (hidden 4096, ffn 11008, 32
heads: QKV out 3·4096) and a 70B-class model (hidden 8192, ffn 28672, GQA with 8 KV heads of
128: QKV out 8192 + 2·1024) at 1 to 16384 tokens: QKV projection, attention output, MLP up,
MLP down, some with a bias, some with bias + GELU (tanh), as torch ``Linear`` computes them
(``x @ W.T + b``, ``W`` of shape ``(out, in)``).

Per product: cuweave = ``Matmul(x, W.T)`` planned over 16 heuristic candidates and
``autotune()``-d with the persistent autotune cache enabled (a fresh file), against every torch
form of the same product (``torch.matmul``, ``F.linear``, ``torch.addmm``,
``torch._addmm_activation``, unfused ``F.gelu(F.linear(...))``); the best of torch is the
denominator. Weights are rotated through copies totalling at least 256 MiB, as a model's
layers do, so small-token products read them from HBM rather than from L2 (the same copies
for every implementation). Times: CUDA events around back-to-back queued calls, the
implementations interleaved round-robin. Products of at most 64 tokens are also timed as CUDA
graph replays (kernel time without Python's per-call cost).

A second process then runs the same products with the autotune cache warm: ``plan()`` takes
the tuned algorithms from the cache (no tuning), timed again against torch in that process.
Reported: per-product TFLOP/s and ratios, their geomean (target 1.05x), the tuning time of the
first process vs the planning time of the second, and what ``autotune()`` costs if a program
calls it again in the second process.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
import zlib

from harness import gpu_times_interleaved, peer

HERE = os.path.dirname(os.path.abspath(__file__))
#: (hidden, ffn, QKV projection width)
MODELS = {"7B": (4096, 11008, 3 * 4096), "70B": (8192, 28672, 8192 + 2 * 8 * 128)}
#: (model, layer, tokens, epilog): epilog None, "bias" or "gelu_bias"
SUITE = [
    ("7B", "qkv", 1, "bias"), ("7B", "qkv", 512, "bias"), ("7B", "qkv", 4096, None),
    ("7B", "attn_out", 256, None), ("7B", "attn_out", 2048, None),
    ("7B", "mlp_up", 16, "gelu_bias"), ("7B", "mlp_up", 1024, "gelu_bias"),
    ("7B", "mlp_up", 16384, None), ("7B", "mlp_down", 64, None),
    ("7B", "mlp_down", 8192, "bias"),
    ("70B", "qkv", 1, None), ("70B", "qkv", 2048, "bias"), ("70B", "qkv", 16384, None),
    ("70B", "attn_out", 32, None), ("70B", "attn_out", 8192, "bias"),
    ("70B", "mlp_up", 8, "gelu_bias"), ("70B", "mlp_up", 512, "gelu_bias"),
    ("70B", "mlp_up", 4096, "gelu_bias"), ("70B", "mlp_down", 128, None),
    ("70B", "mlp_down", 16384, "bias"),
]
QUICK = (0, 6, 9, 10, 16, 19)
CANDIDATES = 16  # heuristic candidates autotune chooses among
ROTATE_BYTES = 256 << 20  # weight copies totalling at least this (L2 is 50 MiB on an H200)
MAX_COPIES = 8
GRAPH_TOKENS = 64  # products of at most this many tokens are also timed as graph replays
GRAPH_CALLS = 16  # calls captured per graph
CHILD_TIMEOUT_S = 150
CUWEAVE, BEST = "cuweave", "torch best"
CW2, BEST2 = "cuweave (2nd process, cache warm)", "torch best (2nd process)"


def _dims(model: str, layer: str) -> tuple[int, int]:
    """``(in_features, out_features)`` of a layer."""
    h, f, q = MODELS[model]
    return {"qkv": (h, q), "attn_out": (h, h), "mlp_up": (h, f), "mlp_down": (f, h)}[layer]


def case_name(model, layer, tokens, epilog) -> str:
    k, n = _dims(model, layer)
    tail = {None: "", "bias": " +bias", "gelu_bias": " +bias+GELU"}[epilog]
    return f"{model} {layer} T={tokens} ({tokens}x{n}x{k}){tail}"


def _flops(tokens, k, n) -> float:
    return 2.0 * tokens * k * n


def _cycle(items):
    it = itertools.cycle(items)
    return lambda: next(it)


def _operands(torch, model, layer, tokens, epilog):
    """``x`` and the rotated ``[(W, bias or None), ...]`` (seeded: both processes alike)."""
    k, n = _dims(model, layer)
    seed = zlib.crc32(f"{model} {layer} {tokens}".encode())  # not hash(): salted per process
    gen = torch.Generator(device="cuda").manual_seed(seed)
    bf16 = torch.bfloat16
    x = torch.randn(tokens, k, device="cuda", dtype=bf16, generator=gen)
    copies = max(1, min(MAX_COPIES, math.ceil(ROTATE_BYTES / (2 * n * k))))
    weights = []
    for _ in range(copies):
        w = (torch.randn(n, k, device="cuda", dtype=torch.float32, generator=gen)
             * k ** -0.5).to(bf16)
        b = (torch.randn(n, device="cuda", dtype=bf16, generator=gen) if epilog else None)
        weights.append((w, b))
    return x, weights


def _torch_impls(torch, x, weights, epilog) -> dict:
    """Every torch form of ``epilog(x @ W.T + b)``, cycling through the weight copies."""
    F = torch.nn.functional
    nxt = _cycle(weights)

    def matmul():
        return torch.matmul(x, nxt()[0].t())

    def linear():
        w, b = nxt()
        return F.linear(x, w, b)

    def addmm():
        w, b = nxt()
        return torch.addmm(b, x, w.t())

    def addmm_gelu():
        w, b = nxt()
        return torch._addmm_activation(b, x, w.t(), use_gelu=True)

    def linear_gelu():
        w, b = nxt()
        return F.gelu(F.linear(x, w, b), approximate="tanh")

    if epilog is None:
        return {"torch.matmul": matmul, "F.linear": linear}
    if epilog == "bias":
        return {"F.linear": linear, "torch.addmm": addmm}
    return {"torch._addmm_activation": addmm_gelu, "F.linear + F.gelu": linear_gelu}


def _planned(x, weights, epilog, tune: bool, algorithms=None):
    """Planned ``Matmul`` per weight copy; the first is planned over ``CANDIDATES`` heuristic
    candidates (or from the autotune cache) and autotuned when ``tune``, the others take its
    algorithms (every copy takes ``algorithms`` where given). Returns ``(matmuls, plan_s,
    tune_s)``."""
    from cuweave.linalg.advanced import Matmul, MatmulPlanPreferences

    name = {None: None, "bias": "BIAS", "gelu_bias": "GELU_BIAS"}[epilog]
    mms = []
    plan_s = tune_s = 0.0
    for i, (w, b) in enumerate(weights):
        mm = Matmul(x, w.t())
        kw = {"epilog": name, "epilog_inputs": {"bias": b[None, :]}} if epilog else {}
        if algorithms is not None:
            mm.plan(algorithms=list(algorithms), **kw)
        elif i == 0:
            t0 = time.perf_counter()
            mm.plan(preferences=MatmulPlanPreferences(limit=CANDIDATES), **kw)
            plan_s = time.perf_counter() - t0
            if tune:
                t0 = time.perf_counter()
                mm.autotune()
                tune_s = time.perf_counter() - t0
        else:
            mm.plan(algorithms=list(mms[0].algorithms), **kw)
        mms.append(mm)
    return mms, plan_s, tune_s


def _rel_err(torch, got, want) -> float:
    got, want = got.float(), want.float()
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))


def _iters(tokens, k, n) -> int:
    est_ms = max(_flops(tokens, k, n) / 650e12, 2.0 * n * k / 3.3e12) * 1e3 + 0.01
    return max(3, min(40, int(4.0 / est_ms)))


def _graphed(torch, fn, calls: int):
    """``calls`` calls of ``fn`` captured in one CUDA graph, after as many calls on the
    capturing stream (every weight copy's ``Matmul`` has run there: none must wait on work
    outside the capture); returns ``(replay, outputs kept alive)``."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    outs = []
    with torch.cuda.stream(side):
        for _ in range(calls):
            fn()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            for _ in range(calls):
                outs.append(fn())
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    return graph.replay, (graph, outs)


def measure(torch, spec, tune: bool, quick: bool, graphs: bool) -> dict:
    """One product: TFLOP/s of cuweave and of each torch form (interleaved), plus its
    tuning and correctness facts."""
    model, layer, tokens, epilog = spec
    k, n = _dims(model, layer)
    x, weights = _operands(torch, model, layer, tokens, epilog)
    mms, plan_s, tune_s = _planned(x, weights, epilog, tune)
    timps = _torch_impls(torch, x, weights, epilog)
    ref = next(iter(timps.values()))()  # the first copy's product (the cycles start there)
    err = _rel_err(torch, mms[0].execute(), ref)
    del ref
    nxt = _cycle(mms)
    impls = {CUWEAVE: lambda: nxt().execute(), **timps}
    flops = _flops(tokens, k, n)
    iters = _iters(tokens, k, n)
    times = gpu_times_interleaved(impls, iters=iters, warmup=2, rounds=3 if quick else 5)
    tflops = {name: flops / (ms * 1e-3) / 1e12 for name, ms in times.items()}
    alg = mms[0].algorithms[0]
    out = {"tflops": tflops, "plan_s": plan_s, "tune_s": tune_s, "rel_err": err,
           "copies": len(weights), "iters": iters, "algorithm_id": alg.algorithm_id,
           "algorithm": alg.__getstate__()["data"].hex(), "graph": None}
    if graphs and tokens <= GRAPH_TOKENS:
        out["graph"] = _graph_tflops(torch, impls, flops)
    out["_mm0"] = mms[0]
    for mm in mms[1:]:
        mm.free()
    return out


def _graph_tflops(torch, impls, flops) -> dict | None:
    replays, keep = {}, []
    for name, fn in impls.items():
        try:
            replay, held = _graphed(torch, fn, GRAPH_CALLS)
        except Exception as e:
            print(f"   CUDA graph capture of {name} failed: {type(e).__name__}: {str(e)[:200]}")
            torch.cuda.synchronize()
            continue
        replays[name] = replay
        keep.append(held)
    if CUWEAVE not in replays:
        return None
    times = gpu_times_interleaved(replays, iters=2, warmup=1, rounds=5)
    return {name: flops * GRAPH_CALLS / (ms * 1e-3) / 1e12 for name, ms in times.items()}


def _best(tflops: dict) -> tuple[str, float]:
    name = max((k for k in tflops if k != CUWEAVE), key=tflops.get)
    return name, tflops[name]


def _geomean(values) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


# ---- the first process (the benchmark engine) --------------------------------------------------
def run(results, quick: bool) -> None:
    torch = peer("torch")
    if torch is None or not torch.cuda.is_available():
        print("   torch with CUDA is needed for the LLM GEMM suite; skipped")
        return
    from cuweave.linalg.advanced import enable_autotune_cache

    suite = [SUITE[i] for i in QUICK] if quick else SUITE
    cache = os.path.join(tempfile.mkdtemp(prefix="cuweave-llm-"), "autotune.json")
    enable_autotune_cache(cache)  # a fresh file: this process tunes every product
    first = {}
    try:
        for spec in suite:
            try:
                first[case_name(*spec)] = _report_one(results, torch, spec, quick)
            except Exception:
                traceback.print_exc()
    finally:
        enable_autotune_cache(None)
    _report_first(results, first)
    second = _second_process(cache, quick)
    if second is not None:
        _report_second(results, first, second)


def _report_one(results, torch, spec, quick) -> dict:
    case = case_name(*spec)
    got = measure(torch, spec, tune=True, quick=quick, graphs=True)
    got.pop("_mm0").free()
    tf = got["tflops"]
    best_name, best = _best(tf)
    meta = {k: got[k] for k in ("plan_s", "tune_s", "rel_err", "copies", "iters",
                                "algorithm_id")}
    for name, v in tf.items():
        results.add(case=case, impl=name, metric="TFLOP/s", unit="TFLOP/s", value=v,
                    **(meta if name == CUWEAVE else {}))
    results.add(case=case, impl=BEST, metric="TFLOP/s", unit="TFLOP/s", value=best,
                best=best_name)
    results.add_ratio(case=case, metric="TFLOP/s", num=CUWEAVE, den=BEST,
                      higher_is_better=True, target=1.0)
    if got["rel_err"] > 2e-2:
        print(f"   !! {case}: cuweave differs from torch by {got['rel_err']:.3g} (max rel.)")
    g = got["graph"]
    if g and len(g) > 1:
        gcase = f"{case} [CUDA graph]"
        gbest_name, gbest = _best(g)
        results.add(case=gcase, impl=CUWEAVE, metric="TFLOP/s", unit="TFLOP/s", value=g[CUWEAVE])
        results.add(case=gcase, impl=BEST, metric="TFLOP/s", unit="TFLOP/s", value=gbest,
                    best=gbest_name)
        results.add_ratio(case=gcase, metric="TFLOP/s", num=CUWEAVE, den=BEST,
                          higher_is_better=True)
    return {"cuweave": tf[CUWEAVE], "best": best, "best_name": best_name,
            "algorithm": got["algorithm"], "plan_s": got["plan_s"], "tune_s": got["tune_s"],
            "graph": None if not g or len(g) < 2 else g[CUWEAVE] / _best(g)[1]}


def _report_first(results, first: dict) -> None:
    if not first:
        return
    n = len(first)
    suite = f"LLM suite: {n} GEMMs"
    results.add(case=suite, impl="cuweave vs torch best (geomean)", metric="speedup", unit="x",
                value=_geomean(v["cuweave"] / v["best"] for v in first.values()), target=1.05)
    graph = [v["graph"] for v in first.values() if v["graph"]]
    if graph:
        results.add(case=suite, impl=f"cuweave vs torch best, CUDA graphs, T<={GRAPH_TOKENS} "
                    f"({len(graph)}; geomean)", metric="speedup", unit="x",
                    value=_geomean(graph))
    results.add(case=suite, impl="1st process: plan + autotune, all products", metric="time",
                unit="s", value=sum(v["plan_s"] + v["tune_s"] for v in first.values()))
    results.add(case=suite, impl="1st process: autotune alone", metric="time", unit="s",
                value=sum(v["tune_s"] for v in first.values()))


# ---- the second process: the autotune cache warm ---------------------------------------------
def _second_process(cache: str, quick: bool) -> dict | None:
    out = cache + ".second.json"
    env = dict(os.environ, CUWEAVE_AUTOTUNE_CACHE=cache)
    src = os.path.join(HERE, "..", "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, os.path.abspath(__file__), "--second-process", cache, out]
    if quick:
        cmd.append("--quick")
    print("   == second process (autotune cache warm)", flush=True)
    t0 = time.perf_counter()
    try:
        subprocess.run(cmd, env=env, timeout=CHILD_TIMEOUT_S, check=True)
        with open(out) as f:
            got = json.load(f)
    except (subprocess.SubprocessError, OSError, ValueError) as e:
        print(f"   second process failed: {type(e).__name__}: {e}")
        return None
    got["wall_s"] = time.perf_counter() - t0
    return got


def _report_second(results, first: dict, second: dict) -> None:
    shapes = second["shapes"]
    ratios, same = [], 0
    for case, s in shapes.items():
        results.add(case=case, impl=CW2, metric="TFLOP/s", unit="TFLOP/s", value=s["cuweave"],
                    plan_s=s["plan_s"], autotune_again_s=s["autotune_again_s"])
        results.add(case=case, impl=BEST2, metric="TFLOP/s", unit="TFLOP/s", value=s["best"],
                    best=s["best_name"])
        results.add_ratio(case=case, metric="TFLOP/s", num=CW2, den=BEST2,
                          higher_is_better=True, target=1.0)
        ratios.append(s["cuweave"] / s["best"])
        same += case in first and first[case]["algorithm"] == s["algorithm"]
    suite = f"LLM suite: {len(first)} GEMMs"
    results.add(case=suite, impl="2nd process (cache warm) vs torch best (geomean)",
                metric="speedup", unit="x", value=_geomean(ratios), target=1.05)
    results.add(case=suite, impl="2nd process: plan from the cache, all products",
                metric="time", unit="s", value=sum(s["plan_s"] for s in shapes.values()))
    results.add(case=suite, impl="2nd process: autotune() called again anyway", metric="time",
                unit="s", value=sum(s["autotune_again_s"] for s in shapes.values()))
    results.add(case=suite, impl="2nd process: products planned with the 1st's winner",
                metric="count", unit=f"of {len(shapes)}", value=same)
    results.add(case=suite, impl="2nd process: wall time (start to end)", metric="time",
                unit="s", value=second["wall_s"])


def second_main(cache: str, out: str, quick: bool) -> int:
    """The second process: every product planned from the warm cache and timed against torch;
    ``autotune()`` then called again (timed) to show what a program that always calls it pays."""
    import torch

    from cuweave.linalg.advanced import enable_autotune_cache

    enable_autotune_cache(cache)
    suite = [SUITE[i] for i in QUICK] if quick else SUITE
    shapes = {}
    for spec in suite:
        case = case_name(*spec)
        try:
            got = measure(torch, spec, tune=False, quick=quick, graphs=False)
            mm0 = got.pop("_mm0")
            t0 = time.perf_counter()
            mm0.autotune()
            again = time.perf_counter() - t0
            mm0.free()
        except Exception:
            traceback.print_exc()
            continue
        best_name, best = _best(got["tflops"])
        shapes[case] = {"cuweave": got["tflops"][CUWEAVE], "best": best, "best_name": best_name,
                        "plan_s": got["plan_s"], "autotune_again_s": again,
                        "algorithm": got["algorithm"], "rel_err": got["rel_err"]}
        print(f"  {case:44s} cuweave {shapes[case]['cuweave']:8.1f}  {best_name} {best:8.1f} "
              f"TFLOP/s  plan {got['plan_s'] * 1e3:.1f} ms", flush=True)
    with open(out, "w") as f:
        json.dump({"shapes": shapes}, f)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "--second-process":
        sys.exit(second_main(sys.argv[2], sys.argv[3], "--quick" in sys.argv[4:]))
    print("usage: python benchmarks/run.py --engines llm (this module's main is its second "
          "process)")
    sys.exit(2)
