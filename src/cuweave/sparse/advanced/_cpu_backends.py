"""The CPU sparse direct solvers cuweave can run on, behind one small interface.

- ``pardiso``: Intel MKL PARDISO through ``libmkl_rt`` (the ``mkl`` wheel, ctypes). Supernodal,
  multithreaded, METIS nested dissection; every matrix type; reuses the symbolic phase.
- ``cholmod``: CHOLMOD through scikit-sparse (SPD/HPD only); reuses the symbolic phase.
- ``superlu``: SciPy's SuperLU (always present; single-threaded; refactorizes from scratch).

:func:`choose` picks per matrix type and size from the measurement committed in
``benchmarks/results/sparse_cpu.md`` (``CUWEAVE_CPU_SPARSE=pardiso|cholmod|superlu`` forces
one). Every backend takes the structure :mod:`._structure` derives and F-ordered right-hand
sides ``(n, k)``; a singular or indefinite matrix raises :class:`SingularMatrixError`.
"""

from __future__ import annotations

import ctypes
import os
import threading
import warnings

import numpy as np

from ..._bindings.cudss import MatrixType, ReorderingAlg
from ..._internal.errors import InvalidOperandError, InvalidOptionError, LibraryNotFoundError
from ..._internal.logging import get_logger

__all__ = ["SingularMatrixError", "BACKENDS", "available", "choose", "make", "ENV_CHOICE"]

_log = get_logger("sparse")

#: environment variable forcing one CPU backend
ENV_CHOICE = "CUWEAVE_CPU_SPARSE"


class SingularMatrixError(InvalidOperandError):
    """The matrix ``a`` is singular (or not positive definite for SPD/HPD types)."""


# ------------------------------------------------------------------------------ SuperLU
class SuperLU:
    """SciPy's SuperLU: the full matrix, factorized from scratch each time (no symbolic reuse);
    minimum-degree ordering on A^T + A for symmetric types, COLAMD for general ones."""

    name = "superlu"
    want = "full"
    reuses_symbolic = False

    _ORDERINGS = {ReorderingAlg.NONE: "NATURAL", ReorderingAlg.COLAMD: "COLAMD",
                  ReorderingAlg.BTF_COLAMD: "COLAMD"}

    def __init__(self, mtype: MatrixType, n: int, dtype: np.dtype, num_threads: int,
                 reordering=ReorderingAlg.DEFAULT):
        self.mtype, self.n, self.dtype = mtype, n, dtype
        self._permc = self._ORDERINGS.get(reordering) or (
            "COLAMD" if mtype == MatrixType.GENERAL and reordering == ReorderingAlg.DEFAULT
            else "MMD_AT_PLUS_A")
        self._lu = None
        self._structure = None

    def analyze(self, indptr, indices, values) -> None:
        self._structure = (indptr, indices)

    def permutation(self):
        return None if self._lu is None else self._lu.perm_c.copy()

    def factorize(self, values) -> dict:
        import scipy.sparse as sp
        from scipy.sparse.linalg import splu

        indptr, indices = self._structure
        # CSR arrays read as CSC are A^T: factor A^T and solve with trans="T"
        at = sp.csc_matrix((values, indices, indptr), shape=(self.n, self.n))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._lu = splu(at, permc_spec=self._permc)
        except RuntimeError as e:
            self._lu = None
            raise SingularMatrixError(f"a must be non-singular, got a singular matrix (SuperLU: "
                                      f"{e})") from None
        return {"lu_nnz": int(self._lu.L.nnz + self._lu.U.nnz - self.n)}

    def solve(self, b: np.ndarray) -> np.ndarray:
        return self._lu.solve(b, trans="T")

    def release(self) -> None:
        self._lu = None


