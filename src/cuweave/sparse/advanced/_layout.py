"""The sparse direct solver's operands: what ``a`` and ``b`` are, checked once.

``a`` is a CSR matrix of SciPy (``csr_matrix``/``csr_array``), CuPy (``cupyx.scipy.sparse``) or
torch (``layout=torch.sparse_csr``; 3-D and higher: an implicit batch), or a sequence of them
(an explicit batch). ``b`` is a dense NumPy/CuPy/torch array (1-D vector, 2-D matrix of
columns, N-D implicit batch) or a sequence of them. Each is described once as a list of
systems (:class:`Csr` per matrix, an :class:`~cuweave._internal.arrays.Operand` per right-hand
side) in a :class:`Problem`; engines work on that list and never look at the user's objects.

The checks (:func:`check_structure`, :func:`check_values`) raise typed errors naming the
parameter: non-square matrices, index dtypes, unsorted or duplicate column indices, indices
out of range, inconsistent ``indptr``, non-finite values, shape and dtype mismatches.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..._internal import cuda
from ..._internal.arrays import Operand
from ..._internal.errors import InvalidOperandError
from ..._internal.packages import adapter, resolve_stream, wrap_operand

__all__ = ["SparseOperandError", "Csr", "Problem", "wrap_lhs", "wrap_rhs", "make_problem",
           "check_structure", "check_values", "host_copy", "VALUE_TYPES", "INDEX_TYPES"]

VALUE_TYPES = ("float32", "float64", "complex64", "complex128")
INDEX_TYPES = ("int32", "int64")
#: which dense package goes with which sparse one (as nvmath-python)
RHS_PACKAGE = {"scipy": "numpy", "cupyx": "cupy", "torch": "torch"}
_LHS_EXPECTED = ("a CSR matrix (scipy.sparse csr_matrix/csr_array, cupyx.scipy.sparse "
                 "csr_matrix, or a torch tensor with layout=torch.sparse_csr) or a sequence of "
                 "them")


class SparseOperandError(InvalidOperandError, TypeError):
    """A bad ``a`` or ``b`` (also a ``TypeError``, as nvmath-python raises there)."""


@dataclass
class Csr:
    """One CSR matrix of the problem: its three arrays as operands (same device)."""

    n: int
    nnz: int
    indptr: Operand
    indices: Operand
    values: Operand

    @property
    def arrays(self) -> tuple:
        return self.indptr.obj, self.indices.obj, self.values.obj


@dataclass
class Problem:
    """``a`` and ``b`` as lists of systems, with what they share."""

    lhs_form: str              # "single", "explicit" (a sequence) or "implicit" (N-D)
    lhs_shape: tuple           # the matrix shape, or a tuple of shapes (explicit)
    lhs_package: str           # "scipy", "cupyx" or "torch"
    matrices: list             # [Csr] per system
    rhs_form: str
    rhs_shape: tuple           # b's shape, or a tuple of shapes (explicit)
    rhs_package: str           # "numpy", "cupy" or "torch"
    rhs: list                  # [Operand] per system: (n,) or (n, k)
    rhs_obj: object            # the user's b (kept alive)
    dtype: str
    index_type: str
    device: str                # "cpu" or "cuda"
    device_id: int | None
    lhs_obj: object = None     # the user's a (kept alive)
    nnz: object = None         # one int (single/implicit) or a tuple (explicit)

    def __post_init__(self):
        if self.nnz is None and self.matrices:
            self.nnz = (tuple(m.nnz for m in self.matrices) if self.lhs_form == "explicit"
                        else self.matrices[0].nnz)

    def without_arrays(self) -> Problem:
        """This problem's description without references to the user's arrays."""
        return dataclasses.replace(self, matrices=[], rhs=[], rhs_obj=None, lhs_obj=None)

    @property
    def batch_count(self) -> int:
        return 0 if self.lhs_form == "single" else len(self.matrices)

    @property
    def batched(self) -> bool:
        return self.lhs_form != "single"

    @property
    def sizes(self) -> tuple:
        return tuple(m.n for m in self.matrices)

def _sparse_package(x) -> str | None:
    mod = type(x).__module__
    if mod.startswith("scipy.sparse"):
        return "scipy"
    if mod.startswith("cupyx.scipy.sparse"):
        return "cupyx"
    if (mod == "torch" or mod.startswith("torch.")) and hasattr(x, "layout"):
        return "torch"
    return None


def _components(x, package: str, name: str):
    """``[(indptr, indices, values, shape)]`` of the CSR ``x`` (one per batch sample for an
    N-D torch tensor), and the batch shape."""
    if package in ("scipy", "cupyx"):
        fmt = getattr(x, "format", None)
        if fmt != "csr":
            raise SparseOperandError(f"{name} must be {_LHS_EXPECTED}, got a {fmt!r} "
                                     f"{type(x).__name__} (convert it with .tocsr())")
        return [(x.indptr, x.indices, x.data, tuple(x.shape))], ()
    if str(x.layout) != "torch.sparse_csr":
        raise SparseOperandError(f"{name} must be {_LHS_EXPECTED}, got a torch tensor with "
                                 f"layout={x.layout} (convert it with .to_sparse_csr())")
    shape = tuple(x.shape)
    if len(shape) < 2:
        raise SparseOperandError(f"{name} must be a matrix (N, N) or a batch (..., N, N), got "
                                 f"shape {shape}")
    crow, col, val = x.crow_indices(), x.col_indices(), x.values()
    if val.ndim != len(shape) - 1:
        raise SparseOperandError(f"{name} must have scalar values (no dense dimensions), got "
                                 f"values of shape {tuple(val.shape)}")
    batch = shape[:-2]
    if not batch:
        return [(crow, col, val, shape)], ()
    out = []
    for idx in np.ndindex(*batch):
        out.append((crow[idx], col[idx], val[idx], shape[-2:]))
    return out, batch


def _wrap_csr(parts, name: str) -> Csr:
    indptr, indices, values, shape = parts
    if len(shape) != 2 or shape[0] != shape[1]:
        raise SparseOperandError(f"{name} must be square (N, N), got shape {shape}")
    ip = wrap_operand(indptr, f"{name}.indptr")
    ix = wrap_operand(indices, f"{name}.indices")
    vals = wrap_operand(values, f"{name}.values")
    for op, what in ((ip, "indptr"), (ix, "indices")):
        if op.dtype not in INDEX_TYPES:
            raise SparseOperandError(f"{name}.{what} must be int32 or int64, got {op.dtype!r}")
    if ip.dtype != ix.dtype:
        raise SparseOperandError(f"{name}.indices must have the dtype of {name}.indptr "
                                 f"({ip.dtype!r}), got {ix.dtype!r}")
    if vals.dtype not in VALUE_TYPES:
        raise SparseOperandError(f"{name} must have values of dtype {', '.join(VALUE_TYPES)}, "
                                 f"got {vals.dtype!r}")
    for op, what in ((ip, "indptr"), (ix, "indices"), (vals, "values")):
        if op.ndim != 1 or (op.shape[0] > 1 and op.strides[0] != 1):
            raise SparseOperandError(f"{name}.{what} must be a contiguous 1-D array, got shape "
                                     f"{op.shape} with strides {op.strides}")
    if ip.place != ix.place or ip.place != vals.place:
        raise SparseOperandError(f"{name}'s arrays must live on one device, got "
                                 f"{ip.place}, {ix.place}, {vals.place}")
    n = shape[0]
    if ip.shape[0] != n + 1:
        raise SparseOperandError(f"{name}.indptr must have N + 1 = {n + 1} entries, got "
                                 f"{ip.shape[0]}")
    if ix.shape[0] != vals.shape[0]:
        raise SparseOperandError(f"{name}.indices and {name}.values must have one length, got "
                                 f"{ix.shape[0]} and {vals.shape[0]}")
    return Csr(n, vals.shape[0], ip, ix, vals)


def wrap_lhs(a, name: str = "a"):
    """``(form, shape, package, [Csr])`` of ``a``."""
    package = _sparse_package(a)
    if package is not None:
        parts, batch = _components(a, package, name)
        mats = [_wrap_csr(p, name) for p in parts]
        return ("implicit" if batch else "single"), tuple(a.shape), package, mats
    if isinstance(a, Sequence) and not isinstance(a, str):
        if len(a) == 0:
            raise SparseOperandError(f"{name} must be {_LHS_EXPECTED}, got an empty sequence")
        packages = {_sparse_package(x) for x in a}
        if None in packages or len(packages) != 1:
            raise SparseOperandError(f"{name} must be {_LHS_EXPECTED} (one package), got a "
                                     f"sequence of {sorted({type(x).__name__ for x in a})}")
        package = packages.pop()
        mats = []
        for i, x in enumerate(a):
            parts, batch = _components(x, package, f"{name}[{i}]")
            if batch:
                raise SparseOperandError(f"{name}[{i}] must be a CSR matrix (explicit batches "
                                         f"hold matrices), got shape {tuple(x.shape)}")
            mats.append(_wrap_csr(parts[0], f"{name}[{i}]"))
        return "explicit", tuple(tuple(x.shape) for x in a), package, mats
    raise SparseOperandError(f"{name} must be {_LHS_EXPECTED}, got {type(a).__name__!r}")


def _samples(b, op: Operand, name: str) -> list:
    """The right-hand sides of an N-D ``b`` (``b[i, j, ...]``), wrapped."""
    batch = op.shape[:-2]
    return [wrap_operand(b[idx], f"{name}[{', '.join(map(str, idx))}]")
            for idx in np.ndindex(*batch)]


def wrap_rhs(b, name: str = "b"):
    """``(form, shape, package, [Operand])`` of ``b``."""
    if isinstance(b, Sequence) and not isinstance(b, str):
        if len(b) == 0:
            raise SparseOperandError(f"{name} must be a dense array or a sequence of them, got "
                                     "an empty sequence")
        ops = [wrap_operand(x, f"{name}[{i}]") for i, x in enumerate(b)]
        for i, op in enumerate(ops):
            if op.ndim not in (1, 2):
                raise SparseOperandError(f"{name}[{i}] must be a vector or a matrix (explicit "
                                         f"batches hold them), got shape {op.shape}")
        if len({op.package for op in ops}) != 1:
            raise SparseOperandError(f"{name} must hold arrays of one package, got "
                                     f"{sorted({op.package for op in ops})}")
        return "explicit", tuple(op.shape for op in ops), ops[0].package, ops
    op = wrap_operand(b, name)
    if op.ndim == 0:
        raise SparseOperandError(f"{name} must be a vector (N,), a matrix (N, K) or a batch "
                                 f"(..., N, K), got a scalar")
    if op.ndim <= 2:
        return "single", op.shape, op.package, [op]
    return "implicit", op.shape, op.package, _samples(b, op, name)


def _check_pairing(lhs_form, lhs_shape, rhs_form, rhs_shape, sizes, rhs, name_b="b"):
    """Batch forms, counts and extents of ``a`` and ``b`` agree."""
    if lhs_form == "single":
        if rhs_form != "single":
            raise SparseOperandError(f"{name_b} must be a vector or a matrix for a single "
                                     f"matrix a, got a batch of {len(rhs)}")
    else:
        if rhs_form == "single":
            raise SparseOperandError(f"{name_b} must be a batch (a sequence, or (..., N, K)) for "
                                     f"a batched a, got shape {rhs_shape}")
        if lhs_form == "implicit" and rhs_form == "implicit" \
                and tuple(lhs_shape[:-2]) != tuple(rhs_shape[:-2]):
            raise SparseOperandError(f"{name_b} must have a's batch shape "
                                     f"{tuple(lhs_shape[:-2])}, got {tuple(rhs_shape[:-2])}")
        if len(rhs) != len(sizes):
            raise SparseOperandError(f"{name_b} must hold as many systems as a ({len(sizes)}), "
                                     f"got {len(rhs)}")
    for i, (n, op) in enumerate(zip(sizes, rhs)):
        if op.shape[0] != n:
            where = "" if lhs_form == "single" else f" (system {i})"
            raise SparseOperandError(f"{name_b} must have N = {n} rows to match a{where}, got "
                                     f"shape {op.shape}")


def make_problem(a, b) -> Problem:
    """Wrap and cross-check ``a`` and ``b`` (no values are read: see :func:`check_structure`)."""
    lhs_form, lhs_shape, lhs_package, mats = wrap_lhs(a)
    rhs_form, rhs_shape, rhs_package, rhs = wrap_rhs(b)
    if RHS_PACKAGE[lhs_package] != rhs_package:
        raise SparseOperandError(f"b must be a {RHS_PACKAGE[lhs_package]} array for a "
                                 f"{lhs_package} matrix a, got a {rhs_package} array")
    _check_pairing(lhs_form, lhs_shape, rhs_form, rhs_shape, [m.n for m in mats], rhs)
    dtypes = {m.values.dtype for m in mats}
    index_types = {m.indptr.dtype for m in mats}
    if len(dtypes) != 1 or len(index_types) != 1:
        raise SparseOperandError(f"a's matrices must share one dtype and index type, got "
                                 f"{sorted(dtypes)} and {sorted(index_types)}")
    dtype = dtypes.pop()
    if {op.dtype for op in rhs} != {dtype}:
        raise SparseOperandError(f"b must have a's dtype {dtype!r}, got "
                                 f"{sorted({op.dtype for op in rhs})}")
    places = {m.values.place for m in mats} | {op.place for op in rhs}
    if len(places) != 1:
        raise SparseOperandError(f"a and b must live on one device, got {sorted(places, key=str)}")
    device, device_id = places.pop()
    return Problem(lhs_form, lhs_shape, lhs_package, mats, rhs_form, rhs_shape, rhs_package,
                   rhs, b, dtype, index_types.pop(), device, device_id, lhs_obj=a)


# ------------------------------------------------------------------------------ checks
def host_copy(op: Operand, stream=None) -> np.ndarray:
    """``op``'s elements as a NumPy array (a view for host memory, a copy for device memory,
    read after the package's current stream - or ``stream`` - is idle)."""
    if op.device == "cpu":
        return adapter(op.package).host_array(op)
    out = np.empty(op.shape, dtype=op.dtype)
    if out.size:
        s = resolve_stream(stream, package=op.package, device_id=op.device_id)
        cuda.synchronize(s.ptr)
        cuda.memcpy(out.ctypes.data, op.ptr, out.nbytes)
    return out


