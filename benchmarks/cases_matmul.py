"""cuweave.linalg.advanced (cuBLASLt) vs torch, CuPy and nvmath-python, side by side.

Cases: bf16 large GEMM; fused RELU_BIAS / GELU_BIAS (fp16) vs torch unfused,
``torch._addmm_activation`` and nvmath-python; FP8 e4m3 → bf16 vs ``torch._scaled_mm`` (exact
and fast accumulation, like with like); planned ``execute()`` host µs/call at small sizes vs a
raw ctypes ``cublasLtMatmul`` floor; function-form µs/call; NumPy round trip in a fresh
process and after the other cases (with page faults per call).
"""

from __future__ import annotations

import ctypes
import time

import numpy as np
from harness import gpu_times_interleaved, host_us_interleaved, peer

from cuweave._bindings import cublaslt as lt
from cuweave._bindings.library_types import ComputeType, CudaDataType
from cuweave.linalg.advanced import Matmul, matmul


def _tflops(m, n, k, ms):
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


def _nvmath_planned(nvmath, a, b, epilog=None, bias=None):
    kw = {}
    if epilog is not None:
        kw = {"epilog": getattr(nvmath.linalg.advanced.MatmulEpilog, epilog),
              "epilog_inputs": {"bias": bias}}
    mm = nvmath.linalg.advanced.Matmul(a, b)
    mm.plan(**kw)
    return mm


def large_gemm(res, torch, nvmath, quick):
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    case = f"bf16 {n}^3 GEMM"
    iters = 5 if quick else 20
    mm = Matmul(a, b)
    mm.plan()
    mm.autotune()
    impls = {"cuweave": mm.execute, "torch": lambda: torch.matmul(a, b)}
    nm = _nvmath_planned(nvmath, a, b) if nvmath is not None else None
    if nm is not None:
        impls["nvmath-python"] = nm.execute
    for impl, ms in gpu_times_interleaved(impls, iters=iters).items():
        res.add(case=case, impl=impl, metric="TFLOP/s", unit="TFLOP/s",
                value=_tflops(n, n, n, ms))
    if nm is not None:
        nm.free()
    mm.free()
    for den in ("torch", "nvmath-python"):
        res.add_ratio(case=case, metric="TFLOP/s", num="cuweave", den=den,
                      higher_is_better=True, target=1.0)


def fused(res, torch, nvmath, quick):
    shapes = [(4096, 4096, 4096), (8192, 2048, 1024), (2048, 8192, 512)]
    for epilog in ("RELU_BIAS", "GELU_BIAS"):
        for m, n, k in shapes:
            _fused_case(res, torch, nvmath, quick, epilog, m, n, k)


def _fused_case(res, torch, nvmath, quick, epilog, m, n, k):
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    w = torch.randn(n, k, device="cuda", dtype=torch.float16)  # torch Linear weight
    b = w.t()
    bias = torch.randn(n, device="cuda", dtype=torch.float16)
    case = f"{epilog} fp16 {m}x{n}x{k}"
    iters = 10 if quick else 50
    mm = Matmul(a, b)
    mm.plan(epilog=epilog, epilog_inputs={"bias": bias})
    mm.autotune()
    act = torch.relu if epilog == "RELU_BIAS" else (
        lambda x: torch.nn.functional.gelu(x, approximate="tanh"))
    gelu = epilog == "GELU_BIAS"
    impls = {
        "cuweave": mm.execute,
        "torch unfused": lambda: act(torch.matmul(a, b) + bias),
        "torch._addmm_activation": lambda: torch._addmm_activation(bias, a, b,
                                                                   use_gelu=gelu),
    }
    if nvmath is not None:
        try:  # nvmath-python takes a bias along M only: give it one of that length
            bias_m = torch.randn(m, device="cuda", dtype=torch.float16)
            impls["nvmath-python"] = _nvmath_planned(nvmath, a, b, epilog, bias_m).execute
        except Exception as e:
            print(f"   nvmath-python skipped for {case}: {e}")
    for impl, ms in gpu_times_interleaved(impls, iters=iters).items():
        res.add(case=case, impl=impl, metric="TFLOP/s", unit="TFLOP/s",
                value=_tflops(m, n, k, ms))
    mm.free()
    for den in ("torch._addmm_activation", "torch unfused", "nvmath-python"):
        res.add_ratio(case=case, metric="TFLOP/s", num="cuweave", den=den,
                      higher_is_better=True, target=1.0)


