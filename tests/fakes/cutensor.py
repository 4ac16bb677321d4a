"""A fake cuTENSOR over :class:`tests.fakes.cublaslt.FakeGPU` (host memory stands in for device
memory): descriptors, operation descriptors, preferences and plans are recorded, and the
contraction entry points *compute*: they read A, B (C), the scalars and the addend through the
recorded descriptors (extents, strides, data type, modes) with NumPy and write D. A test then
checks the numbers the whole GPU path produces (staging, descriptors, addend copies, result
layouts) on a machine without a GPU, as long as its pointers are real host memory (NumPy
operands, staged); fake torch tensors carry no memory and are checked by their calls.
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

from cuweave._bindings import cutensor as ct
from cuweave.tensor import _cuda, _function
from tests.fakes.cublaslt import FakeGPU, as_int

__all__ = ["FakeCutensor", "cutensor_gpu"]

_DTYPES = {2: "float16", 14: "bfloat16", 0: "float32", 1: "float64", 4: "complex64",
           5: "complex128"}
_SCALAR = {"float16": np.float32, "bfloat16": np.float32, "float32": np.float32,
           "float64": np.float64, "complex64": np.complex64, "complex128": np.complex128}


def _np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _view(ptr, extents, strides, dtype):
    """The tensor at host address ``ptr`` (element strides) as a NumPy view."""
    dt = _np_dtype(dtype)
    span = 1 + sum((n - 1) * s for n, s in zip(extents, strides))
    buf = (ctypes.c_uint8 * (span * dt.itemsize)).from_address(ptr)
    flat = np.ctypeslib.as_array(buf).view(dt)  # writable, unlike frombuffer
    return np.lib.stride_tricks.as_strided(flat, tuple(extents),
                                           tuple(s * dt.itemsize for s in strides))


class FakeCutensor:
    """Installs the fake (``install(monkeypatch)``) on top of a :class:`FakeGPU`."""

    def __init__(self, gpu: FakeGPU, compute: bool = True):
        self.gpu, self.compute = gpu, compute
        self.tensors = {}  # descriptor -> (extents, strides, dtype, alignment)
        self.ops = {}  # operation descriptor -> (kind, [(desc, modes, op)], compute)
        self.plans = {}  # plan -> (operation descriptor, preference values)
        self.prefs = {}  # preference -> {attribute: value}
        self.calls = []  # (kind, pointer arguments as ints) of each contraction

    def install(self, mp) -> FakeCutensor:
        ids = itertools.count(0x5000, 0x10)
        mp.setattr(ct, "create", lambda: next(ids))
        mp.setattr(ct, "compute_descriptor", lambda name: 0x9000 + ct.COMPUTE_DESCRIPTORS.index(
            name))

        def tensor(handle, extents, strides, dtype, align):
            h = next(ids)
            self.tensors[h] = (tuple(extents), tuple(strides), _DTYPES[int(dtype)], align)
            return h

        def contraction(handle, *args):
            h = next(ids)
            *parts, compute = args
            items = [parts[i:i + 3] for i in range(0, len(parts) - 2, 3)]
            last = (parts[-2], parts[-1], ct.Operator.OP_IDENTITY)
            self.ops[h] = ([(d, tuple(m), int(o)) for d, m, o in items] + [last], compute)
            return h

        def pref_create(handle, algo, jit):
            h = next(ids)
            self.prefs[h] = {"algo": int(algo), "jit": int(jit)}
            return h

        def pref_set(handle, pref, attr, value):
            self.prefs[pref][ct.PlanPreferenceAttribute(attr).name.lower()] = int(value)

        def plan(handle, desc, pref, limit):
            h = next(ids)
            self.plans[h] = (desc, dict(self.prefs[pref]))
            return h

        mp.setattr(ct, "create_tensor_descriptor", tensor)
        mp.setattr(ct, "create_contraction", contraction)
        mp.setattr(ct, "create_contraction_trinary", contraction)
        mp.setattr(ct, "create_plan_preference", pref_create)
        mp.setattr(ct, "plan_preference_set_attribute", pref_set)
        mp.setattr(ct, "create_plan", plan)
        mp.setattr(ct, "plan_get_attribute", lambda h, p, a: 4096)
        for name in ("destroy_plan", "destroy_plan_preference", "destroy_operation_descriptor",
                     "destroy_tensor_descriptor"):
            mp.setattr(ct, name, lambda *a: None)
        mp.setattr(ct, "bare", lambda name: self._entry(name))
        mp.setattr(_cuda, "_handles", {})
        _function.plan_cache.clear()
        mp.setattr(_function.plan_cache, "hits", 0)
        mp.setattr(_function.plan_cache, "misses", 0)
        return self

    def _entry(self, name):
        def fn(*args):
            self.gpu._run_until(len(self.gpu._queue))  # after the queued uploads
            ints = [as_int(a) for a in args]
            self.calls.append((name, ints))
            if self.compute:
                self._contract(ints)
            return 0

        return fn

    def _contract(self, ints) -> None:
        plan = ints[1]
        desc, _ = self.plans[plan]
        items, _compute = self.ops[desc]
        n = len(items) - 2  # inputs (then C and D)
        ptrs = ints[3:3 + n]
        beta_ptr, c_ptr, d_ptr = ints[3 + n], ints[4 + n], ints[5 + n]
        dtype = self.tensors[items[0][0]][2]
        scalar = np.dtype(_SCALAR[dtype])
        alpha = np.frombuffer((ctypes.c_char * scalar.itemsize).from_address(ints[2]), scalar)[0]
        beta = np.frombuffer((ctypes.c_char * scalar.itemsize).from_address(beta_ptr), scalar)[0]
        letters = {}

        def sub(modes):
            return "".join(letters.setdefault(m, chr(97 + len(letters))) for m in modes)

        wide = np.complex128 if dtype.startswith("complex") else np.float64
        terms, arrays = [], []
        for (d, modes, op), ptr in zip(items[:n], ptrs):
            ext, strides, dt, _ = self.tensors[d]
            x = _view(ptr, ext, strides, dt).astype(wide)
            arrays.append(np.conj(x) if op == ct.Operator.OP_CONJ else x)
            terms.append(sub(modes))
        d_desc, d_modes, _ = items[-1]
        ext, strides, dt, _ = self.tensors[d_desc]
        out = sub(d_modes)
        # a mode of D that no input holds is broadcast (cuTENSOR's rule)
        held = set("".join(terms))
        expr = ",".join(terms) + "->" + "".join(ch for ch in out if ch in held)
        r = alpha * np.einsum(expr, *arrays)
        idx = tuple(slice(None) if ch in held else None for ch in out)
        r = np.broadcast_to(r[idx] if idx else r, tuple(ext))
        if beta != 0:
            c_ext, c_strides, _, _ = self.tensors[items[-2][0]]
            r = r + beta * _view(c_ptr, c_ext, c_strides, dt).astype(wide)
        dst = _view(d_ptr, ext, strides, dt)
        np.copyto(dst, r.real if not dt.startswith("complex") else r, casting="unsafe")


@pytest.fixture
def cutensor_gpu(monkeypatch):
    """A :class:`FakeGPU` with the computing fake cuTENSOR installed."""
    gpu = FakeGPU().install(monkeypatch)
    fake = FakeCutensor(gpu).install(monkeypatch)
    yield fake
    _function.plan_cache.clear()
