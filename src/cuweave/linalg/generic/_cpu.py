"""The CPU backend of the generic layer: the machine's optimized BLAS and LAPACK (SciPy's,
through :mod:`cuweave._bindings.host_blas`), with the primitives cuBLAS has and Fortran BLAS
lacks (``geam``, ``dgmm``) written with NumPy on the same memory.

Every primitive takes column-major matrices as (pointer, leading dimension), as cuBLAS does,
so :mod:`._execute` and the solver run one sequence of calls on both. A batch is split over
threads (a ctypes call releases the GIL), each running its BLAS on one thread; a single
matrix uses the BLAS library's own threads (``ExecutionCPU(num_threads=...)`` limits them
through threadpoolctl for the call).
"""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from ..._bindings import host_blas

__all__ = ["CpuBackend", "blas_threads", "cpu_workers"]

_LETTER = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}
_OP = {0: b"N", 1: b"T", 2: b"C"}
_SIDE = {0: b"L", 1: b"R"}
_UPLO = {0: b"L", 1: b"U"}
_DIAG = {0: b"N", 1: b"U"}
_SCALAR = {"float32": ctypes.c_float, "float64": ctypes.c_double,
           "complex64": ctypes.c_float * 2, "complex128": ctypes.c_double * 2}

_LIMIT_LOCK = threading.Lock()
_POOL_LOCK = threading.Lock()
_STATE: dict = {}


def cpu_workers(num_threads=None) -> int:
    if num_threads is not None:
        return max(1, int(num_threads))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@contextmanager
def blas_threads(num_threads):
    """BLAS threads limited to ``num_threads`` for the block (``None``: left alone). The limit
    is process-wide, so limited blocks take turns."""
    if num_threads is None:
        yield
        return
    with _LIMIT_LOCK:
        ctl = _STATE.get("controller")
        if ctl is None:
            from threadpoolctl import ThreadpoolController

            ctl = _STATE["controller"] = ThreadpoolController()
        with ctl.limit(limits=int(num_threads), user_api="blas"):
            yield


def _pool() -> ThreadPoolExecutor:
    pool = _STATE.get("pool")
    if pool is None:
        with _POOL_LOCK:
            pool = _STATE.get("pool")
            if pool is None:
                pool = _STATE["pool"] = ThreadPoolExecutor(
                    max_workers=cpu_workers(), thread_name_prefix="cuweave-linalg")
    return pool


