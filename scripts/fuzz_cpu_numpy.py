"""Oracles of the CPU fuzzer (scripts/fuzz_cpu.py) for ``cuweave.fft.numpy`` against ``numpy.fft``
and the scipy backend against ``scipy.fft``."""

from __future__ import annotations

import numpy as np
from fuzz_cpu_cases import Built, dec, make_recipe
from fuzz_cpu_oracles import (
    _TOL,
    _err_text,
    _is_typed,
    _outcome,
    _same_exception,
    build_ops,
    compare,
    to_numpy,
)

# ---------------------------------------------------------------- NumPy-style API and scipy
_ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")


def _np_args(case, a, out=None):
    """Arguments by name or by position (NumPy's parameter order)."""
    kw = dec(case["kw"])
    if out is not None:
        kw["out"] = out
    if case.get("keywords") or case["target"] == "scipy":
        return (a,), kw
    names = (["n", "axis", "norm", "out"] if case["fn"] in _ONE_D else
             ["s", "axes", "norm", "out"])
    given = [i for i, nm in enumerate(names) if nm in kw]
    if not given:
        return (a,), {}
    last = max(given)
    return (a, *[kw.get(nm) for nm in names[:last + 1]]), {}


def _out_recipe(case, shape):
    spec = case["out"]
    shape = list(shape)
    if spec["shape_delta"] and shape:
        shape[-1] += 1
    rng = np.random.default_rng(spec["seed"])
    return make_recipe(rng, shape, spec["dtype"], layouts=[spec["layout"]], flags=False)



def run_npfft(case, findings, lib):
    import warnings
    scipy = case["target"] == "scipy"
    if scipy:
        import scipy.fft as sfft
        ref_fn = getattr(sfft, case["fn"])
    else:
        ref_fn = getattr(np.fft, case["fn"])
    built = build_ops(case)
    a = built["a"]
    saved = a.obj if a.rec["pkg"] in ("list", "scalar") else np.array(a.view)

    def a_ref():  # a fresh copy for each reference call (overwrite_x may destroy one)
        return saved if a.rec["pkg"] in ("list", "scalar") else saved.copy()

    ref = e_ref = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            args, kw = _np_args(case, a_ref())
            ref = ref_fn(*args, **kw)
        except Exception as e:  # noqa: BLE001
            e_ref = e
        out_cw = None
        if case.get("out"):
            shape = ref.shape if ref is not None else np.shape(saved)
            orec = _out_recipe(case, shape)
            built["out"] = Built(orec)
            case = dict(case, inplace="out", ops=dict(case["ops"], out=orec))
            out_ref = Built(orec).obj
            ref0, ref = ref, None
            e_ref = None
            try:
                args, kw = _np_args(case, a_ref(), out_ref)
                ref = ref_fn(*args, **kw)
            except Exception as e:  # noqa: BLE001
                e_ref = e
                if ref0 is not None and tuple(out_ref.shape) == tuple(ref0.shape) and \
                        np.can_cast(ref0.dtype, out_ref.dtype, "same_kind"):
                    # a fitting out= NumPy fails on (its N-D paths with s= reuse out for
                    # intermediate shapes): a NumPy bug, judged as NumPy ignoring out=
                    ref, e_ref = ref0, None
            out_cw = built["out"].obj
        res = err = None
        try:
            args, kw = _np_args(case, a.obj, out_cw)
            if scipy:
                undo = (serve_numpy_on_cpu(lib.fft.scipy_backend)
                        if case.get("served_on_cpu") else None)
                try:
                    with sfft.set_backend(lib.fft.scipy_backend):
                        res = ref_fn(*args, **kw)
                finally:
                    if undo is not None:
                        undo()
            else:
                res = getattr(lib.fft.numpy, case["fn"])(*args, **kw)
        except Exception as e:  # noqa: BLE001
            err = e
    if e_ref is not None and err is not None:
        if not _same_exception(err, e_ref):
            findings.append(("error-mismatch", f"{_err_text(err)} where "
                             f"{'scipy' if scipy else 'numpy'} raises {_err_text(e_ref)}"))
    elif e_ref is None and err is not None:
        if case.get("out") and ref is not out_ref and _is_typed(err):
            pass  # NumPy ignored a wrong out= there (a NumPy quirk); refusing it is fine
        else:
            findings.append(("refused-valid", f"{_err_text(err)} where "
                             f"{'scipy' if scipy else 'numpy'} computes"))
    elif e_ref is not None and err is None:
        findings.append(("accepts-invalid", f"no error where {'scipy' if scipy else 'numpy'} "
                         f"raises {_err_text(e_ref)}"))
    else:
        _np_values(case, ref_fn, a_ref(), ref, res, out_cw, out_ref if out_cw is not None
                   else None, built, findings)
    overwrite = bool(dec(case["kw"]).get("overwrite_x"))
    for name, b in built.items():
        b.check(name == "out" and err is None or (name == "a" and overwrite), name, findings)
    return _outcome(err)


