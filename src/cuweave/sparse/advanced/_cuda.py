"""CUDA (and hybrid) execution of the sparse direct solver with cuDSS.

The engine owns one cuDSS handle (or borrows ``options.handle``), one config and one data
object, and three cuDSS matrix objects: ``a`` (CSR, or a batch of CSR), ``b`` and ``x`` (dense
column-major, or batches). Their pointers are the caller's arrays when these live on the
device; host (SciPy/NumPy) operands under CUDA execution are mirrored in device buffers the
engine owns (copied in at construction and :meth:`update`, results copied back after each
solve). Hybrid execution (cuDSS's host-assisted mode) reads host operands where they are.

Phases map to ``cudssExecute``: plan = ANALYSIS (reordering + symbolic factorization),
factorize = FACTORIZATION (its INFO is read: a singular matrix raises), solve = SOLVE into a
new result allocated in ``b``'s package, from its pool, on the caller's stream.
"""

from __future__ import annotations

import os

import numpy as np

from ..._bindings import cudss
from ..._bindings.cudss import ConfigParam, DataParam, Layout
from ..._bindings.library_types import CudaDataType
from ..._internal import cuda
from ..._internal.arrays import DeviceArray
from ..._internal.memory import parse_memory_limit
from ..._internal.packages import adapter, empty, resolve_stream, wrap_operand
from ._configs import memory_estimates_dtype
from ._cpu_backends import SingularMatrixError
from ._layout import Problem, SparseOperandError, result_perm
from ._options import ExecutionHybrid

__all__ = ["CudaEngine", "CudssStore"]

_VALUE_TYPES = {"float32": CudaDataType.CUDA_R_32F, "float64": CudaDataType.CUDA_R_64F,
                "complex64": CudaDataType.CUDA_C_32F, "complex128": CudaDataType.CUDA_C_64F}
_INDEX_TYPES = {"int32": CudaDataType.CUDA_R_32I, "int64": CudaDataType.CUDA_R_64I}
_REAL = {"float32": "float32", "float64": "float64", "complex64": "float32",
         "complex128": "float64"}


class CudssStore:
    """The settings store over a cuDSS config object (:mod:`._configs` reads and writes it)."""

    def __init__(self, config: int):
        self.config = config

    def get(self, param):
        return cudss.config_get(self.config, param)

    def set(self, param, value) -> None:
        cudss.config_set(self.config, param, int(value) if isinstance(value, bool) else value)


def _threading_lib(path: str | None) -> str | None:
    """The threading layer to load: the option, else ``CUDSS_THREADING_LIB``; ``None`` when
    neither names an existing file (multithreading is optional)."""
    path = path or os.environ.get("CUDSS_THREADING_LIB")
    return path if path and os.path.isfile(path) else None


def _column_major(op, n: int) -> bool:
    """Whether the right-hand side ``op`` ((n,) or (n, k)) is dense column-major."""
    if op.ndim == 1:
        return op.shape[0] <= 1 or op.strides[0] == 1
    return (op.strides[0] == 1 or op.shape[0] <= 1) and (op.shape[1] <= 1
                                                         or op.strides[1] == n)


class _PointerArray:
    """A device array of pointers (cuDSS batches), rewritten on a stream when they change."""

    def __init__(self, pointers, device_id: int, stream: int):
        self.host = np.asarray(pointers, dtype=np.uint64)
        self.device = DeviceArray((len(self.host),), "uint64", device_id=device_id,
                                  stream=stream)
        cuda.memcpy_async(self.device.ptr, self.host.ctypes.data, self.host.nbytes, stream)
        cuda.synchronize(stream)  # the host array may change right after

    @property
    def ptr(self) -> int:
        return self.device.ptr

    def update(self, pointers, stream: int) -> None:
        new = np.asarray(pointers, dtype=np.uint64)
        if np.array_equal(new, self.host):
            return
        self.host = new
        cuda.memcpy_async(self.device.ptr, self.host.ctypes.data, self.host.nbytes, stream)
        cuda.synchronize(stream)


