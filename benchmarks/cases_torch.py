"""cuweave.torch fused layers vs torch eager and torch.compile, side by side.

Cases: an MLP block (Linear → GELU(tanh) → Linear) forward + backward (input and parameter
gradients) in bf16 at tokens 8192, hidden 4096, ffn 16384: cuweave ``FusedMLP`` eager and
under ``torch.compile``, torch eager, torch.compile (default mode). A small step (tokens 64)
captured in a CUDA graph vs the same step eager, and the host time of the small step's calls
(eager route vs the ``torch.library`` operator, vs torch). The block's products one by one, the
backward variants (first bias gradient in DGELU_BGRAD or in the weight gradient's BGRADB;
autotuning over 8/16/32 heuristic candidates), the FP8 forward Linear. A probe: can a plain
``cuweave.linalg.advanced.matmul`` be captured in a CUDA graph after a warm-up?

``CUWEAVE_TORCH_PARTS`` (comma-separated part names, e.g. ``host_time,small_step``) runs only
those parts.
"""

from __future__ import annotations

import os
import statistics
import time
import traceback

from harness import gpu_times_interleaved, peer


def _blocks(torch, hidden, ffn, act, dtype):
    from cuweave.torch import FusedMLP

    torch.manual_seed(0)
    fused = FusedMLP(hidden, ffn, activation=act, device="cuda", dtype=dtype)
    gelu = torch.nn.GELU(approximate="tanh") if act == "gelu" else torch.nn.ReLU()
    plain = torch.nn.Sequential(torch.nn.Linear(hidden, ffn, device="cuda", dtype=dtype), gelu,
                                torch.nn.Linear(ffn, hidden, device="cuda", dtype=dtype))
    plain.load_state_dict({"0.weight": fused.fc1.weight, "0.bias": fused.fc1.bias,
                           "2.weight": fused.fc2.weight, "2.bias": fused.fc2.bias})
    return fused, plain


def _step(torch, module, x, dy):
    """forward + backward: the input and every parameter gradient (no accumulation)."""
    inputs = [x, *module.parameters()]

    def step():
        return torch.autograd.grad(module(x), inputs, dy)

    return step


def mlp_block(res, torch, quick, act="gelu"):
    tokens, hidden, ffn = 8192, 4096, 16384
    dtype = torch.bfloat16
    fused, plain = _blocks(torch, hidden, ffn, act, dtype)
    x = torch.randn(tokens, hidden, device="cuda", dtype=dtype, requires_grad=True)
    dy = torch.randn(tokens, hidden, device="cuda", dtype=dtype)
    case = f"MLP {act} fwd+bwd bf16 T={tokens} h={hidden} ffn={ffn}"
    impls = {"cuweave FusedMLP": _step(torch, fused, x, dy),
             "torch eager": _step(torch, plain, x, dy),
             "torch.compile": _step(torch, torch.compile(plain), x, dy),
             "cuweave FusedMLP + torch.compile": _step(
                 torch, torch.compile(fused, fullgraph=True), x, dy)}
    flops = 3 * 2 * (2.0 * tokens * hidden * ffn)
    for impl, ms in gpu_times_interleaved(impls, iters=5 if quick else 10, warmup=3).items():
        res.add(case=case, impl=impl, metric="ms", unit="ms", value=ms)
        res.add(case=case, impl=impl, metric="TFLOP/s", unit="TFLOP/s",
                value=flops / (ms * 1e-3) / 1e12)
    res.add_ratio(case=case, metric="ms", num="cuweave FusedMLP", den="torch eager",
                  higher_is_better=False, target=1.15)
    res.add_ratio(case=case, metric="ms", num="cuweave FusedMLP", den="torch.compile",
                  higher_is_better=False, target=1.0)
    res.add_ratio(case=case, metric="ms", num="cuweave FusedMLP + torch.compile",
                  den="torch.compile", higher_is_better=False, target=1.0)


def _mlp_operands(torch, tokens, hidden, ffn):
    bf16 = torch.bfloat16
    torch.manual_seed(0)
    x = torch.randn(tokens, hidden, device="cuda", dtype=bf16)
    w1 = torch.randn(ffn, hidden, device="cuda", dtype=bf16) / hidden ** 0.5
    w2 = torch.randn(hidden, ffn, device="cuda", dtype=bf16) / ffn ** 0.5
    b1 = torch.randn(ffn, device="cuda", dtype=bf16)
    b2 = torch.randn(hidden, device="cuda", dtype=bf16)
    dy = torch.randn(tokens, hidden, device="cuda", dtype=bf16)
    return x, w1, b1, w2, b2, dy


