"""A planned matrix product (:class:`Plan`) and one execution of it (:class:`Call`).

``plan.run(call)`` is the only way a product is executed: :class:`~.matmul.Matmul` holds one
plan and its current call, the function form :func:`~._function.matmul` takes a cached plan
and runs a fresh call. A plan is made once from a :class:`~._spec.Spec` and the epilog; what it
holds does not change after (its prepared launch, the cuBLASLt argument list, is patched by
each run with the call's pointers, which is why one plan serves one caller at a time).
"""

from __future__ import annotations

import functools

from ..._internal.arrays import ALIGNMENT, Operand
from ..._internal.errors import CublasLtError, InvalidOptionError
from ..._internal.options import coerce_options
from . import _autotune_cache
from ._algorithm import Algorithm
from ._binding import EpilogBinding, check_aux_input_dtype, frame_constraints, wrap_inputs
from ._epilogs import AUX_FORMATS, epilog_spec, validate_epilog
from ._fit import fit_bgrad_layout, refit, stage
from ._layout import _check_lt_layout
from ._options import MatmulPlanPreferences
from ._run import build_run
from ._spec import (
    AlgorithmTypeError,
    _check_algorithm,
    check_fp8_aux,
    ignored,
    split_aux_scale,
)

__all__ = ["Plan", "Call", "UNIT", "make_plan", "plan_inputs", "algorithm_ids"]

#: the scalars ``(alpha, beta)`` of a call that gives none
UNIT = (1.0, 0.0)
_NONE: dict = {}


class Call:
    """The operands, stream and scalars of one execution of a :class:`Plan`.

    ``a`` and ``b`` are the device pointers of the user's ``a`` and ``b`` (unused for host
    operands); ``ops`` the operand records by name (``None`` for a function-form call of two
    plain torch/CuPy device arrays whose plan needs no record: ``plan.needs_records``);
    ``stream`` a resolved handle, or ``None`` for the package's current stream; ``scalars``
    ``(alpha, beta)``. The optional parts default to nothing: ``inputs`` (epilog inputs by
    name), ``scales`` (fp8 scales, :meth:`Spec.scales`), ``aux_scale`` (the fp8 aux output's
    scale) and ``staged`` (host operands: ``{name: (host array, strides)}``, :func:`._fit.stage`).
    """

    inputs = _NONE
    scales = _NONE
    aux_scale = None
    staged = None

    def __init__(self, a, b, ops=None, stream=None, scalars=UNIT):
        self.a = a
        self.b = b
        self.ops = ops
        self.stream = stream
        self.scalars = scalars

    @classmethod
    def of(cls, ops: dict, stream=None, scalars=UNIT, inputs=None, scales=None,
           aux_scale=None):
        """A call on the operand records ``ops`` (name -> Operand)."""
        call = cls(ops["a"].ptr, ops["b"].ptr, ops, stream, scalars)
        if inputs:
            call.inputs = inputs
        if scales:
            call.scales = scales
        if aux_scale is not None:
            call.aux_scale = aux_scale
        return call

    def copy(self, **changes) -> Call:
        """This call with ``changes`` (field -> value)."""
        new = Call(self.a, self.b, self.ops, self.stream, self.scalars)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new


def plan_inputs(spec, epi, prefs, epilog_inputs, aux_scale):
    """``(inputs, aux scale)`` of a plan for the epilog ``epi``: the epilog inputs validated
    and wrapped, the fp8 aux output's scale checked (and required where the aux output is
    fp8), after the epilog's fp8 rules."""
    types = spec.types
    check_fp8_aux(prefs, epi, types)
    aux_type = prefs.epilog.aux_type
    typed = (bool(epi.outputs) and epi.aux_output is not None
             and AUX_FORMATS[epi.aux_output].typed)
    aux_scale = spec.aux_scale(aux_scale, aux_type, required=typed)
    inputs = wrap_inputs(epi, epilog_inputs)
    check_aux_input_dtype(epi, inputs, types, prefs)
    return inputs, aux_scale


def make_plan(spec, ops, *, preferences=None, epilog=None, epilog_inputs=None,
              algorithms=None):
    """``(plan, inputs, aux scale)``: the arguments of a plan checked (in nvmath-python's
    order), the epilog inputs wrapped once, and the :class:`Plan` of ``ops`` made."""
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
        algorithms = list(algorithms)
    prefs = coerce_options(preferences, MatmulPlanPreferences, "preferences")
    epi = validate_epilog(epilog_spec(epilog), dtype=spec.types["d"])
    if epilog is None and epilog_inputs is not None:  # as nvmath-python: ignored
        epilog_inputs = ignored(spec.log, "epilog_inputs", epilog_inputs)
    epilog_inputs, aux_scale = split_aux_scale(epilog_inputs)
    inputs, aux_scale = plan_inputs(spec, epi, prefs, epilog_inputs, aux_scale)
    return Plan(spec, ops, epi, inputs, prefs, algorithms), inputs, aux_scale