class CudaEngine:
    """The sparse direct solver on a CUDA device with cuDSS."""

    host_threads_ok = False

    def __init__(self, problem: Problem, options, execution, logger, stream=None):
        cudss.load()
        self.hybrid = isinstance(execution, ExecutionHybrid)
        self.space = "hybrid" if self.hybrid else "cuda"
        self.device_id = problem.device_id if problem.device == "cuda" else execution.device_id
        cuda.require(self.device_id)
        cuda.set_device(self.device_id)
        self.logger = logger
        self.mirrored = problem.device == "cpu" and not self.hybrid
        self.blocking = options.blocking is True or problem.device == "cpu"
        self._check_supported(problem)
        self.dtype, self.index_type = problem.dtype, problem.index_type
        self.vtype, self.itype = _VALUE_TYPES[problem.dtype], _INDEX_TYPES[problem.index_type]
        self.mtype, self.mview = options.sparse_system_type, options.sparse_system_view
        self.batched = problem.batched
        self.sizes = problem.sizes
        self._objects = {}       # cuDSS matrix objects "a", "b", "x"
        self._ptr_arrays = {}    # batches: device pointer arrays
        self._mirrors = None     # host operands under CUDA execution: device copies
        self._keep = []          # host arrays cuDSS reads sizes from (batches)
        self._rhs_copies = []    # column-major copies of right-hand sides cuDSS cannot read
        self._last_stream = 0
        self.own_handle = options.handle is None
        self.handle = cudss.create() if self.own_handle else options.handle
        self.config = self.data_obj = None
        try:
            self.config = cudss.config_create()
            self.data_obj = cudss.data_create(self.handle)
            self.store = CudssStore(self.config)
            self._configure(options, execution)
            s = self._stream(stream, problem)
            self._bind(problem, s)
        except BaseException:
            self.release()
            raise

    # ---- construction --------------------------------------------------------------------
    def _check_supported(self, problem: Problem) -> None:
        if problem.index_type == "int64" and problem.batched:
            raise SparseOperandError("a must have int32 indices for a batched solve (cuDSS), got "
                                     "int64; convert indptr and indices to int32")
        if self.hybrid:
            if problem.batched:
                raise SparseOperandError("a must be a single matrix under hybrid execution "
                                         "(cuDSS), got a batch")
            if problem.rhs[0].ndim > 1 and problem.rhs[0].shape[1] != 1:
                raise SparseOperandError("b must be a vector under hybrid execution (cuDSS), "
                                         f"got shape {problem.rhs[0].shape}")

    def _configure(self, options, execution) -> None:
        lib = _threading_lib(options.multithreading_lib)
        if lib is not None:
            cudss.set_threading_layer(self.handle, lib)
            self.host_threads_ok = True
            self.logger.info("cuDSS threading layer: %s", lib)
        if self.hybrid:
            self.store.set(ConfigParam.HYBRID_EXECUTE_MODE, 1)
            if execution.num_threads is not None:
                if execution.num_threads > 1 and lib is None:
                    raise SparseOperandError(
                        "execution.num_threads must be 1 without a threading layer "
                        "(DirectSolverOptions.multithreading_lib or CUDSS_THREADING_LIB), got "
                        f"{execution.num_threads}")
                self.store.set(ConfigParam.HOST_NTHREADS, execution.num_threads)
            return
        hmo = execution.hybrid_memory_mode_options
        if hmo.hybrid_memory_mode:
            self.store.set(ConfigParam.HYBRID_MEMORY_MODE, 1)
            self.store.set(ConfigParam.USE_CUDA_REGISTER_MEMORY, int(hmo.register_cuda_memory))
            if hmo.hybrid_device_memory_limit is not None:
                total = cuda.total_memory(self.device_id)
                limit = parse_memory_limit(hmo.hybrid_device_memory_limit, total)
                self.store.set(ConfigParam.HYBRID_DEVICE_MEMORY_LIMIT, limit)

    def _stream(self, stream, problem: Problem) -> int:
        package = problem.rhs_package if problem.device == "cuda" else None
        s = resolve_stream(stream, package=package, device_id=self.device_id).ptr
        self._last_stream = s
        return s

    def _bind(self, problem: Problem, stream: int) -> None:
        """Create the cuDSS matrix objects over the current operands."""
        if self.mirrored:
            self._mirrors = _Mirrors(problem, self.device_id, stream)
        a_ptrs = self._lhs_pointers(problem)
        b_ptrs = self._rhs_pointers(problem, stream)
        if not self.batched:
            n = self.sizes[0]
            ip, ix, vals = a_ptrs[0]
            self._objects["a"] = cudss.matrix_create_csr(
                n, n, problem.matrices[0].nnz, ip, ix, vals, self.itype, self.vtype,
                self.mtype, self.mview)
            k = self._ncols(problem.rhs[0])
            for name in ("b", "x"):
                self._objects[name] = cudss.matrix_create_dn(n, k, n, b_ptrs[0], self.vtype,
                                                             Layout.COL_MAJOR)
            return
        idx = np.dtype(self.index_type)
        nrows = np.asarray(self.sizes, dtype=idx)
        nnz = np.asarray([m.nnz for m in problem.matrices], dtype=idx)
        ncols_b = np.asarray([self._ncols(op) for op in problem.rhs], dtype=idx)
        self._keep = [nrows, nnz, ncols_b]
        for key, column in (("ip", 0), ("ix", 1), ("vals", 2)):
            self._ptr_arrays[key] = _PointerArray([p[column] for p in a_ptrs], self.device_id,
                                                  stream)
        for key in ("b", "x"):
            self._ptr_arrays[key] = _PointerArray(b_ptrs, self.device_id, stream)
        count = len(self.sizes)
        pa = self._ptr_arrays
        self._objects["a"] = cudss.matrix_create_batch_csr(
            count, nrows.ctypes.data, nrows.ctypes.data, nnz.ctypes.data, pa["ip"].ptr,
            pa["ix"].ptr, pa["vals"].ptr, self.itype, self.vtype, self.mtype, self.mview)
        for key in ("b", "x"):
            self._objects[key] = cudss.matrix_create_batch_dn(
                count, nrows.ctypes.data, ncols_b.ctypes.data, nrows.ctypes.data,
                pa[key].ptr, self.itype, self.vtype, Layout.COL_MAJOR)

    @staticmethod
    def _ncols(op) -> int:
        return 1 if op.ndim == 1 else op.shape[1]

    def _lhs_pointers(self, problem: Problem) -> list:
        if self.mirrored:
            return self._mirrors.lhs_pointers()
        return [(m.indptr.ptr, m.indices.ptr, m.values.ptr) for m in problem.matrices]

    def _rhs_pointers(self, problem: Problem, stream: int) -> list:
        if self.mirrored:
            return self._mirrors.rhs_pointers()
        ptrs = []
        self._rhs_copies = []
        for op in problem.rhs:
            if not _column_major(op, op.shape[0]):
                # a layout cuDSS cannot read: a column-major copy on the device
                ad = adapter(op.package)
                copy = ad.dense_copy(op.obj, op.shape, "F", stream, self.device_id)
                op = wrap_operand(copy, "b")
                self._rhs_copies.append(copy)
            ptrs.append(op.ptr)
        return ptrs

    # ---- operands ------------------------------------------------------------------------
    def update(self, problem: Problem, new_a: bool, new_b: bool, same_structure: bool,
               stream=None) -> None:
        s = self._stream(stream, problem)
        if self.mirrored:
            if self._mirrors is None:
                self._mirrors = _Mirrors(problem, self.device_id, s)
            else:
                self._mirrors.upload(problem, s, lhs=new_a, rhs=new_b)
        if new_a or self._mirrors is not None:
            ptrs = self._lhs_pointers(problem)
            if self.batched:
                for key, column in (("ip", 0), ("ix", 1), ("vals", 2)):
                    self._ptr_arrays[key].update([p[column] for p in ptrs], s)
            else:
                cudss.matrix_set_csr_pointers(self._objects["a"], *ptrs[0])
        if new_b or self._mirrors is not None:
            ptrs = self._rhs_pointers(problem, s)
            if self.batched:
                self._ptr_arrays["b"].update(ptrs, s)
            else:
                cudss.matrix_set_values(self._objects["b"], ptrs[0])

    def release_operands(self) -> None:
        self._mirrors = None
        self._rhs_copies = []

    # ---- phases --------------------------------------------------------------------------
    def _execute(self, phase, stream: int) -> None:
        cudss.set_stream(self.handle, stream)
        o = self._objects
        cudss.execute(self.handle, phase, self.config, self.data_obj, o["a"], o["x"], o["b"])

    def plan(self, problem: Problem, structures, stream=None) -> None:
        s = self._stream(stream, problem)
        self._execute(cudss.Phase.ANALYSIS, s)
        if self.blocking:
            cuda.synchronize(s)

    def factorize(self, problem: Problem, stream=None) -> None:
        s = self._stream(stream, problem)
        self._execute(cudss.Phase.FACTORIZATION, s)
        cuda.synchronize(s)  # INFO is read on the host: factorize() always blocks
        info = self.data(DataParam.INFO)
        if info != 0:
            definite = self.mtype in (cudss.MatrixType.SPD, cudss.MatrixType.HPD)
            raise SingularMatrixError(
                f"a must be {'positive definite' if definite else 'non-singular'}, got a "
                f"matrix cuDSS could not factorize (CUDSS_DATA_INFO = {info}: a zero or "
                f"non-positive pivot)")

    def solve(self, problem: Problem, stream=None):
        s = self._stream(stream, problem)
        result, ops = self._allocate(problem, s)
        if self.mirrored:
            x_ptrs = self._mirrors.x_pointers()
        else:
            x_ptrs = [op.ptr for op in ops]
        if self.batched:
            self._ptr_arrays["x"].update(x_ptrs, s)
        else:
            cudss.matrix_set_values(self._objects["x"], x_ptrs[0])
        self._execute(cudss.Phase.SOLVE, s)
        if self.mirrored:
            self._mirrors.download(ops, s)
        elif self.blocking:
            cuda.synchronize(s)
        return result

    def _allocate(self, problem: Problem, stream: int):
        """``(user-facing result, [Operand per system])`` in b's package and memory space."""
        kw = {"stream": stream} if problem.device == "cuda" else {}
        if problem.rhs_form == "explicit":
            ops = [empty(op, op.shape, op.dtype, perm=result_perm(op.ndim), **kw)
                   for op in problem.rhs]
            return tuple(op.obj for op in ops), ops
        ref = problem.rhs[0]
        shape = tuple(problem.rhs_shape)
        whole = empty(ref, shape, ref.dtype, perm=result_perm(len(shape)), **kw)
        if problem.rhs_form == "single":
            return whole.obj, [whole]
        per = int(np.prod(shape[-2:])) * whole.itemsize
        ops = [wrap_operand(whole.obj[idx], "x") for idx in np.ndindex(*shape[:-2])]
        assert all(op.ptr == whole.ptr + i * per for i, op in enumerate(ops))
        return whole.obj, ops

    # ---- information ---------------------------------------------------------------------
    def data(self, param: DataParam):
        """A cuDSS data value (after the stream's work is done)."""
        cuda.synchronize(self._last_stream)
        n = self.sizes[0]
        idx, val = np.dtype(self.index_type), np.dtype(self.dtype)
        shapes = {
            DataParam.INFO: (np.int32, 1), DataParam.LU_NNZ: (np.int64, 1),
            DataParam.NPIVOTS: (idx, 1), DataParam.INERTIA: (idx, 2),
            DataParam.NSUPERPANELS: (idx, 1), DataParam.PERM_REORDER_ROW: (idx, n),
            DataParam.PERM_REORDER_COL: (idx, n), DataParam.PERM_ROW: (idx, n),
            DataParam.PERM_COL: (idx, n), DataParam.PERM_MATCHING: (idx, n),
            DataParam.DIAG: (val, n), DataParam.SCALE_ROW: (np.dtype(_REAL[self.dtype]), n),
            DataParam.SCALE_COL: (np.dtype(_REAL[self.dtype]), n),
            DataParam.MEMORY_ESTIMATES: (np.uint64, 16),
        }
        dtype, count = shapes[param]
        buf = np.zeros(count, dtype=dtype)
        cudss.data_get(self.handle, self.data_obj, param, buf.ctypes.data, buf.nbytes)
        if param == DataParam.MEMORY_ESTIMATES:
            return buf.view(memory_estimates_dtype)[0].view(np.recarray)
        if param in (DataParam.INFO, DataParam.LU_NNZ, DataParam.NPIVOTS,
                     DataParam.NSUPERPANELS):
            return int(buf[0])
        return buf

    def release(self) -> None:
        """Destroy the cuDSS objects (in reverse order of creation) and drop the buffers."""
        try:
            if self._last_stream is not None:
                cuda.settle(self._last_stream)
        finally:
            for key in ("x", "b", "a"):
                obj = self._objects.pop(key, None)
                if obj:
                    cudss.matrix_destroy(obj)
            if self.data_obj:
                cudss.data_destroy(self.handle, self.data_obj)
                self.data_obj = None
            if self.config:
                cudss.config_destroy(self.config)
                self.config = None
            if self.handle and self.own_handle:
                cudss.destroy(self.handle)
            self.handle = None
            self._ptr_arrays = {}
            self._mirrors = None
            self._rhs_copies = []


