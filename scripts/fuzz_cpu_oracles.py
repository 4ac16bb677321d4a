"""Oracles and runners of the CPU fuzzer (scripts/fuzz_cpu.py) for the nvmath-style entry points
(matmul, FFT, tensor contractions), the threads mode, planned-object lifecycles and results too
large to allocate."""

from __future__ import annotations

import os
import sys

import numpy as np
from fuzz_cpu_cases import Built, dec, plain

# ================================================================ oracles
_TOL = {"float16": 2e-2, "float32": 5e-5, "complex64": 5e-5, "float64": 1e-11,
        "complex128": 1e-11}


def _lib():
    """cuweave's modules, imported lazily (case generation needs none of them)."""
    import cuweave
    import cuweave.fft
    import cuweave.linalg.advanced
    import cuweave.tensor
    return cuweave


def to_numpy(res):
    """A result (NumPy, torch, DLPack producer) as a NumPy array of its logical values."""
    if isinstance(res, np.ndarray):
        return res
    mod = type(res).__module__
    if mod.startswith("torch"):
        return res.resolve_conj().resolve_neg().numpy()
    if hasattr(res, "__dlpack__"):
        return np.from_dlpack(res)
    return np.asarray(res)


def _type_name(e):
    return type(e).__name__


def _err_text(e):
    return f"{_type_name(e)}: {str(e)[:300]}{_where(e)}"


def _where(e):
    """`` [at cuweave/<file>:<line>]``: the innermost cuweave frame the error passed."""
    import traceback
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if f"{os.sep}cuweave{os.sep}" in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f" [at cuweave{f.filename.split(os.sep + 'cuweave', 1)[1]}:{f.lineno}]"


def compare(res, ref, dtype, findings, what="result", scale=None, check_dtype=True,
            tol=None):
    """Shape, dtype kind/size and values within the dtype's tolerance of the reference."""
    try:
        got = to_numpy(res)
    except Exception as e:  # noqa: BLE001 (the result is not an array at all)
        findings.append(("wrong-result", f"{what}: not an array ({_err_text(e)})"))
        return
    if tuple(got.shape) != tuple(ref.shape):
        findings.append(("wrong-result", f"{what}: shape {tuple(got.shape)}, expected "
                         f"{tuple(ref.shape)}"))
        return
    if check_dtype and dtype is not None and got.dtype.newbyteorder("=") != np.dtype(dtype):
        findings.append(("wrong-result", f"{what}: dtype {got.dtype}, expected {dtype}"))
        return
    if got.size == 0:
        return
    g = np.asarray(got, dtype=np.complex128 if got.dtype.kind == "c" else np.float64)
    err = float(np.max(np.abs(g - ref)))
    if not np.isfinite(err) and np.array_equal(np.isnan(g), np.isnan(ref)):
        return
    sc = float(np.max(np.abs(ref))) if scale is None else float(scale)
    if tol is None:
        tol = _TOL.get(str(np.dtype(dtype)) if dtype is not None else "float64", 1e-11)
    if not err <= tol * max(sc, 1e-300) + 1e-300:
        findings.append(("wrong-result", f"{what}: max error {err:.3g} vs scale {sc:.3g} "
                         f"(tolerance {tol:g})"))


def _same_exception(e_cw, e_ref):
    """cuweave's error is an instance of the reference's class a caller can name: the first
    public one in its MRO (NumPy raises private subclasses such as
    _UFuncOutputCastingError of the public UFuncTypeError)."""
    def named(c):  # reachable under its own name (NumPy renames its private classes)
        module = sys.modules.get(c.__module__)
        return not c.__name__.startswith("_") and getattr(module, c.__name__, None) is c

    public = next((c for c in type(e_ref).__mro__ if named(c)), type(e_ref))
    return isinstance(e_cw, public)


def _outcome(e):
    return "ok" if e is None else ("typed:" if _is_typed(e) else "untyped:") + _type_name(e)


def _is_typed(e):
    return isinstance(e, _lib().CuweaveError)


