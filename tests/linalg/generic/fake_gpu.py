"""A computing stand-in for cuBLAS, cuSOLVER-Dn and the CUDA driver, on host memory.

:func:`install` (or the :func:`fake_gpu` fixture) makes the generic layer's GPU path run on a
machine without a GPU: every cuBLAS / cuSOLVER routine the layer calls is computed here with
the documented semantics (column-major, pointer arrays for batched routines, 64-bit pivots of
the generic API, out-of-place trmm, ...), "device" memory is host memory, copies are
``memmove``. So a CPU test checks that the GPU path issues the right calls with the right
arguments, by comparing its results with float64 references. ``calls`` records each routine's
name, in order.

:class:`DeviceView` poses a NumPy array as a device array (``__cuda_array_interface__``).
"""

from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

from cuweave._bindings import cublas, cusolver, host_blas
from cuweave._internal import cuda, memory, packages, wrapping
from cuweave._internal.memory import MemoryPointer
from cuweave.linalg.generic import _cuda
from cuweave.linalg.generic._cpu import CpuBackend

_DT = {"S": "float32", "D": "float64", "C": "complex64", "Z": "complex128"}
_FROM_CUDA = {0: "float32", 1: "float64", 4: "complex64", 5: "complex128"}


class DeviceView:
    """A NumPy array posing as a CUDA array (its host memory stands in for device memory)."""

    def __init__(self, arr: np.ndarray):
        self.arr = arr
        self.shape = arr.shape
        self.dtype = arr.dtype

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.arr.shape, "typestr": self.arr.dtype.str,
                "data": (self.arr.ctypes.data, False), "version": 3,
                "strides": self.arr.strides}


def to_host(x) -> np.ndarray:
    """A copy of a result of the fake GPU (a DeviceArray or a DeviceView) in NumPy (a copy:
    the result's memory goes when ``x`` does)."""
    if isinstance(x, DeviceView):
        return x.arr.copy()
    cai = x.__cuda_array_interface__
    dtype = np.dtype(cai["typestr"])
    shape = tuple(cai["shape"])
    strides = cai.get("strides") or tuple(
        int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize for i in range(len(shape)))
    span = sum((n - 1) * s for n, s in zip(shape, strides)) + dtype.itemsize if all(shape) else 1
    buf = (ctypes.c_char * max(span, 1)).from_address(cai["data"][0])
    return np.ndarray(shape, dtype, buffer=buf, strides=strides).copy()


def _obj(p):
    return p._obj if hasattr(p, "_obj") else p


def _scalar(addr, dtype):
    if dtype.startswith("complex"):
        t = ctypes.c_float if dtype == "complex64" else ctypes.c_double
        v = (t * 2).from_address(addr)
        return complex(v[0], v[1])
    t = ctypes.c_float if dtype == "float32" else ctypes.c_double
    return t.from_address(addr).value


def _ptrs(addr, count):
    return np.ctypeslib.as_array((ctypes.c_uint64 * count).from_address(addr)).astype(np.int64)


def _i32(addr, count):
    return np.ctypeslib.as_array((ctypes.c_int32 * count).from_address(addr))


