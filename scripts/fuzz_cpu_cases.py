"""Cases of the CPU fuzzer (scripts/fuzz_cpu.py): operand recipes (plain JSON), the operands
built from them inside guard buffers, argument encoding and the random case generators."""

from __future__ import annotations

import os

import numpy as np

SENTINEL = 0xA5

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
        data = f"{name}.tobytes()" if simple else f"bytes({name}.base)"
        where = "immutable bytes"
        if pkg == "mmap":
            lines.append(f"_f = tempfile.TemporaryFile(); _f.write({data}); _f.flush()")
            data = "mmap.mmap(_f.fileno(), 0, access=mmap.ACCESS_READ)"
            where = "a PROT_READ mapping"
        lines.append(f"{name} = np.ndarray({shape}, {dt.str!r}, buffer={data}, "
                     f"offset={start if not simple else 0}, strides={name}.strides)"
                     f"  # read-only memory ({where})")
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
