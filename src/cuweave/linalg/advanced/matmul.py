"""The stateful :class:`Matmul`: a ``Plan`` (``_plan.py``) and the current ``Call``.

One lifecycle (:class:`~cuweave._internal.lifecycle.StatefulObject`): ``__init__`` validates the
operands into a ``Spec`` (``_spec.py``) and binds them in a call, ``plan`` makes the plan
(cuBLASLt descriptors and heuristics, or the CPU's NumPy run), ``execute`` runs
``plan.run(call)``, ``reset_operands`` checks new operands against the spec and binds them in
the call. The function form is ``matmul`` (``_function.py``).
"""

from __future__ import annotations

import time

import numpy as np

from ..._internal.errors import InvalidOperandError, InvalidOptionError, InvalidStateError
from ..._internal.lifecycle import StatefulObject
from ..._internal.logging import get_logger
from ..._internal.options import coerce_options
from ..._internal.overlap import check_inplace_target
from ..._internal.packages import wrap_operand
from ._binding import wrap_inputs
from ._options import MatmulOptions, MatmulQuantizationScales
from ._plan import Call, algorithm_ids, make_plan
from ._spec import (
    IncompleteResetError,
    OperandPackageError,
    Spec,
    _scalar,
    _signature,
    ignored,
    signature_mismatch,
    split_aux_scale,
)

__all__ = ["Matmul"]