class _Mirrors:
    """Device copies of host operands (CUDA execution of SciPy/NumPy operands)."""

    def __init__(self, problem: Problem, device_id: int, stream: int):
        self.device_id = device_id
        self.lhs = [tuple(DeviceArray(op.shape, op.dtype, device_id=device_id, stream=stream)
                          for op in (m.indptr, m.indices, m.values)) for m in problem.matrices]
        self.rhs = [DeviceArray((op.shape[0], 1 if op.ndim == 1 else op.shape[1]), op.dtype,
                                device_id=device_id, stream=stream) for op in problem.rhs]
        self.x = [DeviceArray(d.shape, d.dtype, device_id=device_id, stream=stream)
                  for d in self.rhs]
        self.upload(problem, stream, lhs=True, rhs=True)

    def upload(self, problem: Problem, stream: int, *, lhs: bool, rhs: bool) -> None:
        if lhs:
            for m, arrays in zip(problem.matrices, self.lhs):
                for op, dev in zip((m.indptr, m.indices, m.values), arrays):
                    host = np.ascontiguousarray(adapter(op.package).host_array(op))
                    cuda.memcpy_async(dev.ptr, host.ctypes.data, host.nbytes, stream)
        if rhs:
            for op, dev in zip(problem.rhs, self.rhs):
                host = np.asfortranarray(adapter(op.package).host_array(op))
                cuda.memcpy_async(dev.ptr, host.ctypes.data, host.nbytes, stream)
        cuda.synchronize(stream)  # the host arrays may change right after

    def lhs_pointers(self) -> list:
        return [tuple(d.ptr for d in arrays) for arrays in self.lhs]

    def rhs_pointers(self) -> list:
        return [d.ptr for d in self.rhs]

    def x_pointers(self) -> list:
        return [d.ptr for d in self.x]

    def download(self, ops, stream: int) -> None:
        """Copy the solutions into the host results ``ops`` (column-major samples)."""
        for op, dev in zip(ops, self.x):
            nbytes = op.size * op.itemsize
            cuda.memcpy_async(op.ptr, dev.ptr, nbytes, stream)
        cuda.synchronize(stream)
