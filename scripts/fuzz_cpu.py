#!/usr/bin/env python
"""CPU fuzzer of cuweave's public entry points (issue #33).

Thousands of random calls (dtypes, layouts, views, in place, bad options) of
``cuweave.linalg.advanced.matmul``/``Matmul``, ``cuweave.fft.fft/ifft/rfft/irfft``/``FFT``,
``cuweave.fft.numpy.*`` (against ``numpy.fft``), the scipy.fft backend (against ``scipy.fft``)
and ``cuweave.tensor.binary_contraction``/``ternary_contraction``, all on the CPU. Each call is
judged by five oracles:

1. no crash: cases run in a child process with a watchdog; a segfault or a hang is pinned on
   the case that was running;
2. no wrong result: results are compared with a float64 NumPy reference (``numpy.matmul``,
   ``numpy.fft``, ``numpy.einsum``), shape and dtype included;
3. no write outside a target: every operand lives inside a larger guard buffer filled with a
   sentinel; afterwards the guard bytes, the gaps between strided elements and every input are
   checked (only an in-place target's own elements may change);
4. no untyped error: an exception must be a ``cuweave.CuweaveError`` (for the NumPy-style API
   and the scipy backend: an instance of the type NumPy/SciPy raise on the same call);
5. where NumPy/SciPy accept and compute, the NumPy-style API and the scipy backend must too.

A threads mode shares one planned Matmul/FFT between threads (``reset_operands`` + ``execute``
in each) and checks every result.

Cases are plain JSON (``gen_case``), deterministic in (seed, index); each failing case is
written with a reproducer (plain NumPy/torch code) to ``DIR/fuzz_cpu.json`` and a summary by
category to ``DIR/fuzz_cpu.md``. Identical failures (same signature) are kept once, the
smallest case as the reproducer.

Usage::

    PYTHONPATH=src python scripts/fuzz_cpu.py --cases 5000 --seed 1 --out benchmarks/results
    PYTHONPATH=src python scripts/fuzz_cpu.py --seed 1 --replay 1234     # one case, verbose
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

import numpy as np

SENTINEL = 0xA5
CASE_TIMEOUT_S = 30.0

#: failure categories, in report order
CATEGORIES = ("crash", "hang", "wrong-result", "guard-write", "input-modified",
              "untyped-error", "error-mismatch", "refused-valid", "accepts-invalid",
              "thread-race")

REAL = ("float32", "float64")
COMPLEX = ("complex64", "complex128")
SIZES = (1, 2, 3, 4, 5, 8)

TARGET_WEIGHTS = {
    "matmul": 20, "Matmul": 8, "fft": 18, "FFT": 7, "npfft": 20, "scipy": 8,
    "binary": 8, "ternary": 4, "threads": 1, "lifecycle": 3, "huge": 1,
}


# ================================================================ operand recipes (JSON)
def _c_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.insert(0, acc)
        acc *= max(int(n), 1)
    return strides


def _self_overlap(shape, strides):
    """Do two index tuples address one element (exactly, by enumeration: shapes are small)?"""
    if any(n == 0 for n in shape) or not shape:
        return False
    addr = np.zeros(1, np.int64)
    for n, s in zip(shape, strides):
        addr = (addr[:, None] + np.arange(n, dtype=np.int64) * s).ravel()
    return bool(np.unique(addr).size < addr.size)


def make_recipe(rng, shape, dtype, *, pkg="np", layouts=None, flags=True, values="normal"):
    """A JSON description of one operand: package, shape, dtype, exact strides (elements),
    offset (elements), misalignment (bytes), byte order, read-only flag, lazy conjugate."""
    shape = [int(n) for n in shape]
    nd = len(shape)
    if layouts is None:
        layouts = ["c"] * 4 + ["f", "perm", "neg", "slice", "zero", "overlap"]
    if pkg == "torch":  # torch.from_numpy: no negative strides, aligned, native order
        layouts = [x for x in layouts if x != "neg"] or ["c"]
    layout = str(rng.choice(layouts)) if nd and 0 not in shape else "c"
    strides = _c_strides(shape)
    offset = 0
    if layout == "f":
        strides = list(reversed(_c_strides(list(reversed(shape)))))
    elif layout == "perm":
        perm = [int(p) for p in rng.permutation(nd)]
        ps = _c_strides([shape[p] for p in perm])
        strides = [0] * nd
        for i, p in enumerate(perm):
            strides[p] = ps[i]
    elif layout == "slice":
        steps = [int(rng.integers(1, 4)) for _ in shape]
        pads = [int(rng.integers(0, 3)) for _ in shape]
        ext = [max(n, 1) * s + p for n, s, p in zip(shape, steps, pads)]
        strides = [s * st for s, st in zip(_c_strides(ext), steps)]
    elif layout == "neg":
        axes = [i for i in range(nd) if rng.random() < 0.6] or [nd - 1]
        for i in axes:
            offset += (max(shape[i], 1) - 1) * strides[i]
            strides[i] = -strides[i]
    elif layout == "zero":
        cand = [i for i in range(nd) if shape[i] > 1] or [0]
        i = int(rng.choice(cand))
        strides[i] = 0
    elif layout == "overlap":
        cand = [i for i in range(nd) if shape[i] > 1]
        if len(cand) >= 2 or (cand and nd >= 2):
            inner = cand[-1]
            outer = int(rng.choice([i for i in range(nd) if i != inner]))
            strides[outer] = int(rng.integers(1, max(2, shape[inner])))
            strides[inner] = 1
        else:
            layout = "c"
    rec = {"pkg": pkg, "shape": shape, "dtype": dtype, "layout": layout,
           "overlaps": _self_overlap(shape, strides), "strides": strides, "offset": offset,
           "misalign": 0, "bswap": False,
           "ro": False, "conj": False, "seed": int(rng.integers(1 << 30)), "values": values,
           "pad": int(rng.choice([8, 16, 64]))}
    if pkg == "torch":  # torch assumes itemsize alignment (complex128 at 8 mod 16 crashes it)
        rec["pad"] = max(rec["pad"], 16)
    if flags and pkg in ("np", "dlpack"):
        itemsize = np.dtype(dtype).itemsize
        if rng.random() < 0.07 and itemsize > 1:
            rec["misalign"] = int(rng.integers(1, itemsize))
        if rng.random() < 0.07 and itemsize > 1:
            rec["bswap"] = True
        if rng.random() < 0.1:
            rec["ro"] = True
    if pkg == "torch" and dtype.startswith("complex") and rng.random() < 0.3:
        rec["conj"] = True
    return rec


def plain(rec):
    """The same layout, writable (for warm-up calls that fill the plan cache with it)."""
    r = dict(rec, ro=False)
    r["pkg"] = {"dlpack_bytes": "dlpack", "mmap": "np"}.get(rec["pkg"], rec["pkg"])
    return r


def n_elements(rec):
    return int(np.prod(rec["shape"], dtype=np.int64)) if rec.get("shape") is not None else 1


# ================================================================ building operands
class Producer:
    """A generic DLPack producer over a NumPy array (what a third-party array library is)."""

    def __init__(self, array):
        self._a = array

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kw = {}
        if max_version is not None:
            kw["max_version"] = max_version
        if dl_device is not None:
            kw["dl_device"] = dl_device
        if copy is not None:
            kw["copy"] = copy
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def recipe_values(rec):
    shape = tuple(rec["shape"])
    rng = np.random.default_rng(rec["seed"])
    dt = rec["dtype"]
    kind = rec.get("values", "normal")
    if kind == "hermitian":  # a C2R input that a real signal has: rfftn of real data
        full, axes = rec["full"], rec["axes"]
        if 0 in full:
            return np.zeros(shape, complex)
        return np.fft.rfftn(rng.standard_normal(full), axes=axes)
    if dt == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dt).kind in "iu":
        return rng.integers(-3, 4, shape) if np.dtype(dt).kind == "i" else rng.integers(0, 4,
                                                                                         shape)
    v = rng.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return v


class Built:
    """One operand as passed (``obj``), its memory (``buf`` with the guard bytes), the NumPy
    view of its elements (``view``), its logical value in float64/complex128 (``value``)."""

    def __init__(self, rec, workdir=None):
        self.rec = rec
        pkg = rec["pkg"]
        self.buf = self.view = None
        self._keep = []
        if pkg == "scalar":
            self.obj = recipe_values(dict(rec, shape=[])).item()
            self.value = np.asarray(self.obj)
            return
        dt = np.dtype(rec["dtype"])
        if rec["bswap"]:
            dt = dt.newbyteorder()
        it = dt.itemsize
        shape = tuple(rec["shape"])
        strides = [s * it for s in rec["strides"]]
        if any(n == 0 for n in shape):
            span = 0
        else:
            span = sum((n - 1) * abs(s) for n, s in zip(shape, rec["strides"])) + 1
        start = rec["pad"] + rec["misalign"] + rec["offset"] * it
        nbytes = rec["pad"] * 2 + rec["misalign"] + span * it + 8
        buf = np.full(nbytes, SENTINEL, np.uint8)
        view = np.ndarray(shape, dt, buffer=buf, offset=start, strides=strides)
        vals = recipe_values(rec)
        if view.size:
            view[...] = vals.astype(view.dtype, copy=False) if hasattr(vals, "astype") else vals
        # the element bytes (everything else must stay the sentinel)
        mask = np.zeros(nbytes, bool)
        if view.size:
            pos = np.full(shape, start, np.int64)
            for ax, (n, s) in enumerate(zip(shape, strides)):
                idx = np.arange(n, dtype=np.int64) * s
                pos = pos + idx.reshape([-1 if i == ax else 1 for i in range(len(shape))])
            mask[(pos.reshape(-1, 1) + np.arange(it)).ravel()] = True
        self.mask = mask
        if pkg in ("dlpack_bytes", "mmap"):
            data = bytes(buf)
            if pkg == "mmap":
                import mmap
                import tempfile
                fd, path = tempfile.mkstemp(prefix="fuzz_cpu_", dir=workdir)
                os.write(fd, data)
                mm = mmap.mmap(fd, len(data), access=mmap.ACCESS_READ)
                os.close(fd)
                os.unlink(path)
                self._keep.append(mm)
                data = mm
            else:
                self._keep.append(data)
            buf = np.frombuffer(data, np.uint8)
            view = np.ndarray(shape, dt, buffer=data, offset=start, strides=strides)
        self.buf, self.view = buf, view
        self.before = buf.copy()
        val = np.array(view, dtype=np.complex128 if dt.kind == "c" else np.float64)
        if dt.kind == "b" or dt.kind in "iu":
            val = np.array(view)
        if rec["ro"]:
            view.flags.writeable = False
        if pkg == "np":
            self.obj = view
        elif pkg == "list":
            self.obj = view.tolist()
        elif pkg == "torch":
            import torch
            t = torch.from_numpy(view)
            self._tensor = t
            if rec["conj"]:
                t = t.conj()
                val = np.conj(val)
            self.obj = t
        elif pkg in ("dlpack", "dlpack_bytes", "mmap"):
            self.obj = Producer(view)
        else:
            raise ValueError(pkg)
        self.value = val

    def current(self):
        """The logical value now (after an in-place call)."""
        v = np.array(self.view, dtype=np.complex128 if self.view.dtype.kind == "c"
                     else np.float64)
        return np.conj(v) if self.rec.get("conj") else v

    def check(self, is_target, name, findings):
        """Guard bytes and gaps unchanged; every element unchanged unless the target."""
        if self.buf is None:
            return
        now = self.buf
        changed = now != self.before
        if not changed.any():
            return
        outside = changed & ~self.mask
        if outside.any():
            where = np.flatnonzero(outside)
            findings.append(("guard-write", f"{name}: {where.size} byte(s) outside its elements "
                             f"changed (first at byte {int(where[0])})"))
        if not is_target and (changed & self.mask).any():
            extra = " (read-only memory)" if (self.rec["ro"] or self.rec["pkg"] in
                                              ("dlpack_bytes", "mmap")) else ""
            findings.append(("input-modified", f"{name}: input elements changed{extra}"))


def recipe_code(name, rec):
    """Plain NumPy/torch code that builds the operand ``name`` of ``rec``."""
    pkg = rec["pkg"]
    if pkg == "scalar":
        return f"{name} = {Built(rec).obj!r}"
    dt = np.dtype(rec["dtype"])
    if rec["bswap"]:
        dt = dt.newbyteorder()
    it = dt.itemsize
    shape = tuple(rec["shape"])
    strides = tuple(s * it for s in rec["strides"])
    if any(n == 0 for n in shape):
        span = 0
    else:
        span = sum((n - 1) * abs(s) for n, s in zip(shape, rec["strides"])) + 1
    start = rec["pad"] + rec["misalign"] + rec["offset"] * it
    nbytes = rec["pad"] * 2 + rec["misalign"] + span * it + 8
    if rec.get("values") == "hermitian":
        vals = (f"np.fft.rfftn(np.random.default_rng({rec['seed']}).standard_normal("
                f"{tuple(rec['full'])}), axes={tuple(rec['axes'])})")
    elif dt.kind == "c":
        vals = (f"(lambda g: g.standard_normal({shape}) + 1j * g.standard_normal({shape}))"
                f"(np.random.default_rng({rec['seed']}))")
    elif dt.kind == "b":
        vals = f"np.random.default_rng({rec['seed']}).random({shape}) < 0.5"
    elif dt.kind in "iu":
        lo = -3 if dt.kind == "i" else 0
        vals = f"np.random.default_rng({rec['seed']}).integers({lo}, 4, {shape})"
    else:
        vals = f"np.random.default_rng({rec['seed']}).standard_normal({shape})"
    simple = (rec["layout"] == "c" and not rec["misalign"] and not rec["bswap"]
              and dt.isnative)
    lines = []
    if simple:
        lines.append(f"{name} = np.asarray({vals}).astype({dt.str!r})")
    else:
        lines.append(f"{name} = np.ndarray({shape}, {dt.str!r}, buffer=bytearray({nbytes}), "
                     f"offset={start}, strides={strides})  # layout {rec['layout']}")
        lines.append(f"{name}[...] = {vals}")
    if pkg in ("dlpack_bytes", "mmap"):
        lines.append(f"{name} = np.ndarray({shape}, {dt.str!r}, buffer=bytes({name}.base), "
                     f"offset={start if not simple else 0}, strides={name}.strides)"
                     "  # read-only memory (immutable bytes)")
    if rec["ro"]:
        lines.append(f"{name}.flags.writeable = False")
    if pkg == "list":
        lines.append(f"{name} = {name}.tolist()")
    elif pkg == "torch":
        lines.append(f"{name} = torch.from_numpy({name})" + (".conj()" if rec["conj"] else ""))
    elif pkg in ("dlpack", "dlpack_bytes", "mmap"):
        lines.append(f"{name} = Producer({name})")
    return "\n".join(lines)


PRODUCER_CODE = '''class Producer:  # a generic DLPack producer over a NumPy array
    def __init__(self, a): self._a = a
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kw = {k: v for k, v in dict(max_version=max_version, dl_device=dl_device,
                                     copy=copy).items() if v is not None}
        return self._a.__dlpack__(**kw)
    def __dlpack_device__(self): return self._a.__dlpack_device__()'''


# ================================================================ argument encoding (JSON)
def dec(v):
    """Arguments are JSON; a few Python values have a tagged form ``{"$": tag, ...}``."""
    if isinstance(v, dict) and "$" in v:
        tag = v["$"]
        if tag == "np.str_":
            return np.str_(v["v"])
        if tag == "np.float32":
            return np.float32(v["v"])
        if tag == "complex":
            return complex(v["re"], v["im"])
        if tag == "tuple":
            return tuple(dec(x) for x in v["v"])
        if tag == "obj":
            return object()
        if tag == "FFTDirection":
            from cuweave.fft import FFTDirection
            return FFTDirection[v["v"]]
        if tag == "Algorithm":
            from cuweave.linalg.advanced import Algorithm
            return Algorithm(v["v"])
        raise ValueError(tag)
    if isinstance(v, dict):
        return {k: dec(x) for k, x in v.items()}
    if isinstance(v, list):
        return [dec(x) for x in v]
    return v


def code_of(v):
    if isinstance(v, dict) and "$" in v:
        tag = v["$"]
        if tag == "np.str_":
            return f"np.str_({v['v']!r})"
        if tag == "np.float32":
            return f"np.float32({v['v']!r})"
        if tag == "complex":
            return repr(complex(v["re"], v["im"]))
        if tag == "tuple":
            return "(" + "".join(code_of(x) + ", " for x in v["v"]) + ")"
        if tag == "obj":
            return "object()"
        if tag == "FFTDirection":
            return f"cuweave.fft.FFTDirection.{v['v']}"
        if tag == "Algorithm":
            return f"cuweave.linalg.advanced.Algorithm({v['v']!r})"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {code_of(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(code_of(x) for x in v) + "]"
    return repr(v)


def _cplx(z):
    return {"$": "complex", "re": float(z.real), "im": float(z.imag)}


# ================================================================ case generation
def gen_case(seed, index):
    rng = np.random.default_rng([seed, index])
    targets = list(TARGET_WEIGHTS)
    w = np.array([TARGET_WEIGHTS[t] for t in targets], float)
    target = str(rng.choice(targets, p=w / w.sum()))
    case = GENERATORS[target](rng)
    case.update(id=index, seed=seed)
    case.setdefault("expect", "ok")
    if case["expect"] == "ok" and any(r.get("conj") for r in case["ops"].values()):
        case["expect"] = "either"  # a typed refusal of a lazily conjugated tensor is fine
    return case


def _pkg(rng, allow_bytes=True):
    r = rng.random()
    if r < 0.65:
        return "np"
    if r < 0.85:
        return "torch"
    if r < 0.95 or not allow_bytes:
        return "dlpack"
    return "dlpack_bytes"


def _target_recipe(rng, shape, dtype, pkg):
    """An in-place target: mostly writable, sometimes read-only, overlapping or aliased."""
    rec = make_recipe(rng, shape, dtype, pkg=pkg,
                      layouts=["c"] * 5 + ["f", "perm", "neg", "slice", "zero", "overlap"])
    if pkg == "dlpack" and rng.random() < 0.3:
        rec["pkg"] = "dlpack_bytes"
    elif pkg == "np" and rng.random() < 0.04:
        rec["pkg"] = "mmap"
    return rec


def _writable(rec):
    return not (rec["ro"] or rec["pkg"] in ("dlpack_bytes", "mmap") or rec["overlaps"])


def gen_matmul(rng, stateful=False):
    dt = str(rng.choice(list(REAL) * 2 + list(COMPLEX) + ["float16"]))
    pkg = _pkg(rng)
    case = {"target": "Matmul" if stateful else "matmul", "kw": {}, "ops": {}, "expect": "ok"}
    batch = [[], [], [], [2], [1], [2, 3], [0]][int(rng.integers(7))]
    m, k, n = (int(rng.choice(SIZES)) for _ in range(3))
    if rng.random() < 0.04:
        k = 0
    a_shape, b_shape = batch + [m, k], batch + [k, n]
    r = rng.random()
    if r < 0.06 and not batch:
        a_shape = [k]
    elif r < 0.12 and not batch:
        b_shape = [k]
    elif r < 0.2 and batch:
        b_shape = [k, n]  # one matrix broadcast over a batch
    case["ops"]["a"] = make_recipe(rng, a_shape, dt, pkg=pkg)
    case["ops"]["b"] = make_recipe(rng, b_shape, dt, pkg=pkg)
    ab = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2])) if (
        len(a_shape) > 1 and len(b_shape) > 1) else ()
    out_shape = list(np.matmul(np.empty(a_shape, np.int8), np.empty(b_shape, np.int8)).shape)
    del ab
    inplace = False
    if rng.random() < 0.45 and len(a_shape) == 2 == len(b_shape) or rng.random() < 0.25:
        c_kind = rng.choice(["full", "full", "col", "batch1", "vec"])
        if c_kind == "full" or len(out_shape) < 2:
            c_shape = out_shape
        elif c_kind == "col":
            c_shape = out_shape[:-1] + [1]
        elif c_kind == "batch1":
            c_shape = [1] + out_shape
            case["expect"] = "either"
        else:
            c_shape = [out_shape[-1]] if len(out_shape) == 2 and out_shape[-2] == 1 else \
                out_shape
        if len(c_shape) == 1:
            case["expect"] = "either"  # a 1-D c: nvmath-python's reading is not settled
        inplace = rng.random() < 0.4 and c_shape == out_shape
        if inplace:
            case["ops"]["c"] = _target_recipe(rng, c_shape, dt, pkg)
            case["kw"]["options"] = {"inplace": True}
            case["inplace"] = "c"
            if not _writable(case["ops"]["c"]):
                case["expect"] = "error"
        else:
            case["ops"]["c"] = make_recipe(rng, c_shape, dt, pkg=pkg)
        cplx = dt.startswith("complex")
        beta = [1.0, 0.5, 2, -1.0] + ([_cplx(0.5 - 1j)] if cplx else [])
        case["kw"]["beta"] = beta[int(rng.integers(len(beta)))]
    if rng.random() < 0.5:
        alphas = [2.0, 0.5, 3, {"$": "np.float32", "v": 1.5}]
        if dt.startswith("complex"):
            alphas.append(_cplx(1 + 2j))
        case["kw"]["alpha"] = alphas[int(rng.integers(len(alphas)))]
    if rng.random() < 0.3 and not dt.startswith("complex") and len(out_shape) >= 2:
        ep = str(rng.choice(["RELU", "GELU", "BIAS", "RELU_BIAS", "GELU_BIAS", "RELU_AUX"]))
        case["kw"]["epilog"] = ep
        if "BIAS" in ep:
            bshape = [out_shape[-2]] if rng.random() < 0.6 else [out_shape[-2], 1]
            case["ops"]["bias"] = make_recipe(rng, bshape, dt, pkg=pkg, flags=False)
    if rng.random() < 0.25:
        case["warm"] = True  # the same layouts ran once before: the plan-cache hit path
    case["kw"]["execution"] = "cpu" if rng.random() < 0.8 else {"name": "cpu",
                                                              "num_threads": 1}
    if any(op["bswap"] for op in case["ops"].values()) or 0 in out_shape or k == 0:
        case["expect"] = "either" if case["expect"] == "ok" else case["expect"]
    if len(a_shape) > 2 and len(b_shape) > 2 and a_shape[:-2] != b_shape[:-2]:
        case["expect"] = "either" if case["expect"] == "ok" else case["expect"]
    _maybe_bad(rng, case, MATMUL_BAD)
    return case


MATMUL_BAD = [
    ("alpha", "x"), ("options", {"inplace": "yes"}),
    ("options", {"bogus": 1}), ("execution", "gpu"), ("epilog", "nope"),
    ("epilog", 2.0), ("a_dtype", "int32"), ("b_dtype", "bool"), ("k_mismatch", 1),
    ("algorithm", {"$": "Algorithm", "v": "x"}),
    ("a_list", True), ("c_no_beta", True), ("bias_scalar", True),
    ("qualifiers", [1, 2, 3]), ("options", {"inplace": True, "blocking": "never"}),
]


def _maybe_bad(rng, case, bad, p=0.15):
    """With probability ``p``, one bad argument or operand: the call must raise a typed
    error (and change nothing)."""
    if rng.random() >= p:
        return
    name, val = bad[int(rng.integers(len(bad)))]
    case["bad"] = [name, val]
    case["expect_before_bad"] = case["expect"]
    case["expect"] = "error"
    ops, kw = case["ops"], case["kw"]
    first = "x" if "x" in ops else "a"
    if name in ("alpha", "options", "execution", "algorithm", "qualifiers", "norm", "axes",
                "direction", "prolog"):
        kw[name] = val
    elif name == "epilog":
        kw[name] = val
        ops.pop("bias", None)
    elif name == "bias_scalar":
        ops.pop("bias", None)
        kw["epilog"] = "RELU_BIAS"
        kw["epilog_inputs"] = {"bias": 3}
    elif name.endswith("_dtype"):
        op = ops[name[0] if name[0] in ops else first]
        op.update(dtype=val, values="normal", conj=False)
    elif name == "mixed_dtype":
        op = ops["b"]
        op["dtype"] = val if ops["a"]["dtype"] != val else "float32"
    elif name.endswith("_list"):
        ops[first].update(pkg="list", conj=False)
    elif name == "k_mismatch":
        b = ops["b"]
        shape = list(b["shape"])
        shape[-2 if len(shape) > 1 else -1] += 1
        ops["b"] = make_recipe(rng, shape, b["dtype"], pkg=b["pkg"])
    elif name == "c_no_beta":
        kw.pop("beta", None)
        add = "d" if case["target"] == "ternary" else "c"
        if add not in ops:
            ops[add] = make_recipe(rng, case.get("oshape", [2, 2]), ops["a"]["dtype"],
                                   pkg=ops["a"]["pkg"])
    elif name == "expr":
        terms, out = case["expr"].split("->")
        case["expr"] = {"unknown_out": case["expr"] + "z",
                        "wrong_count": terms.split(",")[0] + "->" + out,
                        "arrow": terms + "=>" + out}[val]
    else:
        raise ValueError(name)


def gen_Matmul(rng):
    case = gen_matmul(rng, stateful=True)
    if case["kw"].pop("algorithm", None) is not None:  # not a Matmul argument: no bad one
        case.pop("bad")
        case["expect"] = case.pop("expect_before_bad")
    case["resets"] = int(rng.integers(1, 3))
    return case


FFT_KINDS = ("fft", "ifft", "rfft", "irfft")


def gen_fft(rng, stateful=False):
    kind = str(rng.choice(FFT_KINDS))
    nd = int(rng.choice([1, 1, 2, 2, 3, 4]))
    sizes = (1, 2, 3, 4, 5, 6, 8, 9, 16)
    shape = [int(rng.choice(sizes)) for _ in range(nd)]
    if rng.random() < 0.03:
        shape[int(rng.integers(nd))] = 0
    case = {"target": "FFT" if stateful else "fft", "kind": kind, "kw": {}, "ops": {},
            "expect": "ok"}
    if nd <= 3 and rng.random() < 0.35:
        axes = None
        ax = list(range(nd))
    else:
        cnt = int(rng.integers(1, min(3, nd) + 1))
        ax = [int(a) for a in rng.choice(nd, cnt, replace=False)]
        if rng.random() < 0.5:
            ax = sorted(ax)
        axes = [a - nd if rng.random() < 0.3 else a for a in ax]
        ax = [a % nd for a in axes]
        case["kw"]["axes"] = axes
    case["axes"] = ax
    pkg = _pkg(rng)
    prec = str(rng.choice(["32", "64"]))
    opts = {}
    if kind in ("fft", "ifft"):
        dt = "complex" + ("64" if prec == "32" else "128")
        if rng.random() < 0.3:
            opts["inplace"] = True
    elif kind == "rfft":
        dt = "float" + prec
    else:
        dt = "complex" + ("64" if prec == "32" else "128")
        parity = str(rng.choice(["even", "odd"]))
        if parity == "odd" or rng.random() < 0.3:
            opts["last_axis_parity"] = parity
        last = ax[-1]
        n_last = 2 * (shape[last] - 1) + (parity == "odd")
        if n_last < 1:
            n_last = 1
            case["expect"] = "either"
        full = list(shape)
        full[last] = n_last
        case["n_last"] = n_last
    if rng.random() < 0.2:
        opts["result_layout"] = str(rng.choice(["natural", "optimized"]))
    if opts:
        case["kw"]["options"] = opts
    if opts.get("inplace"):
        rec = _target_recipe(rng, shape, dt, pkg)
        case["inplace"] = "x"
        if not _writable(rec):
            case["expect"] = "error"
    else:
        rec = make_recipe(rng, shape, dt, pkg=pkg)
    if kind == "irfft":
        rec["values"] = "hermitian"
        rec["full"], rec["axes"] = full, ax
    case["ops"]["x"] = rec
    if rng.random() < 0.4:
        norms = [None, "backward", "ortho", "forward", {"$": "np.str_", "v": "ortho"}]
        case["kw"]["norm"] = norms[int(rng.integers(len(norms)))]
    if kind in ("fft", "ifft") and rng.random() < 0.15:  # only they take a direction
        d = str(rng.choice(["FORWARD", "INVERSE"]))
        case["kw"]["direction"] = ({"$": "FFTDirection", "v": d} if rng.random() < 0.5
                                   else d.lower())
    case["kw"]["execution"] = "cpu"
    if rng.random() < 0.25:
        case["warm"] = True
    if 0 in shape or rec["bswap"]:
        case["expect"] = "either" if case["expect"] == "ok" else case["expect"]
    _maybe_bad(rng, case, FFT_BAD if kind in ("fft", "ifft") else FFT_BAD_REAL)
    return case


FFT_BAD = [
    ("axes", [0, 0]), ("axes", [7]), ("axes", [0, 1, 2, 3]), ("norm", "bad"),
    ("options", {"inplace": "yes"}), ("options", {"fft_type": "Z2Z"}),
    ("options", {"result_layout": "weird"}), ("execution", "gpu"), ("direction", "sideways"),
    ("x_dtype", "int64"), ("x_list", True), ("options", {"bogus": 1}),
    ("options", {"last_axis_parity": "neither"}), ("prolog", {"$": "obj"}),
]
FFT_BAD_REAL = [b for b in FFT_BAD if b[0] != "direction"]  # rfft/irfft take no direction


def gen_FFT(rng):
    case = gen_fft(rng, stateful=True)
    case["resets"] = int(rng.integers(1, 3))
    return case


NP_FUNCS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn", "rfftn",
            "irfftn", "fft2", "ifft2", "rfft2", "irfft2")


def gen_npfft(rng, scipy=False):
    fn = str(rng.choice(NP_FUNCS))
    nd = int(rng.choice([1, 1, 2, 2, 3]))
    shape = [int(rng.choice((1, 2, 3, 4, 5, 8, 9))) for _ in range(nd)]
    if rng.random() < 0.06:
        shape[int(rng.integers(nd))] = 0
    dts = ["float64", "float32", "complex128", "complex64", "float16", "int64", "int8",
           "bool"]
    dt = str(rng.choice(dts, p=[.22, .18, .22, .18, .05, .07, .04, .04]))
    r = rng.random()
    case = {"target": "scipy" if scipy else "npfft", "fn": fn, "kw": {}, "ops": {},
            "expect": "compare"}
    if r < 0.06:
        rec = make_recipe(rng, shape, dt, pkg="list", flags=False)
    elif r < 0.09:
        rec = make_recipe(rng, [], dt, pkg="scalar", flags=False)
        nd = 0
    elif r < 0.12:
        rec = make_recipe(rng, [], dt, flags=False)  # a 0-d array
        nd = 0
    else:
        rec = make_recipe(rng, shape, dt, pkg="np")
    case["ops"]["a"] = rec
    one_d = fn in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
    kw = case["kw"]
    if one_d:
        if rng.random() < 0.4:
            kw["n"] = int(rng.choice([1, 2, 3, 5, 8, 0, -1])) if rng.random() < 0.9 else 2.5
        if rng.random() < 0.4 and nd:
            kw["axis"] = int(rng.integers(-nd - (rng.random() < 0.1), nd))
    else:
        if rng.random() < 0.5 and nd:
            cnt = int(rng.integers(1, nd + 1))
            kw["axes"] = [int(a) for a in rng.choice(nd, cnt, replace=False)]
            if rng.random() < 0.05:
                kw["axes"] = kw["axes"] + kw["axes"][:1]
        if rng.random() < 0.3:
            cnt = len(kw.get("axes", [])) or (2 if fn.endswith("2") else max(nd, 1))
            kw["s"] = [int(rng.choice([1, 2, 3, 4, 6])) for _ in range(cnt)]
    if rng.random() < 0.4:
        norms = [None, "backward", "ortho", "forward", {"$": "np.str_", "v": "ortho"}, "bad"]
        kw["norm"] = norms[int(rng.integers(len(norms)))]
    if scipy:
        if rng.random() < 0.2:
            kw["overwrite_x"] = bool(rng.random() < 0.5)
        if rng.random() < 0.15:
            kw["workers"] = int(rng.choice([1, 2, -1]))
    elif rng.random() < 0.2:
        case["out"] = {"dtype": str(rng.choice(["complex128", "complex64", "float64",
                                                "float32", "int64"])),
                       "layout": str(rng.choice(["c", "c", "slice", "f"])),
                       "seed": int(rng.integers(1 << 30)), "shape_delta": int(
                           rng.random() < 0.1)}
    case["keywords"] = bool(rng.random() < 0.5)  # parameters by name or by position
    if scipy:  # without a GPU the backend hands NumPy arrays back to SciPy: mostly make it
        case["served_on_cpu"] = bool(rng.random() < 0.7)  # serve them, on the CPU
    return case


def gen_scipy(rng):
    return gen_npfft(rng, scipy=True)


def gen_contraction(rng, ternary=False):
    letters = list("abcdefgh")
    rng.shuffle(letters)
    nb = int(rng.integers(0, 2))
    batch = letters[:nb]
    rest = letters[nb:]
    dt = str(rng.choice(list(REAL) * 2 + list(COMPLEX)))
    pkg = _pkg(rng)
    ext = {m: int(rng.choice([1, 2, 3, 4])) for m in letters}
    if rng.random() < 0.03:
        ext[letters[0]] = 0
    if not ternary:
        nc, nfa, nfb = (int(rng.integers(0, 3)) for _ in range(3))
        con = rest[:nc]
        fa = rest[nc:nc + nfa]
        fb = rest[nc + nfa:nc + nfa + nfb]
        ma = batch + con + fa
        mb = batch + con + fb
        mo = batch + fa + fb
        modes = [ma, mb]
    else:
        nab, nbc, nfa, nfb, nfc = (int(rng.integers(0, 2)) for _ in range(5))
        i = 0
        sab = rest[i:i + nab]
        i += nab
        sbc = rest[i:i + nbc]
        i += nbc
        fa = rest[i:i + nfa]
        i += nfa
        fb = rest[i:i + nfb]
        i += nfb
        fc = rest[i:i + nfc]
        ma = batch + sab + fa
        mb = batch + sab + sbc + fb
        mc = batch + sbc + fc
        mo = batch + fa + fb + fc
        modes = [ma, mb, mc]
    modes = [list(rng.permutation(m)) if m else [] for m in modes]
    mo = list(rng.permutation(mo)) if mo else []
    expr = ",".join("".join(m) for m in modes) + "->" + "".join(mo)
    names = ["a", "b", "c"] if ternary else ["a", "b"]
    case = {"target": "ternary" if ternary else "binary", "expr": expr, "ops": {}, "kw": {},
            "expect": "ok"}
    case["oshape"] = oshape = [ext[x] for x in mo]
    for nm, m in zip(names, modes):
        case["ops"][nm] = make_recipe(rng, [ext[x] for x in m], dt, pkg=pkg)
    addend = "d" if ternary else "c"
    if rng.random() < 0.35:
        case["ops"][addend] = make_recipe(rng, oshape, dt, pkg=pkg)
        case["kw"]["beta"] = float(rng.choice([1.0, 0.5, -2.0]))
    if rng.random() < 0.3:
        case["kw"]["alpha"] = float(rng.choice([2.0, 0.5])) if rng.random() < 0.8 else 3
    if rng.random() < 0.3:
        rec = _target_recipe(rng, oshape, dt, pkg)
        case["ops"]["out"] = rec
        case["inplace"] = "out"
        if not _writable(rec):
            case["expect"] = "error"
    case["kw"]["execution"] = "cpu"
    if 0 in ext.values() or not mo or any(op["bswap"] for op in case["ops"].values()):
        case["expect"] = "either" if case.get("expect", "ok") == "ok" else case["expect"]
    if rng.random() < 0.25:
        case["warm"] = True
    _maybe_bad(rng, case, TENSOR_BAD)
    return case


TENSOR_BAD = [
    ("expr", "unknown_out"), ("expr", "wrong_count"), ("expr", "arrow"), ("alpha", "x"),
    ("options", {"bogus": 1}), ("execution", "gpu"), ("a_dtype", "int32"),
    ("qualifiers", "conj"), ("c_no_beta", True),
]


def gen_binary(rng):
    return gen_contraction(rng)


def gen_ternary(rng):
    return gen_contraction(rng, ternary=True)


def gen_threads(rng):
    which = str(rng.choice(["Matmul", "FFT", "matmul", "fft"]))
    dt = str(rng.choice(["float64", "complex128"] if which in ("FFT", "fft")
                        else ["float32", "float64"]))
    if which in ("FFT", "fft"):
        dt = "complex128"
    return {"target": "threads", "which": which, "dtype": dt,
            "threads": int(rng.choice([2, 4])), "iters": 60, "seed0": int(rng.integers(1 << 20)),
            "ops": {}, "kw": {}}


def gen_lifecycle(rng):
    which = str(rng.choice(["Matmul", "FFT"]))
    steps = [str(s) for s in rng.choice(
        ["execute", "pickle", "deepcopy", "copy", "free", "set_alpha", "reset",
         "release", "plan", "execute_after", "algorithm_x"], int(rng.integers(2, 6)))]
    return {"target": "lifecycle", "which": which, "steps": steps,
            "seed0": int(rng.integers(1 << 20)), "ops": {}, "kw": {}, "expect": "lifecycle"}


def gen_huge(rng):
    which = str(rng.choice(["matmul", "fft", "npfft", "binary"]))
    return {"target": "huge", "which": which, "ops": {}, "kw": {}, "expect": "error"}


GENERATORS = {"matmul": gen_matmul, "Matmul": gen_Matmul, "fft": gen_fft, "FFT": gen_FFT,
              "npfft": gen_npfft, "scipy": gen_scipy, "binary": gen_binary,
              "ternary": gen_ternary, "threads": gen_threads, "lifecycle": gen_lifecycle,
              "huge": gen_huge}


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


def _same_exception(e_cw, e_ref):
    return isinstance(e_cw, type(e_ref))


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


RUNNERS = {"matmul": run_matmul, "Matmul": run_Matmul, "fft": run_fft, "FFT": run_FFT,
           "npfft": run_npfft, "scipy": run_npfft, "binary": run_contraction,
           "ternary": run_contraction, "threads": run_threads, "lifecycle": run_lifecycle,
           "huge": run_huge}


# ================================================================ planted defects (self-test)
def _plant(kind, lib):
    """Monkeypatch a deliberate defect for one case (the smoke test proves the oracles can
    fail). Returns an undo function."""
    la, F = lib.linalg.advanced, lib.fft
    orig_mm, orig_fft = la.matmul, F.fft
    if kind == "crash":
        import signal
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "wrong-result":
        def mm(*a, **k):
            return orig_mm(*a, **k) + 1
        la.matmul = mm
    elif kind == "input-modified":
        def mm(a, *rest, **k):
            r = orig_mm(a, *rest, **k)
            a.flat[0] += 1
            return r
        la.matmul = mm
    elif kind == "guard-write":
        def fft(x, *a, **k):
            r = orig_fft(x, *a, **k)
            import ctypes
            last = x.__array_interface__["data"][0] + sum(
                (n - 1) * s for n, s in zip(x.shape, x.strides) if s > 0)
            ctypes.memset(last + x.itemsize, 0, 1)
            return r
        F.fft = fft
    elif kind == "untyped-error":
        def fft(x, *a, **k):
            raise RuntimeError("planted")
        F.fft = fft

    def undo():
        la.matmul, F.fft = orig_mm, orig_fft
    return undo


def planted_case(kind, seed=0):
    """A simple valid case (C-ordered NumPy operands) carrying a planted defect."""
    rng = np.random.default_rng(seed)
    if kind in ("wrong-result", "input-modified", "crash"):
        case = {"target": "matmul", "kw": {"execution": "cpu"}, "expect": "ok",
                "ops": {"a": make_recipe(rng, [3, 4], "float64", layouts=["c"], flags=False),
                        "b": make_recipe(rng, [4, 2], "float64", layouts=["c"], flags=False)}}
    else:
        case = {"target": "fft", "kind": "fft", "axes": [0], "expect": "ok",
                "kw": {"execution": "cpu"},
                "ops": {"x": make_recipe(rng, [8], "complex128", layouts=["c"], flags=False)}}
    case.update(id=-1, seed=seed, plant=kind)
    return case


# ================================================================ one case, in this process
def run_case(case):
    """Run one case here; returns (findings, outcome)."""
    import warnings
    lib = _lib()
    findings = []
    undo = _plant(case["plant"], lib) if case.get("plant") else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcome = RUNNERS[case["target"]](case, findings, lib)
    except Exception as e:  # noqa: BLE001 (a defect of the fuzzer itself, reported)
        import traceback
        findings.append(("fuzzer-error", "".join(traceback.format_exception(e))[-1500:]))
        outcome = "fuzzer-error"
    finally:
        if undo is not None:
            undo()
    return findings, outcome


# ================================================================ reproducers
def _kw_code(kw, extra=()):
    parts = [f"{k}={code_of(v)}" for k, v in kw.items()]
    return ", ".join(list(extra) + parts)


def _operand_lines(case, suffix="", warm=False, shift=0):
    lines = []
    for name, rec in case["ops"].items():
        r = plain(rec) if warm else rec
        if shift:
            r = dict(r, seed=r["seed"] + shift)
        lines.append(recipe_code(name + suffix, r))
    return lines


def _call_code(case, s=""):
    """The one call of a function-form case, operands named with suffix ``s``."""
    kw = dict(case["kw"])
    ops = case["ops"]
    t = case["target"]
    if t == "matmul":
        extra = [f"a{s}", f"b{s}"] + ([f"c=c{s}"] if "c" in ops else [])
        if "bias" in ops:
            extra.append(f"epilog_inputs={{'bias': bias{s}}}")
        return f"cuweave.linalg.advanced.matmul({_kw_code(kw, extra)})"
    if t == "fft":
        return f"cuweave.fft.{case['kind']}({_kw_code(kw, [f'x{s}'])})"
    if t in ("binary", "ternary"):
        names = ["a", "b", "c"] if t == "ternary" else ["a", "b"]
        extra = [repr(case["expr"])] + [n + s for n in names]
        for k in ("c", "d", "out"):
            if k in ops and k not in names:
                extra.append(f"{k}={k}{s}")
        fn = "ternary_contraction" if t == "ternary" else "binary_contraction"
        return f"cuweave.tensor.{fn}({_kw_code(kw, extra)})"
    raise ValueError(t)


def reproducer(case, finding=None):
    """Plain Python (NumPy/torch/cuweave) that replays ``case``."""
    ops = case["ops"]
    lines = ["import numpy as np", "import cuweave", "import cuweave.fft",
             "import cuweave.linalg.advanced", "import cuweave.tensor"]
    if any(r["pkg"] == "torch" for r in ops.values()):
        lines.append("import torch")
    if case["target"] == "scipy":
        lines.append("import scipy.fft")
    if any(r["pkg"] in ("dlpack", "dlpack_bytes", "mmap") for r in ops.values()):
        lines.append(PRODUCER_CODE)
    t = case["target"]
    if t in ("matmul", "fft", "binary", "ternary"):
        if case.get("warm"):
            lines.append("# the same layouts once before (writable): the plan-cache hit path")
            lines += _operand_lines(case, "0", warm=True)
            lines.append(_call_code(case, "0"))
        lines += _operand_lines(case)
        lines.append(f"r = {_call_code(case)}")
    elif t in ("Matmul", "FFT"):
        lines += _stateful_code(case)
    elif t in ("npfft", "scipy"):
        lines += _np_code(case)
    else:
        lines += _special_code(case)
    if finding is not None:
        lines.append(f"# {finding[0]}: {finding[1][:400]}")
    return "\n".join(lines)


def _stateful_code(case):
    kw = dict(case["kw"])
    ops = case["ops"]
    lines = _operand_lines(case)
    if case["target"] == "Matmul":
        plan_kw = {k: kw.pop(k) for k in ("epilog", "epilog_inputs") if k in kw}
        extra = ["a", "b"] + (["c=c"] if "c" in ops else [])
        lines.append(f"mm = cuweave.linalg.advanced.Matmul({_kw_code(kw, extra)})")
        pe = ["epilog_inputs={'bias': bias}"] if "bias" in ops else []
        lines.append(f"mm.plan({_kw_code(plan_kw, pe)})")
        lines.append("r0 = mm.execute()")
        for i in range(1, case.get("resets", 1) + 1):
            lines += _operand_lines(case, str(i), shift=1000 * i)
            new = [f"{k}={k}{i}" for k in ("a", "b", "c") if k in ops]
            if "bias" in ops:
                new.append(f"epilog_inputs={{'bias': bias{i}}}")
            lines.append(f"mm.reset_operands({', '.join(new)})")
            lines.append(f"r{i} = mm.execute()")
        return lines
    plan_kw = {k: kw.pop(k) for k in ("norm", "direction", "prolog") if k in kw}
    if case["kind"] in ("ifft", "irfft") and "direction" not in plan_kw:
        plan_kw["direction"] = "inverse"
    ex = {"direction": plan_kw["direction"]} if "direction" in plan_kw else {}
    if case["kind"] == "irfft":
        kw["options"] = dict({"fft_type": "C2R"}, **(kw.get("options") or {}))
    lines.append(f"f = cuweave.fft.FFT({_kw_code(kw, ['x'])})")
    lines.append(f"f.plan({_kw_code(plan_kw)})")
    lines.append(f"r0 = f.execute({_kw_code(ex)})")
    for i in range(1, case.get("resets", 1) + 1):
        lines += _operand_lines(case, str(i), shift=1000 * i)
        lines.append(f"f.reset_operand(x{i})")
        lines.append(f"r{i} = f.execute({_kw_code(ex)})")
    return lines


def _np_code(case):
    lines = _operand_lines(case)
    kw = dict(case["kw"])
    if case.get("out"):
        lines.append(f"# out: dtype {case['out']['dtype']}, layout {case['out']['layout']}, "
                     "shape of NumPy's result" + (" + 1 on the last axis"
                                                  if case['out']['shape_delta'] else ""))
        kw["out"] = {"$": "name", "v": "out"}
    if case.get("keywords") or case["target"] == "scipy":
        args = ["a"] + [f"{k}={'out' if k == 'out' else code_of(v)}" for k, v in kw.items()]
    else:
        names = (["n", "axis", "norm", "out"] if case["fn"] in _ONE_D else
                 ["s", "axes", "norm", "out"])
        given = [i for i, nm in enumerate(names) if nm in kw]
        args = ["a"] + ([("out" if nm == "out" else code_of(kw.get(nm)))
                         for nm in names[:max(given) + 1]] if given else [])
    call = ", ".join(args)
    if case["target"] == "scipy":
        lines.append(f"ref = scipy.fft.{case['fn']}({call})")
        if case.get("served_on_cpu"):
            lines.append(SERVE_ON_CPU_CODE)
        lines.append("with scipy.fft.set_backend(cuweave.fft.scipy_backend):")
        lines.append(f"    r = scipy.fft.{case['fn']}({call})")
    else:
        lines.append(f"ref = np.fft.{case['fn']}({call})")
        lines.append(f"r = cuweave.fft.numpy.{case['fn']}({call})")
    return lines


def _special_code(case):
    t = case["target"]
    if t == "threads":
        w = case["which"]
        return [f"# {case['threads']} threads share one planned object ({w}); each does "
                f"{case['iters']} x (reset + execute) with its own operands, seed0="
                f"{case['seed0']}: see run_threads in scripts/fuzz_cpu.py",
                f"# python scripts/fuzz_cpu.py --seed {case['seed']} --replay {case['id']}"]
    if t == "lifecycle":
        if case["which"] == "Matmul":
            lines = ["a, b = np.ones((4, 3)), np.ones((3, 2))",
                     "obj = cuweave.linalg.advanced.Matmul(a, b, execution='cpu')"]
        else:
            lines = ["x = np.ones(8, np.complex128)",
                     "obj = cuweave.fft.FFT(x, execution='cpu')"]
        lines.append("obj.plan()")
        code = {"execute": "obj.execute()", "execute_after": "obj.execute()",
                "pickle": "import pickle; pickle.loads(pickle.dumps(obj)).execute()",
                "deepcopy": "import copy; copy.deepcopy(obj).execute()",
                "copy": "import copy; copy.copy(obj).execute()", "free": "obj.free()",
                "set_alpha": "obj.alpha = 2.0", "plan": "obj.plan()",
                "reset": ("obj.reset_operands(a, b)" if case["which"] == "Matmul"
                          else "obj.reset_operand(x)"),
                "release": ("obj.release_operands()" if case["which"] == "Matmul"
                            else "obj.release_operand()"),
                "algorithm_x": "cuweave.linalg.advanced.Algorithm('x')"}
        return lines + [code[s] for s in case["steps"]]
    big = "np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), {}, {})"
    if case["which"] == "matmul":
        return [f"a = {big.format((1 << 24, 1), (0, 0))}",
                f"b = {big.format((1, 1 << 24), (0, 0))}",
                "cuweave.linalg.advanced.matmul(a, b, execution='cpu')  # 2**48 results"]
    if case["which"] in ("fft", "npfft"):
        mod = "cuweave.fft.numpy.fft(x)" if case["which"] == "npfft" else \
            "cuweave.fft.fft(x, axes=(1,), execution='cpu')"
        return [f"x = {big.format((1 << 20, 1 << 20), (0, 0)).replace('float32', 'complex64')}",
                mod + "  # an 8 TiB result"]
    return [f"a = {big.format((1 << 24,), (0,))}",
            "cuweave.tensor.binary_contraction('i,j->ij', a, a, execution='cpu')"]


# ================================================================ signatures, sizes
def case_size(case):
    return sum(n_elements(r) for r in case["ops"].values()) + 3 * len(case["kw"]) + (
        10 * len(case.get("steps", ())))


def features(case):
    """The case's traits that matter to a defect (part of a finding's signature)."""
    f = []
    tgt = case.get("inplace")
    if tgt and tgt in case["ops"]:
        rec = case["ops"][tgt]
        f.append("target=" + "+".join(
            [rec["pkg"]] + (["ro"] if rec["ro"] else []) + (["conj"] if rec["conj"] else [])
            + (["overlapping"] if rec["overlaps"] else [])))
    if case.get("warm"):
        f.append("warm")
    if case.get("bad"):
        f.append(f"bad={case['bad'][0]}")
    if case.get("plant"):
        f.append(f"plant={case['plant']}")
    return f


def signature(case, finding):
    cat, msg = finding
    what = case.get("kind") or case.get("fn") or case.get("which") or ""
    head = msg.split(":")[0] if cat in ("untyped-error", "refused-valid", "error-mismatch") \
        else ""
    if cat in ("untyped-error", "refused-valid", "error-mismatch"):
        import re
        m = re.search(r"\b([A-Z][A-Za-z]*(Error|Exception|Warning))\b", msg)
        head = m.group(1) if m else head
    return "|".join([cat, case["target"] + (f".{what}" if what else ""), head] +
                    features(case))


# ================================================================ child process protocol
def worker_main():
    """Read one JSON case per line on stdin, answer one JSON line on the protocol fd."""
    import resource
    limit = int(os.environ.get("FUZZ_MEMORY_LIMIT", 6 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the library prints goes to stderr, not the protocol
    sys.stdout = sys.stderr
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass
    _lib()
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        case = json.loads(line)
        t0 = time.perf_counter()
        findings, outcome = run_case(case)
        proto.write(json.dumps({"findings": findings, "outcome": outcome,
                                "ms": 1e3 * (time.perf_counter() - t0)}) + "\n")


class Worker:
    """A child process running cases, restarted after a crash or a hang."""

    def __init__(self):
        import subprocess
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True,
                                     bufsize=1)
        self._read(120.0)

    def _read(self, timeout):
        import select
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else "eof"

    def run(self, case, timeout=CASE_TIMEOUT_S):
        try:
            self.proc.stdin.write(json.dumps(case) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        ans = self._read(timeout)
        if isinstance(ans, dict):
            return ans
        if ans is None:
            self.proc.kill()
            self.proc.wait()
            return {"findings": [("hang", f"no answer in {timeout:.0f} s")], "outcome": "hang",
                    "ms": 1e3 * timeout}
        code = self.proc.wait()
        return {"findings": [("crash", f"the process died (exit status {code}"
                              + (f", signal {-code})" if code < 0 else ")"))],
                "outcome": "crash", "ms": 0.0}

    @property
    def alive(self):
        return self.proc.poll() is None

    def close(self):
        if self.alive:
            self.proc.stdin.close()
            self.proc.wait(10)


def _may_corrupt(case, ans):
    """Did this case write where it must not (beyond what the guards see, perhaps)?"""
    if ans["outcome"] in ("crash", "hang"):
        return True  # a confirming run that did not crash may still have corrupted memory
    for cat, _ in ans["findings"]:
        if cat in ("guard-write", "input-modified"):
            return True
        if cat == "wrong-result" and case.get("inplace") and case["ops"].get(
                case["inplace"], {}).get("pkg") in ("dlpack", "dlpack_bytes", "mmap"):
            return True  # written through DLPack at wrong addresses
    return False


def run_cases(cases, progress=None, confirm=True):
    """Run ``cases`` in a child process; returns a list of (case, answer). The child is
    restarted after a crash, a hang or a write outside a guard (the heap may be corrupt); a
    crash is run again alone in a fresh child to confirm it is this case's (``confirm``).
    Restarts make a crash or an odd error here the case's own, not the aftermath of an
    earlier case's write into read-only memory or outside a target."""
    results = []
    worker = Worker()
    try:
        for i, case in enumerate(cases):
            if not worker.alive:
                worker = Worker()
            ans = worker.run(case)
            if ans["outcome"] == "crash" and confirm:
                worker = Worker()
                again = worker.run(case)
                if again["outcome"] != "crash":
                    prev = cases[i - 1]["id"] if i else None
                    ans["findings"] = [("crash", ans["findings"][0][1] + "; not reproduced "
                                        f"alone: memory corrupted earlier (case {prev} ran "
                                        "just before)")]
            if _may_corrupt(case, ans) and worker.alive:
                worker.close()  # the heap may be corrupt beyond the guards: a fresh child
                worker = Worker()
            results.append((case, ans))
            if progress and (i + 1) % progress == 0:
                print(f"  {i + 1}/{len(cases)} cases", file=sys.stderr, flush=True)
    finally:
        worker.close()
    return results


