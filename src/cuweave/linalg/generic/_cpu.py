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

        def chunk(idx):
            for i in idx:
                body(i)

        self.for_chunks(count, chunk, work)

    def for_chunks(self, count: int, chunk, work: int = 1 << 62) -> None:
        """``chunk(indices)`` over ``range(count)``, split over threads as :meth:`for_batch`
        says (each thread one chunk of consecutive indices)."""
        workers = min(cpu_workers(self.num_threads), count)
        if workers > 1 and count * work < self.SMALL_WORK * 4:
            workers = 1  # a small batch: threads would cost more than they bring
        if workers <= 1:
            threads = 1 if work < self.SMALL_WORK else self.num_threads
            with blas_threads(threads):
                chunk(range(count))
            return
        bounds = np.linspace(0, count, workers + 1).astype(int)
        parts = [range(bounds[j], bounds[j + 1]) for j in range(workers)]
        with blas_threads(1):
            futures = [_pool().submit(chunk, p) for p in parts[1:]]
            chunk(parts[0])
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

    def densify(self, mode, lower, n, a, lda, out, ldo, count=1, stride_a=0,
                stride_out=0) -> None:
        """The dense form of structured matrices (what the GPU's kernel computes)."""
        from ._densify import densify_host

        isz = self.itemsize
        for i in range(count):
            self.mat(out + i * stride_out * isz, n, n, ldo)[...] = densify_host(
                self.mat(a + i * stride_a * isz, n, n, lda), mode, lower)

    def scal(self, n, alpha, x) -> None:
        self.vec(x, n, 1)[...] *= alpha

    def zero(self, m, n, c, ldc) -> None:
        self.mat(c, m, n, ldc)[...] = 0

    # ---- LAPACK (the direct solver) ----------------------------------------------------------
    def copy(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def _loop(self, name, args: list, info=None, work: int = 1 << 62, pre=None) -> None:
        """Call Fortran routine ``name`` once per matrix of a batch (``name``/``args`` may be
        lists: several routines called one after the other per matrix). ``args``: its
        arguments (``bytes``/``int`` made into ``char``/``int`` once; a NumPy array of
        addresses varies per call; the last argument is LAPACK's ``info``, of the first
        routine written to ``info[i]`` when given). The constant arguments are built once:
        per call, only the addresses change. ``pre``: ``(destinations, sources, nbytes)``, a
        copy made right before each matrix's calls (it is then in cache when read)."""
        names, arglists = (name, args) if isinstance(name, list) else ([name], [args])
        keep, specs = [], []
        count = next(len(v) for v in arglists[0] if isinstance(v, np.ndarray))
        for nm, a in zip(names, arglists):
            fixed, varying = [], []
            for pos, v in enumerate(a[:-1]):
                if isinstance(v, np.ndarray):
                    varying.append((pos, v.tolist()))
                    fixed.append(0)
                    continue
                obj = ctypes.c_char(v) if isinstance(v, bytes) else (
                    ctypes.c_int(v) if isinstance(v, int) else v)
                keep.append(obj)
                fixed.append(ctypes.addressof(obj))
            specs.append((host_blas.routine(nm), fixed, varying))
        dsts, srcs, nbytes = (pre[0].tolist(), pre[1].tolist(), pre[2]) if pre else (0, 0, 0)
        memmove = ctypes.memmove

        def chunk(idx):
            res = ctypes.c_int()
            calls = [(fn, fixed + [ctypes.addressof(res)], varying)
                     for fn, fixed, varying in specs]
            for i in idx:
                if nbytes:
                    memmove(dsts[i], srcs[i], nbytes)
                for j, (fn, call, varying) in enumerate(calls):
                    for pos, ptrs in varying:
                        call[pos] = ptrs[i]
                    fn(*call)
                    if j == 0 and info is not None:
                        info[i] = res.value

        self.for_chunks(count, chunk, work)

    def lu_factor(self, n, a, offsets, lda, state, sources=None) -> None:
        """LU factorizations with partial pivoting (``getrf``) of the matrices at
        ``a + offsets``; pivots and ``info`` (one per matrix) go to ``state``. ``sources``:
        addresses of dense matrices copied there first, one at a time (the copy of ``a``)."""
        piv = state["piv"]
        ptrs = a + offsets * self.itemsize
        pivs = piv.ctypes.data + np.arange(len(offsets), dtype=np.int64) * (4 * max(n, 1))
        pre = None if sources is None else (ptrs, sources, n * n * self.itemsize)
        self._loop(self.letter + "getrf", [n, n, ptrs, max(lda, 1), pivs, None],
                   info=state["info"], work=n ** 3, pre=pre)

    def lu_solve(self, trans, n, nrhs, a, offsets, lda, state, b, boffsets, ldb) -> None:
        piv = state["piv"]
        pivs = piv.ctypes.data + np.arange(len(offsets), dtype=np.int64) * (4 * max(n, 1))
        self._loop(self.letter + "getrs", [_OP[trans], n, nrhs, a + offsets * self.itemsize,
                                           max(lda, 1), pivs, b + boffsets * self.itemsize,
                                           max(ldb, 1), None], work=2 * n * n * nrhs)

    def cholesky_factor(self, uplo, n, a, offsets, lda, state, sources=None) -> None:
        ptrs = a + offsets * self.itemsize
        pre = None if sources is None else (ptrs, sources, n * n * self.itemsize)
        self._loop(self.letter + "potrf", [_UPLO[uplo], n, ptrs, max(lda, 1), None],
                   info=state["info"], work=n ** 3, pre=pre)

    def cholesky_solve(self, uplo, n, nrhs, a, offsets, lda, state, b, boffsets, ldb) -> None:
        self._loop(self.letter + "potrs", [_UPLO[uplo], n, nrhs, a + offsets * self.itemsize,
                                           max(lda, 1), b + boffsets * self.itemsize,
                                           max(ldb, 1), None], work=2 * n * n * nrhs)

    def factor_solve(self, kind, trans, uplo, n, nrhs, a, offsets, lda, state, b, boffsets,
                     ldb, sources=None) -> None:
        """Factorize and solve each system in one pass (``gesv`` / ``posv``, or ``getrf`` then
        ``getrs`` with ``op = T`` for a factorized transpose): what :func:`direct_solver`
        does with a factorization it does not keep, each matrix in cache once."""
        ptrs = a + offsets * self.itemsize
        bptrs = b + boffsets * self.itemsize
        pre = None if sources is None else (ptrs, sources, n * n * self.itemsize)
        L = self.letter
        if kind == "LU":
            pivs = state["piv"].ctypes.data + np.arange(len(offsets), dtype=np.int64) * (
                4 * max(n, 1))
            if trans == 0:
                args = [n, nrhs, ptrs, max(lda, 1), pivs, bptrs, max(ldb, 1), None]
                self._loop(L + "gesv", args, info=state["info"], work=n ** 3, pre=pre)
                return
            self._loop([L + "getrf", L + "getrs"],
                       [[n, n, ptrs, max(lda, 1), pivs, None],
                        [_OP[trans], n, nrhs, ptrs, max(lda, 1), pivs, bptrs, max(ldb, 1),
                         None]], info=state["info"], work=n ** 3, pre=pre)
            return
        args = [_UPLO[uplo], n, nrhs, ptrs, max(lda, 1), bptrs, max(ldb, 1), None]
        self._loop(L + "posv", args, info=state["info"], work=n ** 3, pre=pre)

    def solver_state(self, kind, n, count, handle=None) -> dict:
        """Pivots and ``info`` of ``count`` factorizations (host arrays)."""
        return {"piv": np.zeros((count, max(n, 1)), np.int32),
                "info": np.zeros(count, np.int32)}

    def read_info(self, state) -> np.ndarray:
        return state["info"].copy()
