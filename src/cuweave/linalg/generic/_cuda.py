"""The GPU backend of the generic layer: cuBLAS (and the memory it needs) on one stream.

:class:`CudaBackend` offers the primitives :mod:`._execute` and the solver call, as cuBLAS
routines on device pointers; its temporary buffers come from ``options.allocator``, else the
operands' package pool, else cuda.core (``_internal.memory.allocate``), ordered on the run's
stream and kept until the run is queued (then returned to the pool in stream order).
Handles are made once per device and thread (a cuBLAS handle must not be shared by threads
running at once) and put in host pointer mode; each run sets the handle's stream.

:func:`upload` / :func:`download` move host operands (NumPy) to and from device buffers.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..._bindings import cublas, cusolver
from ..._bindings.library_types import CudaDataType
from ..._internal import cuda
from ..._internal.memory import allocate

__all__ = ["CudaBackend", "cublas_handle", "cusolver_handle", "upload", "download"]

_DATA_TYPE = {"float32": CudaDataType.CUDA_R_32F, "float64": CudaDataType.CUDA_R_64F,
              "complex64": CudaDataType.CUDA_C_32F, "complex128": CudaDataType.CUDA_C_64F}

_SCALAR = {"float32": ctypes.c_float, "float64": ctypes.c_double,
           "complex64": ctypes.c_float * 2, "complex128": ctypes.c_double * 2}

_tls = threading.local()


def cublas_handle(device_id: int) -> int:
    """This thread's cuBLAS handle on ``device_id`` (made once, never destroyed before exit)."""
    handles = getattr(_tls, "handles", None)
    if handles is None:
        handles = _tls.handles = {}
    h = handles.get(device_id)
    if h is None:
        cuda.set_device(device_id)
        h = handles[device_id] = cublas.create()
    return h


def cusolver_handle(device_id: int) -> tuple[int, int]:
    """This thread's cuSOLVER-Dn handle and params object on ``device_id`` (made once)."""
    handles = getattr(_tls, "solvers", None)
    if handles is None:
        handles = _tls.solvers = {}
    h = handles.get(device_id)
    if h is None:
        cuda.set_device(device_id)
        h = handles[device_id] = (cusolver.create(), cusolver.create_params())
    return h


def _ptrs(be, name, base, offsets, state):
    """The pointers ``base + offsets`` (elements) in the state's device array ``name``: written
    by a kernel when the offsets are uniform (the usual dense batch; nothing to copy, nothing
    for the stream to wait for), else copied from the host."""
    dev = state[name]
    offsets = np.asarray(offsets, np.int64)
    count = len(offsets)
    step = int(offsets[1] - offsets[0]) if count > 1 else 0
    uniform = count < 2 or bool(np.all(np.diff(offsets) == step))
    if uniform and not _POINTER_KERNEL_FAILED:
        try:
            from ._densify import launch_pointers

            launch_pointers(be.device_id, be.stream, dev.device_ptr,
                            base + int(offsets[0]) * be.itemsize, step * be.itemsize, count)
            return dev.device_ptr
        except Exception as e:  # NVRTC or cuda.core unusable: copy from the host instead
            _POINTER_KERNEL_FAILED.append(e)
    host = (offsets * be.itemsize + base).astype(np.uint64)
    cuda.memcpy_async(dev.device_ptr, host.ctypes.data, host.nbytes, be.stream)
    be.keep.append(host)
    return dev.device_ptr


#: the exception that made the pointer kernel unusable in this process (then: host copies)
_POINTER_KERNEL_FAILED: list = []


