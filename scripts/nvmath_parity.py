"""Side-by-side behaviour sweep: the same calls to nvmath-python 1.0 and to cuweave, on the GPU.

For each case both libraries get the same torch CUDA tensors. Outcomes are compared:

* both compute: the results must agree (relative L2 error under the dtype's bound);
* both raise: cuweave's error must be an instance of the builtin class nvmath raised, and its
  message should start with nvmath's leading phrase;
* one computes and the other raises: a difference.

Usage (on the GPU machine, nvmath-python 1.0 installed):
``python3 scripts/nvmath_parity.py --groups matmul,fft --out DIR``. Writes ``parity_<group>.json``
(every case) and prints a summary per category with the first differences of each. Exit 0
always: this is a finder, the tests hold what was fixed.
"""

from __future__ import annotations

import argparse
import builtins
import itertools
import json
import logging
import os
import re
import sys
import traceback

import numpy as np

BUILTIN_ERRORS = tuple(v for v in vars(builtins).values()
                       if isinstance(v, type) and issubclass(v, BaseException))


def builtin_class(exc: BaseException) -> type:
    """The first builtin exception class in ``exc``'s MRO (what a caller's except names)."""
    for cls in type(exc).__mro__:
        if cls in BUILTIN_ERRORS:
            return cls
    return Exception


def phrase(message: str) -> str:
    """The leading words of a message, up to its first sentence break or value."""
    head = re.split(r"[.:;(\[{'\"=]|\bgot\b|\d", message, maxsplit=1)[0]
    head = " ".join(head.split())[:60].strip().lower()
    return head if len(head) >= 12 else ""  # a message that starts with a value: no phrase


def outcome(fn, *args, **kwargs):
    try:
        value = fn(*args, **kwargs)
        return {"ok": True, "value": value}
    except Exception as exc:  # noqa: BLE001 - every error is an outcome to compare
        return {"ok": False, "exc": exc, "cls": type(exc).__name__,
                "builtin": builtin_class(exc).__name__, "msg": str(exc)[:400],
                "where": traceback.extract_tb(exc.__traceback__)[-1].name}


def to64(x):
    import torch

    if isinstance(x, tuple):
        x = x[0]
    if isinstance(x, torch.Tensor):
        x = x.detach()
        x = x.to(torch.complex128 if x.is_complex() else torch.float64).cpu().numpy()
    return np.asarray(x)


def compare(nv, cu, tol) -> tuple[str, str]:
    """(category, detail) of one case's two outcomes."""
    if nv["ok"] and cu["ok"]:
        a, b = to64(nv["value"]), to64(cu["value"])
        if a.shape != b.shape:
            return "result shape differs", f"nvmath {a.shape} cuweave {b.shape}"
        den = np.linalg.norm(a.ravel()) or 1.0
        err = float(np.linalg.norm((a - b).ravel()) / den)
        if not np.isfinite(err) or err > tol:
            return "result values differ", f"rel err {err:.3g}"
        return "same", ""
    if nv["ok"]:
        return "cuweave raises, nvmath computes", f"{cu['cls']}: {cu['msg'][:160]}"
    if cu["ok"]:
        return "cuweave computes, nvmath raises", f"{nv['builtin']}: {nv['msg'][:160]}"
    want = getattr(builtins, nv["builtin"], Exception)
    if not isinstance(cu["exc"], want):
        return "error class differs", (f"nvmath {nv['builtin']} ({nv['msg'][:100]}) / cuweave "
                                       f"{cu['cls']} ({cu['msg'][:100]})")
    p = phrase(nv["msg"])
    if p and not cu["msg"].lower().lstrip().startswith(p):
        return "message phrase differs", f"nvmath {nv['msg'][:110]!r} / cuweave {cu['msg'][:110]!r}"
    return "same", ""


# ---- matmul cases ------------------------------------------------------------------------------
E4, E5 = "float8_e4m3fn", "float8_e5m2"
TOL = {"float8_e4m3fn": 0.08, "float8_e5m2": 0.15, "float16": 5e-3, "bfloat16": 3e-2,
       "float32": 1e-4, "float64": 1e-10, "complex64": 1e-4, "complex128": 1e-10}