# ================================================================ report
def load_known():
    """The known-defect table of tests/test_fuzz_smoke.py (id -> (title, predicate)), or {}
    where it cannot be loaded: the report then groups by signature only."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests",
                        "test_fuzz_smoke.py")
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location("_fuzz_smoke_known", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.KNOWN
    except Exception:  # noqa: BLE001 (no pytest, no torch, no test file: no grouping)
        return {}


def summarize(results, seed, wall_s):
    known = load_known()
    per_known = Counter()
    failures = []
    per_cat = Counter()
    outcomes = Counter()
    per_target = Counter()
    groups = {}
    for case, ans in results:
        per_target[case["target"]] += 1
        outcomes[(case["target"], ans["outcome"].split(":")[0])] += 1
        seen = set()
        for cat, msg in ans["findings"]:
            per_cat[cat] += 1
            ids = [k for k, (_, pred) in known.items() if pred(case, cat, msg)]
            for k in ids:
                per_known[k] += 1
            failures.append({"case": case["id"], "category": cat, "message": msg[:240],
                             "known": ids})
            sig = signature(case, (cat, msg))
            if sig in seen:
                continue
            seen.add(sig)
            g = groups.setdefault(sig, {"signature": sig, "category": cat, "count": 0,
                                        "cases": []})
            g["count"] += 1
            g["cases"].append(case["id"])
            size = case_size(case)
            if "case" not in g or size < g["size"]:
                g.update(case=case, size=size, message=msg,
                         reproducer=reproducer(case, (cat, msg)))
    for g in groups.values():
        g["cases"] = g["cases"][:20]
    ms = [ans["ms"] for _, ans in results]
    return {"seed": seed, "cases": len(results), "wall_s": round(wall_s, 1),
            "s_per_1000_cases": round(1000 * wall_s / max(len(results), 1), 1),
            "mean_case_ms": round(float(np.mean(ms)), 2) if ms else 0.0,
            "cases_per_target": dict(per_target),
            "failing_cases": sum(1 for _, a in results if a["findings"]),
            "findings_per_category": {c: per_cat[c] for c in CATEGORIES + ("fuzzer-error",)
                                      if per_cat[c]},
            "outcomes": {f"{t}:{o}": n for (t, o), n in sorted(outcomes.items())},
            "findings_per_known_defect": {k: [known[k][0], per_known[k]] for k in sorted(
                known, key=lambda k: (len(k), k)) if per_known[k]},
            "unknown_findings": sum(1 for f in failures if not f["known"]),
            "failures": failures,
            "distinct": sorted(groups.values(), key=lambda g: (CATEGORIES.index(g["category"])
                                                              if g["category"] in CATEGORIES
                                                              else 99, -g["count"]))}


def write_report(summary, out_dir, command):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "fuzz_cpu.json"), "w") as f:
        json.dump(dict(summary, command=command), f, indent=1, default=str)
    lines = ["# CPU fuzz of cuweave (scripts/fuzz_cpu.py)", "",
             f"`{command}`", "",
             f"{summary['cases']} cases (seed {summary['seed']}) in {summary['wall_s']} s "
             f"({summary['s_per_1000_cases']} s per 1,000 cases, one child process, "
             f"mean {summary['mean_case_ms']} ms a case); {summary['failing_cases']} cases "
             "failed an oracle.", "",
             "Cases per target: " + ", ".join(f"{k} {v}" for k, v in
                                              sorted(summary["cases_per_target"].items())),
             "", "## Findings per category", "", "| category | findings | distinct |",
             "|---|---:|---:|"]
    dist = Counter(g["category"] for g in summary["distinct"])
    for cat, n in summary["findings_per_category"].items():
        lines.append(f"| {cat} | {n} | {dist[cat]} |")
    if summary["findings_per_known_defect"]:
        lines += ["", "## Findings per known defect (docs/fuzz-findings.md)", "",
                  "| id | defect | findings |", "|---|---|---:|"]
        for k, (title, n) in summary["findings_per_known_defect"].items():
            lines.append(f"| {k} | {title} | {n} |")
        lines += ["", f"Findings matching no known defect: {summary['unknown_findings']}."]
    lines += ["", "## Distinct failures (signature = category | target | error | traits)", "",
              "Each with the number of cases and the smallest case's message; the "
              "reproducers are in fuzz_cpu.json; docs/fuzz-findings.md groups them into "
              "defects.", ""]
    for g in summary["distinct"]:
        lines.append(f"- **{g['signature']}** ({g['count']} cases, e.g. case {g['case']['id']})"
                     f": {g['message'][:200]}")
    with open(os.path.join(out_dir, "fuzz_cpu.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="first case index")
    p.add_argument("--out", default=None, help="directory for fuzz_cpu.json/.md")
    p.add_argument("--replay", type=int, default=None, help="run one case here, verbosely")
    p.add_argument("--target", default=None, help="only cases of this target")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker_main()
    if args.replay is not None:
        case = gen_case(args.seed, args.replay)
        print(json.dumps(case, indent=1))
        print(reproducer(case))
        findings, outcome = run_case(case)
        print("outcome:", outcome)
        for f in findings:
            print(" ", f[0], "|", signature(case, f), "|", f[1])
        return 1 if findings else 0
    cases = [gen_case(args.seed, i) for i in range(args.start, args.start + args.cases)]
    if args.target:
        cases = [c for c in cases if c["target"] == args.target]
    t0 = time.perf_counter()
    results = run_cases(cases, progress=500)
    summary = summarize(results, args.seed, time.perf_counter() - t0)
    command = (f"PYTHONPATH=src python scripts/fuzz_cpu.py --cases {args.cases} "
               f"--seed {args.seed}" + (f" --start {args.start}" if args.start else "")
               + (f" --target {args.target}" if args.target else "")
               + (f" --out {args.out}" if args.out else ""))
    if args.out:
        write_report(summary, args.out, command)
    print(json.dumps({k: summary[k] for k in ("cases", "wall_s", "s_per_1000_cases",
                                              "failing_cases", "findings_per_category")},
                     indent=1))
    for g in summary["distinct"]:
        print(f"{g['count']:5d}  {g['signature']}  :: {g['message'][:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