def _raw_floor(a, b, d, torch, algorithm=None):
    """A minimal planned ctypes cublasLtMatmul call (pre-built args, one algorithm): with
    ``algorithm`` (an :class:`Algorithm` of cuweave's plan) the same GPU work as cuweave's
    execute, else the first heuristic result for a 4 MiB workspace."""
    n = a.shape[0]
    h = lt.create()
    desc = lt.matmul_desc_create(ComputeType.COMPUTE_32F, CudaDataType.CUDA_R_32F)
    lay = lt.matrix_layout_create(CudaDataType.CUDA_R_32F, n, n, n)
    if algorithm is None:
        ws_bytes = 1 << 22
        pref = lt.preference_create()
        lt.preference_set_attribute(pref, lt.PreferenceAttribute.MAX_WORKSPACE_BYTES, ws_bytes)
        algo = lt.algo_get_heuristic(h, desc, lay, lay, lay, lay, pref, 1)[0].algo
    else:
        ws_bytes, algo = max(algorithm.workspace_size, 256), algorithm.algo
    ws = torch.empty(ws_bytes, dtype=torch.uint8, device="cuda")
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    stream = torch.cuda.current_stream().cuda_stream
    fn = lt.matmul_function()
    args = (h, desc, ctypes.addressof(alpha), b.data_ptr(), lay, a.data_ptr(), lay,
            ctypes.addressof(beta), d.data_ptr(), lay, d.data_ptr(), lay, ctypes.byref(algo),
            ws.data_ptr(), ws_bytes, stream)

    def call():
        fn(*args)

    return call, (alpha, beta, algo, ws)


def host_overhead(res, torch, cupy, nvmath, quick):
    for n in (64, 256):
        _host_case(res, torch, cupy, nvmath, quick, n)