def _t(shape, dtype, seed=0, order="C"):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.rand(shape, device="cuda", generator=g) * 2 - 1
    x = x.to(getattr(torch, dtype))
    if order == "F" and len(shape) >= 2:
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    return x


def matmul_cases():
    """(group, name, kwargs builder, tolerance dtype) of the matmul sweep."""
    import torch

    cases = []

    def add(group, name, build, tol="float32"):
        cases.append((group, name, build, tol))

    # fp8 quantization scales and amax
    results = [None, "float32", "bfloat16", "float16", E4, E5]
    subsets = [None, "a", "ab", "abd", "abc", "abcd"]
    for (ta, tb), rt, sub, amax, with_c in itertools.product(
            [(E4, E4), (E4, E5), (E5, E4)], results, subsets, [False, True], [False, True]):
        def build(ta=ta, tb=tb, rt=rt, sub=sub, amax=amax, with_c=with_c):
            a, b = _t((64, 32), ta, 1), _t((32, 48), tb, 2, "F")
            opts = {"result_amax": amax}
            if rt is not None:
                opts["result_type"] = getattr(torch, rt)
            kw = {"options": opts}
            args = (a, b)
            if with_c:
                ct = "bfloat16" if rt in (None, E4, E5, "bfloat16", "float32") else rt
                if rt == "float32":
                    ct = "float32"
                args = (a, b, _t((64, 48), ct, 3))
                kw["beta"] = 1.0
            if sub is not None:
                kw["quantization_scales"] = {k: 0.5 for k in sub}
            return args, kw
        add("fp8 scales", f"{ta[6:]}x{tb[6:]} result={rt} scales={sub} amax={amax} c={with_c}",
            build, rt or ta)
    # scales and amax for non-fp8 operands
    for dt, sub, amax in itertools.product(["float16", "bfloat16", "float32"], [None, "a", "abd"],
                                           [False, True]):
        def build(dt=dt, sub=sub, amax=amax):
            kw = {"options": {"result_amax": amax}}
            if sub:
                kw["quantization_scales"] = {k: 1.0 for k in sub}
            return (_t((32, 16), dt, 1), _t((16, 8), dt, 2)), kw
        add("non-fp8 scales", f"{dt} scales={sub} amax={amax}", build, dt)
    # fp8 shapes and alignment
    for (m, n, k), off in itertools.product(
            [(16, 16, 16), (17, 16, 16), (16, 24, 16), (16, 16, 24), (32, 16, 8), (8, 8, 8)],
            [0, 1, 16]):
        def build(m=m, n=n, k=k, off=off):
            a = _t((m * k + off,), E4, 1)[off:].view(m, k)
            b = _t((n, k), E4, 2).T
            return (a, b), {"quantization_scales": {"a": 1.0, "b": 1.0, "d": 1.0}}
        add("fp8 shape/alignment", f"m={m} n={n} k={k} offset={off}", build, E4)
    # bias along M or N, square and not
    for (m, n), blen, bshape in itertools.product([(48, 32), (32, 32)], ["m", "n"],
                                                  ["1d", "col", "row"]):
        def build(m=m, n=n, blen=blen, bshape=bshape):
            length = m if blen == "m" else n
            bias = _t((length,), "float32", 5)
            if bshape == "col":
                bias = bias.reshape(length, 1)
            elif bshape == "row":
                bias = bias.reshape(1, length)
            return (_t((m, 16), "float32", 1), _t((16, n), "float32", 2)), {
                "epilog": "BIAS", "epilog_inputs": {"bias": bias}}
        add("bias", f"{m}x{n} bias len {blen} {bshape}", build)
    # backward epilogs' aux inputs: made by nvmath's forward pass (the same for both), cloned,
    # or laid out as nvmath's documentation describes
    for epi, (m, n), batch, how in itertools.product(
            ["DRELU", "DRELU_BGRAD", "DGELU", "DGELU_BGRAD"], [(48, 32), (32, 32)],
            [(), (2, 3)], ["forward", "clone"]):
        def build(epi=epi, m=m, n=n, batch=batch, how=how):
            import nvmath.linalg.advanced as nla

            fwd = "RELU_AUX" if epi.startswith("DRELU") else "GELU_AUX"
            x, w = _t(batch + (m, 16), "float32", 1), _t(batch + (16, n), "float32", 2)
            _, aux = nla.matmul(x, w, epilog=getattr(nla.MatmulEpilog, fwd))
            name = "relu_aux" if fwd == "RELU_AUX" else "gelu_aux"
            a = aux[name].clone() if how == "clone" else aux[name]
            return (x, w), {"epilog": epi, "epilog_inputs": {name: a}}
        add("backward aux", f"{epi} {m}x{n} batch={batch} aux={how}", build)
    # fp8 aux outputs
    for (ta, tb), rt, aux_t, epi in itertools.product(
            [(E4, E4), (E4, E5), (E5, E4)], [E4, "bfloat16", "float16"], [E4, E5],
            ["GELU_AUX", "GELU_AUX_BIAS"]):
        def build(ta=ta, tb=tb, rt=rt, aux_t=aux_t, epi=epi):
            a, b = _t((64, 32), ta, 1), _t((32, 48), tb, 2, "F")
            sc = {"a": 1.0, "b": 1.0}
            if rt.startswith("float8"):
                sc["d"] = 1.0
            inputs = {"aux_quantization_scale": 1.0}
            if epi.endswith("BIAS"):
                inputs["bias"] = _t((64,), "float16" if rt == "float16" else "bfloat16", 4)
            return (a, b), {"quantization_scales": sc, "epilog": epi, "epilog_inputs": inputs,
                            "options": {"result_type": getattr(torch, rt)},
                            "preferences": {"epilog": {"aux_type": getattr(torch, aux_t)}}}
        add("fp8 aux type", f"{ta[6:]}x{tb[6:]} result={rt} aux={aux_t} {epi}", build, rt)
    # validation
    val = {
        "k mismatch": lambda: ((_t((8, 4), "float32"), _t((5, 6), "float32")), {}),
        "batch mismatch": lambda: ((_t((2, 8, 4), "float32"), _t((3, 4, 6), "float32")), {}),
        "c shape": lambda: ((_t((8, 4), "float32"), _t((4, 6), "float32"),
                             _t((7, 6), "float32")), {"beta": 1.0}),
        "sliced a": lambda: ((_t((8, 8), "float32")[:, ::2], _t((4, 6), "float32")), {}),
        "sliced batch": lambda: ((_t((4, 8, 4), "float32")[::2], _t((2, 4, 6), "float32")), {}),
        "algorithms None": lambda: ((_t((8, 4), "float32"), _t((4, 6), "float32")),
                                    {"algorithm": None}),
        "epilog_inputs without epilog": lambda: (
            (_t((8, 4), "float32"), _t((4, 6), "float32")),
            {"epilog_inputs": {"bias": _t((8,), "float32")}}),
        "beta without c": lambda: ((_t((8, 4), "float32"), _t((4, 6), "float32")),
                                   {"beta": 2.0}),
        "alpha overflow": lambda: ((_t((8, 4), "float32"), _t((4, 6), "float32")),
                                   {"alpha": 1e300}),
        "mixed dtypes": lambda: ((_t((8, 4), "float32"), _t((4, 6), "float16")), {}),
        "1-D a": lambda: ((_t((4,), "float32"), _t((4, 6), "float32")), {}),
    }
    for name, build in val.items():
        add("validation", name, build)
    return cases