class _SolverPrimitives:
    """The direct solver's primitives of :class:`CudaBackend` (cuSOLVER-Dn for one system,
    cuBLAS / cuSOLVER batched routines for batches)."""

    def alloc_bytes(self, nbytes):
        return allocate(max(int(nbytes), 1), package=self.package, device_id=self.device_id,
                        stream=self.stream, allocator=self.allocator)

    def copy(self, dst, src, nbytes):
        cuda.memcpy_async(dst, src, nbytes, self.stream)

    def solver_state(self, kind, n, count, handle=None):
        st = {"count": count, "n": n}
        if count == 1:
            h, params = cusolver_handle(self.device_id)
            st["handle"], st["params"] = (handle or h), params
            st["piv"] = self.alloc_bytes(8 * max(n, 1))
            st["info"] = self.alloc_bytes(4)
        else:
            st["handle"] = self.handle
            st["piv"] = self.alloc_bytes(4 * max(n, 1) * count)
            st["info"] = self.alloc_bytes(4 * count)
            st["aptrs"] = self.alloc_bytes(8 * count)
            st["bptrs"] = self.alloc_bytes(8 * count)
        return st

    def _workspace(self, st, query, *args):
        dsize, hsize = ctypes.c_size_t(), ctypes.c_size_t()
        cusolver.call(query, st["handle"], st["params"], *args, ctypes.byref(dsize),
                      ctypes.byref(hsize))
        dws = self.alloc_bytes(dsize.value)
        hws = np.empty(max(hsize.value, 1), np.uint8)
        self.keep += [dws, hws]
        return dws.device_ptr, dsize.value, hws.ctypes.data, hsize.value

    def lu_factor(self, n, a, offsets, lda, st):
        dt = int(_DATA_TYPE[self.dtype])
        if st["count"] == 1:
            p = a + int(offsets[0]) * self.itemsize
            cusolver.set_stream(st["handle"], self.stream)
            ws = self._workspace(st, "cusolverDnXgetrf_bufferSize", n, n, dt, p, max(lda, 1),
                                 dt)
            cusolver.call("cusolverDnXgetrf", st["handle"], st["params"], n, n, dt, p,
                          max(lda, 1), st["piv"].device_ptr, dt, *ws, st["info"].device_ptr)
            return
        ptrs = _ptrs(self, "aptrs", a, offsets, st)
        cublas.call(self._name("cublas{t}getrfBatched"), st["handle"], n, ptrs, max(lda, 1),
                    st["piv"].device_ptr, st["info"].device_ptr, st["count"])

    def lu_solve(self, trans, n, nrhs, a, offsets, lda, st, b, boffsets, ldb):
        dt = int(_DATA_TYPE[self.dtype])
        if st["count"] == 1:
            cusolver.set_stream(st["handle"], self.stream)
            info = self.alloc_bytes(4)
            self.keep.append(info)
            cusolver.call("cusolverDnXgetrs", st["handle"], st["params"], int(trans), n, nrhs,
                          dt, a + int(offsets[0]) * self.itemsize, max(lda, 1),
                          st["piv"].device_ptr, dt, b + int(boffsets[0]) * self.itemsize,
                          max(ldb, 1), info.device_ptr)
            return
        aptrs = _ptrs(self, "aptrs", a, offsets, st)
        bptrs = _ptrs(self, "bptrs", b, boffsets, st)
        info = ctypes.c_int()
        cublas.call(self._name("cublas{t}getrsBatched"), st["handle"], int(trans), n, nrhs,
                    aptrs, max(lda, 1), st["piv"].device_ptr, bptrs, max(ldb, 1),
                    ctypes.addressof(info), st["count"])

    def cholesky_factor(self, uplo, n, a, offsets, lda, st):
        dt = int(_DATA_TYPE[self.dtype])
        if st["count"] == 1:
            p = a + int(offsets[0]) * self.itemsize
            cusolver.set_stream(st["handle"], self.stream)
            ws = self._workspace(st, "cusolverDnXpotrf_bufferSize", int(uplo), n, dt, p,
                                 max(lda, 1), dt)
            cusolver.call("cusolverDnXpotrf", st["handle"], st["params"], int(uplo), n, dt, p,
                          max(lda, 1), dt, *ws, st["info"].device_ptr)
            return
        h, _ = cusolver_handle(self.device_id)
        cusolver.set_stream(h, self.stream)
        ptrs = _ptrs(self, "aptrs", a, offsets, st)
        cusolver.call(f"cusolverDn{cublas.PREFIX[self.dtype]}potrfBatched", h, int(uplo), n,
                      ptrs, max(lda, 1), st["info"].device_ptr, st["count"])

    def cholesky_solve(self, uplo, n, nrhs, a, offsets, lda, st, b, boffsets, ldb):
        dt = int(_DATA_TYPE[self.dtype])
        if st["count"] == 1:
            cusolver.set_stream(st["handle"], self.stream)
            info = self.alloc_bytes(4)
            self.keep.append(info)
            cusolver.call("cusolverDnXpotrs", st["handle"], st["params"], int(uplo), n, nrhs,
                          dt, a + int(offsets[0]) * self.itemsize, max(lda, 1), dt,
                          b + int(boffsets[0]) * self.itemsize, max(ldb, 1), info.device_ptr)
            return
        # A = L L^H (lower) or U^H U (upper): two batched triangular solves
        aptrs = _ptrs(self, "aptrs", a, offsets, st)
        bptrs = _ptrs(self, "bptrs", b, boffsets, st)
        one = self.scalar(1)
        steps = (0, 2) if int(uplo) == 0 else (2, 0)  # op N then C, or C then N
        for op in steps:
            cublas.call(self._name("cublas{t}trsmBatched"), st["handle"], 0, int(uplo), op, 0,
                        n, nrhs, ctypes.addressof(one), aptrs, max(lda, 1), bptrs,
                        max(ldb, 1), st["count"])

    def read_info(self, st):
        count = st["count"]
        host = np.empty(count, np.int32)
        cuda.memcpy_async(host.ctypes.data, st["info"].device_ptr, 4 * count, self.stream)
        cuda.synchronize(self.stream)
        return host