class FakeGPU:
    def __init__(self):
        self.calls: list[str] = []
        self.buffers: list = []

    # ---- memory ---------------------------------------------------------------------------
    def allocate(self, nbytes, **kwargs):
        buf = np.zeros(max(int(nbytes), 1) + 256, np.uint8)
        addr = buf.ctypes.data
        addr += (-addr) % 256
        mem = MemoryPointer(addr, nbytes, finalizer=None)
        mem._owner = buf
        return mem

    # ---- cuBLAS ---------------------------------------------------------------------------
    def cublas_call(self, name, handle, *a):
        self.calls.append(name)
        t, routine = name[6], name[7:].replace("_v2", "")
        dt = _DT[t]
        cpu = CpuBackend(dt)
        s = lambda p: _scalar(p, dt)  # noqa: E731
        if routine == "gemm":
            cpu.gemm(a[0], a[1], a[2], a[3], a[4], s(a[5]), a[6], a[7], a[8], a[9], s(a[10]),
                     a[11], a[12])
        elif routine == "gemmStridedBatched":
            opa, opb, m, n, k, al, A, lda, sa, B, ldb, sb, be, C, ldc, sc, count = a
            cpu.gemm_strided(opa, opb, m, n, k, s(al), A, lda, sa, B, ldb, sb, s(be), C, ldc,
                             sc, count)
        elif routine in ("symm", "hemm"):
            getattr(cpu, routine)(a[0], a[1], a[2], a[3], s(a[4]), a[5], a[6], a[7], a[8],
                                  s(a[9]), a[10], a[11])
        elif routine == "trmm":
            cpu.trmm(a[0], a[1], a[2], a[3], a[4], a[5], s(a[6]), a[7], a[8], a[9], a[10],
                     a[11], a[12])
        elif routine == "dgmm":
            cpu.dgmm(*a)
        elif routine == "geam":
            opa, opb, m, n, al, A, lda, be, B, ldb, C, ldc = a
            cpu.geam(opa, opb, m, n, s(al), A, lda, s(be), B, ldb, C, ldc)
        elif routine == "scal":
            n, al, x, inc = a
            assert inc == 1
            cpu.scal(n, s(al), x)
        elif routine == "getrfBatched":
            n, aptrs, lda, piv, info, count = a
            infos = _i32(info, count)
            for i, p in enumerate(_ptrs(aptrs, count)):
                r = ctypes.c_int()
                host_blas.call(t.lower() + "getrf", n, n, (int(p),), lda, (piv + 4 * n * i,), r)
                infos[i] = r.value
        elif routine == "getrsBatched":
            trans, n, nrhs, aptrs, lda, piv, bptrs, ldb, info, count = a
            ap, bp = _ptrs(aptrs, count), _ptrs(bptrs, count)
            for i in range(count):
                r = ctypes.c_int()
                host_blas.call(t.lower() + "getrs", b"NTC"[trans:trans + 1], n, nrhs,
                               (int(ap[i]),), lda, (piv + 4 * n * i,), (int(bp[i]),), ldb, r)
            ctypes.c_int.from_address(info).value = 0
        elif routine == "trsmBatched":
            side, uplo, trans, diag, m, n, al, aptrs, lda, bptrs, ldb, count = a
            ap, bp = _ptrs(aptrs, count), _ptrs(bptrs, count)
            alpha = cpu.scalar(s(al))
            for i in range(count):
                host_blas.call(t.lower() + "trsm", b"LR"[side:side + 1], b"LU"[uplo:uplo + 1],
                               b"NTC"[trans:trans + 1], b"NU"[diag:diag + 1], m, n, alpha,
                               (int(ap[i]),), lda, (int(bp[i]),), ldb)
        else:  # pragma: no cover - a routine the fake does not know
            raise AssertionError(f"fake cuBLAS has no {name}")

    # ---- cuSOLVER -------------------------------------------------------------------------
    def cusolver_call(self, name, *a):
        self.calls.append(name)
        if name.endswith("_bufferSize"):
            _obj(a[-2]).value, _obj(a[-1]).value = 64, 0
            return
        if name == "cusolverDnXgetrf":
            h, params, m, n, dt, A, lda, piv, ct, dws, dsz, hws, hsz, info = a
            t = {"float32": "s", "float64": "d", "complex64": "c",
                 "complex128": "z"}[_FROM_CUDA[dt]]
            p32 = np.zeros(max(n, 1), np.int32)
            r = ctypes.c_int()
            host_blas.call(t + "getrf", m, n, (A,), lda, (p32.ctypes.data,), r)
            np.ctypeslib.as_array((ctypes.c_int64 * n).from_address(piv))[:] = p32[:n]
            ctypes.c_int.from_address(info).value = r.value
        elif name == "cusolverDnXgetrs":
            h, params, trans, n, nrhs, dt, A, lda, piv, dtb, B, ldb, info = a
            t = "sdcz"[[0, 1, 4, 5].index(dt)]
            p32 = np.ctypeslib.as_array((ctypes.c_int64 * n).from_address(piv)).astype(np.int32)
            r = ctypes.c_int()
            host_blas.call(t + "getrs", b"NTC"[trans:trans + 1], n, nrhs, (A,), lda,
                           (p32.ctypes.data,), (B,), ldb, r)
            ctypes.c_int.from_address(info).value = r.value
        elif name == "cusolverDnXpotrf":
            h, params, uplo, n, dt, A, lda, ct, dws, dsz, hws, hsz, info = a
            t = "sdcz"[[0, 1, 4, 5].index(dt)]
            r = ctypes.c_int()
            host_blas.call(t + "potrf", b"LU"[uplo:uplo + 1], n, (A,), lda, r)
            ctypes.c_int.from_address(info).value = r.value
        elif name == "cusolverDnXpotrs":
            h, params, uplo, n, nrhs, dt, A, lda, dtb, B, ldb, info = a
            t = "sdcz"[[0, 1, 4, 5].index(dt)]
            r = ctypes.c_int()
            host_blas.call(t + "potrs", b"LU"[uplo:uplo + 1], n, nrhs, (A,), lda, (B,), ldb, r)
            ctypes.c_int.from_address(info).value = r.value
        elif name.endswith("potrfBatched"):
            h, uplo, n, aptrs, lda, info, count = a
            t = name[10].lower()
            infos = _i32(info, count)
            for i, p in enumerate(_ptrs(aptrs, count)):
                r = ctypes.c_int()
                host_blas.call(t + "potrf", b"LU"[uplo:uplo + 1], n, (int(p),), lda, r)
                infos[i] = r.value
        else:  # pragma: no cover
            raise AssertionError(f"fake cuSOLVER has no {name}")

    def densify(self, be, *args, **kwargs):
        """The densify kernel's launch, computed as the CPU backend does (its NumPy twin)."""
        self.calls.append("densify")
        CpuBackend(be.dtype).densify(*args, **kwargs)

    def pointers(self, device_id, stream, out, base, step_bytes, count):
        """The pointer-array kernel's launch, computed on the host."""
        self.calls.append("batch_pointers")
        dst = np.ctypeslib.as_array((ctypes.c_uint64 * count).from_address(out))
        dst[:] = base + np.arange(count, dtype=np.uint64) * np.uint64(step_bytes)

    def install(self, mp) -> FakeGPU:
        from cuweave.linalg.generic import _densify

        mp.setattr(_cuda.CudaBackend, "densify",
                   lambda be, *args, **kw: self.densify(be, *args, **kw))
        mp.setattr(_densify, "launch_pointers", self.pointers)
        mp.setattr(_cuda, "_POINTER_KERNEL_FAILED", [])
        mp.setattr(cublas, "call", self.cublas_call)
        mp.setattr(cublas, "set_stream", lambda h, s: None)
        mp.setattr(cusolver, "call", self.cusolver_call)
        mp.setattr(cusolver, "set_stream", lambda h, s: None)
        mp.setattr(_cuda, "cublas_handle", lambda d: 0x1000)
        mp.setattr(_cuda, "cusolver_handle", lambda d: (0x2000, 0x3000))
        mp.setattr(_cuda, "allocate", self.allocate)
        mp.setattr(packages, "allocate", self.allocate)
        mp.setattr(memory, "allocate", self.allocate)  # where DeviceArray results allocate
        mp.setattr(wrapping, "pointer_device", lambda p: 0)

        def memset(ptr, value, nbytes, stream):
            ctypes.memset(ptr, value, nbytes)
            return (0,)

        driver = types.SimpleNamespace(cuMemsetD8Async=memset)
        for name, fn in (("set_device", lambda d: None), ("driver", lambda: driver),
                         ("is_available", lambda: True), ("require", lambda *a: None),
                         ("synchronize", lambda s: None), ("settle", lambda s: None),
                         ("device_count", lambda: 1),
                         ("memcpy_async", lambda d, s, n, st: ctypes.memmove(d, s, n))):
            mp.setattr(cuda, name, fn)
        return self


@pytest.fixture
def fake_gpu(monkeypatch):
    from cuweave.linalg.generic.matmul import plan_cache

    plan_cache.clear()
    yield FakeGPU().install(monkeypatch)
    plan_cache.clear()