SERVE_ON_CPU_CODE = '''import cuweave.fft.scipy_backend as sb  # serve NumPy arrays as with a GPU,
sb._gpu_usable = lambda: True                   # but run them on the CPU
sb.numpy_gpu_min_elements = 1
_recipe = sb.recipe
class _OnCPU:
    def __init__(self, r): self._r = r
    def __getattr__(self, k): return getattr(self._r, k)
    def run(self, x, execution=None): return self._r.run(x, execution="cpu")
sb.recipe = lambda *a, **k: _OnCPU(_recipe(*a, **k))'''


class _OnCPU:
    """A NumPy-style recipe whose ``run`` executes on the CPU whatever it is asked."""

    def __init__(self, r):
        self._r = r

    def __getattr__(self, k):
        return getattr(self._r, k)

    def run(self, x, execution=None):
        return self._r.run(x, execution="cpu")


def serve_numpy_on_cpu(sb):
    """Make the scipy backend serve NumPy arrays as it does with a GPU (any size, default
    workers) but run them on the CPU; returns the undo function."""
    saved = sb._gpu_usable, sb.numpy_gpu_min_elements, sb.recipe
    real = sb.recipe
    sb._gpu_usable = lambda: True
    sb.numpy_gpu_min_elements = 1
    sb.recipe = lambda *a, **k: _OnCPU(real(*a, **k))

    def undo():
        sb._gpu_usable, sb.numpy_gpu_min_elements, sb.recipe = saved
    return undo


def _wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _np_values(case, ref_fn, a_ref, ref, res, out_cw, out_ref, built, findings):
    """Both computed: dtype and out= as NumPy/SciPy, values against a float64 reference (the
    same call on the input widened to float64/complex128, without out=: NumPy's own out=
    paths are not always right), within the dtype's tolerance or 4x NumPy's own error."""
    lib_name = "scipy" if case["target"] == "scipy" else "numpy"
    numpy_ignored_out = out_cw is not None and ref is not out_ref
    ref_arr = np.asarray(ref)
    if numpy_ignored_out:  # NumPy ignores out= in its N-D inverse paths (a NumPy quirk)
        odt = np.dtype(case["out"]["dtype"])
        if res is out_cw and not np.can_cast(ref_arr.dtype, odt, "same_kind"):
            findings.append(("accepts-invalid", f"out= of dtype {odt} filled with a "
                             f"{ref_arr.dtype} result (NumPy's casting rule 'same_kind' "
                             "refuses it)"))
            return
        out_cw = None
    if out_cw is not None and res is not out_cw:
        findings.append(("wrong-result", "out= given but not returned"))
    got = to_numpy(res)
    if got.dtype != ref_arr.dtype and not numpy_ignored_out:
        findings.append(("wrong-result", f"result dtype {got.dtype}, {lib_name} gives "
                         f"{ref_arr.dtype}"))
        return
    # the same arguments in the same style (a positional None is not a default: fft2's
    # axes=None means all axes), out= as None
    args, kw = _np_args(case, _wide(a_ref), "OUT" if case.get("out") else None)
    args = tuple(None if isinstance(v, str) and v == "OUT" else v for v in args)
    if "out" in kw:
        kw["out"] = None
    kw.pop("overwrite_x", None)
    try:
        ref64 = _wide(ref_fn(*args, **kw))
    except Exception:  # noqa: BLE001 (no wider reference: NumPy's own result)
        ref64 = _wide(ref_arr)
    tol = _TOL.get(got.dtype.name, 1e-11)
    if ref64.shape == ref_arr.shape and ref64.size:
        sc = max(float(np.max(np.abs(ref64))), 1e-300)
        own = float(np.max(np.abs(_wide(ref_arr) - ref64))) / sc
        if own < 1e-3:
            tol = max(tol, 4 * own)
    compare(got, ref64, None, findings, tol=tol)
    if out_cw is not None:
        compare(built["out"].current(), ref64, None, findings, "out", tol=tol)