_CUDA_TYPE = {"float32": "CUDA_R_32F", "bfloat16": "CUDA_R_16BF", "float16": "CUDA_R_16F",
              "float8_e4m3fn": "CUDA_R_8F_E4M3", "float8_e5m2": "CUDA_R_8F_E5M2"}


def _typed(kw: dict, top, epilogs) -> dict:
    """``kw`` with the spellings nvmath-python requires: epilogs as ``MatmulEpilog`` members
    and result/aux types as ``CudaDataType`` members (of ``top``, nvmath's or cuweave's)."""
    kw = dict(kw)

    def cuda_type(dt):
        return getattr(top.CudaDataType, _CUDA_TYPE[str(dt).replace("torch.", "")])

    if isinstance(kw.get("epilog"), str):
        kw["epilog"] = epilogs.MatmulEpilog[kw["epilog"]]
    if kw.get("options", {}).get("result_type") is not None:
        kw["options"] = {**kw["options"], "result_type": cuda_type(kw["options"]["result_type"])}
    aux = kw.get("preferences", {}).get("epilog", {}).get("aux_type")
    if aux is not None:
        kw["preferences"] = {**kw["preferences"], "epilog": {"aux_type": cuda_type(aux)}}
    return kw


def run_matmul(out_dir):
    import nvmath
    import nvmath.linalg.advanced as nla
    import torch

    import cuweave
    import cuweave.linalg.advanced as cla

    rows = []
    for group, name, build, tol in matmul_cases():
        try:
            args, kw = build()
        except Exception as exc:  # noqa: BLE001
            rows.append({"group": group, "case": name, "category": "build failed",
                         "detail": repr(exc)[:200]})
            continue
        nv = outcome(nla.matmul, *args, **_typed(kw, nvmath, nla))
        torch.cuda.synchronize()
        cu = outcome(cla.matmul, *args, **_typed(kw, cuweave, cla))
        torch.cuda.synchronize()
        category, detail = compare(nv, cu, TOL.get(tol, 1e-4))
        rows.append({"group": group, "case": name, "category": category, "detail": detail,
                     "nvmath": _brief(nv), "cuweave": _brief(cu)})
    return rows