def mlp_products(res, torch, quick, tokens=8192, hidden=4096, ffn=16384):
    """The block's six products one by one (fused epilogs) against what torch runs for each."""
    from cuweave.torch import _ops

    F = torch.nn.functional
    x, w1, b1, w2, b2, dy = _mlp_operands(torch, tokens, hidden, ffn)
    h, aux = _ops.linear(x, w1, b1, "gelu")
    z = aux[:ffn].t()
    dz, _ = _ops.linear_dgrad_act(dy, w2, aux, "gelu", False)
    cases = {
        "fwd1 GELU_AUX_BIAS": {
            "cuweave": lambda: _ops.linear(x, w1, b1, "gelu"),
            "torch addmm + gelu": lambda: F.gelu(F.linear(x, w1, b1), approximate="tanh"),
            "torch addmm alone": lambda: F.linear(x, w1, b1)},
        "fwd2 BIAS": {"cuweave": lambda: _ops.linear(h, w2, b2, "none"),
                      "torch addmm alone": lambda: F.linear(h, w2, b2)},
        "wgrad2 BGRADB": {
            "cuweave": lambda: _ops.linear_wgrad(h, dy, True),
            "torch mm + sum": lambda: (dy.t() @ h, dy.sum(0)),
            "torch mm alone": lambda: dy.t() @ h},
        "dgrad DGELU_BGRAD": {
            "cuweave": lambda: _ops.linear_dgrad_act(dy, w2, aux, "gelu", True),
            "cuweave DGELU (no bias gradient)": lambda: _ops.linear_dgrad_act(
                dy, w2, aux, "gelu", False),
            "torch mm + gelu_backward + sum": lambda: torch.ops.aten.gelu_backward(
                dy @ w2, z, approximate="tanh").sum(0),
            "torch mm + gelu_backward": lambda: torch.ops.aten.gelu_backward(
                dy @ w2, z, approximate="tanh"),
            "torch mm alone": lambda: dy @ w2},
        "wgrad1 BGRADB": {
            "cuweave": lambda: _ops.linear_wgrad(x, dz, True),
            "cuweave without the bias gradient": lambda: _ops.linear_wgrad(x, dz, False),
            "torch mm + sum": lambda: (dz.t() @ x, dz.sum(0)),
            "torch mm alone": lambda: dz.t() @ x},
        "dgrad1 (plain)": {"torch mm": lambda: dz @ w1},
    }
    for name, impls in cases.items():
        case = f"{name} bf16 T={tokens} h={hidden} ffn={ffn}"
        for impl, ms in gpu_times_interleaved(impls, iters=5, warmup=2).items():
            res.add(case=case, impl=impl, metric="ms", unit="ms", value=ms)
        for den in impls:
            if den != "cuweave" and "cuweave" in impls:
                res.add_ratio(case=case, metric="ms", num="cuweave", den=den,
                              higher_is_better=False)


def mlp_variants(res, torch, quick, tokens=8192, hidden=4096, ffn=16384):
    """The block (GELU, fwd+bwd) under the design choices, each against torch eager in the
    same interleaved run: where the first bias gradient is reduced, how many heuristic
    candidates the large products are autotuned over."""
    from cuweave.torch import _engine, _ops, clear_plans

    fused, plain = _blocks(torch, hidden, ffn, "gelu", torch.bfloat16)
    x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)
    case = f"MLP gelu fwd+bwd bf16 T={tokens} h={hidden} ffn={ffn}: variants"
    ref = _step(torch, plain, x, dy)
    old = (_ops.FIRST_BIAS_GRAD, _engine.AUTOTUNE_CANDIDATES)
    try:
        for where, candidates in (("dgrad", 8), ("wgrad", 8), ("wgrad", 16), ("wgrad", 32)):
            _ops.FIRST_BIAS_GRAD, _engine.AUTOTUNE_CANDIDATES = where, candidates
            clear_plans()
            name = f"cuweave, b1 grad in {where}, autotune {candidates}"
            times = gpu_times_interleaved({name: _step(torch, fused, x, dy), "torch eager": ref},
                                          iters=5, warmup=2, rounds=3)
            res.add(case=case, impl=name, metric="ms", unit="ms", value=times[name])
            res.add(case=case, impl=name, metric="vs torch eager", unit="x",
                    value=times["torch eager"] / times[name])
    finally:
        _ops.FIRST_BIAS_GRAD, _engine.AUTOTUNE_CANDIDATES = old
        clear_plans()


