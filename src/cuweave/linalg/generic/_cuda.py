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

from ..._bindings import cublas
from ..._internal import cuda
from ..._internal.memory import allocate

__all__ = ["CudaBackend", "cublas_handle", "upload", "download"]

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


class CudaBackend:
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

    def for_batch(self, count: int, body) -> None:
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
    ptr = be.alloc(max(host.size, 1))
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
