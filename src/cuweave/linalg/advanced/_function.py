"""The function form :func:`matmul`: a planned :class:`Matmul` per operand layout, cached.

A call wraps its operands, looks the plan up in :data:`plan_cache` (an LRU bounded by count
and workspace bytes), rebinds the operands and executes. For torch/CuPy device arrays with
nothing but ``alpha`` and ``epilog`` given, the key is read straight off the arrays and a hit reuses
the cached plan's operand records (no wrapping): the call is then the planned execute plus
about a microsecond.
"""

from __future__ import annotations

import numpy as np

from ..._internal.cache import PlanCache
from ..._internal.packages import PAIR_PROBERS, pair_prober, wrap_operand
from ._binding import _input_name
from ._checks import (
    _check_algorithm,
    _freeze,
    _input_key,
    _op_key,
    _scalar,
    ignored,
    split_aux_scale,
)
from ._epilogs import epilog_spec, validate_epilog_inputs
from .matmul import Matmul, _log

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
        ``(*batch, M, 1)``). EXT: ``(1, N)`` adds it to every row (torch ``Linear``'s
        convention); a 1-D bias of length ``N != M`` also does, but when ``M == N`` a 1-D bias
        always means ``(M,)``: pass ``(1, N)`` (``bias[None, :]``) for the row form.
        The aux inputs of backward epilogs are the arrays the forward pass returned.
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
        _scalar(alpha, None, "alpha")
    if beta is not None and c is not None and type(beta) is not float:  # no c: ignored
        _scalar(beta, None, "beta")
    if (c is None and epilog_inputs is None and qualifiers is None and options is None
            and quantization_scales is None and preferences is None and algorithm is None
            and execution is None):
        # the key whatever the stream (not part of a plan): (key, pointer of a, pointer of b)
        # of torch/CuPy device arrays read off the arrays by their adapters' probes (what _key
        # holds, pointers by alignment), None for anything else; epilog is hashable here
        cls = type(a)
        try:  # known by the type (arrays of one type) or the pair of types: one subscript
            probe = PAIR_PROBERS[cls if type(b) is cls else (cls, type(b))]
        except KeyError:
            probe = pair_prober(cls, type(b))
        found = probe(a, b, epilog)
        if found is not None:
            key, pa, pb = found
            mm = plan_cache.pop(key)
            if mm is None:
                return _call(a, b, c, alpha, beta, epilog, epilog_inputs, qualifiers,
                             quantization_scales, options, preferences, algorithm, execution,
                             stream, key, True)
            spare = mm._spare_ops  # (records by name, record of a, record of b)
            lean = mm._fast_run
            if spare is None or lean is None:
                return _run_cached(mm, found, a, b, alpha, stream)
            # the key fixes the layouts and nothing else is bound: the planned records take
            # the tensors and the probed pointers (nothing wrapped), and the lean run runs, on
            # a given stream resolved first (an event then stands for it, as release_operands
            # records one)
            ops, oa, ob = spare
            oa.obj, oa.ptr, ob.obj, ob.ptr = a, pa, b, pb
            if alpha is None:
                alpha = 1.0
            try:
                s = None if stream is None else mm._resolve_stream(stream)
                if alpha != mm._alpha:
                    mm.alpha = alpha
                mm._ops = ops
                return lean(mm, s)
            finally:
                mm._ops = oa.obj = ob.obj = None  # as release_operands leaves it
                if stream is not None:
                    mm._engine.res.mark()
                plan_cache.put(key, mm, mm._engine.workspace_size)
    return _call(a, b, c, alpha, beta, epilog, epilog_inputs, qualifiers, quantization_scales,
                 options, preferences, algorithm, execution, stream, None, False)


def _ignored_inputs(epilog_inputs, options):
    """``None``: epilog inputs without an epilog are ignored with a warning (nvmath-python's
    rule), on the options' logger when one is given."""
    logger = options.get("logger") if isinstance(options, dict) else getattr(options, "logger",
                                                                             None)
    return ignored(logger or _log, "epilog_inputs", epilog_inputs)