# ------------------------------------------------------------------------------ CHOLMOD
class Cholmod:
    """CHOLMOD (scikit-sparse), supernodal Cholesky of SPD/HPD matrices; the upper CSR triangle
    read as the lower CSC one (conjugated for complex)."""

    name = "cholmod"
    want = "upper"
    reuses_symbolic = True

    _ORDERINGS = {ReorderingAlg.DEFAULT: "default", ReorderingAlg.AMD: "amd",
                  ReorderingAlg.NESTED_DISSECTION: "metis", ReorderingAlg.NONE: "natural",
                  ReorderingAlg.COLAMD: "colamd", ReorderingAlg.BTF_COLAMD: "colamd"}

    def __init__(self, mtype, n, dtype, num_threads, reordering=ReorderingAlg.DEFAULT):
        self._ordering = self._ORDERINGS[reordering]
        if mtype not in (MatrixType.SPD, MatrixType.HPD):
            raise InvalidOptionError(f"the cholmod backend needs an SPD or HPD matrix type, got "
                                     f"{mtype!r}")
        from sksparse import cholmod  # noqa: F401 - raises ImportError when missing

        self.mtype, self.n, self.dtype = mtype, n, dtype
        self._factor = None
        self._structure = None

    def _matrix(self, values):
        import scipy.sparse as sp

        indptr, indices = self._structure
        return sp.csc_matrix((values, indices, indptr), shape=(self.n, self.n))

    def analyze(self, indptr, indices, values) -> None:
        from sksparse import cholmod

        self._structure = (indptr, indices)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._factor = cholmod.analyze(self._matrix(values), mode="supernodal",
                                           ordering_method=self._ordering)

    def permutation(self):
        return None if self._factor is None else np.asarray(self._factor.P())

    def factorize(self, values) -> dict:
        from sksparse import cholmod

        m = self._matrix(values)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._factor.cholesky_inplace(m)
        except cholmod.CholmodNotPositiveDefiniteError as e:
            raise SingularMatrixError(f"a must be positive definite for an SPD/HPD system type, "
                                      f"got a matrix that is not (CHOLMOD: {e})") from None
        return {}

    def solve(self, b):
        return self._factor.solve_A(b)

    def release(self) -> None:
        self._factor = None


# ------------------------------------------------------------------------------ PARDISO
_PARDISO_MTYPE = {  # (matrix type, complex) -> PARDISO mtype
    (MatrixType.GENERAL, False): 11, (MatrixType.GENERAL, True): 13,
    (MatrixType.SYMMETRIC, False): -2, (MatrixType.SYMMETRIC, True): 6,
    (MatrixType.HERMITIAN, False): -2, (MatrixType.HERMITIAN, True): -4,
    (MatrixType.SPD, False): 2, (MatrixType.SPD, True): 6,
    (MatrixType.HPD, False): 2, (MatrixType.HPD, True): 4,
}
_PARDISO_ERRORS = {
    -1: "input inconsistent", -2: "not enough memory", -3: "reordering problem",
    -4: "zero pivot, numerical factorization or iterative refinement problem",
    -5: "unclassified internal error", -6: "reordering failed", -7: "diagonal matrix is singular",
    -8: "32-bit integer overflow", -9: "not enough memory for out-of-core",
    -10: "error opening out-of-core files", -11: "read/write error with out-of-core files",
}
_mkl_lock = threading.Lock()
_mkl: list = []


def _mkl_paths() -> list[str]:
    """Where ``libmkl_rt`` may be: the ``mkl`` wheel's files, then the loader's path."""
    paths = []
    try:
        import importlib.metadata as md

        for f in md.distribution("mkl").files or ():
            if f.name.startswith("libmkl_rt.so"):
                paths.append(str(f.locate()))
    except Exception:
        pass
    paths.append("libmkl_rt.so.2")
    paths.append("libmkl_rt.so")
    return paths


def mkl_rt():
    """``libmkl_rt`` with ``pardiso`` declared, or ``None`` where MKL is not installed."""
    if _mkl:
        return _mkl[0]
    with _mkl_lock:
        if not _mkl:
            lib = None
            for path in _mkl_paths():
                try:
                    lib = ctypes.CDLL(path)
                    break
                except OSError:
                    continue
            if lib is not None:
                lib.MKL_Set_Interface_Layer(0)  # LP64: 32-bit MKL_INT
                p = ctypes.POINTER
                i32 = p(ctypes.c_int32)
                lib.pardiso.argtypes = [p(ctypes.c_void_p), i32, i32, i32, i32, i32,
                                        ctypes.c_void_p, i32, i32, i32, i32, i32, i32,
                                        ctypes.c_void_p, ctypes.c_void_p, i32]
                lib.pardiso.restype = None
                lib.MKL_Set_Num_Threads_Local.argtypes = [ctypes.c_int]
                lib.MKL_Set_Num_Threads_Local.restype = ctypes.c_int
            _mkl.append(lib)
    return _mkl[0]