def check_structure(csr: Csr, name: str, stream=None) -> tuple:
    """Check ``indptr``/``indices`` of ``csr``; returns them (host arrays: NumPy views; device
    arrays: the package's arrays, checked where they live: only a failing check copies them to
    the host to say where)."""
    if csr.indptr.device == "cuda" and _device_structure_ok(csr):
        return csr.indptr.obj, csr.indices.obj
    indptr = host_copy(csr.indptr, stream)
    indices = host_copy(csr.indices, stream)
    _check_host_structure(indptr, indices, csr.n, csr.nnz, name)
    return indptr, indices


def _device_structure_ok(csr: Csr) -> bool:
    """The checks of :func:`_check_host_structure` in the package's own array operations (CuPy
    and torch share these); a few scalars come back to the host, not the arrays."""
    ip, ix = csr.indptr.obj, csr.indices.obj
    n, nnz = csr.n, csr.nnz
    if int(ip[0]) != 0 or int(ip[-1]) != nnz:
        return False
    counts = ip[1:] - ip[:-1]
    if n and bool((counts < 0).any()):
        return False
    if nnz == 0:
        return True
    if int(ix.min()) < 0 or int(ix.max()) >= n:
        return False
    if nnz == 1:
        return True
    step = ix[1:] - ix[:-1]
    # positions where a non-empty row (other than the first entry's) starts: a step there may
    # go down; everywhere else it must go up
    starts = ip[1:-1][counts[1:] > 0]
    starts = starts[starts > 0]
    bad = int((step <= 0).sum())
    if starts.shape[0]:
        bad -= int((step[starts - 1] <= 0).sum())
    return bad == 0