class CudaBackend(_SolverPrimitives):
    """cuBLAS primitives for one dtype on ``device_id``, queued on ``stream``."""

    def __init__(self, dtype: str, device_id: int, stream: int, package=None,
                 allocator=None):
        self.dtype = dtype
        self.itemsize = np.dtype(dtype).itemsize
        self.complex = dtype.startswith("complex")
        self.device_id = device_id
        self.stream = stream
        self.package = package
        self.allocator = allocator
        self.keep: list = []
        cuda.set_device(device_id)
        self.handle = cublas_handle(device_id)
        cublas.set_stream(self.handle, stream)
        self._fn = {}

    def _name(self, family: str) -> str:
        name = self._fn.get(family)
        if name is None:
            name = self._fn[family] = cublas.typed(family, self.dtype)
        return name

    def scalar(self, x):
        s = _SCALAR[self.dtype]()
        if self.complex:
            s[0], s[1] = complex(x).real, complex(x).imag
        else:
            s.value = x.real if isinstance(x, complex) else x
        return s

    def alloc(self, nelems: int) -> int:
        mem = allocate(max(int(nelems), 1) * self.itemsize, package=self.package,
                       device_id=self.device_id, stream=self.stream, allocator=self.allocator)
        self.keep.append(mem)
        return mem.device_ptr

    def for_batch(self, count: int, body, work: int = 0) -> None:
        for i in range(count):
            body(i)

    # ---- BLAS ------------------------------------------------------------------------------
    def _call(self, family, *args):
        cublas.call(self._name(family), self.handle, *args)

    def gemm(self, opa, opb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) -> None:
        al, be = self.scalar(alpha), self.scalar(beta)
        self._call("cublas{t}gemm_v2", opa, opb, m, n, k, ctypes.addressof(al), a,
                   max(lda, 1), b, max(ldb, 1), ctypes.addressof(be), c, max(ldc, 1))

    def gemm_strided(self, opa, opb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc,
                     sc, count) -> None:
        al, be = self.scalar(alpha), self.scalar(beta)
        self._call("cublas{t}gemmStridedBatched", opa, opb, m, n, k, ctypes.addressof(al), a,
                   max(lda, 1), sa, b, max(ldb, 1), sb, ctypes.addressof(be), c, max(ldc, 1),
                   sc, count)

    def symm(self, side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc) -> None:
        al, be = self.scalar(alpha), self.scalar(beta)
        self._call("cublas{t}symm_v2", side, uplo, m, n, ctypes.addressof(al), a, max(lda, 1),
                   b, max(ldb, 1), ctypes.addressof(be), c, max(ldc, 1))

    def hemm(self, side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc) -> None:
        al, be = self.scalar(alpha), self.scalar(beta)
        self._call("cublas{t}hemm_v2", side, uplo, m, n, ctypes.addressof(al), a, max(lda, 1),
                   b, max(ldb, 1), ctypes.addressof(be), c, max(ldc, 1))

    def trmm(self, side, uplo, op, diag, m, n, alpha, a, lda, b, ldb, c, ldc) -> None:
        al = self.scalar(alpha)
        self._call("cublas{t}trmm_v2", side, uplo, op, diag, m, n, ctypes.addressof(al), a,
                   max(lda, 1), b, max(ldb, 1), c, max(ldc, 1))

    def dgmm(self, side, m, n, a, lda, x, incx, c, ldc) -> None:
        self._call("cublas{t}dgmm", side, m, n, a, max(lda, 1), x, incx, c, max(ldc, 1))

    def geam(self, opa, opb, m, n, alpha, a, lda, beta, b, ldb, c, ldc) -> None:
        al, be = self.scalar(alpha), self.scalar(beta)
        self._call("cublas{t}geam", opa, opb, m, n, ctypes.addressof(al), a, max(lda, 1),
                   ctypes.addressof(be), b, max(ldb, 1), c, max(ldc, 1))

    def scal(self, n, alpha, x) -> None:
        al = self.scalar(alpha)
        self._call("cublas{t}scal_v2", n, ctypes.addressof(al), x, 1)

    def densify(self, mode, lower, n, a, lda, out, ldo, count=1, stride_a=0,
                stride_out=0) -> None:
        """``out`` = the dense form of the structured ``n x n`` matrix at ``a`` (``count``
        matrices spaced by the strides, in elements; one kernel launch)."""
        from ._densify import launch

        launch(self.dtype, self.device_id, self.stream, a, lda, stride_a, out, ldo, stride_out,
               n, mode, int(bool(lower)), count=count)

    def zero(self, m, n, c, ldc) -> None:
        drv = cuda.driver()
        if ldc == m:
            cuda.check(drv.cuMemsetD8Async(c, 0, m * n * self.itemsize, self.stream),
                       "cuMemsetD8Async")
        else:
            for j in range(n):
                cuda.check(drv.cuMemsetD8Async(c + j * ldc * self.itemsize, 0,
                                               m * self.itemsize, self.stream),
                           "cuMemsetD8Async")


def upload(be: CudaBackend, host: np.ndarray) -> int:
    """A device copy of the C- or F-contiguous (or dense) host array ``host``: its address,
    the same element layout as ``host``'s buffer."""
    nbytes = host.nbytes
    mem = be.alloc_bytes(nbytes)
    be.keep.append(mem)
    ptr = mem.device_ptr
    cuda.memcpy_async(ptr, _lowest(host), nbytes, be.stream)
    be.keep.append(host)  # the copy reads it until the stream gets there
    return ptr


def download(be: CudaBackend, ptr: int, host: np.ndarray) -> None:
    """Copy the dense device buffer at ``ptr`` into the dense host array ``host`` and wait."""
    cuda.memcpy_async(_lowest(host), ptr, host.nbytes, be.stream)
    cuda.synchronize(be.stream)


def _lowest(x: np.ndarray) -> int:
    """The lowest address of the dense array ``x``'s elements."""
    lo = sum(s * (n - 1) for s, n in zip(x.strides, x.shape) if s < 0 and n > 0)
    return x.ctypes.data + lo