def judge(case, err, findings, *, ok_expected=None):
    """The error oracle for nvmath-style entry points: an error must be typed; an error on a
    valid call or no error on an invalid one is reported."""
    expect = case.get("expect", "ok") if ok_expected is None else ok_expected
    if err is None:
        if expect == "error":
            why = case.get("bad") or (f"in-place target not writable "
                                      f"({_target_desc(case)})")
            findings.append(("accepts-invalid", f"no error for {why}"))
        return
    if not _is_typed(err):
        findings.append(("untyped-error", _err_text(err)))
    elif expect == "ok" and not isinstance(err, _lib().fft.UnsupportedLayoutError):
        # UnsupportedLayoutError is the documented refusal of a layout the engine cannot
        # express (with a permutation hint): counted in the outcomes, not a finding
        findings.append(("refused-valid", _err_text(err)))


def _target_desc(case):
    name = case.get("inplace")
    rec = case["ops"].get(name) if name else None
    if rec is None:
        return "-"
    bits = [rec["pkg"], rec["layout"]]
    if rec["ro"]:
        bits.append("read-only flag")
    if rec["conj"]:
        bits.append("conj view")
    if rec["overlaps"]:
        bits.append("self-overlapping")
    return ", ".join(bits)


def build_ops(case, warm=False, seed_shift=0):
    out = {}
    for name, rec in case["ops"].items():
        r = plain(rec) if warm else rec
        if seed_shift:
            r = dict(r, seed=r["seed"] + seed_shift)
        out[name] = Built(r)
    return out


def check_memory(case, built, findings, wrote_target):
    target = case.get("inplace")
    for name, b in built.items():
        # a target in read-only memory is never a target: any write there is a defect
        is_target = name == target and wrote_target and not (
            b.rec["ro"] or b.rec["pkg"] in ("dlpack_bytes", "mmap"))
        b.check(is_target, name, findings)
        if name == target and not wrote_target and b.buf is not None and \
                (b.buf != b.before).any() and not any(f[0] == "input-modified"
                                                      for f in findings):
            findings.append(("input-modified", f"{name}: in-place target changed although "
                             "the call failed"))


# ---------------------------------------------------------------- matmul
def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def ref_matmul(case, vals, kw):
    a, b = vals["a"], vals["b"]
    r = np.matmul(a, b)
    alpha = kw.get("alpha")
    alpha = 1.0 if alpha is None else complex(alpha) if isinstance(alpha, complex) else float(
        alpha)
    r = alpha * r
    scale = abs(alpha) * np.matmul(np.abs(a), np.abs(b))
    if "c" in vals and kw.get("beta") is not None:
        beta = kw["beta"]
        r = r + beta * vals["c"]
        scale = scale + abs(beta) * np.abs(vals["c"])
    ep = kw.get("epilog")
    if ep is not None and "BIAS" in str(ep):
        bias = vals["bias"]
        bias = bias.reshape(-1, 1) if bias.ndim == 1 else bias
        r = r + bias
        scale = scale + np.abs(bias)
    if ep in ("RELU", "RELU_BIAS", "RELU_AUX"):
        r = np.maximum(r, 0)
    elif ep in ("GELU", "GELU_BIAS"):
        r = _gelu(r)
    return r, float(np.max(scale)) if scale.size else 0.0


def _mm_call(case, built, lib):
    kw = dec(case["kw"])
    la = lib.linalg.advanced
    c = built["c"].obj if "c" in built else None
    if "bias" in built:
        kw["epilog_inputs"] = {"bias": built["bias"].obj}
    return la.matmul(built["a"].obj, built["b"].obj, c=c, **kw)


def _warm(case, call, lib):
    if not case.get("warm"):
        return
    try:
        call(case, build_ops(case, warm=True), lib)
    except Exception:  # noqa: BLE001,S110 (the warm-up only fills the plan cache)
        pass


def _expected_dtype(case, name="a"):
    return case["ops"][name]["dtype"]


def _check_result(case, built, res, ref, scale, dtype, findings, label="result"):
    if isinstance(res, tuple) and case["kw"].get("epilog") in ("RELU_AUX",):
        res = res[0]
    compare(res, ref, dtype, findings, label, scale=scale)
    target = case.get("inplace")
    if target and target in built:
        b = built[target]
        cur = b.current()
        if cur.shape == ref.shape:
            before = len(findings)
            compare(cur.astype(np.dtype(dtype)), ref, dtype, findings, f"{label} in {target}",
                    scale=scale)
            if len(findings) > before and "not written" not in findings[-1][1]:
                findings[-1] = (findings[-1][0], findings[-1][1] + " (in-place target)")


