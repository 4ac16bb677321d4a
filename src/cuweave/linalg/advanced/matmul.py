"""``Matmul`` (stateful) and ``matmul`` (function form) on cuBLASLt, with a CPU backend.

One lifecycle (:class:`~cuweave._internal.lifecycle.StatefulObject`): ``__init__`` specifies
and validates, ``plan`` canonicalizes the problem into the lt frame (see ``_layout``) and
creates the backend's plan, ``execute`` runs it. The backend is a parameter: CUDA
(``_cuda.CudaEngine``) or CPU (``_cpu.execute_cpu`` over NumPy views of the same lt frame).
"""

from __future__ import annotations

import functools
import time

import numpy as np

from ..._internal import cuda
from ..._internal.arrays import alignment, check_same_place
from ..._internal.errors import (
    CublasLtError,
    InvalidOperandError,
    InvalidOptionError,
    InvalidStateError,
)
from ..._internal.lifecycle import StatefulObject
from ..._internal.logging import get_logger
from ..._internal.options import ExecutionCPU, coerce_options, resolve_execution
from ..._internal.overlap import check_inplace_target
from ..._internal.packages import adapter, empty, resolve_stream, wrap_operand
from . import _autotune_cache
from ._algorithm import Algorithm
from ._binding import (
    EpilogBinding,
    check_aux_input_dtype,
    frame_constraints,
    perm_from_strides,
    staged,
)
from ._checks import (
    AlgorithmTypeError,
    IncompleteResetError,
    OperandPackageError,
    _check_algorithm,
    _check_lt_layout,
    _check_same_package,
    _conj_flags,
    _scalar,
    _signature,
    alignment_error,
    check_aux_scale,
    check_fp8_aux,
    check_scales,
    ignored,
    scale_value,
    signature_mismatch,
    split_aux_scale,
)
from ._epilogs import AUX_FORMATS, epilog_spec, validate_epilog, validate_epilog_inputs
from ._fit import dense_strides, fit_bgrad_layout, fit_layouts
from ._layout import analyze, host_view, remember_aux_frame
from ._options import (
    MatmulOptions,
    MatmulPlanPreferences,
    MatmulQuantizationScales,
)
from ._run import build_run, deliver_results, squeeze
from ._types import resolve_types

__all__ = ["Matmul"]

_log = get_logger("linalg.advanced")


def _batched_view(arr, count):
    """``(count, rows, n)`` / ``(count, length)`` view of an aux output (no copy)."""
    v = arr.view()
    v.shape = (count, *arr.shape[-2:]) if arr.shape[-1:] != (1,) and arr.ndim >= 2 and \
        arr.size // count != arr.shape[-1] else (count, arr.size // count)
    return v