class CpuBackend:
    """BLAS primitives on host memory for one dtype (see the module docstring)."""

    def __init__(self, dtype: str, num_threads=None):
        self.dtype = dtype
        self.np_dtype = np.dtype(dtype)
        self.itemsize = self.np_dtype.itemsize
        self.letter = _LETTER[dtype]
        self.complex = dtype.startswith("complex")
        self.num_threads = num_threads
        self.keep: list = []

    # ---- memory ----------------------------------------------------------------------------
    def alloc(self, nelems: int) -> int:
        buf = np.empty(max(int(nelems), 1), self.np_dtype)
        self.keep.append(buf)
        return buf.ctypes.data

    def mat(self, ptr: int, rows: int, cols: int, ld: int) -> np.ndarray:
        """The column-major ``rows x cols`` matrix at ``ptr`` as a NumPy view."""
        n = (ld * (cols - 1) + rows) if rows and cols else 0
        buf = (ctypes.c_char * max(n * self.itemsize, 1)).from_address(ptr)
        return np.ndarray((rows, cols), self.np_dtype, buffer=buf,
                          strides=(self.itemsize, ld * self.itemsize))

    def vec(self, ptr: int, n: int, inc: int) -> np.ndarray:
        """``n`` elements at ``ptr`` spaced by ``inc`` (BLAS's convention: a negative ``inc``
        reads the same elements backwards)."""
        step = abs(inc) or 1
        buf = (ctypes.c_char * max(((n - 1) * step + 1) * self.itemsize, 1)).from_address(ptr)
        v = np.ndarray((n,), self.np_dtype, buffer=buf, strides=(step * self.itemsize,))
        return v[::-1] if inc < 0 else v

    def scalar(self, x):
        s = _SCALAR[self.dtype]()
        if self.complex:
            s[0], s[1] = complex(x).real, complex(x).imag
        else:
            s.value = x.real if isinstance(x, complex) else x
        return s

    # ---- batches ---------------------------------------------------------------------------
    #: below this many flops per call, BLAS runs on one thread (waking the library's threads
    #: cost ~30 ms per call of a 5 x 5 solve on a loaded 2-core host, against 15 us on one)
    SMALL_WORK = 1 << 21

    def for_batch(self, count: int, body, work: int = 1 << 62) -> None:
        """``body(i)`` for every ``i < count``: one BLAS call with the library's threads (one
        thread when a call does fewer than :attr:`SMALL_WORK` flops, ``work``), or the batch
        split over threads with one BLAS thread each."""
        workers = min(cpu_workers(self.num_threads), count)
        if workers > 1 and count * work < self.SMALL_WORK * 4:
            workers = 1  # a small batch: threads would cost more than they bring
        if workers <= 1:
            threads = 1 if work < self.SMALL_WORK else self.num_threads
            with blas_threads(threads):
                for i in range(count):
                    body(i)
            return
        chunks = np.array_split(np.arange(count), workers)

        def run(idx):
            for i in idx:
                body(int(i))

        with blas_threads(1):
            futures = [_pool().submit(run, c) for c in chunks[1:]]
            run(chunks[0])
            for f in futures:
                f.result()

    # ---- BLAS --------------------------------------------------------------------------------
    def gemm(self, opa, opb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) -> None:
        host_blas.call(self.letter + "gemm", _OP[opa], _OP[opb], m, n, k, self.scalar(alpha),
                       (a,), max(lda, 1), (b,), max(ldb, 1), self.scalar(beta), (c,),
                       max(ldc, 1))

    def gemm_strided(self, opa, opb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc,
                     sc, count) -> None:
        isz = self.itemsize
        self.for_batch(count, lambda i: self.gemm(opa, opb, m, n, k, alpha, a + i * sa * isz,
                                                  lda, b + i * sb * isz, ldb, beta,
                                                  c + i * sc * isz, ldc), work=2 * m * n * k)

    def symm(self, side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc) -> None:
        host_blas.call(self.letter + "symm", _SIDE[side], _UPLO[uplo], m, n,
                       self.scalar(alpha), (a,), max(lda, 1), (b,), max(ldb, 1),
                       self.scalar(beta), (c,), max(ldc, 1))

    def hemm(self, side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc) -> None:
        host_blas.call(self.letter + "hemm", _SIDE[side], _UPLO[uplo], m, n,
                       self.scalar(alpha), (a,), max(lda, 1), (b,), max(ldb, 1),
                       self.scalar(beta), (c,), max(ldc, 1))

    def trmm(self, side, uplo, op, diag, m, n, alpha, a, lda, b, ldb, c, ldc) -> None:
        """``C = alpha * op(tri(A)) B`` (or ``B op(tri(A))``), out of place as cuBLAS's."""
        self.mat(c, m, n, ldc)[...] = self.mat(b, m, n, ldb)
        host_blas.call(self.letter + "trmm", _SIDE[side], _UPLO[uplo], _OP[op], _DIAG[diag],
                       m, n, self.scalar(alpha), (a,), max(lda, 1), (c,), max(ldc, 1))

    def dgmm(self, side, m, n, a, lda, x, incx, c, ldc) -> None:
        """``C = diag(x) A`` (left) or ``A diag(x)`` (right)."""
        A = self.mat(a, m, n, lda)
        if side == 0:
            res = A * self.vec(x, m, incx)[:, None]
        else:
            res = A * self.vec(x, n, incx)[None, :]
        self.mat(c, m, n, ldc)[...] = res

    def geam(self, opa, opb, m, n, alpha, a, lda, beta, b, ldb, c, ldc) -> None:
        """``C = alpha * op(A) + beta * op(B)``; a zero scalar's matrix is not read."""
        res = np.zeros((m, n), self.np_dtype)
        for s, op, p, ld in ((alpha, opa, a, lda), (beta, opb, b, ldb)):
            if s == 0:
                continue
            x = self.mat(p, m, n, ld) if op == 0 else self.mat(p, n, m, ld).T
            if op == 2:
                x = x.conj()
            res += x if s == 1 else s * x
        self.mat(c, m, n, ldc)[...] = res

    def scal(self, n, alpha, x) -> None:
        self.vec(x, n, 1)[...] *= alpha

    def zero(self, m, n, c, ldc) -> None:
        self.mat(c, m, n, ldc)[...] = 0

    # ---- LAPACK (the direct solver) ----------------------------------------------------------
    def copy(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def lu_factor(self, n, a, offsets, lda, state) -> None:
        """LU factorizations with partial pivoting (``getrf``) of the matrices at
        ``a + offsets``; pivots and ``info`` (one per matrix) go to ``state``."""
        piv, info, fn, isz = state["piv"], state["info"], self.letter + "getrf", self.itemsize

        def body(i):
            res = ctypes.c_int()
            host_blas.call(fn, n, n, (a + int(offsets[i]) * isz,), max(lda, 1),
                           (piv.ctypes.data + i * n * 4,), res)
            info[i] = res.value

        self.for_batch(len(offsets), body, work=n ** 3)

    def lu_solve(self, trans, n, nrhs, a, offsets, lda, state, b, boffsets, ldb) -> None:
        piv, fn, isz = state["piv"], self.letter + "getrs", self.itemsize

        def body(i):
            res = ctypes.c_int()
            host_blas.call(fn, _OP[trans], n, nrhs, (a + int(offsets[i]) * isz,), max(lda, 1),
                           (piv.ctypes.data + i * n * 4,), (b + int(boffsets[i]) * isz,),
                           max(ldb, 1), res)

        self.for_batch(len(offsets), body, work=2 * n * n * nrhs)

    def cholesky_factor(self, uplo, n, a, offsets, lda, state) -> None:
        info, fn, isz = state["info"], self.letter + "potrf", self.itemsize

        def body(i):
            res = ctypes.c_int()
            host_blas.call(fn, _UPLO[uplo], n, (a + int(offsets[i]) * isz,), max(lda, 1), res)
            info[i] = res.value

        self.for_batch(len(offsets), body, work=n ** 3)

    def cholesky_solve(self, uplo, n, nrhs, a, offsets, lda, state, b, boffsets, ldb) -> None:
        fn, isz = self.letter + "potrs", self.itemsize

        def body(i):
            res = ctypes.c_int()
            host_blas.call(fn, _UPLO[uplo], n, nrhs, (a + int(offsets[i]) * isz,),
                           max(lda, 1), (b + int(boffsets[i]) * isz,), max(ldb, 1), res)

        self.for_batch(len(offsets), body, work=2 * n * n * nrhs)

    def solver_state(self, kind, n, count, handle=None) -> dict:
        """Pivots and ``info`` of ``count`` factorizations (host arrays)."""
        return {"piv": np.zeros((count, max(n, 1)), np.int32),
                "info": np.zeros(count, np.int32)}

    def read_info(self, state) -> np.ndarray:
        return state["info"].copy()
