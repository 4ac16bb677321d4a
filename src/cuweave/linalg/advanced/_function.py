"""The function form :func:`matmul`: wrap once, key, take the cached plan, run a fresh call.

A call wraps its operands, looks the :class:`~._plan.Plan` up in :data:`plan_cache` (an LRU
bounded by count and workspace bytes; a miss makes the plan) and runs ``plan.run(Call(...))``.
For torch/CuPy device arrays with nothing but ``alpha``, ``epilog`` and ``stream`` given, the
key and the pointers are read straight off the arrays (no wrapping): the call is then the
planned execute plus about a microsecond.
"""

from __future__ import annotations

import numpy as np

from ..._internal.cache import PlanCache, plan_key
from ..._internal.errors import InvalidOperandError
from ..._internal.options import coerce_options
from ..._internal.packages import PAIR_PROBERS, pair_prober, wrap_operand
from ._binding import _input_name
from ._epilogs import epilog_spec, validate_epilog_inputs
from ._layout import aux_frames_of
from ._options import MatmulOptions
from ._plan import UNIT, Call, make_plan
from ._spec import AUX_SCALE, Spec, _check_algorithm, _scalar, ignored, split_aux_scale
from .matmul import _log

__all__ = ["matmul", "plan_cache"]

#: the function form's plan cache (bounded by count and workspace bytes)
plan_cache = PlanCache(maxsize=64, max_workspace_bytes=1 << 30)


def matmul(a, b, /, c=None, *, alpha=None, beta=None, epilog=None, epilog_inputs=None,
           qualifiers=None, quantization_scales=None, options=None, preferences=None,
           algorithm=None, execution=None, stream=None):
    """``epilog(alpha * a @ b + beta * c)`` in one call (planned objects are cached).

    The second call with operands of the same layout, dtype, package and device plans nothing:
    the planned :class:`Matmul` is taken from a process-wide LRU cache and rebound.

    Parameters
    ----------
    a, b, c, alpha, beta, qualifiers, quantization_scales, options, execution, stream
        As for :class:`Matmul`.
    epilog : MatmulEpilog, int or str, optional
        E.g. ``MatmulEpilog.RELU_BIAS`` or ``"relu_bias"``.
    epilog_inputs : dict, optional
        ``{"bias": ...}``, ``{"relu_aux": ...}`` or ``{"gelu_aux": ...}`` as the epilog needs.
        A bias is added to every column as nvmath's: ``(M,)`` or ``(M, 1)`` (batched:
        ``(*batch, M, 1)``). A cuweave extension: ``(1, N)`` adds it to every row (torch
        ``Linear``'s convention); a 1-D bias of length ``N != M`` also does, but when ``M == N`` a
        1-D bias always means ``(M,)``: pass ``(1, N)`` (``bias[None, :]``) for the row form. The
        aux inputs of backward epilogs are the arrays the forward pass returned.
    preferences : MatmulPlanPreferences or dict, optional
    algorithm : Algorithm, optional
        Use this algorithm (from :meth:`Matmul.plan`) instead of the heuristics.

    Returns
    -------
    result, or (result, aux)
        The result in the operands' package; ``aux`` (a dict) for epilogs and options with
        auxiliary outputs (``relu_aux``, ``gelu_aux``, bias gradients, ``result_amax``).

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.linalg.advanced import matmul
    >>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> b = np.ones((3, 2), np.float32)
    >>> bias = np.array([-4.0, 1.0], np.float32)        # length M: added to every column
    >>> matmul(a, b, epilog="relu_bias", epilog_inputs={"bias": bias}, execution="cpu")
    array([[ 0.,  0.],
           [13., 13.]], dtype=float32)
    >>> d, aux = matmul(a, b, epilog="relu_aux", execution="cpu")
    >>> sorted(aux), aux["relu_aux"].dtype
    (['relu_aux'], dtype('uint8'))
    """
    if epilog is not None:  # validated before keying: 2.0 or True must never hit RELU's plan
        epilog = epilog_spec(epilog).epilog
    elif epilog_inputs is not None:
        epilog_inputs = _ignored_inputs(epilog_inputs, options)
    if alpha is not None and type(alpha) is not float:  # a cached plan skips the checks
        alpha = _scalar(alpha, None, "alpha")
    if beta is not None and c is not None and type(beta) is not float:  # no c: ignored
        beta = _scalar(beta, None, "beta")
    # the key, read off torch/CuPy device arrays or built from the operands wrapped once; the
    # cached plan or a new one; a fresh call run on it; the plan goes back
    found = plan = None
    if (c is None and epilog_inputs is None and qualifiers is None and options is None
            and quantization_scales is None and preferences is None and algorithm is None
            and execution is None):
        # the key whatever the stream (not part of a plan): (key, pointer of a, pointer of b)
        # of torch/CuPy device arrays read off the arrays by their adapters' probes (the
        # operands' metadata, pointers by alignment), None for anything else
        cls = type(a)
        try:  # known by the type (arrays of one type) or the pair of types: one subscript
            probe = PAIR_PROBERS[cls if type(b) is cls else (cls, type(b))]
        except KeyError:
            probe = pair_prober(cls, type(b))
        found = probe(a, b, epilog)
        if found is not None:
            key, pa, pb = found
            plan = plan_cache.pop(key)
            if plan is not None and not plan.needs_records:
                # the key fixes the layouts and nothing else is given: a call of the two
                # probed pointers (nothing wrapped)
                s = None
                try:
                    if stream is not None:
                        s = plan.spec.stream(stream).ptr
                    return plan.run(Call(pa, pb, None, s, UNIT if alpha is None else
                                         _alpha(plan, alpha)))
                finally:
                    if s is not None:  # the stream may be destroyed now: an event stands
                        plan.forget_stream()
                    plan_cache.put(key, plan, plan.engine.workspace_size)
    ops = {"a": wrap_operand(a, "a"), "b": wrap_operand(b, "b")}
    if c is not None:
        ops["c"] = wrap_operand(c, "c")
    inputs = None
    if epilog_inputs is not None and not isinstance(epilog_inputs, dict):
        validate_epilog_inputs(epilog, epilog_inputs)  # raises: not a dict
    if algorithm is not None:
        _check_algorithm(algorithm)
    tensors, aux_scale = split_aux_scale(epilog_inputs)
    if tensors:
        inputs = {k: wrap_operand(v, _input_name(k)) for k, v in tensors.items()}
    if found is not None:
        key = found[0]
    else:  # the operands, whether beta is given, whatever else is given (an aux input also
        # by the frame its forward pass made it in, an aux scale by its kind: its value is read
        # at each run), by the one key builder
        key = plan_key(ops["a"], ops["b"], ops.get("c"), beta is None, epilog, inputs,
                       aux_frames_of(inputs), None if qualifiers is None else
                       np.asarray(qualifiers), quantization_scales, options, preferences,
                       execution, algorithm, None if aux_scale is None else "scalar"
                       if isinstance(aux_scale, int | float | np.number) else aux_scale)
        try:
            plan = plan_cache.pop(key)
        except TypeError:  # something unhashable: no caching
            key = None
    fresh = plan is None
    if fresh:  # a miss: the call's values checked, then the plan made for these operands
        plan, inputs, values = _new_plan(ops, inputs, aux_scale, epilog, epilog_inputs,
                                         qualifiers, options, preferences, algorithm,
                                         execution, alpha, beta, quantization_scales, stream)
    s = None
    try:
        spec = plan.spec
        if not fresh:  # a hit's own values, checked before it runs (its epilog inputs need
            # no check: the key holds their layouts and an aux input's frame)
            values = spec.call_values(ops, alpha, beta, quantization_scales, stream,
                                      aux_scale=aux_scale, aux_type=plan.prefs.epilog.aux_type,
                                      reread_c=True)
        scalars, scales, aux_scale, s = values
        call = Call.of(ops, None if s is None or spec.on_cpu else s.ptr, scalars, inputs,
                       scales, aux_scale)
        if spec.host:
            call.staged = plan.stage(ops)
        return plan.run(call)
    finally:
        if s is not None:
            plan.forget_stream()
        if key is not None:
            plan_cache.put(key, plan, plan.workspace_size)
        else:
            plan.free()