def same_structure(old, new) -> bool:
    """Whether two structures from :func:`check_structure` are equal (device arrays: the same
    memory, or equal contents compared on the device)."""
    (oi, oj), (ni, nj) = old, new
    if isinstance(oi, np.ndarray) and isinstance(ni, np.ndarray):
        return np.array_equal(oi, ni) and np.array_equal(oj, nj)
    if isinstance(oi, np.ndarray) or isinstance(ni, np.ndarray):
        return False
    if tuple(oi.shape) != tuple(ni.shape) or tuple(oj.shape) != tuple(nj.shape):
        return False
    same_memory = wrap_operand(oi).ptr == wrap_operand(ni).ptr and \
        wrap_operand(oj).ptr == wrap_operand(nj).ptr
    return same_memory or (bool((oi == ni).all()) and bool((oj == nj).all()))


def _check_host_structure(indptr, indices, n: int, nnz: int, name: str) -> None:
    """The structure checks on host arrays, raising the error that says what and where."""
    if indptr[0] != 0 or indptr[-1] != nnz:
        raise SparseOperandError(f"{name}.indptr must start at 0 and end at nnz = {nnz}, got "
                                 f"{int(indptr[0])} and {int(indptr[-1])}")
    counts = np.diff(indptr)
    if counts.size and counts.min() < 0:
        row = int(np.argmax(counts < 0))
        raise SparseOperandError(f"{name}.indptr must be non-decreasing, got a decrease at row "
                                 f"{row}")
    if nnz:
        lo, hi = int(indices.min()), int(indices.max())
        if lo < 0 or hi >= n:
            raise SparseOperandError(f"{name}.indices must lie in [0, {n}), got "
                                     f"{lo if lo < 0 else hi}")
        step = np.diff(indices.astype(np.int64))
        starts = np.zeros(nnz, dtype=bool)  # True where an entry starts a new row
        starts[indptr[:-1][counts > 0]] = True
        bad = np.flatnonzero((step <= 0) & ~starts[1:])
        if bad.size:
            k = int(bad[0]) + 1
            row = int(np.searchsorted(indptr, k, side="right") - 1)
            if step[k - 1] == 0:
                raise SparseOperandError(
                    f"{name} must have no duplicate entries (sum them with "
                    f"a.sum_duplicates()), got column {int(indices[k])} twice in row {row}")
            raise SparseOperandError(
                f"{name} must have sorted column indices in every row (sort them with "
                f"a.sort_indices()), got unsorted indices in row {row}")


def check_values(op: Operand, name: str) -> None:
    """Every value of ``op`` (a's values or b) is finite: checked on the array's own device."""
    if op.size == 0:
        return
    if op.device == "cpu":
        v = adapter(op.package).host_array(op)
        ok = bool(np.isfinite(v).all())
    else:
        x = op.obj
        ok = not bool(((x - x) != 0).any())  # NaN - NaN and inf - inf are NaN
    if not ok:
        raise SparseOperandError(f"{name} must hold finite values, got NaN or infinity")


def result_perm(ndim: int) -> tuple:
    """The axis order of a result in memory: batch axes outermost, each sample column-major."""
    if ndim <= 1:
        return tuple(range(ndim))
    return tuple(range(ndim - 2)) + (ndim - 1, ndim - 2)


def batch_count(shape) -> int:
    return math.prod(shape[:-2]) if len(shape) > 2 else 0
