"""A numeric stand-in for cuDSS and the CUDA runtime, to run the CUDA engine on a CPU machine.

:func:`fake_gpu` patches, for a ``with`` block, the cuDSS function table of
:mod:`cuweave._bindings.cudss` with Python functions that keep matrix objects, configs and
data in dictionaries and *really solve* (dense NumPy on host memory: "device" pointers are host
addresses), and the CUDA runtime helpers the engine calls (device buffers are NumPy arrays,
copies are ``memmove``). Optionally (``torch_as_cuda=True``) torch CPU tensors pose as CUDA
tensors of device 0. A test then checks what the engine hands cuDSS - pointers, batches,
sizes, copies, phases - through the numbers that come back, independently of cuDSS itself.

The fake reads a matrix the way cuDSS documents: GENERAL as given; SYMMETRIC/SPD (HERMITIAN/
HPD) from the view's triangle (FULL: the upper one), mirrored (conjugated). A singular matrix
(or a non-positive-definite SPD/HPD one) sets CUDSS_DATA_INFO to 1 after FACTORIZATION.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import itertools

import numpy as np
import pytest

_VALUE = {0: np.float32, 1: np.float64, 4: np.complex64, 5: np.complex128}
_INDEX = {10: np.int32, 24: np.int64}


def _array(addr: int, dtype, count: int) -> np.ndarray:
    """``count`` elements of ``dtype`` at host address ``addr`` (a view)."""
    dtype = np.dtype(dtype)
    if count == 0:
        return np.zeros(0, dtype)
    buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(addr)
    return np.frombuffer(buf, dtype=dtype)


def _val(x):
    return int(getattr(x, "value", x) or 0)


class FakeCudss:
    """The fake library; ``calls`` counts entry points, ``phases`` lists executed phases,
    ``streams`` the streams set, ``log`` the runtime calls (memcpy, sync)."""

    def __init__(self):
        self.calls = collections.Counter()
        self.phases = []
        self.streams = []
        self.log = []
        self._ids = itertools.count(0x1000, 0x10)
        self.matrices = {}
        self.configs = {}
        self.datas = {}
        self.live = set()

    # ---- cuDSS entry points --------------------------------------------------------------
    def _new(self, ref, kind, payload):
        h = next(self._ids)
        ref._obj.value = h
        self.live.add(h)
        getattr(self, kind)[h] = payload
        return 0

    def cudssGetProperty(self, which, ref):
        ref._obj.value = (1, 0, 0)[which]
        return 0

    def cudssCreate(self, ref):
        h = next(self._ids)
        ref._obj.value = h
        self.live.add(h)
        return 0

    def cudssDestroy(self, h):
        self.live.discard(_val(h))
        return 0

    def cudssSetStream(self, h, s):
        self.streams.append(_val(s))
        return 0

    def cudssSetThreadingLayer(self, h, path):
        return 0

    def cudssConfigCreate(self, ref):
        return self._new(ref, "configs", {})

    def cudssConfigDestroy(self, c):
        self.live.discard(_val(c))
        return 0

    def cudssDataCreate(self, h, ref):
        return self._new(ref, "datas", {"info": 0})

    def cudssDataDestroy(self, h, d):
        self.live.discard(_val(d))
        return 0

    def cudssConfigSet(self, c, param, ref, size):
        self.configs[_val(c)][int(param)] = ref._obj.value
        return 0

    def cudssConfigGet(self, c, param, ref, size, written):
        ref._obj.value = self.configs[_val(c)].get(int(param), 0)
        written._obj.value = size
        return 0

    def cudssDataSet(self, h, d, param, addr, nbytes):
        return 0

    def cudssDataGet(self, h, d, param, addr, nbytes, written):
        from cuweave._bindings.cudss import DataParam

        data = self.datas[_val(d)]
        param = DataParam(int(param))
        out = _array(_val(addr), np.uint8, _val(nbytes))
        if param == DataParam.INFO:
            src = np.array([data["info"]], np.int32)
        elif param == DataParam.LU_NNZ:
            src = np.array([data.get("lu_nnz", 0)], np.int64)
        elif param in (DataParam.PERM_REORDER_COL, DataParam.PERM_REORDER_ROW):
            n = data["n"]
            src = np.arange(n, dtype=np.int32 if _val(nbytes) == 4 * n else np.int64)
        elif param == DataParam.MEMORY_ESTIMATES:
            src = np.arange(1, 17, dtype=np.uint64) * 1024
        else:
            src = np.zeros(_val(nbytes), np.uint8)
        raw = src.view(np.uint8)[: out.size]
        out[: raw.size] = raw
        written._obj.value = raw.size
        return 0

    def cudssMatrixCreateDn(self, ref, nrows, ncols, ld, values, vtype, layout):
        return self._new(ref, "matrices", {"kind": "dn", "n": _val(nrows), "k": _val(ncols),
                                           "ld": _val(ld), "ptr": _val(values),
                                           "vtype": _val(vtype), "layout": _val(layout)})

    def cudssMatrixCreateCsr(self, ref, m, n, nnz, rs, re, ci, vals, otype, itype, vtype,
                             mtype, mview, base):
        assert re is None and _val(base) == 0 and _val(otype) == _val(itype)
        return self._new(ref, "matrices", {"kind": "csr", "n": _val(m), "nnz": _val(nnz),
                                           "rs": _val(rs), "ci": _val(ci), "vals": _val(vals),
                                           "itype": _val(itype), "vtype": _val(vtype),
                                           "mtype": _val(mtype), "mview": _val(mview)})

    def cudssMatrixCreateBatchDn(self, ref, count, nrows, ncols, ld, values, itype, vtype,
                                 layout):
        return self._new(ref, "matrices", {"kind": "bdn", "count": _val(count),
                                           "nrows": _val(nrows), "ncols": _val(ncols),
                                           "ld": _val(ld), "ptrs": _val(values),
                                           "itype": _val(itype), "vtype": _val(vtype)})

    def cudssMatrixCreateBatchCsr(self, ref, count, nrows, ncols, nnz, rs, re, ci, vals, otype,
                                  itype, vtype, mtype, mview, base):
        assert re is None
        return self._new(ref, "matrices", {"kind": "bcsr", "count": _val(count),
                                           "nrows": _val(nrows), "nnz": _val(nnz),
                                           "rs": _val(rs), "ci": _val(ci), "vals": _val(vals),
                                           "itype": _val(itype), "vtype": _val(vtype),
                                           "mtype": _val(mtype), "mview": _val(mview)})

    def cudssMatrixDestroy(self, m):
        self.live.discard(_val(m))
        return 0

    def cudssMatrixSetValues(self, m, values):
        self.matrices[_val(m)]["ptr"] = _val(values)
        return 0

    def cudssMatrixSetCsrPointers(self, m, rs, re, ci, vals):
        mat = self.matrices[_val(m)]
        mat.update(rs=_val(rs), ci=_val(ci), vals=_val(vals))
        return 0

    def cudssExecute(self, h, phase, config, data, a, x, b):
        self.phases.append(int(phase))
        d = self.datas[_val(data)]
        mats, rhs, sols = self._systems(self.matrices[_val(a)], self.matrices[_val(b)],
                                        self.matrices[_val(x)])
        d["n"] = mats[0].shape[0]
        if int(phase) == 3:  # ANALYSIS: remember the patterns
            d["patterns"] = [m for m in mats]
        elif int(phase) == 4:  # FACTORIZATION
            d["factors"] = [m.copy() for m in mats]
            d["lu_nnz"] = sum(m.size for m in mats)
            d["info"] = 0 if all(self._factorable(m, self.matrices[_val(a)]["mtype"])
                                 for m in mats) else 1
        elif int(phase) == 1008:  # SOLVE
            for m, (bv, shape), (xv, _) in zip(d["factors"], rhs, sols):
                xv[...] = np.linalg.solve(m, bv.reshape(shape, order="F")).ravel(order="F")
        return 0

    # ---- reading the objects -------------------------------------------------------------
    @staticmethod
    def _factorable(m, mtype) -> bool:
        if np.linalg.matrix_rank(m) < m.shape[0]:
            return False
        if mtype in (3, 4):
            try:
                np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                return False
        return True

    @staticmethod
    def _dense(n, nnz, rs, ci, vals, itype, vtype, mtype, mview):
        idx = _INDEX[itype]
        indptr = _array(rs, idx, n + 1)
        indices = _array(ci, idx, nnz)
        values = _array(vals, _VALUE[vtype], nnz)
        d = np.zeros((n, n), dtype=_VALUE[vtype])
        rows = np.repeat(np.arange(n), np.diff(indptr))
        d[rows, indices] = values
        if mtype == 0:
            return d
        t = np.tril(d) if mview == 1 else np.triu(d)
        other = t.conj().T if mtype in (2, 4) else t.T
        return t + other - np.diag(np.diag(t))

    def _systems(self, a, b, x):
        if a["kind"] == "csr":
            mats = [self._dense(a["n"], a["nnz"], a["rs"], a["ci"], a["vals"], a["itype"],
                                a["vtype"], a["mtype"], a["mview"])]
            return mats, [self._dn(b)], [self._dn(x)]
        count, idx = a["count"], _INDEX[a["itype"]]
        nrows = _array(a["nrows"], idx, count)
        nnz = _array(a["nnz"], idx, count)
        ptrs = {k: _array(a[k], np.uint64, count) for k in ("rs", "ci", "vals")}
        mats = [self._dense(int(nrows[i]), int(nnz[i]), int(ptrs["rs"][i]), int(ptrs["ci"][i]),
                            int(ptrs["vals"][i]), a["itype"], a["vtype"], a["mtype"],
                            a["mview"]) for i in range(count)]
        return mats, self._bdn(b), self._bdn(x)

    @staticmethod
    def _dn(m):
        assert m["ld"] == m["n"] and m["layout"] == 0
        return _array(m["ptr"], _VALUE[m["vtype"]], m["n"] * m["k"]), (m["n"], m["k"])

    @staticmethod
    def _bdn(m):
        count, idx = m["count"], _INDEX[m["itype"]]
        nrows, ncols = _array(m["nrows"], idx, count), _array(m["ncols"], idx, count)
        ld = _array(m["ld"], idx, count)
        assert np.array_equal(ld, nrows)
        ptrs = _array(m["ptrs"], np.uint64, count)
        return [(_array(int(p), _VALUE[m["vtype"]], int(r * c)), (int(r), int(c)))
                for p, r, c in zip(ptrs, nrows, ncols)]

    def table(self) -> dict:
        from cuweave._bindings import cudss

        def wrap(name):
            fn = getattr(self, name)

            def call(*args):
                self.calls[name] += 1
                return fn(*args)

            return call

        return {name: wrap(name) for name in cudss._SIGNATURES}


class FakeDeviceArray:
    """A "device" buffer in host memory (NumPy), as :class:`DeviceArray` is used."""

    def __init__(self, shape, dtype, *, device_id=0, strides=None, stream=0, allocator=None):
        from cuweave._internal.dtypes import numpy_dtype

        self.shape, self.dtype = tuple(shape), dtype
        self._buf = np.zeros(shape, dtype=numpy_dtype(dtype), order="F")
        self.ptr = self._buf.ctypes.data


class _FakeStream:
    def __init__(self, ptr):
        self.cuda_stream = ptr


@contextlib.contextmanager
def fake_gpu(*, torch_as_cuda: bool = False):
    """Context manager yielding a :class:`FakeCudss` (see the module docstring)."""
    from cuweave._bindings import cudss
    from cuweave._internal import cuda
    from cuweave.sparse.advanced import _cuda

    fake = FakeCudss()

    def memcpy(dst, src, n, stream=None):
        fake.log.append(("memcpy", n, stream))
        ctypes.memmove(dst, src, n)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cudss, "_funcs", fake.table())
        mp.setattr(cuda, "require", lambda device_id=0: None)
        mp.setattr(cuda, "set_device", lambda device_id: None)
        mp.setattr(cuda, "synchronize", lambda stream: fake.log.append(("sync", stream)))
        mp.setattr(cuda, "settle", lambda stream: None)
        mp.setattr(cuda, "memcpy_async", memcpy)
        mp.setattr(cuda, "memcpy", lambda dst, src, n: memcpy(dst, src, n))
        mp.setattr(cuda, "total_memory", lambda device_id=0: 80 << 30)
        mp.setattr(_cuda, "DeviceArray", FakeDeviceArray)
        if torch_as_cuda:
            import torch

            from cuweave._internal import packages

            mp.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
            mp.setattr(torch.Tensor, "get_device", lambda self: 0)
            mp.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 0, raising=False)
            mp.setattr(torch.cuda, "current_stream", lambda device=None: _FakeStream(0))
            mp.setattr(packages.TORCH, "device_type", "cpu")
        yield fake