class Matmul(StatefulObject):
    """A planned ``epilog(alpha * a @ b + beta * c)`` (see the package documentation).

    Parameters
    ----------
    a, b : array
        NumPy, CuPy, torch (CPU or CUDA), DLPack or CUDA-array-interface operands, ``a`` of
        ``(..., M, K)`` and ``b`` of ``(..., K, N)`` (1-D operands are promoted).
    c : array, optional
        ``(..., M, N)`` or ``(..., M, 1)`` (broadcast); requires ``beta``.
    alpha, beta : scalar, optional
    qualifiers : numpy structured array, optional
        :data:`matrix_qualifiers_dtype` records for ``a``, ``b`` (and ``c``).
    quantization_scales : MatmulQuantizationScales or dict, optional
        fp8 only.
    options : MatmulOptions or dict, optional
    execution : "cuda", "cpu", ExecutionCUDA, ExecutionCPU or dict, optional
        EXT. Host operands default to CUDA when a GPU is usable, else the CPU.
    stream : stream-like, optional

    Examples
    --------
    Plan once, execute many times; ``reset_operands`` swaps in new data of the same layout.

    >>> import numpy as np
    >>> from cuweave.linalg.advanced import Matmul, MatmulEpilog
    >>> a = np.ones((4, 3), np.float32)
    >>> b = np.full((3, 2), 2.0, np.float32)
    >>> with Matmul(a, b, execution="cpu") as mm:
    ...     algorithms = mm.plan(epilog=MatmulEpilog.RELU)
    ...     first = mm.execute()
    ...     mm.reset_operands(a=-a)
    ...     second = mm.execute()
    >>> first[0].tolist(), second[0].tolist()
    ([6.0, 6.0], [0.0, 0.0])
    """

    _run = None  # the one CUDA run, specialized by plan() (_run.build_run)
    _fast_run = None  # _run where no optional step applies (execute() calls it unchecked)
    _fast = None  # _fast_run while it applies now: operands bound, no fixed stream
    _spare_ops = None  # (records, a's, b's): refilled by the function form on a hit (_function)
    _from_tune_cache = False  # the plan's algorithms came timed from the autotune cache

    def __init__(self, a, b, /, c=None, *, alpha=None, beta=None, qualifiers=None,
                 quantization_scales=None, options=None, execution=None, stream=None):
        self.options = coerce_options(options, MatmulOptions, "options")
        self._log = self.options.logger or _log
        ops = {"a": wrap_operand(a, "a"), "b": wrap_operand(b, "b")}
        if c is not None:
            ops["c"] = wrap_operand(c, "c")
        _check_same_package(ops)
        device, device_id, self._package = check_same_place(ops)
        self._adapter = adapter(self._package)
        #: the adapter's pointer reader of arrays its records hold as they are (the unchecked
        #: reset's fast path, device operands only)
        self._plain_pointer = None if device == "cpu" else getattr(self._adapter,
                                                                   "plain_pointer", None)
        self._ab_shapes = (ops["a"].shape, ops["b"].shape)
        if c is not None:
            ops["c"] = self._matrix_c(ops["c"])
        self._host = device == "cpu"
        self._space = resolve_execution(
            execution, operand_device=device, operand_device_id=device_id,
            host_default="cuda", default_device_id=self.options.device_id)
        self._on_cpu = isinstance(self._space, ExecutionCPU)
        self._device_id = None if self._on_cpu else self._space.device_id
        self._conj = _conj_flags(qualifiers, ops)
        self._types = resolve_types(ops["a"].dtype, ops["b"].dtype,
                                    ops["c"].dtype if c is not None else None, self.options,
                                    log=self._log)
        if not self._types["a"].startswith("complex"):
            self._conj = (False, False)  # conjugating a real operand changes nothing
        if self.options.inplace and c is not None:
            check_inplace_target(ops["c"], "c")
        if c is not None and beta is None:
            raise InvalidOperandError("beta must be given when c is given, got None")
        if c is None and beta is not None:  # as nvmath-python: ignored with a warning
            beta = ignored(self._log, "beta", beta)
        self._engine = None
        self._alpha = _scalar(alpha, 1.0, "alpha")
        self._beta = _scalar(beta, 0.0, "beta")
        if not self._types["a"].startswith("complex") and (
                isinstance(self._alpha, complex | np.complexfloating) or
                isinstance(self._beta, complex | np.complexfloating)):
            raise InvalidOperandError(f"alpha and beta must be real for real operands, got "
                                      f"{self.alpha!r}, {self.beta!r}")
        if quantization_scales is not None and not self._types["fp8"]:  # as nvmath-python
            quantization_scales = ignored(self._log, "quantization_scales", quantization_scales)
        self._scales = coerce_options(quantization_scales, MatmulQuantizationScales,
                                      "quantization_scales")
        self._place = ops["a"].place
        self._scale_ops = self._check_scales(self._scales)
        self._stream = stream
        self._stream_ptr = None  # ``stream`` resolved at plan time
        if stream is not None:
            resolve_stream(stream, package=self._package, device_id=self._device_id or 0)
        self._alignments = {}  # user operand -> pointer alignment assumed by the plan
        self._engine = None
        self._binding = None
        self._algorithms = None
        self._copies = {}  # host operand -> how its staged array is derived (_fit)
        self._bgrad = None  # "bgrada"/"bgradb" while planned for them (operation preference)
        self._aux_scale = None  # the fp8 aux output's scale (float or Operand; check_aux_scale)
        self._bind_operands(ops)
        self._dev_copies = {}  # device operand -> (shape, order) of its per-run copy (_fit)
        self._problem = fit_layouts(self)
        self._log.info("Matmul %s @ %s (%s) on %s", ops["a"].shape, ops["b"].shape,
                       self._types["a"], self.execution_space)

    # ---------------------------------------------------------------- properties
    @property
    def execution_space(self) -> str:
        """``"cpu"`` or ``"cuda:<id>"`` (EXT)."""
        return "cpu" if self._on_cpu else f"cuda:{self._device_id}"

    @property
    def algorithms(self) -> list:
        self._require_planned("algorithms")
        return list(self._algorithms)

    @property
    def alpha(self):
        return self._alpha

    @alpha.setter
    def alpha(self, value) -> None:
        self._alpha = self._check_scalar(value, "alpha")
        if self._engine is not None:
            self._engine.set_scalars(value, self._beta)

    @property
    def beta(self):
        return self._beta

    @beta.setter
    def beta(self, value) -> None:
        self._beta = self._check_scalar(value, "beta")
        if self._engine is not None:
            self._engine.set_scalars(self._alpha, value)

    def _check_scalar(self, value, name):
        """``value`` validated as ``__init__`` does (a real scalar for real operands)."""
        if value is None:
            raise InvalidOperandError(f"{name} must be a real or complex scalar, got None")
        value = _scalar(value, None, name)
        if isinstance(value, complex | np.complexfloating) and \
                not self._types["a"].startswith("complex"):
            raise InvalidOperandError(f"{name} must be real for real operands, got {value!r}")
        return value

    def _check_scales(self, scales) -> dict:
        return check_scales(scales, self._place, self._types["d"] in ("float8_e4m3fn",
                                                                      "float8_e5m2"))

    def _set_stream(self, stream) -> None:
        """The stream of the following runs (``None``: the package's current stream then)."""
        if stream is None:
            self._stream = self._stream_ptr = None
            self._refresh_fast()
            return
        ptr = resolve_stream(stream, package=self._package,
                             device_id=self._device_id or 0).ptr  # validates on the CPU too
        self._stream = stream
        self._stream_ptr = None if self._on_cpu or self._run is None else ptr
        self._refresh_fast()

    # ---------------------------------------------------------------- operands
    def _bind_operands(self, ops) -> None:
        """Keep the operands; host operands also get their staged (device-side) layout."""
        self._ops = ops
        self._signatures = {k: _signature(op) for k, op in ops.items()}
        self._staged = {k: self._stage(k, op) for k, op in ops.items()} if self._host else None

    def _stage(self, k, op):
        """(host array, element strides) of host operand ``k`` as computed on: the operand, a
        dense copy of a non-dense one, or what :mod:`._fit` decided."""
        arr, strides = staged(op, k)
        derive = self._copies.get(k)
        if derive is not None:
            arr = derive(arr)
            strides = tuple(x // arr.itemsize for x in arr.strides)
        return arr, strides

    def _aux_type(self):
        prefs = getattr(self, "_prefs", None)
        return prefs.epilog.aux_type if prefs is not None else None

    def _analyze(self, forced):
        ops, st = self._ops, self._staged
        if st is not None:
            strides = {k: st[k][1] for k in ops}
            shapes = {k: st[k][0].shape for k in ops}
        else:  # device operands: their own layout, or that of their per-run copy
            shapes = {k: op.shape for k, op in ops.items()}
            strides = {k: op.strides for k, op in ops.items()}
            for k, (shape, order) in self._dev_copies.items():
                shapes[k], strides[k] = shape, dense_strides(shape, order)
        c = ops.get("c")
        return analyze(shapes["a"], strides["a"], shapes["b"], strides["b"],
                       c_shape=shapes["c"] if c is not None else None,
                       c_strides=strides.get("c"), conj_a=self._conj[0], conj_b=self._conj[1],
                       forced=forced, inplace=self.options.inplace, fp8=self._types["fp8"],
                       bgrad=self._bgrad)

    def reset_operands(self, a=None, b=None, c=None, *, alpha=None, beta=None,
                       quantization_scales=None, epilog_inputs=None, stream=None):
        """Replace operands (positional or keyword) with arrays of the planned layout.

        Device operands must be at least as aligned as the planned ones (InvalidOperandError
        otherwise)."""
        self._reset(a, b, c, alpha, beta, quantization_scales, epilog_inputs, stream, True)

    def reset_operands_unchecked(self, a=None, b=None, c=None, *, alpha=None, beta=None,
                                 quantization_scales=None, epilog_inputs=None, stream=None):
        """:meth:`reset_operands` without any check: the caller guarantees the planned
        layouts and device pointers at least as aligned as the planned ones (cuBLASLt kernels
        are chosen for the planned alignment, up to 256 bytes)."""
        if (c is None and alpha is None and beta is None and quantization_scales is None
                and stream is None and self._repoint(a, b, epilog_inputs)):
            return
        self._reset(a, b, c, alpha, beta, quantization_scales, epilog_inputs, stream, False)

    def _repoint(self, a, b, epilog_inputs) -> bool:
        """The unchecked reset of bound device operands and epilog inputs whose arrays the
        adapter reads a plain pointer from (``Adapter.plain_pointer``: torch tensors without
        lazy negation or conjugation): their records take the new arrays and pointers, nothing
        is wrapped or validated again. ``False`` (nothing changed): take :meth:`_reset`."""
        ops, pointer = self._ops, self._plain_pointer
        if ops is None or pointer is None:
            return False
        pa = pointer(a) if a is not None else 0
        pb = pointer(b) if b is not None else 0
        if pa is None or pb is None:
            return False
        if epilog_inputs and not self._repoint_inputs(epilog_inputs, pointer):
            return False
        if a is not None:
            rec = ops["a"]
            rec.obj, rec.ptr = a, pa
        if b is not None:
            rec = ops["b"]
            rec.obj, rec.ptr = b, pb
        return True

    def _repoint_inputs(self, epilog_inputs, pointer) -> bool:
        """:meth:`_repoint` of the epilog inputs (all or none); ``False``: take
        :meth:`_reset`, which checks the names and a square aux input's frame."""
        bind = self._binding
        if bind is None or type(epilog_inputs) is not dict:
            return False
        bound = bind.inputs
        if len(epilog_inputs) != len(bound) or bind.square_aux in epilog_inputs:
            return False
        new = []
        for k, x in epilog_inputs.items():
            rec = bound.get(k)
            ptr = pointer(x) if rec is not None else None
            if ptr is None:
                return False
            new.append((rec, x, ptr))
        for rec, x, ptr in new:
            rec.obj, rec.ptr = x, ptr
        return True

    def _matrix_c(self, c):
        """A 1-D ``c`` is taken only where the result is a vector of its length (``a`` or
        ``b`` 1-D): it is then the result's shape, read as that vector's matrix. For matrix
        results nvmath-python 1.0 refuses a 1-D ``c`` (NumPy would add ``(N,)`` to every row,
        older nvmath added ``(M,)`` to every column: for square results the two disagree)."""
        if len(c.shape) != 1 or self.options.inplace:
            return c
        a_shape, b_shape = self._ab_shapes
        if len(a_shape) >= 2 and len(b_shape) >= 2:
            raise InvalidOperandError(
                f"c must be at least 2-D for a matrix result ((M, 1) adds a column to every "
                f"column, (M, N) is the whole matrix), got shape {tuple(c.shape)!r}")
        row = len(a_shape) == 1 and len(b_shape) >= 2
        want = b_shape[-1] if row else (a_shape[-2] if len(a_shape) >= 2 else 1)
        if c.shape[0] != want:
            raise InvalidOperandError(
                f"c shape must be the result's, ({want},), got {tuple(c.shape)!r}")
        view = self._adapter.new_axis(c.obj, 0 if row else 1, "c")
        return wrap_operand(view, "c")

    def _reset(self, a, b, c, alpha, beta, scales, epilog_inputs, stream, check):
        if check:
            self._require_valid("reset_operands")
            if self._ops is not None and all(x is None for x in (a, b, c, alpha, beta, scales,
                                                                 epilog_inputs, stream)):
                raise InvalidOperandError(  # nvmath-python's rule (EXT: a stream alone counts)
                    "reset_operands() must be given at least one of a, b, c, alpha, beta, "
                    "quantization_scales, epilog_inputs or stream, got none")
        new = {name: wrap_operand(x, name) for name, x in (("a", a), ("b", b), ("c", c))
               if x is not None}
        if "c" in new:
            new["c"] = self._matrix_c(new["c"])
        inputs = None
        epilog_inputs, aux_scale = split_aux_scale(epilog_inputs)
        if epilog_inputs is not None and self._binding is not None:
            inputs = self._binding.wrap_inputs(epilog_inputs)
        self._rebind(new, alpha, beta, scales, inputs, stream, check, aux_scale)

    def _rebind(self, new: dict, alpha, beta, scales, inputs, stream, check,
                aux_scale=None) -> None:
        """:meth:`reset_operands` on wrapped operands (``new``: name -> Operand)."""
        self._require_valid("reset_operands")
        if aux_scale is not None:
            self._aux_scale = check_aux_scale(aux_scale, self._aux_type(), self._place, True)
        ops, sigs = self._ops, self._signatures
        if check:
            for name, op in new.items():
                if name not in sigs:
                    raise InvalidOperandError(f"{name} must not be given: the Matmul was "
                                              "created without it")
                if op.package != sigs[name][3]:
                    raise OperandPackageError(
                        f"{name} must come from the planned operand's package "
                        f"({sigs[name][3]}), got a {op.package} operand")
                got = _signature(op)
                if got != sigs[name]:
                    raise signature_mismatch(name, sigs[name], got)
                if name == "c" and self.options.inplace:
                    check_inplace_target(op, "c")
                need = self._alignments.get(name)
                if need is not None and alignment(op.ptr) < need:
                    raise alignment_error(name, alignment(op.ptr), need)
        if ops is None:
            if len(new) != len(sigs):
                raise IncompleteResetError("reset_operands() after release_operands() needs "
                                           f"{', '.join(sigs)}")
            missing = [k for k in self._binding.missing_inputs() if k not in (inputs or {})] \
                if self._binding is not None else []
            if missing:
                raise IncompleteResetError("reset_operands() after release_operands() needs "
                                           f"epilog_inputs {missing}")
            ops = new
        else:
            ops.update(new)
        self._ops = ops
        if self._host:
            st = self._staged
            for k, op in new.items():
                st[k] = self._stage(k, op)
        if alpha is not None and (check or alpha != self._alpha):  # buffers change on change
            self.alpha = alpha
        if beta is not None and "c" not in self._signatures:  # as nvmath-python
            beta = ignored(self._log, "beta", beta)
        if beta is not None and (check or beta != self._beta):
            self.beta = beta
        if scales is not None and not self._types["fp8"]:  # as __init__: ignored
            ignored(self._log, "quantization_scales", scales)
        elif scales is not None:
            sc = coerce_options(scales, MatmulQuantizationScales, "quantization_scales")
            self._scale_ops, self._scales = self._check_scales(sc), sc
        if inputs is not None:
            self._binding.reset_inputs(inputs, check)
        if stream is not None:
            self._set_stream(stream)
        self._refresh_fast()

    def release_operands(self) -> None:
        """Drop references to the operands, the epilog inputs and the stream object
        (``reset_operands`` binds new ones; runs then use the package's current stream unless
        it is given a ``stream``)."""
        self._require_valid("release_operands")
        self._ops = None
        self._fast = None
        if self._host:
            self._staged = {}
        self._stream = self._stream_ptr = None
        if self._binding is not None:
            self._binding.release_inputs()
        if self._engine is not None:  # the stream may be destroyed now: an event stands for it
            self._engine.res.mark()

    # ---------------------------------------------------------------- plan
    def plan(self, *, preferences=None, algorithms=None, epilog=None, epilog_inputs=None,
             stream=None):
        """Plan the matmul; returns the algorithms (heuristic order; the CPU has one).

        ``epilog_inputs`` as for :func:`~cuweave.linalg.advanced.matmul`: a bias of ``(M,)``
        or ``(M, 1)`` is added to every column (nvmath's meaning, also when ``M == N``);
        EXT: ``(1, N)`` adds a bias to every row (torch ``Linear``'s convention)."""
        self._require_valid("plan")
        if self._ops is None:
            raise InvalidStateError("plan() needs operands: call reset_operands() first")
        t0 = time.perf_counter()
        if algorithms is not None:
            if isinstance(algorithms, Algorithm) or not isinstance(algorithms, list | tuple):
                raise AlgorithmTypeError(
                    f"algorithms must be None or a list of Algorithm objects, got {algorithms!r}")
            if not algorithms:
                raise InvalidOptionError("algorithms must be None or a non-empty list of Algorithm "
                                         f"objects, got {algorithms!r}")
            for i, alg in enumerate(algorithms):
                if not isinstance(alg, Algorithm):
                    raise AlgorithmTypeError(f"algorithms[{i}] must be an Algorithm from "
                                             f"Matmul.plan/algorithms, got {alg!r}")
        if stream is not None:
            self._set_stream(stream)
        prefs = self._prefs = coerce_options(preferences, MatmulPlanPreferences, "preferences")
        spec = validate_epilog(epilog_spec(epilog), dtype=self._types["d"])
        if epilog is None and epilog_inputs is not None:  # as nvmath-python: ignored
            epilog_inputs = ignored(self._log, "epilog_inputs", epilog_inputs)
        epilog_inputs, aux_scale = split_aux_scale(epilog_inputs)
        aux_type = prefs.epilog.aux_type
        check_fp8_aux(prefs, spec, self._types)
        self._aux_scale = check_aux_scale(aux_scale, aux_type, self._place,
                                          required=bool(spec.outputs) and spec.aux_output
                                          is not None and AUX_FORMATS[spec.aux_output].typed)
        inputs = {k: wrap_operand(v, f"epilog_inputs[{k!r}]")
                  for k, v in validate_epilog_inputs(spec, epilog_inputs).items()}
        check_aux_input_dtype(spec, inputs, self._types, prefs)
        p0 = self._problem
        forced = frame_constraints(spec, inputs, p0.user_m, p0.user_n, p0.batch_shape,
                                   self._types["d"]) if inputs or spec.outputs else {}
        self._bgrad = spec.name.lower() if spec.layout_requirement else None
        p = self._problem = self._analyze(forced)
        if self._bgrad and not self._on_cpu:
            p = self._problem = fit_bgrad_layout(self, spec, p, forced)
        self._binding = EpilogBinding(spec, epilog_inputs, p, self._types, self._ops, prefs)
        if self._engine is not None:
            self._engine.free()
            self._engine = None
        if self._on_cpu:
            self._algorithms = [Algorithm.cpu()]
        else:
            self._algorithms = self._plan_cuda(spec, p, prefs, algorithms)
            self._engine.set_scalars(self._alpha, self._beta)
            self._run, lean = build_run(self)
            self._fast_run = self._run if lean else None
            self._stream_ptr = (None if self._stream is None else
                                self._resolve_stream(self._stream))
        self._mark_planned()
        self._refresh_fast()
        if self._log.isEnabledFor(20):
            self._log.info("planned %s (lt m=%d n=%d k=%d, batch %d, %s result) on %s in "
                           "%.2f ms: %d algorithm(s)", spec.name, p.m, p.n, p.k, p.batch_count,
                           "row-major" if p.swap else "column-major", self.execution_space,
                           (time.perf_counter() - t0) * 1e3, len(self._algorithms))
        return list(self._algorithms)

    def _plan_cuda(self, spec, p, prefs, algorithms):
        from ..._bindings import cublaslt as lt
        from . import _cuda

        validate_epilog(spec, dtype=self._types["d"], k=p.k, batched=p.batch_count > 1,
                        version=lt.get_version())
        if p.c_broadcast and not self._host and not self._adapter.can_broadcast:
            from ..._internal.errors import UnsupportedLayoutError

            raise UnsupportedLayoutError(
                f"c must be a full (M, N) matrix in a cuBLASLt layout for {self._package} "
                "operands (broadcasting c needs torch or CuPy), got a broadcast/strided c")
        _check_lt_layout(self._binding.lt, spec, p)
        self._engine = _cuda.CudaEngine(self._device_id, self._package, self._host, self.options)
        lt_align = self._plan_alignments(p)
        cached = None
        if algorithms is None and _autotune_cache.enabled():
            algorithms = cached = _autotune_cache.lookup(self._device_id, self._cache_key(spec))
        plan = functools.partial(self._engine.plan, p, self._types, self._binding.lt,
                                 self._binding, prefs, alignments=lt_align)
        self._from_tune_cache = False
        if cached is None:
            return plan(list(algorithms) if algorithms is not None else None)
        try:
            planned = plan(list(cached))
            self._from_tune_cache = True  # autotune() then reuses the stored timing
            return planned
        except CublasLtError as e:  # a stale entry (another library build, layout, ...)
            self._log.info("autotune cache: the stored algorithms were rejected (%s); running "
                           "the heuristics", e)
            return plan(None)

    def _plan_alignments(self, p) -> dict:
        """Pointer alignments (bytes, <= 256) the heuristics may assume, in the lt frame;
        records the user operands' in ``_alignments`` (checked by ``reset_operands``)."""
        ops = self._ops
        self._alignments = {} if self._host else {k: alignment(op.ptr) for k, op in ops.items()}
        user = dict.fromkeys(("a", "b", "c"), 256)  # staged buffers and new results: 256
        user.update(self._alignments)
        x, y = p.lt_users
        d = user["c"] if self.options.inplace else 256
        c = user["c"] if p.c is not None else d
        return {"a": user[x], "b": user[y], "c": c, "d": d}

    def _cache_key(self, spec):
        p, t, o = self._problem, self._types, self.options
        prefs = getattr(self, "_prefs", None)
        aux_type = prefs.epilog.aux_type if prefs is not None else None
        x, y = p.lt_users  # the dtypes of cuBLASLt's A and B, next to their layouts
        return repr((p.a, p.b, p.d, p.c, p.m, p.n, p.k, p.batch_count, t[x], t[y], t["c"],
                     t["c_layout"], t["d"], int(t["compute"]), int(t["scale"]),
                     int(self._binding.lt.epilog), bool(o.fast_accumulation),
                     o.sm_count_target or 0, aux_type))

    def applicable_algorithm_ids(self, limit: int = 8) -> list[int]:
        """Algorithm ids cuBLASLt has for this problem's types (the CPU: ``[-1]``)."""
        self._require_valid("applicable_algorithm_ids")
        if self._on_cpu:
            return [-1]
        from ..._bindings import cublaslt as lt
        from ..._bindings.library_types import DATA_TYPE
        from ._cuda import handle_for

        t = self._types
        x, y = self._problem.lt_users  # cuBLASLt's A and B (swapped: the user's b is A)
        return lt.algo_get_ids(handle_for(self._device_id), t["compute"], t["scale"],
                               DATA_TYPE[t[x]], DATA_TYPE[t[y]],
                               DATA_TYPE[t["c_layout"]], DATA_TYPE[t["d"]], limit)

    # ---------------------------------------------------------------- autotune
    def autotune(self, iterations: int = 10, prune=None, release_workspace: bool = False,
                 stream=None):
        """Time every planned algorithm and reorder :attr:`algorithms` fastest first; with
        ``prune=N`` only the fastest ``N`` are kept.

        With the persistent autotune cache on (:func:`enable_autotune_cache`), a plan whose
        algorithms came from it is already in timed order: nothing is timed again."""
        self._require_planned("autotune")
        if not isinstance(iterations, int) or iterations < 1:
            raise InvalidOptionError(f"iterations must be a positive int, got {iterations!r}")
        if prune is not None and (not isinstance(prune, int) or isinstance(prune, bool) or
                                  prune < 1):
            raise InvalidOptionError(f"prune must be None or a positive int, got {prune!r}")
        if self._on_cpu:
            self._log.info("autotune: nothing to tune on the CPU (one NumPy BLAS algorithm)")
            return list(self._algorithms)
        if self._from_tune_cache:
            self._log.info("autotune: the plan's algorithms come timed from the autotune cache")
            if prune is not None:
                self._algorithms = self._algorithms[:prune]
            if release_workspace:
                self._engine.release_workspace()
            return list(self._algorithms)
        given = self._resolve_stream(stream)  # None: the current stream, read by the run
        s = given if given is not None else self._adapter.stream_getter(self._device_id)()
        keep = []  # the run's result and aux outputs stay alive while they are written

        def bind():  # the one run, bound but not called: the engine times the call
            return self._run(self, given, None,
                             tune=lambda a, b, c, d, out: keep.append(out) or (a, b, c, d))

        try:
            algos = self._engine.autotune(bind, iterations, prune, s, self._log)
        except BaseException:
            if self._host:  # the bound run's direct uploads may still read the operands
                cuda.settle(s)
            raise
        self._algorithms = algos
        if _autotune_cache.enabled():
            _autotune_cache.store(self._device_id, self._cache_key(self._binding.spec), algos)
        if release_workspace:
            self._engine.release_workspace()
        return list(algos)

    # ---------------------------------------------------------------- execute
    def _refresh_fast(self) -> None:
        """Let ``execute()`` call the lean run directly while operands are bound and runs use
        the current stream."""
        ok = self._ops is not None and self._stream_ptr is None and not self._freed
        self._fast = self._fast_run if ok else None

    def _resolve_stream(self, stream) -> int | None:
        """The stream handle of a run (``None``: the package's current one, read by the run)."""
        if stream is None:
            return self._stream_ptr
        return resolve_stream(stream, package=self._package,
                              device_id=self._device_id or 0).ptr

    def execute(self, *, algorithm=None, release_workspace: bool = False, stream=None):
        """Run the planned matmul; returns the result (and an aux dict for aux epilogs)."""
        fast = self._fast
        if fast is not None and algorithm is None and stream is None and not release_workspace:
            return fast(self)
        self._require_planned("execute")
        if self._ops is None:
            raise InvalidStateError("execute() after release_operands(): call "
                                    "reset_operands() first")
        if algorithm is not None:
            _check_algorithm(algorithm)
            if algorithm not in self._algorithms:
                raise InvalidOptionError(
                    f"algorithm must be one of the planned algorithms (Matmul.algorithms), got "
                    f"{algorithm!r}")
        if not self._on_cpu:
            out = self._run(self, self._resolve_stream(stream), algorithm)
            if release_workspace:
                self._engine.release_workspace()
            return out
        if stream is not None:
            resolve_stream(stream, package=self._package)  # validates
        result, aux = self._execute_cpu()
        squeezed = self._problem.squeeze
        if squeezed and not self.options.inplace:  # in place: the result is c itself
            result = squeeze(result, squeezed)
        if self._adapter.deliver is not None:
            result, aux = deliver_results(self._adapter.deliver, result, aux)
        return (result, aux) if aux else result

    def _new_result(self, stream, pinned=False):
        """The run's result (``c`` in place); ``pinned``: a host result a GPU run downloads
        into (page-locked where the pool allows)."""
        p, ref = self._problem, self._ops["a"]
        if self.options.inplace:
            return self._ops["c"]
        return empty(ref, p.result_shape, self._types["d"], perm=p.result_perm,
                     device_id=self._device_id, stream=stream, allocator=None, pinned=pinned)

    def _new_aux(self, stream, host: bool) -> dict:
        aux = {}
        for user, ltname, shape, strides, dtype in self._binding.outputs:
            perm = perm_from_strides(shape, strides)
            ref = self._ops["a"]
            aux[ltname] = (user, empty(ref, shape, dtype, perm=perm, device_id=self._device_id,
                                       stream=stream))
        return aux

    def _execute_cpu(self):
        from ._cpu import execute_cpu

        p, t, ops = self._problem, self._types, self._ops
        arrays = {k: self._stage(k, op)[0] for k, op in ops.items()}
        res = self._new_result(0)
        # in place: the problem was analyzed on c's staged (dense) layout; a non-dense c is
        # computed in that copy and written back through the user's own view below
        d_arr = arrays["c"] if self.options.inplace else res.host_array()
        count = p.batch_count
        a = host_view(arrays["a"] if not p.swap else arrays["b"], p.a, count)
        b = host_view(arrays["b"] if not p.swap else arrays["a"], p.b, count)
        d = host_view(d_arr, p.d, count)
        c = None
        if "c" in arrays:
            full = p.batch_shape + (p.user_m, p.user_n)
            cv = np.broadcast_to(arrays["c"], full).reshape((count, p.user_m, p.user_n))
            c = cv.swapaxes(-1, -2) if p.swap else cv
        conj_a, conj_b = (self._conj if not p.swap else self._conj[::-1])
        bind = self._binding
        bias = aux_in = None
        if bind.spec.bias:
            bv = bind.inputs["bias"].host_array()
            bias = bv.reshape(-1, p.m)
        if bind.spec.aux_input:
            aux_in = bind.inputs[bind.spec.aux_input].host_array()
        aux = self._new_aux(0, True)
        aux_out = {k: _batched_view(v[1].host_array(), count) for k, v in aux.items()}
        alpha, beta = self.alpha, self.beta
        sd = 1.0
        if t["fp8"]:
            sc = self._scale_ops
            sa, sb, scc, sd = (scale_value(sc[k]) if k in sc else 1.0 for k in "abcd")
            alpha, beta = alpha * sa * sb * sd, beta * scc * sd
        execute_cpu(a, b, c, d, alpha=alpha, beta=beta, epilog=bind.lt, bias=bias,
                    aux_in=aux_in, aux_out=aux_out,
                    dtypes=self._cpu_dtypes(p, t, bind),
                    compute_type=t["compute"], conj_a=conj_a, conj_b=conj_b,
                    num_threads=self._space.num_threads,
                    aux_scale=None if self._aux_scale is None else scale_value(self._aux_scale))
        if self.options.inplace and d_arr.ctypes.data != ops["c"].ptr:  # a staged copy
            np.copyto(ops["c"].host_array(), d_arr)
        out = {user: arr.obj for user, arr in aux.values()}
        from ..._internal.dtypes import to_float32

        if self.options.result_amax:
            out["result_amax"] = np.float32(np.max(np.abs(to_float32(d_arr, t["d"])),
                                                   initial=0.0) / (sd if sd else 1.0))
        if self._prefs.epilog.aux_amax:  # checked: an fp8 gelu_aux, stored scaled
            name = bind.spec.aux_output
            su = scale_value(self._aux_scale) if self._aux_scale is not None else 1.0
            out[f"{name}_amax"] = np.float32(np.max(np.abs(to_float32(
                aux[name][1].host_array(), str(aux[name][1].dtype))), initial=0.0) / (su or 1.0))
        self._remember_aux(aux)
        return res.obj, out

    @staticmethod
    def _cpu_dtypes(p, t, bind) -> dict:
        """Storage dtypes of the CPU run's arrays in the lt frame: C's is the layout type
        (fp8 results: float16 by default), the bias's and aux's the bound/planned ones."""
        dtypes = {"a": t["a"] if not p.swap else t["b"], "b": t["b"] if not p.swap else t["a"],
                  "c": t["c"] or t["c_layout"], "d": t["d"]}
        if bind.spec.bias:
            dtypes["bias"] = bind.inputs["bias"].dtype
        if bind.spec.aux_input:
            dtypes["aux_in"] = bind.inputs[bind.spec.aux_input].dtype
        for _user, ltname, _shape, _strides, dtype in bind.outputs:
            dtypes[ltname] = dtype
        return dtypes

    def _remember_aux(self, aux) -> None:
        for user, op in aux.values():
            if user == self._binding.spec.aux_output:
                remember_aux_frame(op.obj, op.ptr, op.shape, self._problem.swap)

    # ---------------------------------------------------------------- cleanup
    def _release(self) -> None:
        self._fast = self._fast_run = self._run = None
        if self._engine is not None:
            self._engine.free()
            self._engine = None
        self._ops = None
        self._staged = {}