class Pardiso:
    """MKL PARDISO (LP64, zero-based CSR). Symmetric types give their upper triangle."""

    name = "pardiso"
    reuses_symbolic = True

    def __init__(self, mtype, n, dtype, num_threads, reordering=ReorderingAlg.DEFAULT):
        self.lib = mkl_rt()
        if self.lib is None:
            raise LibraryNotFoundError("MKL PARDISO (libmkl_rt)", "sparse-cpu")
        self.mtype, self.n, self.dtype = mtype, n, np.dtype(dtype)
        cplx = self.dtype.kind == "c"
        self.pmtype = _PARDISO_MTYPE[(mtype, cplx)]
        self.want = "full" if self.pmtype in (11, 13) else "upper"
        self.threads = num_threads
        self.pt = (ctypes.c_void_p * 64)()
        self.iparm = (ctypes.c_int32 * 64)()
        ip = self.iparm
        ip[0] = 1                       # not all defaults
        # METIS nested dissection (cuDSS's default too), or minimum degree
        ip[1] = 2 if reordering in (ReorderingAlg.DEFAULT, ReorderingAlg.NESTED_DISSECTION) else 0
        self._perm = np.arange(n, dtype=np.int32)
        ip[4] = 1 if reordering == ReorderingAlg.NONE else 2  # take / return the permutation
        ip[7] = 0                       # iterative refinement: automatic (2 steps if perturbed)
        general = self.pmtype in (11, 13)
        ip[9] = 13 if general else 8    # pivot perturbation 1e-13 / 1e-8
        ip[10] = 1 if general else 0    # scaling with the matching
        ip[12] = 1 if general else 0    # weighted matching
        ip[17] = -1                     # report the factors' nonzeros
        ip[20] = 1                      # Bunch-Kaufman pivoting (symmetric indefinite)
        ip[26] = 0                      # no matrix checker: cuweave validated it
        ip[27] = 1 if self.dtype in (np.float32, np.complex64) else 0
        ip[34] = 1                      # zero-based indices
        self._i = {k: ctypes.c_int32(v) for k, v in
                   (("maxfct", 1), ("mnum", 1), ("mtype", self.pmtype), ("n", n),
                    ("msglvl", 0))}
        self._structure = None
        self._values = None
        self._analyzed = False

    def _call(self, phase: int, values=None, b=None, x=None, nrhs: int = 1) -> None:
        indptr, indices = self._structure
        err = ctypes.c_int32(0)
        i = self._i
        ph, k = ctypes.c_int32(phase), ctypes.c_int32(nrhs)
        vals = values if values is not None else self._values
        prev = self.lib.MKL_Set_Num_Threads_Local(self.threads)
        try:
            self.lib.pardiso(self.pt, ctypes.byref(i["maxfct"]), ctypes.byref(i["mnum"]),
                             ctypes.byref(i["mtype"]), ctypes.byref(ph), ctypes.byref(i["n"]),
                             vals.ctypes.data if vals is not None else None,
                             indptr.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                             indices.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                             self._perm.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                             ctypes.byref(k), self.iparm,
                             ctypes.byref(i["msglvl"]),
                             b.ctypes.data if b is not None else None,
                             x.ctypes.data if x is not None else None, ctypes.byref(err))
        finally:
            self.lib.MKL_Set_Num_Threads_Local(prev)
        if err.value:
            self._raise(err.value, phase)

    def _raise(self, code: int, phase: int):
        what = _PARDISO_ERRORS.get(code, "unknown error")
        if code in (-4, -7) or (code == -3 and phase == 22):
            definite = self.pmtype in (2, 4)
            raise SingularMatrixError(
                f"a must be {'positive definite' if definite else 'non-singular'}, got a matrix "
                f"that is not (PARDISO error {code}: {what})")
        raise InvalidOperandError(f"PARDISO failed with error {code} ({what}) in phase {phase}")

    def set_pivot_eps(self, eps: float) -> None:
        """PARDISO perturbs pivots smaller than 10^-iparm[9] (times the matrix norm)."""
        if eps > 0:
            self.iparm[9] = max(1, min(30, int(round(-np.log10(eps)))))

    def analyze(self, indptr, indices, values) -> None:
        self.release()
        self._structure = (indptr.astype(np.int32, copy=False),
                           indices.astype(np.int32, copy=False))
        self._values = np.ascontiguousarray(values)
        self._analyzed = True  # from here on, phase -1 must release PARDISO's memory
        self._call(11)

    def permutation(self):
        return self._perm.copy() if self.iparm[4] == 2 and self._analyzed else None

    def factorize(self, values) -> dict:
        self._values = np.ascontiguousarray(values)
        self._call(22)
        ip = self.iparm
        out = {"lu_nnz": int(ip[17]), "npivots": int(ip[13])}
        if self.pmtype in (-2, -4, 6):
            out["inertia"] = (int(ip[21]), int(ip[22]))
        return out

    def solve(self, b: np.ndarray) -> np.ndarray:
        b = np.asfortranarray(b, dtype=self.dtype)
        x = np.empty_like(b, order="F")
        self._call(33, b=b, x=x, nrhs=1 if b.ndim == 1 else b.shape[1])
        return x

    def perturbed_pivots(self) -> int:
        return int(self.iparm[13])

    def release(self) -> None:
        if self._analyzed and self._structure is not None:
            try:
                self._call(-1)
            except Exception as e:  # releasing must not raise
                _log.debug("PARDISO release failed: %s", e)
        self._analyzed = False