def _host_case(res, torch, cupy, nvmath, quick, n):
    calls = 500 if quick else 3000
    sync = torch.cuda.synchronize
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    d = torch.empty(n, n, device="cuda")
    case = f"planned execute fp32 {n}^2"
    mm = Matmul(a, b)
    mm.plan()
    raw, keep = _raw_floor(a, b, d, torch, mm.algorithms[0])
    raw_h, keep_h = _raw_floor(a, b, d, torch)
    c = torch.empty(n, n, device="cuda")  # in place: the result is written into c (beta=0)
    mm_in = Matmul(a, b, c, beta=0.0, options={"inplace": True})
    mm_in.plan(algorithms=[mm.algorithms[0]])
    impls = {"cuweave": mm.execute, "cuweave inplace=True (no allocation)": mm_in.execute,
             "raw ctypes cublasLtMatmul": raw, "raw ctypes, its own heuristic (4 MiB)": raw_h,
             "torch.matmul": lambda: torch.matmul(a, b)}
    if cupy is not None:
        ca, cb = cupy.asarray(a), cupy.asarray(b)
        impls["cupy.matmul"] = lambda: cupy.matmul(ca, cb)
    if nvmath is not None:
        nm = _nvmath_planned(nvmath, a, b)
        impls["nvmath-python"] = nm.execute
    for impl, us in host_us_interleaved(impls, calls=calls, sync=sync).items():
        res.add(case=case, impl=impl, metric="host", unit="us/call", value=us)
    res.add_ratio(case=case, metric="host", num="cuweave", den="raw ctypes cublasLtMatmul",
                  higher_is_better=False, target=0.8)  # i.e. <= 1.25x the floor
    res.add_ratio(case=case, metric="host", num="cuweave inplace=True (no allocation)",
                  den="raw ctypes cublasLtMatmul", higher_is_better=False)
    res.add_ratio(case=case, metric="host", num="cuweave", den="torch.matmul",
                  higher_is_better=False, target=1.0)  # i.e. <= 1.0x torch.matmul
    mm.free()
    mm_in.free()
    del keep, keep_h
    fcase = f"function form fp32 {n}^2"
    fimpls = {"cuweave matmul()": lambda: matmul(a, b),
              "torch.matmul": lambda: torch.matmul(a, b)}
    if nvmath is not None:
        fimpls["nvmath-python matmul()"] = lambda: nvmath.linalg.advanced.matmul(a, b)
    per = {impl: calls if "nvmath" not in impl else max(calls // 10, 20) for impl in fimpls}
    for impl, us in host_us_interleaved(fimpls, calls=per, sync=sync).items():
        res.add(case=fcase, impl=impl, metric="host", unit="us/call", value=us)
    res.add_ratio(case=fcase, metric="host", num="cuweave matmul()", den="torch.matmul",
                  higher_is_better=False, target=0.8)  # i.e. <= 1.25x torch.matmul
    _host_epilog_case(res, torch, calls, n)


def _host_epilog_case(res, torch, calls, n):
    """Host µs/call of a planned RELU_BIAS execute: must be as lean as the plain one."""
    sync = torch.cuda.synchronize
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    bias = torch.randn(n, device="cuda", dtype=torch.float16)
    case = f"planned execute RELU_BIAS fp16 {n}^2"
    mm = Matmul(a, b)
    mm.plan(epilog="RELU_BIAS", epilog_inputs={"bias": bias})
    impls = {"cuweave": mm.execute,
             "torch._addmm_activation": lambda: torch._addmm_activation(bias, a, b)}
    for impl, us in host_us_interleaved(impls, calls=calls, sync=sync).items():
        res.add(case=case, impl=impl, metric="host", unit="us/call", value=us)
    res.add_ratio(case=case, metric="host", num="cuweave", den="torch._addmm_activation",
                  higher_is_better=False)
    mm.free()


def _minflt() -> int:
    try:
        import resource
    except ImportError:  # not POSIX
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _round_trip_impls(torch, nvmath, a, b, calls):
    """The round trips; ``calls``: how many times each is called (the operands new to cuweave
    are made up front, one pair per call)."""
    fresh = iter([(a + i, b - i) for i in range(calls)])
    # the peers get copies of their own: cuweave page-locks a and b in place from their third
    # upload, and the driver's pageable copies would then take them at DMA speed too
    ta, tb, na, nb = a.copy(), b.copy(), a.copy(), b.copy()
    impls = {"cuweave matmul()": lambda: matmul(a, b),
             # arrays it has never seen: their pages are copied, never registered
             "cuweave matmul(), operands new to it": lambda: matmul(*next(fresh)),
             "torch manual": lambda: torch.matmul(torch.from_numpy(ta).cuda(),
                                                  torch.from_numpy(tb).cuda()).cpu().numpy()}
    mm = Matmul(a, b)
    mm.plan()
    impls["cuweave planned"] = mm.execute
    if nvmath is not None:
        impls["nvmath-python matmul()"] = lambda: nvmath.linalg.advanced.matmul(na, nb)
    return impls, mm


def round_trip_times(torch, nvmath, quick, n=2048) -> dict:
    """``{impl: (median wall ms, minor page faults per call)}`` of a NumPy ``n``² fp32 round
    trip, the implementations interleaved round-robin (host copies drift over time)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    rounds = 3 if quick else 7
    impls, mm = _round_trip_impls(torch, nvmath, a, b, rounds * 4)
    times: dict = {impl: [] for impl in impls}
    faults: dict = {impl: [] for impl in impls}
    for _ in range(rounds):
        for impl, fn in impls.items():
            fn()  # warm-up of this round
            for _ in range(3):
                f0, t0 = _minflt(), time.perf_counter()
                fn()
                times[impl].append((time.perf_counter() - t0) * 1e3)
                faults[impl].append(_minflt() - f0)
    mm.free()
    return {impl: (float(np.median(times[impl])), float(np.median(faults[impl])))
            for impl in impls}


def _fresh_round_trip(quick):
    """:func:`round_trip_times` in a new process (nothing run before it but the imports)."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(tempfile.mkdtemp(prefix="cuweave-rt-"), "fresh.json")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(here, "..", "src"),
                                                    env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, os.path.abspath(__file__), "--round-trip", out]
    cmd += ["--quick"] if quick else []
    try:
        subprocess.run(cmd, env=env, timeout=120, check=True)
        with open(out) as f:
            return json.load(f)
    except (subprocess.SubprocessError, OSError, ValueError) as e:
        print(f"   fresh-process round trip failed: {type(e).__name__}: {e}")
        return None


def numpy_round_trip(res, torch, nvmath, quick):
    """The round trip in a fresh process and in this one (after the other cases: large GEMMs,
    thousands of small calls, nvmath-python), each against torch's manual path in the same
    process."""
    n = 2048
    conditions = (("fresh process", _fresh_round_trip(quick)),
                  ("after the other matmul cases", round_trip_times(torch, nvmath, quick, n)))
    for where, got in conditions:
        if not got:
            continue
        case = f"NumPy {n}^2 fp32 round trip ({where})"
        for impl, (ms, faults) in got.items():
            res.add(case=case, impl=impl, metric="wall", unit="ms", value=ms,
                    page_faults_per_call=faults)
        for num in ("cuweave matmul()", "cuweave planned"):
            res.add_ratio(case=case, metric="wall", num=num, den="torch manual",
                          higher_is_better=False, target=2.0)  # i.e. <= 0.5x torch's wall time
        if "cuweave matmul(), operands new to it" in got:
            res.add_ratio(case=case, metric="wall", num="cuweave matmul(), operands new to it",
                          den="torch manual", higher_is_better=False)


def _fp8_operands(torch, n):
    torch.manual_seed(0)
    e4m3 = torch.float8_e4m3fn
    a = (torch.randn(n, n, device="cuda") * 0.5).to(e4m3)  # (M, K) row-major
    b = (torch.randn(n, n, device="cuda") * 0.5).to(e4m3).t()  # (K, N) column-major
    sa = torch.tensor(0.75, device="cuda")
    sb = torch.tensor(1.25, device="cuda")
    return a, b, sa, sb


def fp8_planned(a, b, sa, sb, fast: bool, candidates: int = 16):
    """cuweave's fp8 product (bf16 result) planned over ``candidates`` and autotuned."""
    from cuweave.linalg.advanced import MatmulPlanPreferences

    mm = Matmul(a, b, quantization_scales={"a": sa, "b": sb},
                options={"result_type": "bfloat16", "fast_accumulation": fast})
    mm.plan(preferences=MatmulPlanPreferences(limit=candidates))
    mm.autotune()
    return mm


def fp8_gemm(res, torch, nvmath, quick):
    """FP8 e4m3 8192^3 -> bf16 against ``torch._scaled_mm``, like with like: both with the
    exact (default) accumulation, and both with fast accumulation (torch's
    ``use_fast_accum=True``, cuweave's ``fast_accumulation=True``)."""
    if torch.cuda.get_device_capability() < (8, 9) or not hasattr(torch, "_scaled_mm"):
        print("   fp8 needs compute capability >= 8.9 and torch._scaled_mm; skipped")
        return
    n = 8192
    a, b, sa, sb = _fp8_operands(torch, n)
    bf16 = torch.bfloat16
    mm, mm_fast = fp8_planned(a, b, sa, sb, False), fp8_planned(a, b, sa, sb, True)
    ref = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=bf16).float()
    err = float((mm.execute().float() - ref).abs().max() / ref.abs().max())
    impls = {
        "cuweave": mm.execute,
        "torch._scaled_mm": lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb,
                                                     out_dtype=bf16),
        "cuweave fast_accumulation=True": mm_fast.execute,
        "torch._scaled_mm use_fast_accum=True": lambda: torch._scaled_mm(
            a, b, scale_a=sa, scale_b=sb, out_dtype=bf16, use_fast_accum=True),
    }
    if nvmath is not None:
        try:
            nm = nvmath.linalg.advanced.Matmul(
                a, b, quantization_scales={"a": sa, "b": sb},
                options={"result_type": nvmath.CudaDataType.CUDA_R_16BF})
            nm.plan()
            impls["nvmath-python"] = nm.execute
        except Exception as e:
            print(f"   nvmath-python fp8 skipped: {type(e).__name__}: {e}")
    case = f"FP8 e4m3 {n}^3 -> bf16"
    for impl, ms in gpu_times_interleaved(impls, iters=5 if quick else 10,
                                          rounds=5 if quick else 9).items():
        res.add(case=case, impl=impl, metric="TFLOP/s", unit="TFLOP/s",
                value=_tflops(n, n, n, ms), **({"max_rel_diff_vs_torch": err}
                                               if impl == "cuweave" else {}))
    res.add_ratio(case=case, metric="TFLOP/s", num="cuweave", den="torch._scaled_mm",
                  higher_is_better=True, target=1.0)
    res.add_ratio(case=case, metric="TFLOP/s", num="cuweave fast_accumulation=True",
                  den="torch._scaled_mm use_fast_accum=True", higher_is_better=True,
                  target=1.0)
    res.add_ratio(case=case, metric="TFLOP/s", num="cuweave", den="nvmath-python",
                  higher_is_better=True)
    mm.free()
    mm_fast.free()