# ---- FFT cases ---------------------------------------------------------------------------------
def _view(base, shape, strides, offset=0):
    return base.as_strided(shape, strides, offset)


def fft_cases():
    """(group, name, (function name, operand builder, kwargs), tolerance dtype)."""
    import torch

    cases = []

    def add(group, name, fn, build, kw, tol="complex64"):
        cases.append((group, name, (fn, build, kw), tol))

    # natural result layout: strides of a fresh C-order array, size-1 axes included
    shapes = [(1, 1, 32, 32, 1), (32, 1, 16), (1, 16), (4, 1, 1, 8), (8, 8, 1, 1)]
    for shape, dt, fn, layout in itertools.product(
            shapes, ["complex64", "complex128", "float32"], ["fft", "rfft"],
            ["natural", "optimized"]):
        if (fn == "rfft") != dt.startswith("float"):
            continue
        for axes in ([len(shape) - 1], [len(shape) - 2, len(shape) - 1], None):
            def build(shape=shape, dt=dt):
                return _t(shape, "float32", 3).to(getattr(torch, dt)) if dt.startswith(
                    "float") else torch.complex(_t(shape, "float32", 1), _t(shape, "float32", 2)
                                                ).to(getattr(torch, dt))
            add("result layout", f"{fn} {shape} {dt} axes={axes} {layout}", fn, build,
                {"axes": axes, "options": {"result_layout": layout}}, dt)

    def cplx(shape, seed=1):
        return torch.complex(_t(shape, "float32", seed), _t(shape, "float32", seed + 1))

    # layouts cuFFT cannot take directly: overlapping and non-tileable views, out of place
    views = {
        "overlapping rows": ((16, 16), (8, 1)),
        "repeated stride": ((8, 8), (1, 1)),
        "non-tileable batch": ((3, 4, 8), (40, 9, 1)),
        "gapped batch": ((4, 8), (17, 2)),
        "single element": ((1,), (1,)),
        "zero stride batch": ((4, 8), (0, 1)),
    }
    for (name, (shape, strides)), inplace, axes in itertools.product(
            views.items(), [False, True], [[-1], None]):
        def build(shape=shape, strides=strides):
            return _view(cplx((512,)), shape, strides)
        add("view layouts", f"{name} inplace={inplace} axes={axes}", "fft", build,
            {"axes": axes, "options": {"inplace": inplace}})
    # fft_type and dtype mismatches, axes out of range, options
    bad = {
        "fft on real": ("fft", lambda: _t((8, 8), "float32"), {}),
        "ifft on real": ("ifft", lambda: _t((8, 8), "float32"), {}),
        "rfft on complex": ("rfft", lambda: cplx((8, 8)), {}),
        "irfft on real": ("irfft", lambda: _t((8, 8), "float32"), {}),
        "fft_type R2C on complex": ("fft", lambda: cplx((8, 8)), {"options": {"fft_type": "R2C"}}),
        "fft_type C2C on real": ("rfft", lambda: _t((8, 8), "float32"),
                                 {"options": {"fft_type": "C2C"}}),
        "axes out of range": ("fft", lambda: cplx((8, 8)), {"axes": [2]}),
        "repeated axes": ("fft", lambda: cplx((8, 8)), {"axes": [1, 1]}),
        "axes with gap": ("fft", lambda: cplx((4, 8, 8)), {"axes": [0, 2]}),
        "int operand": ("fft", lambda: torch.ones(8, 8, dtype=torch.int32, device="cuda"), {}),
        "float64 to fft": ("fft", lambda: _t((8,), "float64"), {}),
        "empty irfft output": ("irfft", lambda: cplx((8, 1)), {}),
        "irfft last_axis_parity odd": ("irfft", lambda: cplx((8, 5)),
                                       {"options": {"last_axis_parity": "odd"}}),
        "options device_id": ("fft", lambda: cplx((8, 8)), {"options": {"device_id": 0}}),
        "bad option": ("fft", lambda: cplx((8, 8)), {"options": {"nonsense": 1}}),
        "bad result_layout": ("fft", lambda: cplx((8, 8)), {"options": {"result_layout": "x"}}),
        "4 axes": ("fft", lambda: cplx((2, 2, 2, 2)), {"axes": [0, 1, 2, 3]}),
    }
    for name, (fn, build, kw) in bad.items():
        add("fft validation", name, fn, build, kw)
    return cases