BACKENDS = {"pardiso": Pardiso, "cholmod": Cholmod, "superlu": SuperLU}


def available() -> list[str]:
    """The backends usable in this process, fastest first (as measured)."""
    names = []
    if mkl_rt() is not None:
        names.append("pardiso")
    try:
        from sksparse import cholmod  # noqa: F401

        names.append("cholmod")
    except Exception:
        pass
    names.append("superlu")
    return names


#: below this many unknowns (the largest system of a problem) SuperLU is faster than
#: PARDISO: a PARDISO call costs ~10 ms of its own (measured: 256 systems of 16-64 unknowns
#: 3.0 s with PARDISO, 0.26 s with SuperLU; 2-D 10k unknowns about even; 3-D 10k 2.4x faster
#: with PARDISO)
SMALL_SYSTEM = 5000


def choose(mtype: MatrixType, largest: int | None = None) -> str:
    """The backend for ``mtype`` (``largest``: the problem's largest system):
    ``CUWEAVE_CPU_SPARSE`` when set, else the fastest measured one that handles it
    (benchmarks/results/sparse_cpu.md): SuperLU for systems below :data:`SMALL_SYSTEM`
    unknowns; PARDISO for every type where MKL is installed; CHOLMOD for SPD/HPD without MKL;
    SuperLU otherwise."""
    forced = os.environ.get(ENV_CHOICE, "").strip().lower()
    if forced and forced != "auto":
        if forced not in BACKENDS:
            raise InvalidOptionError(f"{ENV_CHOICE} must be one of 'auto', "
                                     f"{', '.join(map(repr, BACKENDS))}, got {forced!r}")
        if forced != "superlu" and forced not in available():
            raise LibraryNotFoundError(forced, "sparse-cpu",
                                       f"{ENV_CHOICE}={forced} is not installed")
        return forced
    if largest is not None and largest < SMALL_SYSTEM:
        return "superlu"
    have = available()
    for name in have:
        if name == "cholmod" and mtype not in (MatrixType.SPD, MatrixType.HPD):
            continue
        return name
    return "superlu"


#: mean entries per row below which PARDISO's default ordering for symmetric types is minimum
#: degree: on 2-D meshes (5-point stencils: 5 per row) MKL's METIS costs twice the rest of the
#: solve, on 3-D ones (7 per row) nested dissection's smaller fill wins (measured; see
#: docs/sparse.md)
MIN_DEGREE_BELOW = 6.0


def make(name: str, mtype: MatrixType, n: int, dtype, num_threads: int,
         reordering=ReorderingAlg.DEFAULT, row_length: float = 0.0):
    """A new backend object ``name`` for one system (``row_length``: the full matrix's mean
    entries per row, which picks PARDISO's default ordering)."""
    if name == "pardiso" and reordering == ReorderingAlg.DEFAULT:
        # PARDISO's minimum degree is slow for nonsymmetric types (measured: 10x its
        # symmetric analysis): nested dissection there
        symmetric = mtype != MatrixType.GENERAL
        reordering = (ReorderingAlg.AMD if symmetric and row_length < MIN_DEGREE_BELOW
                      else ReorderingAlg.NESTED_DISSECTION)
    return BACKENDS[name](mtype, n, np.dtype(dtype), num_threads, reordering)
