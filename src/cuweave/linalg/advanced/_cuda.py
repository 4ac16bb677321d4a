"""The CUDA backend of :class:`~cuweave.linalg.advanced.Matmul`: cuBLASLt descriptors,
heuristics, the pre-built hot-path call, autotuning and host staging.

:class:`CudaEngine` receives a fully validated :class:`~._layout.Problem` plus the types from
the Matmul object; it never re-validates on the hot path. ``execute`` patches the pointers of
a pre-built argument list and calls the raw ``cublasLtMatmul`` function.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..._bindings import cublaslt as lt
from ..._bindings.library_types import DATA_TYPE, CudaDataType
from ..._internal import cuda
from ..._internal.dtypes import ITEMSIZE
from ..._internal.errors import CublasLtError, InvalidOperandError
from ..._internal.memory import parse_memory_limit
from ..._internal.packages import allocate
from ..._internal.resources import StreamResources
from ..._internal.staging import shared_stager
from ._algorithm import Algorithm

__all__ = ["CudaEngine", "handle_for", "SCALE_NUMPY"]

SCALE_NUMPY = {
    CudaDataType.CUDA_R_16F: np.float16, CudaDataType.CUDA_R_32F: np.float32,
    CudaDataType.CUDA_R_64F: np.float64, CudaDataType.CUDA_C_32F: np.complex64,
    CudaDataType.CUDA_C_64F: np.complex128,
}
_MAX_WORKSPACE = 32 << 20
_handles: dict[int, int] = {}
_handles_lock = threading.Lock()
_A, _B, _C, _D, _ALGO, _WS, _WS_SIZE, _STREAM = 3, 5, 8, 10, 12, 13, 14, 15


def _device_count() -> int:
    try:
        return cuda.device_count()
    except Exception:
        return 1


def handle_for(device_id: int) -> int:
    """One cuBLASLt handle per device for the process (created on first use)."""
    h = _handles.get(device_id)
    if h is None:
        with _handles_lock:
            h = _handles.get(device_id)
            if h is None:
                cuda.set_device(device_id)
                h = _handles[device_id] = lt.create()
    return h


def _raw_matmul_function():
    """``cublasLtMatmul`` without ``argtypes``: called with pre-built ctypes objects only, so
    ctypes passes them as they are instead of converting 16 Python values per call."""
    return lt.bare("cublasLtMatmul")


def _raw_desc_set_function():
    """``cublasLtMatmulDescSetAttribute`` without ``argtypes`` (pre-built ctypes arguments)."""
    return lt.bare("cublasLtMatmulDescSetAttribute")


def _pointer_setter(desc: int):
    """``set(attr, ptr) -> status`` of a pointer attribute of ``desc``: the untyped
    ``cublasLtMatmulDescSetAttribute`` on pre-built ctypes arguments (one 8-byte buffer
    patched per call; ~0.4 µs against the typed binding's ~1.35 µs)."""
    fn = _raw_desc_set_function()
    buf, d, size, attrs = ctypes.c_void_p(), ctypes.c_void_p(desc), ctypes.c_size_t(8), {}
    ref = ctypes.byref(buf)

    def set_(attr, ptr) -> int:
        a = attrs.get(attr)
        if a is None:
            a = attrs[attr] = ctypes.c_int(int(attr))
        buf.value = ptr
        return fn(d, a, ref, size)

    return set_


def _extent_bytes(lt_op, count, itemsize) -> int:
    per = (lt_op.cols - 1) * lt_op.ld + lt_op.rows
    return (per + (count - 1) * lt_op.batch_stride) * itemsize


class CudaEngine:
    """Descriptors and resources of one planned matmul on one device."""

    def __init__(self, device_id: int, package: str, host: bool, options):
        self.device_id = device_id
        self.package = package
        self.host = host
        self.options = options
        self.handle = options.handle or handle_for(device_id)
        self._descs: list = []
        self._layouts: list = []
        #: the workspace and host-staging buffers, ordered across the runs' streams
        self.res = StreamResources(device_id, None if host else package, options.allocator)
        self.workspace_ptr = self.workspace_size = 0
        self.has_workspace = False
        self._stager = shared_stager() if host else None
        self._fn = _raw_matmul_function()
        # the ctypes arguments of cublasLtMatmul, made once: plans fill them (_build_args) and
        # each run patches the operand pointers (the stream when it changes) of these objects
        vp = ctypes.c_void_p
        self._ptrs = [vp(), vp(), vp(), vp(), vp(), vp(), vp(), vp(), vp(), vp(), vp(), vp(),
                      None, vp(), ctypes.c_size_t(), vp()]
        self.alpha_buf = self.beta_buf = None
        #: C is D (no c, a C layout of D's type): every run passes D's pointer as C, so the
        #: argument tuple holds D's object at C's place and a run patches it once
        self.c_is_d = False
        self.args = None  # the argument tuple of the plan's first algorithm (None: unplanned)
        #: ``call(a, b, c, d, algorithm, stream)``: one cublasLtMatmul (see _make_call)
        self.call = self._make_call()
        self._bound: dict = {}  # descriptor pointer attribute -> the pointer it holds
        #: whether runs must make ``device_id`` current (more than one device present)
        self.multi_device = _device_count() > 1
        #: cuBLASLt operand -> minimum pointer alignment (bytes) the heuristics assumed
        self.alignments = {"a": 256, "b": 256, "c": 256, "d": 256}

    # ---------------------------------------------------------------- planning
    def plan(self, p, types, lt_epilog, epi, prefs, algorithms, alignments=None):
        """Create descriptors, run the heuristics (unless ``algorithms``), pre-build args.

        ``alignments`` maps the cuBLASLt operands ``a``, ``b``, ``c``, ``d`` to the alignment in
        bytes of their pointers (at most 256; :func:`alignment`): the heuristics only return
        kernels valid for pointers at least that aligned. ``epi`` holds the epilog pointers'
        static parts: ``bias_bstride``, ``aux_ld``,
        ``aux_bstride``, ``bias_dtype``, ``aux_dtype`` (or None), ``fp8`` scale pointers.
        """
        self._destroy_descriptors()
        cuda.set_device(self.device_id)
        self.p, self.types = p, types
        if alignments is not None:
            self.alignments = dict(alignments)
        desc = lt.matmul_desc_create(types["compute"], types["scale"])
        self._descs.append(desc)
        A = lt.MatmulDescAttribute
        lt.matmul_desc_set_attribute(desc, A.TRANSA, int(p.a.op))
        lt.matmul_desc_set_attribute(desc, A.TRANSB, int(p.b.op))
        epilog_value = int(getattr(lt_epilog, "epilog", lt_epilog))
        if epilog_value != int(lt.Epilogue.DEFAULT):
            lt.matmul_desc_set_attribute(desc, A.EPILOGUE, epilog_value)
        if self.options.sm_count_target:
            lt.matmul_desc_set_attribute(desc, A.SM_COUNT_TARGET, self.options.sm_count_target)
        if self.options.fast_accumulation:
            lt.matmul_desc_set_attribute(desc, A.FAST_ACCUM, 1)
        for attr, value in epi.static_attributes():
            lt.matmul_desc_set_attribute(desc, attr, value)
        self.desc = desc
        self._set_ptr = _pointer_setter(desc)
        count = p.batch_count
        d_type = types["d"]
        ua, ub = p.lt_users  # swapped: cuBLASLt's A is the user's b (and its dtype)
        self.la = self._layout(types[ua], p.a, count)
        self.lb = self._layout(types[ub], p.b, count)
        self.ld = self._layout(d_type, p.d, count)
        self.c_is_d = p.c is None and types["c_layout"] == d_type
        self.lc = self.ld if self.c_is_d else self._layout(
            types["c_layout"], p.d if p.c is None else p.c, count)
        if algorithms is None:
            algorithms = self._heuristics(prefs)
        else:
            algorithms = [self._check(alg) for alg in algorithms]
        self.algorithms = algorithms
        self._ensure_workspace(max(a.workspace_size for a in algorithms), 0)
        self.alpha_buf = np.zeros(1, SCALE_NUMPY[CudaDataType(types["scale"])])
        self.beta_buf = np.zeros(1, self.alpha_buf.dtype)
        self._bound = {int(attr): v.value or 0 for attr, v in epi.static_attributes()
                       if isinstance(v, ctypes.c_void_p)}
        self._build_args(algorithms[0])
        if self.host:
            self._allocate_staging(p, types)
        return algorithms

    def _layout(self, dtype, lt_op, count):
        h = lt.matrix_layout_create(DATA_TYPE[dtype], lt_op.rows, lt_op.cols, lt_op.ld)
        self._layouts.append(h)
        if count > 1:
            lt.matrix_layout_set_attribute(h, lt.MatrixLayoutAttribute.BATCH_COUNT, count)
            lt.matrix_layout_set_attribute(h, lt.MatrixLayoutAttribute.STRIDED_BATCH_OFFSET,
                                           lt_op.batch_stride)
        return h

    def _workspace_limit(self) -> int:
        total = cuda.total_memory(self.device_id)
        return min(parse_memory_limit(self.options.memory_limit, total), _MAX_WORKSPACE)

    def _heuristics(self, prefs):
        pref = lt.preference_create()
        try:
            P = lt.PreferenceAttribute
            lt.preference_set_attribute(pref, P.MAX_WORKSPACE_BYTES, self._workspace_limit())
            lt.preference_set_attribute(pref, P.REDUCTION_SCHEME_MASK,
                                        int(prefs.reduction_scheme_mask))
            if prefs.max_waves_count:
                lt.preference_set_attribute(pref, P.MAX_WAVES_COUNT,
                                            float(prefs.max_waves_count))
            lt.preference_set_attribute(pref, P.IMPL_MASK, int(prefs.numerical_impl_mask))
            al = self.alignments
            for name, attr in (("a", P.MIN_ALIGNMENT_A_BYTES), ("b", P.MIN_ALIGNMENT_B_BYTES),
                               ("c", P.MIN_ALIGNMENT_C_BYTES), ("d", P.MIN_ALIGNMENT_D_BYTES)):
                lt.preference_set_attribute(pref, attr, int(al[name]))
            results = lt.algo_get_heuristic(self.handle, self.desc, self.la, self.lb, self.lc,
                                            self.ld, pref, prefs.limit)
        except CublasLtError as e:
            raise self._unsupported(e) from e
        finally:
            lt.preference_destroy(pref)
        if not results:
            raise self._unsupported(CublasLtError(15, "cublasLtMatmulAlgoGetHeuristic"))
        return [Algorithm.from_heuristic(r) for r in results]

    def _unsupported(self, err):
        t = self.types
        return CublasLtError(
            err.status, err.function,
            hint=f"no cuBLASLt algorithm for a={t['a']}, b={t['b']}, result={t['d']}, "
                 f"compute_type={t['compute'].name}, scale_type={t['scale'].name}, ops="
                 f"({self.p.a.op.name}, {self.p.b.op.name}) and this epilog/layout; try another "
                 "compute type, epilog or memory layout")

    def _check(self, alg):
        if not isinstance(alg, Algorithm) or alg.is_cpu:
            raise InvalidOperandError(f"algorithms must be a list of Algorithm objects from "
                                      f"Matmul.plan on the GPU, got {alg!r}")
        res = lt.algo_check(self.handle, self.desc, self.la, self.lb, self.lc, self.ld,
                            alg.algo)
        alg.workspace_size = res.workspaceSize
        return alg

    def _ensure_workspace(self, nbytes: int, stream: int) -> None:
        if self.has_workspace and self.workspace_size >= nbytes:
            return
        self.workspace_ptr = self.res.get("work", nbytes, stream)
        self.workspace_size, self.has_workspace = nbytes, True
        self._ptrs[_WS].value = self.workspace_ptr or None
        self._ptrs[_WS_SIZE].value = nbytes

    def release_workspace(self) -> None:
        self.res.release("work")
        self.workspace_ptr, self.workspace_size, self.has_workspace = 0, 0, False

    def enter(self, stream: int) -> None:
        """Prepare a run on ``stream``: the plan's device current (several devices only) and
        ``stream`` ordered after the previous run's stream when it changed."""
        if self.multi_device:
            cuda.set_device(self.device_id)
        if stream != self.res.last:
            self.res.enter(stream)

    # ---------------------------------------------------------------- host staging
    def _allocate_staging(self, p, types) -> None:
        count = p.batch_count
        ua, ub = p.lt_users
        need = {ua: _extent_bytes(p.a, count, ITEMSIZE[types[ua]]),
                ub: _extent_bytes(p.b, count, ITEMSIZE[types[ub]]),
                "d": _extent_bytes(p.d, count, ITEMSIZE[types["d"]])}
        if p.c is not None:
            need["c"] = _extent_bytes(p.c, count, ITEMSIZE[types["c"]])
        for name, nbytes in need.items():
            self.res.get(name, nbytes, 0)

    def device_buffer(self, name: str, nbytes: int, stream: int) -> int:
        """A cached device buffer (host staging of operands and epilog inputs/outputs)."""
        return self.res.get(name, nbytes, stream)

    def upload(self, items, stream: int) -> list[int]:
        """Upload ``[(name, dense host array), ...]`` into the cached device buffers of those
        names in one pipelined transfer; returns the device pointers."""
        ptrs = [self.res.get(name, host.nbytes, stream) for name, host in items]
        if self._stager is None:
            self._stager = shared_stager()
        # direct: every staged run downloads its result after, waiting for the stream
        self._stager.upload_many([(host, p) for (_, host), p in zip(items, ptrs)], stream,
                                 direct=True)
        return ptrs

    def download(self, ptr: int, host: np.ndarray, stream: int) -> None:
        self._stager.download(ptr, host, stream)

    # ---------------------------------------------------------------- execution
    def _build_args(self, algorithm) -> None:
        """Fill the argument objects for this plan and ``algorithm`` (the operand pointers and
        the stream are patched by each run)."""
        ptrs = self._ptrs
        for i, value in ((0, self.handle), (1, self.desc), (2, self.alpha_buf.ctypes.data),
                         (4, self.la), (6, self.lb), (7, self.beta_buf.ctypes.data),
                         (9, self.lc), (11, self.ld), (_WS, self.workspace_ptr or None)):
            ptrs[i].value = value
        ptrs[_WS_SIZE].value = self.workspace_size
        # by reference: an algorithm's configuration changed later is what the next run uses
        self._algo_ref = ptrs[_ALGO] = algorithm.ref()
        self._keep_algo = algorithm
        args = list(ptrs)
        if self.c_is_d:
            args[_C] = ptrs[_D]
        self.args = tuple(args)

    def run(self, a, b, c, d, algorithm, stream) -> None:
        """One ``cublasLtMatmul`` with the pre-built arguments (pointers patched): :attr:`call`
        (which the planned runs hold)."""
        self.call(a, b, c, d, algorithm, stream)

    def _make_call(self):
        """The engine's one ``cublasLtMatmul`` call, over its argument objects: the operand
        pointers patched (C's only where it is not D), the stream where it changed, the
        pre-built tuple passed as is (no conversion of Python values, no attribute chain)
        unless another algorithm is asked for or the workspace was released."""
        ptrs, fn, eng = self._ptrs, self._fn, self
        pa, pb, pc, pd, ps = ptrs[_A], ptrs[_B], ptrs[_C], ptrs[_D], ptrs[_STREAM]
        held = None  # the stream ps holds (written here only): patched when it changes

        def call(a, b, c, d, algorithm, stream) -> None:
            nonlocal held
            pa.value, pb.value, pd.value = a, b, d
            if not eng.c_is_d:
                pc.value = c
            if stream != held:
                ps.value = held = stream
            if algorithm is None and eng.has_workspace:
                status = fn(*eng.args)
            else:
                status = eng._run_other(algorithm, stream)
            if status:
                raise CublasLtError(status, "cublasLtMatmul")

        return call

    def _run_other(self, algorithm, stream) -> int:
        """The call of :attr:`call` with ``algorithm`` (or the plan's first), the workspace
        made large enough first; returns the status."""
        if not self.has_workspace:  # after release_workspace()
            self._ensure_workspace(max(x.workspace_size for x in self.algorithms), stream)
        args = self.args
        if algorithm is not None:
            if algorithm.workspace_size > self.workspace_size:
                self._ensure_workspace(algorithm.workspace_size, stream)
            args = list(args)
            args[_ALGO] = algorithm.ref()
        return self._fn(*args)

    def set_scalars(self, alpha, beta) -> None:
        """Write ``alpha``/``beta`` (read by cuBLASLt when a run is queued)."""
        if self.alpha_buf is not None:
            self.alpha_buf[0] = alpha
            self.beta_buf[0] = beta

    def set_pointer(self, attr, ptr: int) -> None:
        """Point a descriptor attribute at ``ptr`` (no library call when it already does)."""
        if self._bound.get(attr) != ptr:
            status = self._set_ptr(attr, ptr)
            if status:
                raise CublasLtError(status, "cublasLtMatmulDescSetAttribute")
            self._bound[attr] = ptr

    def autotune(self, bind, iterations: int, prune, stream: int, log) -> list:
        """Time each algorithm (L2 flushed before each run) and return them fastest first,
        the fastest ``prune`` only when ``prune`` is given (nvmath's meaning).

        ``bind()`` returns ``(a, b, c, d)`` device pointers valid for repeated runs (alpha and
        beta are already in their buffers). Each algorithm runs once untimed (module loading),
        then ``iterations`` times, each after an L2 flush, all queued back to back: the GPU
        never idles between timed runs, so they run at the clocks of sustained use (a sync
        per run would time short bursts after idle gaps, at other clocks).
        """
        self.enter(stream)
        a, b, c, d = bind()
        flush_bytes = max(cuda.l2_cache_size(self.device_id), 1 << 20) * 2
        flush = allocate(flush_bytes, package=None, device_id=self.device_id, stream=stream)
        drv = cuda.driver()
        algos = list(self.algorithms)  # every one is timed; ``prune`` keeps the fastest N
        timings = []
        for alg in algos:
            self.run(a, b, c, d, alg, stream)
            events = []
            for _ in range(iterations):
                cuda.check(drv.cuMemsetD8Async(flush.device_ptr, 0, flush_bytes, stream),
                           "cuMemsetD8Async")
                start = cuda.Event().record(stream)
                self.run(a, b, c, d, alg, stream)
                events.append((start, cuda.Event().record(stream)))
            events[-1][1].synchronize()
            times = [start.elapsed_ms(end) for start, end in events]
            timings.append((float(np.median(times)), alg))
        flush.free()
        timings.sort(key=lambda t: t[0])
        if log.isEnabledFor(20):
            log.info("autotune: %s", ", ".join(f"id {alg.algorithm_id}: {t * 1e3:.1f} us"
                                               for t, alg in timings))
        ordered = [alg for _, alg in timings]
        self.algorithms = ordered[:prune] if prune is not None else ordered
        self._build_args(self.algorithms[0])
        return self.algorithms

    # ---------------------------------------------------------------- cleanup
    def _destroy_descriptors(self) -> None:
        layouts, self._layouts = self._layouts, []
        for h in dict.fromkeys(layouts):
            try:
                lt.matrix_layout_destroy(h)
            except Exception:
                pass
        descs, self._descs = self._descs, []
        for h in descs:
            try:
                lt.matmul_desc_destroy(h)
            except Exception:
                pass

    def free(self) -> None:
        self._destroy_descriptors()
        self.res.close()
        self.workspace_ptr, self.workspace_size, self.has_workspace = 0, 0, False
        self._stager = None  # the process-wide stager outlives the engine
        self.args = None
        self._bound = {}