_log = get_logger("linalg.advanced")


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
        A cuweave extension. Host operands default to CUDA when a GPU is usable, else the CPU.
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

    _plan = None  # the Plan (plan() makes it)
    _ready = None  # the plan's run while a call is bound: execute() calls it unchecked

    def __init__(self, a, b, /, c=None, *, alpha=None, beta=None, qualifiers=None,
                 quantization_scales=None, options=None, execution=None, stream=None):
        self.options = coerce_options(options, MatmulOptions, "options")
        self._log = self.options.logger or _log
        ops = {"a": wrap_operand(a, "a"), "b": wrap_operand(b, "b")}
        if c is not None:
            ops["c"] = wrap_operand(c, "c")
        spec = self._spec = Spec(ops, qualifiers, self.options, execution, self._log)
        alpha, beta = spec.scalars(alpha, beta, c is not None)
        self._scales, scale_ops = spec.call_scales(quantization_scales)
        s = None if stream is None else spec.stream(stream)  # validated on the CPU too
        self._stream = s  # the stream object, kept alive while the call uses it
        self._call = Call.of(ops, None if s is None or spec.on_cpu else s.ptr, (alpha, beta),
                             scales=scale_ops)
        self._call.staged = self._stage(ops)
        self._log.info("Matmul %s @ %s (%s) on %s", ops["a"].shape, ops["b"].shape,
                       spec.types["a"], spec.execution_space)

    def _stage(self, ops):
        """The staged host arrays of ``ops`` as the plan (else the spec) computes on them."""
        if not self._spec.host:
            return None
        if self._plan is not None:
            return self._plan.stage(ops)
        from ._fit import stage

        return stage(self._spec.fit, ops)

    def _bound(self, call) -> None:
        """Make ``call`` the current one (``None``: no operands bound)."""
        self._call = call
        self._ready = self._plan.run if call is not None and self._plan is not None else None

    # ---------------------------------------------------------------- properties
    @property
    def execution_space(self) -> str:
        """``"cpu"`` or ``"cuda:<id>"`` (a cuweave extension)."""
        return self._spec.execution_space

    @property
    def algorithms(self) -> list:
        """The planned algorithms (:class:`Algorithm`), a new list each time: in the
        heuristics' order after :meth:`plan`, fastest first after :meth:`autotune`. Inspect or
        configure them, save them (pickle, :meth:`Algorithm.as_numpy`) for a later
        ``plan(algorithms=...)``, or pass one to ``execute(algorithm=...)``. The CPU has a
        single algorithm. Reading it before :meth:`plan` raises
        :class:`~cuweave.InvalidStateError`."""
        self._require_planned("algorithms")
        return list(self._plan.algorithms)

    @property
    def alpha(self):
        """The scale factor of ``a @ b`` used by the next :meth:`execute` (1.0 unless given).
        Settable: a real scalar for real operands, a real or complex one for complex
        operands; it takes effect without planning again (as ``reset_operands(alpha=...)``)."""
        return self._scalars[0]

    @alpha.setter
    def alpha(self, value) -> None:
        self._require_valid("alpha")  # a freed object takes no new values
        self._set_scalars(self._check_scalar(value, "alpha"), self._scalars[1])

    @property
    def beta(self):
        """The scale factor of ``c`` used by the next :meth:`execute` (0.0 without ``c``).
        Settable like :attr:`alpha`, without planning again."""
        return self._scalars[1]

    @beta.setter
    def beta(self, value) -> None:
        self._require_valid("beta")
        self._set_scalars(self._scalars[0], self._check_scalar(value, "beta"))

    @property
    def _scalars(self):
        call = self._call
        return call.scalars if call is not None else self._kept_scalars

    _kept_scalars = (1.0, 0.0)  # the scalars while no call is bound

    def _set_scalars(self, alpha, beta) -> None:
        self._kept_scalars = (alpha, beta)
        if self._call is not None:
            self._call.scalars = self._kept_scalars

    def _check_scalar(self, value, name):
        """``value`` validated as ``__init__`` does (a real scalar for real operands)."""
        if value is None:
            raise InvalidOperandError(f"{name} must be a real or complex scalar, got None")
        value = _scalar(value, None, name)
        if isinstance(value, complex | np.complexfloating) and not self._spec.complex:
            raise InvalidOperandError(f"{name} must be real for real operands, got {value!r}")
        return value

    def _set_stream(self, stream) -> None:
        """The stream of the following runs (``None``: the package's current stream then)."""
        s = None if stream is None else self._spec.stream(stream)  # validated on the CPU too
        self._stream = s
        if self._call is not None:
            self._call.stream = None if s is None or self._spec.on_cpu else s.ptr

    # ---------------------------------------------------------------- operands
    def reset_operands(self, a=None, b=None, c=None, *, alpha=None, beta=None,
                       quantization_scales=None, epilog_inputs=None, stream=None):
        """Replace operands (positional or keyword) with arrays of the planned layout.

        Device operands must be at least as aligned as the planned ones (InvalidOperandError
        otherwise). Each new operand must come from the planned one's package and match its
        dtype, shape, strides and device. After :meth:`release_operands`, every operand (and
        every epilog input the plan needs) must be given again. Arguments left ``None`` keep
        their current values; at least one must be given.

        Parameters
        ----------
        a : array, optional
            The new ``a``.
        b : array, optional
            The new ``b``.
        c : array, optional
            The new ``c`` (only when the Matmul was created with ``c``).
        alpha : scalar, optional
            The new scale factor of ``a @ b`` (as setting :attr:`alpha`).
        beta : scalar, optional
            The new scale factor of ``c`` (as setting :attr:`beta`; ignored, with a
            warning, without ``c``).
        quantization_scales : MatmulQuantizationScales or dict, optional
            New fp8 scales (ignored, with a warning, for other operands).
        epilog_inputs : dict, optional
            New epilog inputs of the planned epilog, by name (``"bias"``, ``"relu_aux"``,
            ``"gelu_aux"``, ...; ``"aux_quantization_scale"`` for an fp8 auxiliary output),
            each matching the planned one.
        stream : optional
            CUDA stream (int handle, ``__cuda_stream__``, torch/cupy) of the following
            executions. Validated but unused with CPU execution.

        Examples
        --------
        >>> import numpy as np
        >>> from cuweave.linalg.advanced import Matmul
        >>> a, b = np.eye(2), np.arange(4.0).reshape(2, 2)
        >>> with Matmul(a, b, execution="cpu") as mm:
        ...     _ = mm.plan()
        ...     mm.reset_operands(a=2 * a, alpha=0.5)
        ...     mm.execute().tolist()
        [[0.0, 1.0], [2.0, 3.0]]
        """
        self._reset(a, b, c, alpha, beta, quantization_scales, epilog_inputs, stream, True)

    def reset_operands_unchecked(self, a=None, b=None, c=None, *, alpha=None, beta=None,
                                 quantization_scales=None, epilog_inputs=None, stream=None):
        """:meth:`reset_operands` without any check: the caller guarantees the planned
        layouts and device pointers at least as aligned as the planned ones (cuBLASLt kernels
        are chosen for the planned alignment, up to 256 bytes).

        For hot loops (a training step swapping in the next batch, say): new arrays are bound
        without validation, so an incompatible one gives wrong results or errors from the
        library rather than a clear error.

        Parameters
        ----------
        a : array, optional
            The new ``a``.
        b : array, optional
            The new ``b``.
        c : array, optional
            The new ``c``.
        alpha : scalar, optional
            The new scale factor of ``a @ b``.
        beta : scalar, optional
            The new scale factor of ``c``.
        quantization_scales : MatmulQuantizationScales or dict, optional
            New fp8 scales.
        epilog_inputs : dict, optional
            New epilog inputs of the planned epilog, by name.
        stream : optional
            CUDA stream of the following executions.
        """
        if (c is None and alpha is None and beta is None and quantization_scales is None
                and stream is None and self._repoint(a, b, epilog_inputs)):
            return
        self._reset(a, b, c, alpha, beta, quantization_scales, epilog_inputs, stream, False)

    def _repoint(self, a, b, epilog_inputs) -> bool:
        """The unchecked reset of bound device operands and epilog inputs whose arrays the
        adapter reads a plain pointer from (``Adapter.plain_pointer``: torch tensors without
        lazy negation or conjugation): the call's records take the new arrays and pointers,
        nothing is wrapped or validated again. ``False`` (nothing changed): take
        :meth:`_reset`."""
        call, pointer = self._call, self._spec.plain_pointer
        if call is None or pointer is None:
            return False
        pa = pointer(a) if a is not None else 0
        pb = pointer(b) if b is not None else 0
        if pa is None or pb is None:
            return False
        if epilog_inputs and not self._repoint_inputs(call, epilog_inputs, pointer):
            return False
        ops = call.ops
        if a is not None:
            rec = ops["a"]
            rec.obj, rec.ptr = a, pa
            call.a = pa
        if b is not None:
            rec = ops["b"]
            rec.obj, rec.ptr = b, pb
            call.b = pb
        return True

    def _repoint_inputs(self, call, epilog_inputs, pointer) -> bool:
        """:meth:`_repoint` of the epilog inputs (all or none); ``False``: take
        :meth:`_reset`, which checks the names and a square aux input's frame."""
        plan = self._plan
        if plan is None or type(epilog_inputs) is not dict:
            return False
        bound = call.inputs
        if len(epilog_inputs) != len(bound) or plan.binding.square_aux in epilog_inputs:
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

    def _reset(self, a, b, c, alpha, beta, scales, epilog_inputs, stream, check):
        self._require_valid("reset_operands")
        if check and self._call is not None and all(
                x is None for x in (a, b, c, alpha, beta, scales, epilog_inputs, stream)):
            # nvmath-python's rule (a cuweave extension: a stream alone counts)
            raise InvalidOperandError(
                "reset_operands() must be given at least one of a, b, c, alpha, beta, "
                "quantization_scales, epilog_inputs or stream, got none")
        new = {name: wrap_operand(x, name) for name, x in (("a", a), ("b", b), ("c", c))
               if x is not None}
        if "c" in new:
            new["c"] = self._spec.matrix_c(new["c"])
        inputs = None
        epilog_inputs, aux_scale = split_aux_scale(epilog_inputs)
        if epilog_inputs is not None and self._plan is not None:
            inputs = wrap_inputs(self._plan.epilog, epilog_inputs)
        self._rebind(new, alpha, beta, scales, inputs, stream, check, aux_scale)

    def _check_operand(self, name, op) -> None:
        sigs = self._spec.signatures
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
        if self._plan is not None:
            self._plan.check_alignment(name, op)

    def _rebind(self, new: dict, alpha, beta, scales, inputs, stream, check,
                aux_scale=None) -> None:
        """:meth:`reset_operands` on wrapped operands (``new``: name -> Operand)."""
        spec, plan, call = self._spec, self._plan, self._call
        if aux_scale is not None:
            aux_type = plan.prefs.epilog.aux_type if plan is not None else None
            aux_scale = spec.aux_scale(aux_scale, aux_type)
        if check:
            for name, op in new.items():
                self._check_operand(name, op)
        if call is None:
            if len(new) != len(spec.signatures):
                raise IncompleteResetError("reset_operands() after release_operands() needs "
                                           f"{', '.join(spec.signatures)}")
            missing = [] if plan is None else plan.binding.missing_inputs(inputs or {})
            if missing:
                raise IncompleteResetError("reset_operands() after release_operands() needs "
                                           f"epilog_inputs {missing}")
            call = Call.of(new, None, self._kept_scalars, scales=self._scale_ops)
            call.inputs = {}
            if self._aux_scale is not None:
                call.aux_scale = self._aux_scale
        else:
            call.ops.update(new)
            call.a, call.b = call.ops["a"].ptr, call.ops["b"].ptr
        if spec.host and new:
            call.staged = {**(call.staged or {}), **self._stage(new)}
        self._bound(call)
        if alpha is not None and (check or alpha != self.alpha):
            self.alpha = alpha
        if beta is not None and "c" not in spec.signatures:  # as nvmath-python
            beta = ignored(self._log, "beta", beta)
        if beta is not None and (check or beta != self.beta):
            self.beta = beta
        if scales is not None and not spec.types["fp8"]:  # as __init__: ignored
            ignored(self._log, "quantization_scales", scales)
        elif scales is not None:
            sc = coerce_options(scales, MatmulQuantizationScales, "quantization_scales")
            call.scales, self._scales = spec.scales(sc), sc
        if aux_scale is not None:
            call.aux_scale = aux_scale
        if inputs is not None:
            plan.binding.check_inputs(inputs, check)
            call.inputs = {**call.inputs, **inputs}
        if stream is not None:
            self._set_stream(stream)

    @property
    def _scale_ops(self):
        return self._spec.scales(self._scales)

    _aux_scale = None  # the checked fp8 aux scale of the last plan (kept across releases)

    def release_operands(self) -> None:
        """Drop references to the operands, the epilog inputs and the stream object
        (``reset_operands`` binds new ones; runs then use the package's current stream unless
        it is given a ``stream``)."""
        self._require_valid("release_operands")
        call = self._call
        if call is not None:
            self._kept_scalars = call.scalars
            self._aux_scale = call.aux_scale
        self._bound(None)
        self._stream = None
        if self._plan is not None:  # the stream may be destroyed now: an event stands for it
            self._plan.forget_stream()

    # ---------------------------------------------------------------- plan
    def plan(self, *, preferences=None, algorithms=None, epilog=None, epilog_inputs=None,
             stream=None):
        """Plan the matmul; returns the algorithms (heuristic order; the CPU has one).

        ``epilog_inputs`` as for :func:`~cuweave.linalg.advanced.matmul`: a bias of ``(M,)``
        or ``(M, 1)`` is added to every column (nvmath's meaning, also when ``M == N``);
        A cuweave extension: ``(1, N)`` adds a bias to every row (torch ``Linear``'s convention).
        Planning again replaces the plan (and its epilog).

        Parameters
        ----------
        preferences : MatmulPlanPreferences or dict, optional
            Filters of cuBLASLt's heuristics (how many algorithms, which kernels, the epilog's
            auxiliary output type). The default is ``MatmulPlanPreferences()``.
        algorithms : sequence of Algorithm, optional
            Algorithms to use instead of running the heuristics, for instance ones saved from
            an earlier autotuned plan of the same problem (same cuBLASLt version). They must
            suit this problem.
        epilog : MatmulEpilog, optional
            The function applied to the result, ``epilog(alpha * a @ b + beta * c)`` (RELU,
            GELU, BIAS, their AUX and gradient forms, ...). The default is none.
        epilog_inputs : dict, optional
            The inputs the epilog needs, by name: ``"bias"`` for the BIAS epilogs,
            ``"relu_aux"`` or ``"gelu_aux"`` (the auxiliary output of a forward RELU_AUX or
            GELU_AUX run) for the DRELU and DGELU ones. Each comes from the operands'
            package and memory space. A missing one raises an error naming it.
        stream : optional
            CUDA stream (int handle, ``__cuda_stream__``, torch/cupy) to plan on, kept for
            the following executions. Validated but unused with CPU execution.

        Returns
        -------
        list of Algorithm
            The algorithms that suit the problem, in the heuristics' order (fastest expected
            first); the CPU has one.

        Examples
        --------
        >>> import numpy as np
        >>> from cuweave.linalg.advanced import Matmul, MatmulEpilog
        >>> a, b = np.ones((2, 3)), np.ones((3, 2))
        >>> bias = np.array([1.0, -10.0])
        >>> with Matmul(a, b, execution="cpu") as mm:
        ...     algorithms = mm.plan(epilog=MatmulEpilog.RELU_BIAS,
        ...                          epilog_inputs={"bias": bias})
        ...     mm.execute().tolist()
        [[4.0, 4.0], [0.0, 0.0]]
        >>> algorithms
        [Algorithm(cpu)]
        """
        self._require_valid("plan")
        call = self._call
        if call is None:
            raise InvalidStateError("plan() needs operands: call reset_operands() first")
        t0 = time.perf_counter()
        if stream is not None:
            self._set_stream(stream)
        plan, inputs, aux_scale = make_plan(
            self._spec, call.ops, preferences=preferences, epilog=epilog,
            epilog_inputs=epilog_inputs, algorithms=algorithms)
        old, self._plan = self._plan, plan
        if old is not None:
            old.free()
        epi = plan.epilog
        call.inputs = inputs
        call.aux_scale = aux_scale
        if self._spec.host:
            call.staged = plan.stage(call.ops)
        self._bound(call)
        self._mark_planned()
        p = plan.problem
        if self._log.isEnabledFor(20):
            self._log.info("planned %s (lt m=%d n=%d k=%d, batch %d, %s result) on %s in "
                           "%.2f ms: %d algorithm(s)", epi.name, p.m, p.n, p.k, p.batch_count,
                           "row-major" if p.swap else "column-major", self.execution_space,
                           (time.perf_counter() - t0) * 1e3, len(plan.algorithms))
        return list(plan.algorithms)

    def applicable_algorithm_ids(self, limit: int = 8) -> list[int]:
        """Algorithm ids cuBLASLt has for this problem's types (the CPU: ``[-1]``).

        Parameters
        ----------
        limit : int, optional
            The largest number of ids to return. The default is 8.

        Returns
        -------
        list of int
            IDs of cuBLASLt algorithms that suit this problem's compute, scale and operand
            types (in no particular order), or ``[-1]`` with CPU execution.

        Examples
        --------
        >>> import numpy as np
        >>> from cuweave.linalg.advanced import Matmul
        >>> with Matmul(np.ones((2, 2)), np.ones((2, 2)), execution="cpu") as mm:
        ...     mm.applicable_algorithm_ids()
        [-1]
        """
        self._require_valid("applicable_algorithm_ids")
        if self._spec.on_cpu:
            return [-1]
        return algorithm_ids(self._spec, (self._plan or self._spec.fit).problem, limit)

    # ---------------------------------------------------------------- autotune
    def autotune(self, iterations: int = 10, prune=None, release_workspace: bool = False,
                 stream=None):
        """Time every planned algorithm and reorder :attr:`algorithms` fastest first; with
        ``prune=N`` only the fastest ``N`` are kept.

        With the persistent autotune cache on (:func:`enable_autotune_cache`), a plan whose
        algorithms came from it is already in timed order: nothing is timed again.

        The timings run the bound operands (results are written, as by :meth:`execute`).
        They depend on the GPU's temperature, clocks and load: on a busy or unsteady machine
        the order found may not be the best. With CPU execution there is one algorithm and
        nothing is timed.

        Parameters
        ----------
        iterations : int, optional
            How many times each algorithm is run and timed (a positive int). The default is
            10.
        prune : int, optional
            Keep only the ``prune`` fastest algorithms. The default keeps all.
        release_workspace : bool, optional
            ``True`` returns the workspace to the memory pool when autotuning ends; ``False``
            (the default) keeps it for the next call.
        stream : optional
            CUDA stream (int handle, ``__cuda_stream__``, torch/cupy) to time on (default:
            the stored stream, else the package's current one). Validated but unused with CPU
            execution.

        Returns
        -------
        list of Algorithm
            The algorithms, fastest first (also :attr:`algorithms` from now on).
        """
        self._require_planned("autotune")
        if not isinstance(iterations, int) or iterations < 1:
            raise InvalidOptionError(f"iterations must be a positive int, got {iterations!r}")
        if prune is not None and (not isinstance(prune, int) or isinstance(prune, bool) or
                                  prune < 1):
            raise InvalidOptionError(f"prune must be None or a positive int, got {prune!r}")
        call = self._call
        if stream is not None:
            s = self._spec.stream(stream).ptr
            call = call.copy(stream=s) if call is not None else None
        return self._plan.autotune(call, iterations, prune, release_workspace)

    # ---------------------------------------------------------------- execute
    def execute(self, *, algorithm=None, release_workspace: bool = False, stream=None):
        """Run the planned matmul; returns the result (and an aux dict for aux epilogs).

        Parameters
        ----------
        algorithm : Algorithm, optional
            One of :attr:`algorithms` to run with. The default is the first one (the best
            by the heuristics, or by :meth:`autotune`).
        release_workspace : bool, optional
            ``True`` returns the workspace to the memory pool when the call ends (useful when
            other work needs the memory between executions, at the cost of getting it again
            next time); ``False`` (the default) keeps it.
        stream : optional
            CUDA stream (int handle, ``__cuda_stream__``, torch/cupy) of this execution
            (default: the stored stream, else the package's current one). Validated but
            unused with CPU execution.

        Returns
        -------
        array or tuple
            The result ``epilog(alpha * a @ b + beta * c)`` in the operands' package and
            memory space; with ``options.inplace``, ``c`` itself. An epilog with auxiliary
            outputs (RELU_AUX, GELU_AUX, ...) or ``options.result_amax`` returns
            ``(result, aux)``, ``aux`` a dict of the auxiliary outputs by name.
        """
        ready = self._ready
        if (ready is not None and algorithm is None and stream is None
                and release_workspace is False):
            return ready(self._call)
        self._require_planned("execute")
        call = self._call
        if call is None:
            raise InvalidStateError("execute() after release_operands(): call "
                                    "reset_operands() first")
        plan = self._plan
        if algorithm is not None:
            plan.check_algorithm(algorithm)
        if stream is not None:
            s = self._spec.stream(stream)  # validated on the CPU too
            if not self._spec.on_cpu:
                call = call.copy(stream=s.ptr)
        out = plan.run(call, algorithm)
        if release_workspace:
            plan.release_workspace()
        return out

    # ---------------------------------------------------------------- cleanup
    def _release(self) -> None:
        self._ready = None
        plan, self._plan = self._plan, None
        if plan is not None:
            plan.free()
        self._call = None