def algorithm_ids(spec, problem, limit: int) -> list[int]:
    """Algorithm ids cuBLASLt has for the types of ``spec`` in ``problem``'s frame."""
    from ..._bindings import cublaslt as lt
    from ..._bindings.library_types import DATA_TYPE
    from ._cuda import handle_for

    t = spec.types
    x, y = problem.lt_users  # cuBLASLt's A and B (swapped: the user's b is A)
    return lt.algo_get_ids(handle_for(spec.device_id), t["compute"], t["scale"],
                           DATA_TYPE[t[x]], DATA_TYPE[t[y]], DATA_TYPE[t["c_layout"]],
                           DATA_TYPE[t["d"]], limit)


class Plan:
    """A matrix product planned for one :class:`~._spec.Spec` and epilog.

    Made by ``Plan(spec, ops, epilog_spec, inputs, prefs, algorithms)`` where ``ops`` and
    ``inputs`` are the wrapped operands and epilog inputs it is planned for (their layouts,
    alignments and, for a square result, the aux input's frame), checked by
    :func:`plan_inputs`.
    ``run(call, algorithm=None, tune=None)`` executes it (:mod:`._run`).
    """

    def __init__(self, spec, ops, epi, inputs, prefs, algorithms):
        self.spec = spec
        self.prefs = prefs
        types = spec.types
        p0 = spec.fit.problem
        forced = frame_constraints(epi, inputs, p0.user_m, p0.user_n, p0.batch_shape,
                                   types["d"]) if inputs or epi.outputs else {}
        bgrad = epi.name.lower() if epi.layout_requirement else None
        kw = {"host": spec.host, "conj": spec.conj, "inplace": spec.options.inplace,
              "fp8": types["fp8"]}
        fit = refit(spec.fit, ops, forced, bgrad, **kw)
        if bgrad and not spec.on_cpu:
            fit = fit_bgrad_layout(fit, ops, epi, forced, can_copy=spec.adapter.can_copy,
                                   log=spec.log, **kw)
        self.fit = fit
        p = self.problem = fit.problem
        self.binding = EpilogBinding(epi, inputs, p, types, ops, prefs)
        self.epilog = epi
        #: user operand -> pointer alignment the plan assumes (device operands)
        self.alignments = {}
        self.engine = None
        self.from_tune_cache = False  # the algorithms came timed from the autotune cache
        #: a template of the operands' package and memory space (results are made like it)
        self.ref = Operand(None, spec.package, 0, (), (), "float32", spec.place[0],
                           spec.place[1])
        try:
            if spec.on_cpu:
                self.algorithms = [Algorithm.cpu()]
            else:
                self.algorithms = self._plan_cuda(ops, algorithms)
            #: the run of this plan; ``lean``: no optional step (the common case)
            self.run, self.lean = build_run(self)
        except BaseException:
            self.free()
            raise
        #: a call must carry operand records (else two pointers do: ``Call.ops`` is None)
        self.needs_records = bool(spec.host or spec.on_cpu or fit.dev_copies or "c" in ops)

    # ---- CUDA ---------------------------------------------------------------------------
    def _plan_cuda(self, ops, algorithms):
        from ..._bindings import cublaslt as lt
        from . import _cuda

        spec, p, epi = self.spec, self.problem, self.epilog
        # what nothing can refuse first: the operands' alignments, the autotune cache's key
        lt_align = self._alignments(ops)
        tuned = algorithms is None and _autotune_cache.enabled()
        tune_key = self.cache_key() if tuned else None
        validate_epilog(epi, dtype=spec.types["d"], k=p.k, batched=p.batch_count > 1,
                        version=lt.get_version())
        if p.c_broadcast and not spec.host and not spec.adapter.can_broadcast:
            from ..._internal.errors import UnsupportedLayoutError

            raise UnsupportedLayoutError(
                f"c must be a full (M, N) matrix in a cuBLASLt layout for {spec.package} "
                "operands (broadcasting c needs torch or CuPy), got a broadcast/strided c")
        _check_lt_layout(self.binding.lt, epi, p)
        self.engine = _cuda.CudaEngine(spec.device_id, spec.package, spec.host, spec.options)
        cached = None
        if tuned:
            algorithms = cached = _autotune_cache.lookup(spec.device_id, tune_key)
        plan = functools.partial(self.engine.plan, p, spec.types, self.binding.lt,
                                 self.binding, self.prefs, alignments=lt_align)
        if cached is None:
            return plan(list(algorithms) if algorithms is not None else None)
        try:
            planned = plan(list(cached))
            self.from_tune_cache = True  # autotune() then reuses the stored timing
            return planned
        except CublasLtError as e:  # a stale entry (another library build, layout, ...)
            spec.log.info("autotune cache: the stored algorithms were rejected (%s); running "
                          "the heuristics", e)
            return plan(None)

    def _alignments(self, ops) -> dict:
        """Pointer alignments (bytes, <= 256) the heuristics may assume, in cuBLASLt's frame;
        records the user operands' in :attr:`alignments` (checked at each reset)."""
        if not self.spec.host:
            self.alignments = {k: ALIGNMENT[op.ptr & 255] for k, op in ops.items()}
        user = dict.fromkeys(("a", "b", "c"), 256)  # staged buffers and new results: 256
        user.update(self.alignments)
        x, y = self.problem.lt_users
        d = user["c"] if self.spec.options.inplace else 256
        c = user["c"] if self.problem.c is not None else d
        return {"a": user[x], "b": user[y], "c": c, "d": d}

    def cache_key(self) -> str:
        """The persistent autotune cache's key of this problem."""
        p, t, o = self.problem, self.spec.types, self.spec.options
        x, y = p.lt_users  # the dtypes of cuBLASLt's A and B, next to their layouts
        return repr((p.a, p.b, p.d, p.c, p.m, p.n, p.k, p.batch_count, t[x], t[y], t["c"],
                     t["c_layout"], t["d"], int(t["compute"]), int(t["scale"]),
                     int(self.binding.lt.epilog), bool(o.fast_accumulation),
                     o.sm_count_target or 0, self.prefs.epilog.aux_type))

    def autotune(self, call, iterations: int, prune, release_workspace: bool) -> list:
        """Time the algorithms on ``call``'s operands and keep them fastest first."""
        from ..._internal import cuda

        spec, log = self.spec, self.spec.log
        if spec.on_cpu:
            log.info("autotune: nothing to tune on the CPU (one NumPy BLAS algorithm)")
            return list(self.algorithms)
        if self.from_tune_cache:
            log.info("autotune: the plan's algorithms come timed from the autotune cache")
            if prune is not None:
                self.algorithms = self.algorithms[:prune]
        else:
            s = call.stream
            if s is None:
                s = spec.adapter.stream_getter(spec.device_id)()
            keep = []  # the run's result and aux outputs stay alive while they are written

            def bind():  # the one run, bound but not called: the engine times the call
                return self.run(call, None, lambda a, b, c, d, out: keep.append(out) or
                                (a, b, c, d))

            try:
                self.algorithms = self.engine.autotune(bind, iterations, prune, s, log)
            except BaseException:
                if spec.host:  # the bound run's direct uploads may still read the operands
                    cuda.settle(s)
                raise
            if _autotune_cache.enabled():
                _autotune_cache.store(spec.device_id, self.cache_key(), self.algorithms)
        if release_workspace:
            self.engine.release_workspace()
        return list(self.algorithms)

    # ---- calls --------------------------------------------------------------------------
    def check_algorithm(self, algorithm) -> None:
        """``algorithm`` must be one of the planned ones."""
        _check_algorithm(algorithm)
        if algorithm not in self.algorithms:
            raise InvalidOptionError(
                f"algorithm must be one of the planned algorithms (Matmul.algorithms), got "
                f"{algorithm!r}")

    def check_alignment(self, name: str, op) -> None:
        """A device operand at least as aligned as the planned one."""
        need = self.alignments.get(name)
        if need is not None and ALIGNMENT[op.ptr & 255] < need:
            from ._spec import alignment_error

            raise alignment_error(name, ALIGNMENT[op.ptr & 255], need)

    def stage(self, ops) -> dict | None:
        """The staged host arrays of host operands ``ops`` (``None``: device operands)."""
        return stage(self.fit, ops) if self.spec.host else None

    @property
    def workspace_size(self) -> int:
        return self.engine.workspace_size if self.engine is not None else 0

    def forget_stream(self) -> None:
        """The last call's stream may be destroyed now: an event stands for it."""
        if self.engine is not None:
            self.engine.res.mark()

    def release_workspace(self) -> None:
        if self.engine is not None:
            self.engine.release_workspace()

    def free(self) -> None:
        """Destroy the descriptors and return the buffers."""
        engine, self.engine = self.engine, None
        self.run = None
        if engine is not None:
            engine.free()