def fp8_forward(res, torch, quick, tokens=8192, hidden=4096, ffn=16384):
    """The block's first product (GELU, bias) with fp8 e4m3 operands, bf16 result."""
    from cuweave.torch import _ops, fused_linear_fp8, quantize_fp8

    if torch.cuda.get_device_capability() < (8, 9):
        print("   fp8 needs compute capability >= 8.9; skipped")
        return
    F = torch.nn.functional
    x, w1, b1, *_ = _mlp_operands(torch, tokens, hidden, ffn)
    (xq, sx), (wq, sw) = quantize_fp8(x), quantize_fp8(w1)
    y = fused_linear_fp8(xq, wq, sx, sw, b1, "gelu")
    ref = F.gelu(F.linear(x.float(), w1.float(), b1.float()), approximate="tanh")
    err = float((y.float() - ref).norm() / ref.norm())
    case = f"fwd1 GELU_BIAS fp8 e4m3 -> bf16 T={tokens} h={hidden} ffn={ffn}"
    impls = {"cuweave fp8": lambda: fused_linear_fp8(xq, wq, sx, sw, b1, "gelu"),
             "cuweave bf16 (GELU_AUX_BIAS)": lambda: _ops.linear(x, w1, b1, "gelu"),
             "torch bf16 addmm + gelu": lambda: F.gelu(F.linear(x, w1, b1),
                                                       approximate="tanh")}
    if hasattr(torch, "_scaled_mm"):
        impls["torch._scaled_mm + gelu"] = lambda: F.gelu(torch._scaled_mm(
            xq, wq.t(), sx, sw, bias=b1, out_dtype=torch.bfloat16), approximate="tanh")
    for impl, ms in gpu_times_interleaved(impls, iters=5, warmup=2).items():
        res.add(case=case, impl=impl, metric="ms", unit="ms", value=ms)
    for den in impls:
        if den != "cuweave fp8":
            res.add_ratio(case=case, metric="ms", num="cuweave fp8", den=den,
                          higher_is_better=False)
    res.add(case=case, impl="cuweave fp8", metric="rel. L2 error vs float32", unit="",
            value=err)


def _graphed(torch, step):
    """``step`` captured in a CUDA graph after a warm-up on a side stream; returns replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def small_step(res, torch, quick, hidden=4096, ffn=16384):
    tokens, dtype = 64, torch.bfloat16
    fused, plain = _blocks(torch, hidden, ffn, "gelu", dtype)
    x = torch.randn(tokens, hidden, device="cuda", dtype=dtype, requires_grad=True)
    dy = torch.randn(tokens, hidden, device="cuda", dtype=dtype)
    case = f"MLP gelu fwd+bwd bf16 T={tokens} h={hidden} ffn={ffn}"
    impls = {"cuweave FusedMLP + CUDA graph": _graphed(torch, _step(torch, fused, x, dy)),
             "cuweave FusedMLP eager": _step(torch, fused, x, dy),
             "torch eager": _step(torch, plain, x, dy),
             "torch + CUDA graph": _graphed(torch, _step(torch, plain, x, dy))}
    for impl, ms in gpu_times_interleaved(impls, iters=20 if quick else 50, warmup=3).items():
        res.add(case=case, impl=impl, metric="ms", unit="ms", value=ms)
    res.add_ratio(case=case, metric="ms", num="cuweave FusedMLP + CUDA graph", den="torch eager",
                  higher_is_better=False, target=2.0)
    res.add_ratio(case=case, metric="ms", num="cuweave FusedMLP + CUDA graph",
                  den="cuweave FusedMLP eager", higher_is_better=False)
    res.add_ratio(case=case, metric="ms", num="cuweave FusedMLP + CUDA graph",
                  den="torch + CUDA graph", higher_is_better=False)


def host_time(res, torch, quick, tokens=64, hidden=1024, ffn=4096):
    """Host µs per call with no call waiting on the GPU: each span of calls is queued behind a
    long ``torch.cuda._sleep`` (the GPU is still sleeping when the span ends; checked). The
    eager route (``FusedMLP``) against the ``torch.library`` operator called directly
    (``torch.ops.cuweave.mlp``, forward only) and against torch's layers."""
    from cuweave.torch import _ops

    dtype = torch.bfloat16
    fused, plain = _blocks(torch, hidden, ffn, "gelu", dtype)
    x = torch.randn(tokens, hidden, device="cuda", dtype=dtype, requires_grad=True)
    dy = torch.randn(tokens, hidden, device="cuda", dtype=dtype)
    xd, p = x.detach(), [t.detach() for t in fused.parameters()]

    def no_grad(fn):
        def call():
            with torch.no_grad():
                return fn()
        return call

    impls = {"cuweave FusedMLP fwd+bwd": _step(torch, fused, x, dy),
             "torch fwd+bwd": _step(torch, plain, x, dy),
             "cuweave FusedMLP fwd (no_grad)": no_grad(lambda: fused(x)),
             "torch.ops.cuweave.mlp fwd (no_grad, operator route)": no_grad(
                 lambda: torch.ops.cuweave.mlp(xd, *p, "gelu")),
             "cuweave eager route fwd (no_grad, _ops.mlp_call)": no_grad(
                 lambda: _ops.mlp_call(xd, *p, "gelu")),
             "torch fwd (no_grad)": no_grad(lambda: plain(x))}
    calls, rounds, cycles = 20, 7 if quick else 15, int(2e8)  # ~0.1 s of GPU sleep
    for fn in impls.values():
        for _ in range(5):
            fn()
    torch.cuda.synchronize()
    spans: dict = {name: [] for name in impls}
    for _ in range(rounds):
        for name, fn in impls.items():
            done = torch.cuda.Event()
            torch.cuda._sleep(cycles)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            done.record()
            busy = not done.query()  # the sleep (and the queued calls) not finished yet
            torch.cuda.synchronize()
            if busy:
                spans[name].append((t1 - t0) / calls * 1e6)
    case = f"host time, MLP gelu bf16 T={tokens} h={hidden} ffn={ffn}"
    for name, us in spans.items():
        if us:
            res.add(case=case, impl=name, metric="host us", unit="us",
                    value=statistics.median(us))
    res.add_ratio(case=case, metric="host us", num="cuweave FusedMLP fwd+bwd",
                  den="torch fwd+bwd", higher_is_better=False)
    res.add_ratio(case=case, metric="host us", num="cuweave FusedMLP fwd (no_grad)",
                  den="torch fwd (no_grad)", higher_is_better=False)