def run_matmul(case, findings, lib):
    _warm(case, _mm_call, lib)
    built = build_ops(case)
    err = res = None
    try:
        res = _mm_call(case, built, lib)
    except Exception as e:  # noqa: BLE001
        err = e
    judge(case, err, findings)
    check_memory(case, built, findings, err is None)
    if err is None and case.get("expect") != "error":
        kw = dec(case["kw"])
        ref, scale = ref_matmul(case, {k: b.value for k, b in built.items()}, kw)
        _check_result(case, built, res, ref, scale, _expected_dtype(case), findings)
    return _outcome(err)


def run_Matmul(case, findings, lib):
    la = lib.linalg.advanced
    kw = dec(case["kw"])
    plan_kw = {k: kw.pop(k) for k in ("epilog", "epilog_inputs") if k in kw}
    built = build_ops(case)
    err = None
    mm = None
    step = "construct"
    try:
        c = built["c"].obj if "c" in built else None
        mm = la.Matmul(built["a"].obj, built["b"].obj, c=c, **kw)
        step = "plan"
        if "bias" in built:
            plan_kw["epilog_inputs"] = {"bias": built["bias"].obj}
        mm.plan(**plan_kw)
        for i in range(case.get("resets", 1) + 1):
            step = f"execute #{i}"
            if i:
                built_i = build_ops(case, seed_shift=1000 * i)
                new = {k: built_i[k].obj for k in ("a", "b", "c") if k in built_i}
                step = f"reset_operands #{i}"
                if "bias" in built_i:
                    mm.reset_operands(**new, epilog_inputs={"bias": built_i["bias"].obj})
                else:
                    mm.reset_operands(**new)
                step = f"execute #{i}"
            else:
                built_i = built
            res = mm.execute()
            vals = {k: b.value for k, b in built_i.items()}
            ref, scale = ref_matmul(case, vals, dict(kw, **plan_kw))
            if case.get("expect") != "error":
                n0 = len(findings)
                _check_result(case, built_i, res, ref, scale, _expected_dtype(case), findings,
                              label=f"execute #{i}")
                if len(findings) > n0:
                    break
            if i:
                check_memory(case, built_i, findings, True)
    except Exception as e:  # noqa: BLE001
        err = e
    finally:
        if mm is not None:
            try:
                mm.free()
            except Exception as e:  # noqa: BLE001
                if not _is_typed(e):
                    findings.append(("untyped-error", "free(): " + _err_text(e)))
    judge(case, err, findings)
    if err is not None and findings and findings[-1][1].startswith(_type_name(err)):
        findings[-1] = (findings[-1][0], f"{step}: {findings[-1][1]}")
    check_memory(case, built, findings, err is None)
    return _outcome(err)


# ---------------------------------------------------------------- nvmath-style FFT
def _norm_factor(norm, inverse, n):
    norm = None if norm is None else str(norm)
    if norm is None:
        return 1.0
    if norm == "ortho":
        return 1.0 / np.sqrt(n) if n else 1.0
    if norm == "backward":
        return 1.0 / n if inverse and n else 1.0
    if norm == "forward":
        return 1.0 / n if not inverse and n else 1.0
    return 1.0


def _inverse(case, kw):
    d = kw.get("direction")
    if d is None:
        return case["kind"] in ("ifft", "irfft")
    return str(getattr(d, "name", d)).lower() == "inverse"


def ref_fft(case, x, kw):
    kind, ax = case["kind"], case["axes"]
    inv = _inverse(case, kw)
    if kind in ("fft", "ifft"):
        n = int(np.prod([x.shape[a] for a in ax]))
        y = np.fft.ifftn(x, axes=ax) * n if inv else np.fft.fftn(x, axes=ax)
    elif kind == "rfft":
        n = int(np.prod([x.shape[a] for a in ax]))
        y = np.fft.rfftn(x, axes=ax)
    else:
        s = [x.shape[a] for a in ax[:-1]] + [case["n_last"]]
        n = int(np.prod(s))
        y = np.fft.irfftn(x, s=s, axes=ax) * n
    y = y * _norm_factor(kw.get("norm"), inv, n)
    scale = float(np.max(np.abs(x))) * np.sqrt(max(n, 1)) * _norm_factor(kw.get("norm"), inv,
                                                                          n) if x.size else 0
    return y, max(scale, float(np.max(np.abs(y))) if y.size else 0.0)