def run(results, quick: bool) -> None:
    torch = peer("torch")
    if torch is None or not torch.cuda.is_available():
        print("   torch with CUDA is needed for the matmul benchmarks; skipped")
        return
    import traceback

    cupy, nvmath = peer("cupy"), _nvmath_or_none()
    parts = [(large_gemm, (torch, nvmath)), (fused, (torch, nvmath)),
             (fp8_gemm, (torch, nvmath)), (host_overhead, (torch, cupy, nvmath)),
             (numpy_round_trip, (torch, nvmath))]
    for part, args in parts:
        try:
            part(results, *args, quick)
        except Exception:
            traceback.print_exc()


def _nvmath_or_none():
    nvmath = peer("nvmath")
    if nvmath is not None:
        try:
            import nvmath.linalg.advanced  # noqa: F401
        except Exception:
            nvmath = None
    return nvmath


if __name__ == "__main__":  # the fresh process of numpy_round_trip
    import json
    import sys

    if len(sys.argv) < 3 or sys.argv[1] != "--round-trip":
        print("usage: python benchmarks/run.py --engines matmul")
        sys.exit(2)
    got = round_trip_times(peer("torch"), _nvmath_or_none(), "--quick" in sys.argv[3:])
    with open(sys.argv[2], "w") as f:
        json.dump(got, f)