def capture_probe(res, torch, quick):
    """Whether ``linalg.advanced.matmul`` (function form) and a planned ``Matmul`` survive
    CUDA graph capture after a warm-up on the capturing stream (1 = captured and replayed
    with the right result, 0 = failed; the error is printed)."""
    from cuweave.linalg.advanced import Matmul, matmul

    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    bias = torch.randn(1, 64, device="cuda", dtype=torch.float16)
    ref = torch.relu(a.float() @ b.float() + bias.float())
    mm = Matmul(a, b)
    mm.plan(epilog="relu_bias", epilog_inputs={"bias": bias})
    forms = {"matmul() function form": lambda: matmul(a, b, epilog="relu_bias",
                                                     epilog_inputs={"bias": bias}),
             "planned Matmul.execute()": mm.execute}
    for name, fn in forms.items():
        ok = 0.0
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.stream(side):
                fn()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=side):
                    out = fn()
            graph.replay()
            torch.cuda.synchronize()
            ok = float(torch.allclose(out.float(), ref, rtol=1e-2, atol=1e-1))
        except Exception as e:
            print(f"   capture probe, {name}: {type(e).__name__}: {str(e)[:300]}")
        torch.cuda.synchronize()
        res.add(case="CUDA graph capture after warm-up", impl=name, metric="captured",
                unit="1=yes", value=ok)
    mm.free()


def run(results, quick: bool) -> None:
    torch = peer("torch")
    if torch is None or not torch.cuda.is_available():
        print("   torch with CUDA is needed for the torch benchmarks; skipped")
        return
    parts = [(host_time, {}), (small_step, {"hidden": 1024, "ffn": 4096}), (small_step, {}),
             (mlp_block, {}), (mlp_products, {}), (fp8_forward, {}), (capture_probe, {}),
             (mlp_variants, {})]
    if not quick:
        parts.insert(4, (mlp_block, {"act": "relu"}))
        parts.insert(1, (host_time, {"hidden": 4096, "ffn": 16384}))
    only = [n.strip() for n in os.environ.get("CUWEAVE_TORCH_PARTS", "").split(",") if n.strip()]
    if only:
        parts = [(part, kw) for part, kw in parts if part.__name__ in only]
    for part, kw in parts:
        try:
            part(results, torch, quick, **kw)
        except Exception:
            traceback.print_exc()
        torch.cuda.synchronize()