def _fft_dtype(case):
    dt = case["ops"]["x"]["dtype"]
    return {("rfft", "float32"): "complex64", ("rfft", "float64"): "complex128",
            ("irfft", "complex64"): "float32", ("irfft", "complex128"): "float64"}.get(
        (case["kind"], dt), dt)


def _fft_call(case, built, lib):
    kw = dec(case["kw"])
    return getattr(lib.fft, case["kind"])(built["x"].obj, **kw)


def run_fft(case, findings, lib):
    _warm(case, _fft_call, lib)
    built = build_ops(case)
    err = res = None
    try:
        res = _fft_call(case, built, lib)
    except Exception as e:  # noqa: BLE001
        err = e
    judge(case, err, findings)
    check_memory(case, built, findings, err is None)
    if err is None and case.get("expect") != "error":
        ref, scale = ref_fft(case, built["x"].value, dec(case["kw"]))
        _check_result(case, built, res, ref, scale, _fft_dtype(case), findings)
    return _outcome(err)


def run_FFT(case, findings, lib):
    kw = dec(case["kw"])
    plan_kw = {k: kw.pop(k) for k in ("norm", "direction", "prolog") if k in kw}
    if case["kind"] in ("ifft", "irfft") and "direction" not in plan_kw:
        plan_kw["direction"] = "inverse"
    exec_kw = {"direction": plan_kw["direction"]} if "direction" in plan_kw else {}
    if case["kind"] == "irfft":
        kw.setdefault("options", {})
        if isinstance(kw["options"], dict):  # a bad fft_type stays bad
            kw["options"] = dict({"fft_type": "C2R"}, **kw["options"])
    built = build_ops(case)
    err = None
    f = None
    step = "construct"
    try:
        f = lib.fft.FFT(built["x"].obj, **kw)
        step = "plan"
        f.plan(**plan_kw)
        for i in range(case.get("resets", 1) + 1):
            if i:
                built_i = build_ops(case, seed_shift=1000 * i)
                step = f"reset_operand #{i}"
                f.reset_operand(built_i["x"].obj)
            else:
                built_i = built
            step = f"execute #{i}"
            res = f.execute(**exec_kw)
            if case.get("expect") != "error":
                ref, scale = ref_fft(case, built_i["x"].value, dict(plan_kw, **exec_kw))
                n0 = len(findings)
                _check_result(case, built_i, res, ref, scale, _fft_dtype(case), findings,
                              label=f"execute #{i}")
                if len(findings) > n0:
                    break
            if i:
                check_memory(case, built_i, findings, True)
    except Exception as e:  # noqa: BLE001
        err = e
    finally:
        if f is not None:
            try:
                f.free()
            except Exception as e:  # noqa: BLE001
                if not _is_typed(e):
                    findings.append(("untyped-error", "free(): " + _err_text(e)))
    judge(case, err, findings)
    if err is not None and findings and findings[-1][1].startswith(_type_name(err)):
        findings[-1] = (findings[-1][0], f"{step}: {findings[-1][1]}")
    check_memory(case, built, findings, err is None)
    return _outcome(err)


# ---------------------------------------------------------------- tensor contractions
def _tensor_call(case, built, lib):
    kw = dec(case["kw"])
    t = lib.tensor
    for k in ("out",):
        if k in built:
            kw[k] = built[k].obj
    if case["target"] == "binary":
        if "c" in built:
            kw["c"] = built["c"].obj
        return t.binary_contraction(case["expr"], built["a"].obj, built["b"].obj, **kw)
    if "d" in built:
        kw["d"] = built["d"].obj
    return t.ternary_contraction(case["expr"], built["a"].obj, built["b"].obj,
                                 built["c"].obj, **kw)