def _call(a, b, c, alpha, beta, epilog, epilog_inputs, qualifiers, quantization_scales,
          options, preferences, algorithm, execution, stream, fast, looked_up):
    """:func:`matmul` past the cached lean run: wrap, key (``fast``: the probed key, already
    looked up and missed when ``looked_up``), plan or rebind, execute, cache."""
    mm = None
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
    key = fast
    if key is None:
        key = _key(ops, c, beta, epilog, inputs, qualifiers, quantization_scales, options,
                   preferences, execution, algorithm)
        if aux_scale is not None:  # its kind only: the value is read at each run
            key += (None if isinstance(aux_scale, int | float | np.number)
                    else _freeze(aux_scale),)
    if not looked_up:
        try:
            mm = plan_cache.pop(key)
        except TypeError:  # something unhashable: no caching
            key = None
    if mm is None:
        mm = Matmul(a, b, c, alpha=alpha, beta=beta, qualifiers=qualifiers,
                    quantization_scales=quantization_scales, options=options,
                    execution=execution, stream=stream)
        mm.plan(preferences=preferences, epilog=epilog, epilog_inputs=epilog_inputs,
                algorithms=[algorithm] if algorithm is not None else None)
    else:
        if c is not None:
            ops["c"] = mm._matrix_c(ops["c"])  # a 1-D c read as the planned matrix
        mm._rebind(ops, 1.0 if alpha is None else alpha, beta, quantization_scales, inputs,
                   None, False, aux_scale)  # the stream: release_operands() reset it
    mm._spare_ops = (ops, ops["a"], ops["b"]) if fast is not None else None
    try:
        return mm.execute(stream=stream)
    finally:
        _put_back(mm, key)

def _key(ops, c, beta, epilog, inputs, qualifiers, quantization_scales, options, preferences,
         execution, algorithm) -> tuple:
    extras = None  # everything but the operands, frozen only when something is given
    if (epilog is not None or inputs is not None or qualifiers is not None or
            quantization_scales is not None or options is not None or preferences is not None
            or execution is not None or algorithm is not None):
        extras = (_freeze(epilog),
                  None if inputs is None else tuple(sorted((k, _input_key(v, k))
                                                           for k, v in inputs.items())),
                  None if qualifiers is None else _freeze(np.asarray(qualifiers)),
                  None if quantization_scales is None else _freeze(quantization_scales),
                  None if options is None else _freeze(options),
                  None if preferences is None else _freeze(preferences),
                  None if execution is None else _freeze(execution), algorithm)
    return (_op_key(ops["a"]), _op_key(ops["b"]), _op_key(ops["c"]) if c is not None else None,
            beta is None, extras)


def _run_cached(mm, found, a, b, alpha, stream):
    """Execute the cached plan ``mm`` for ``a`` and ``b`` (``found``: their probed key and
    pointers) where the lean run does not apply (optional steps) or the plan has no operand
    records yet: the plan's operand records get the tensors (wrapped once if it was planned by
    a call that could not use the key), then the rebind and execute."""
    key, pa, pb = found
    spare = mm._spare_ops  # (records by name, record of a, record of b)
    if spare is None:
        ops = {"a": wrap_operand(a, "a"), "b": wrap_operand(b, "b")}
        spare = mm._spare_ops = (ops, ops["a"], ops["b"])
    ops, oa, ob = spare
    oa.obj, oa.ptr, ob.obj, ob.ptr = a, pa, b, pb
    mm._rebind(ops, 1.0 if alpha is None else alpha, None, None, None, None, False)
    try:
        return mm.execute(stream=stream)
    finally:
        _put_back(mm, key)

def _put_back(mm, key) -> None:
    """Release the call's operands (the records keep no tensor alive) and cache the plan."""
    mm.release_operands()
    spare = mm._spare_ops
    if spare is not None:
        spare[1].obj = spare[2].obj = None
    if key is not None:
        ws = mm._engine.workspace_size if mm._engine is not None else 0
        plan_cache.put(key, mm, ws)