def run_fft(out_dir):
    import nvmath.fft as nfft
    import torch

    import cuweave.fft as cfft

    rows = []
    for group, name, (fn, build, kw), tol in fft_cases():
        try:
            x1, x2 = build(), None
            x2 = x1.clone() if not kw.get("options", {}).get("inplace") else None
        except Exception as exc:  # noqa: BLE001
            rows.append({"group": group, "case": name, "category": "build failed",
                         "detail": repr(exc)[:200]})
            continue
        if x2 is None:  # in place: each library its own copy of the same view
            x2 = build()
        nv = outcome(getattr(nfft, fn), x1, **kw)
        torch.cuda.synchronize()
        cu = outcome(getattr(cfft, fn), x2, **kw)
        torch.cuda.synchronize()
        category, detail = compare(nv, cu, TOL.get(tol, 1e-4))
        if category == "same" and nv["ok"] and hasattr(nv["value"], "stride"):
            if tuple(nv["value"].stride()) != tuple(cu["value"].stride()):
                category = "result strides differ"
                detail = f"nvmath {nv['value'].stride()} cuweave {cu['value'].stride()}"
        rows.append({"group": group, "case": name, "category": category, "detail": detail,
                     "nvmath": _brief(nv), "cuweave": _brief(cu)})
    return rows


def _brief(o):
    return "ok" if o["ok"] else f"{o['cls']}({o['builtin']}): {o['msg'][:200]}"


def summarize(rows, out_dir, name):
    with open(os.path.join(out_dir, f"parity_{name}.json"), "w") as f:
        json.dump(rows, f, indent=1)
    groups = {}
    for r in rows:
        groups.setdefault(r["group"], {}).setdefault(r["category"], []).append(r)
    for group, cats in groups.items():
        total = sum(len(v) for v in cats.values())
        print(f"== {group}: {total} cases: " + ", ".join(
            f"{k} {len(v)}" for k, v in sorted(cats.items())))
        for cat, items in sorted(cats.items()):
            if cat == "same":
                continue
            for r in items[:6]:
                print(f"   [{cat}] {r['case']}: {r['detail']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", default="matmul")
    ap.add_argument("--out", default=".")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    logging.disable(logging.WARNING)
    for g in args.groups.split(","):
        rows = {"matmul": run_matmul, "fft": run_fft}[g](args.out)
        summarize(rows, args.out, g)
    return 0


if __name__ == "__main__":
    sys.exit(main())