def ref_contraction(case, vals, kw):
    names = ["a", "b", "c"] if case["target"] == "ternary" else ["a", "b"]
    r = np.einsum(case["expr"], *[vals[n] for n in names])
    scale = np.einsum(case["expr"], *[np.abs(vals[n]) for n in names])
    alpha = kw.get("alpha", 1.0)
    alpha = 1.0 if alpha is None else alpha
    r = alpha * r
    scale = abs(alpha) * scale
    add = "d" if case["target"] == "ternary" else "c"
    if add in vals and kw.get("beta") is not None:
        r = r + kw["beta"] * vals[add]
        scale = scale + abs(kw["beta"]) * np.abs(vals[add])
    return np.asarray(r), float(np.max(scale)) if np.size(scale) else 0.0


def run_contraction(case, findings, lib):
    _warm(case, _tensor_call, lib)
    built = build_ops(case)
    err = res = None
    try:
        res = _tensor_call(case, built, lib)
    except Exception as e:  # noqa: BLE001
        err = e
    judge(case, err, findings)
    check_memory(case, built, findings, err is None)
    if err is None and case.get("expect") != "error":
        ref, scale = ref_contraction(case, {k: b.value for k, b in built.items()},
                                     dec(case["kw"]))
        _check_result(case, built, res, ref, scale, _expected_dtype(case), findings)
    return _outcome(err)


# ---------------------------------------------------------------- threads (item 13)
def run_threads(case, findings, lib):
    import threading
    la, F = lib.linalg.advanced, lib.fft
    which, nt, iters = case["which"], case["threads"], case["iters"]
    rng = np.random.default_rng(case["seed0"])
    if which in ("Matmul", "matmul"):
        data = [[(rng.standard_normal((6, 5)), rng.standard_normal((5, 4)))
                 for _ in range(iters)] for _ in range(nt)]
        if case["dtype"] == "float32":
            data = [[(a.astype(np.float32), b.astype(np.float32)) for a, b in d] for d in data]
        shared = la.Matmul(*data[0][0], execution="cpu") if which == "Matmul" else None
    else:
        data = [[(rng.standard_normal(16) + 1j * rng.standard_normal(16),)
                 for _ in range(iters)] for _ in range(nt)]
        shared = F.FFT(data[0][0][0], execution="cpu") if which == "FFT" else None
    if shared is not None:
        shared.plan()
    wrong, errors = [0], []
    barrier = threading.Barrier(nt)

    def work(t):
        barrier.wait()
        for ops in data[t]:
            try:
                if which == "Matmul":
                    shared.reset_operands(a=ops[0], b=ops[1])
                    r = shared.execute()
                elif which == "FFT":
                    shared.reset_operand(ops[0])
                    r = shared.execute()
                elif which == "matmul":
                    r = la.matmul(ops[0], ops[1], execution="cpu")
                else:
                    r = F.fft(ops[0], execution="cpu")
                ref = ops[0] @ ops[1] if len(ops) == 2 else np.fft.fft(ops[0])
                if r.shape != ref.shape or not np.allclose(r, ref, rtol=1e-4, atol=1e-4):
                    wrong[0] += 1
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(nt)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
        if shared is not None:
            shared.free()
    if wrong[0]:
        findings.append(("thread-race", f"{which} shared by {nt} threads: {wrong[0]} of "
                         f"{nt * iters} results wrong (not those of the thread's own "
                         "operands)"))
    untyped = [e for e in errors if not _is_typed(e)]
    if untyped:
        findings.append(("untyped-error", f"{which} from {nt} threads: {len(untyped)} "
                         f"untyped errors, first {_err_text(untyped[0])}"))
    return "ok" if not errors else f"errors:{len(errors)}"