def _alpha(plan, alpha) -> tuple:
    """``(alpha, 0.0)``: a complex ``alpha`` only for complex operands."""
    if (type(alpha) is not float and not plan.spec.complex
            and isinstance(alpha, complex | np.complexfloating)):
        raise InvalidOperandError(f"alpha must be real for real operands, got {alpha!r}")
    return (alpha, 0.0)


def _ignored_inputs(epilog_inputs, options):
    """``None``: epilog inputs without an epilog are ignored with a warning (nvmath-python's
    rule), on the options' logger when one is given."""
    logger = options.get("logger") if isinstance(options, dict) else getattr(options, "logger",
                                                                             None)
    return ignored(logger or _log, "epilog_inputs", epilog_inputs)


def _new_plan(ops, inputs, aux_scale, epilog, epilog_inputs, qualifiers, options, preferences,
              algorithm, execution, alpha, beta, quantization_scales, stream):
    """``(plan, inputs, call values)`` of a cache miss: the spec of ``ops``, the call's values
    checked on it (:meth:`Spec.call_values`, before any work), then its plan with the epilog
    inputs (wrapped once, ``inputs``) and the aux scale (checked by the plan)."""
    opts = coerce_options(options, MatmulOptions, "options")
    spec = Spec(ops, qualifiers, opts, execution, opts.logger or _log)
    scalars, scales, _, s = spec.call_values(ops, alpha, beta, quantization_scales, stream)
    given = dict(inputs or {})  # wrapped once: the plan takes the records
    if aux_scale is not None:
        given[AUX_SCALE] = aux_scale
    plan, inputs, aux_scale = make_plan(
        spec, ops, preferences=preferences, epilog=epilog,
        epilog_inputs=given if epilog_inputs is not None else None,
        algorithms=[algorithm] if algorithm is not None else None)
    return plan, inputs, (scalars, scales, aux_scale, s)