# ---------------------------------------------------------------- lifecycle (item 14)
def run_lifecycle(case, findings, lib):
    import copy
    import pickle
    la, F = lib.linalg.advanced, lib.fft
    rng = np.random.default_rng(case["seed0"])
    is_mm = case["which"] == "Matmul"

    def operands():
        if is_mm:
            return (rng.standard_normal((4, 3)), rng.standard_normal((3, 2)))
        return (rng.standard_normal(8) + 1j * rng.standard_normal(8),)

    ops = operands()
    obj = la.Matmul(*ops, execution="cpu") if is_mm else F.FFT(ops[0], execution="cpu")
    obj.plan()
    state = {"freed": False, "bound": True, "alpha": 1.0}

    def ref():
        return state["alpha"] * (ops[0] @ ops[1]) if is_mm else np.fft.fft(ops[0])

    def usable_copy(dup, how):
        try:
            r = dup.execute()
        except Exception as e:  # noqa: BLE001
            if not _is_typed(e):
                findings.append(("untyped-error", f"{how} copy execute: {_err_text(e)}"))
            return
        if not state["freed"] and state["bound"]:
            compare(r, ref(), "float64" if is_mm else "complex128", findings,
                    f"{how} copy's result")

    for step in case["steps"]:
        if (state["freed"] and step == "release") or (step == "plan" and not state["bound"]):
            try:  # refusing or doing it are both fine: released after free, planned unbound
                (obj.plan if step == "plan" else
                 obj.release_operands if is_mm else obj.release_operand)()
            except Exception as e:  # noqa: BLE001
                if not _is_typed(e):
                    findings.append(("untyped-error", f"{case['which']} {step}: "
                                     + _err_text(e)))
            continue
        invalid = state["freed"] or (step in ("execute", "execute_after")
                                     and not state["bound"])
        try:
            if step in ("execute", "execute_after"):
                r = obj.execute()
                if not invalid:
                    compare(r, ref(), "float64" if is_mm else "complex128", findings,
                            f"{step} result")
            elif step in ("pickle", "deepcopy", "copy"):
                invalid = False  # refusing is fine; a copy must work
                dup = (pickle.loads(pickle.dumps(obj)) if step == "pickle" else
                       copy.deepcopy(obj) if step == "deepcopy" else copy.copy(obj))
                usable_copy(dup, step)
                continue
            elif step == "free":
                obj.free()
                state["freed"] = True
                invalid = False
            elif step == "set_alpha":
                if not is_mm:
                    continue
                obj.alpha = 2.0
                if not invalid:
                    state["alpha"] = 2.0
            elif step == "reset":
                new = operands()
                if is_mm:
                    obj.reset_operands(*new)
                else:
                    obj.reset_operand(new[0])
                if not invalid:
                    ops = new
                    state["bound"] = True
            elif step == "release":
                (obj.release_operands if is_mm else obj.release_operand)()
                if not invalid:
                    state["bound"] = False
            elif step == "plan":
                obj.plan()
            elif step == "algorithm_x":
                invalid = True  # not an algorithm: a typed error is expected
                la.Algorithm("x")
            if invalid:
                findings.append(("accepts-invalid", f"{case['which']}.{step} accepted "
                                 + ("" if step == "algorithm_x" else
                                    f"after {'free()' if state['freed'] else 'release'} ")
                                 + f"(steps {case['steps']})"))
        except Exception as e:  # noqa: BLE001
            if not _is_typed(e):
                findings.append(("untyped-error", f"{case['which']} {step}: {_err_text(e)}"))
            elif not invalid and step not in ("pickle", "deepcopy", "copy"):
                findings.append(("refused-valid", f"{case['which']} {step}: {_err_text(e)}"))
    return "ok"


# ---------------------------------------------------------------- results too large
def _huge(shape, dtype):
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape))


def run_huge(case, findings, lib):
    which = case["which"]
    err = None
    try:
        if which == "matmul":
            lib.linalg.advanced.matmul(_huge((1 << 24, 1), np.float32),
                                       _huge((1, 1 << 24), np.float32), execution="cpu")
        elif which == "fft":
            lib.fft.fft(_huge((1 << 20, 1 << 20), np.complex64), axes=(1,), execution="cpu")
        elif which == "npfft":
            try:
                np.fft.fft(_huge((1 << 20, 1 << 20), np.complex64))
            except Exception as e_ref:  # noqa: BLE001
                try:
                    lib.fft.numpy.fft(_huge((1 << 20, 1 << 20), np.complex64))
                except Exception as e:  # noqa: BLE001
                    if not _same_exception(e, e_ref):
                        findings.append(("error-mismatch", f"{_err_text(e)} where numpy "
                                         f"raises {_err_text(e_ref)}"))
                return "typed"
        else:
            lib.tensor.binary_contraction("i,j->ij", _huge((1 << 24,), np.float32),
                                          _huge((1 << 24,), np.float32), execution="cpu")
    except Exception as e:  # noqa: BLE001
        err = e
    judge(case, err, findings)
    return _outcome(err)
