"""The one CUDA execute path of :class:`~cuweave.linalg.advanced.Matmul`, specialized at plan time.

:func:`build_run` turns a planned Matmul into one function ``run(mm, stream=None,
algorithm=None, tune=None)`` that every CUDA entry point calls (``execute()`` with or without
arguments, the function form, autotuning). Its steps are chosen once, at plan time:

=====================  ===========================================================
step                   chosen at plan time
=====================  ===========================================================
stream                 the package's current-stream getter (``stream=None``)
ordering               the object's :class:`~cuweave._internal.resources.StreamResources`
operands               device pointers, or one pipelined upload (host operands)
result                 ``c`` in place, the package's result allocator, or a staged buffer
C pointer              D, ``c``, or the workspace (a C layout of another type)
epilog pointers        bias / aux inputs, aux outputs (allocated per run)
extras                 ``c`` broadcast into D, fp8 scales and amax
finish                 download (host operands), synchronize (``blocking=True``), squeeze
=====================  ===========================================================

A step that does not apply costs one test of a constant: the common run (device operands, the
current stream, no aux outputs) is the raw ``cublasLtMatmul`` call plus the stream query, the
result allocation and three pointer patches (four where C is not D). ``tune`` (autotuning)
receives the bound pointers instead of the call.
"""

from __future__ import annotations

import numpy as np

from ..._internal import cuda
from ..._internal.packages import empty, wrap_operand
from ._binding import _A, dense_bytes, perm_from_strides, staged
from ._checks import scale_value
from ._layout import remember_aux_frame

__all__ = ["build_run", "squeeze", "deliver_results"]


def squeeze(obj, axes):
    """``obj`` with the promoted axes of 1-D operands removed."""
    if not hasattr(obj, "squeeze"):
        return obj
    for ax in sorted(axes):
        obj = obj.squeeze(ax)
    return obj


def deliver_results(deliver, out, aux):
    """``out`` and the values of ``aux`` through the adapter's ``deliver``."""
    return deliver(out), ({k: deliver(v) for k, v in aux.items()} if aux else aux)


def _flat(arr: np.ndarray) -> np.ndarray:
    """The bytes of a dense host array as they go to the device (any axis order)."""
    flat = dense_bytes(arr)
    return arr if flat is None else flat


def build_run(mm):
    """``(run, lean)`` for the planned Matmul ``mm`` (see the module docstring); ``lean``: no
    optional step applies (``execute()`` may then call ``run`` before any check)."""
    p, t, bind, eng = mm._problem, mm._types, mm._binding, mm._engine
    dev, pkg, staged_ = mm._device_id, mm._adapter, mm._host
    inplace = mm.options.inplace
    current, res, enter, call, set_pointer = (pkg.stream_getter(dev), eng.res, eng.enter,
                                              eng.call, eng.set_pointer)
    multi = eng.multi_device
    x, y = p.lt_users
    # the C pointer: 0 D itself, 1 the user's c, 2 the workspace (C layout of another type,
    # never read with beta=0)
    c_mode = 1 if p.c is not None else (2 if t["c_layout"] != t["d"] else 0)
    alloc = None if inplace or staged_ else pkg.result_allocator(p.result_shape, t["d"],
                                                                 p.result_perm, dev)
    # a result on the current stream straight from the package's callables, where it has them
    new, pointer = (alloc and pkg.result_maker(p.result_shape, t["d"], p.result_perm, dev)
                    or (None, None))
    inputs = tuple((k, _A.BIAS_POINTER if k == "bias" else _A.EPILOGUE_AUX_POINTER)
                   for k in bind.inputs)
    outputs = _output_steps(mm)
    extras = p.c_broadcast or t["fp8"]
    amax_steps = amax_outputs(mm) if t["fp8"] else ()  # (aux key, descriptor attribute)
    amax = bool(amax_steps)
    blocking = mm.options.blocking is True and not staged_
    squeezed = () if inplace else p.squeeze  # in place: the result is c itself
    # device operands in a layout cuBLASLt cannot address: a dense copy per run (_fit)
    copies = () if staged_ else tuple((k, shape, order, k == x)
                                      for k, (shape, order) in mm._dev_copies.items())
    dense_copy = pkg.dense_copy
    deliver = pkg.deliver  # results made writable, handed over as the package's arrays
    # the optional steps grouped, so that a lean run tests a few constants only
    bind_more = bool(outputs or extras)  # aux outputs; c broadcast, fp8 scales and amax
    finish = bool(staged_ or blocking or amax or squeezed or deliver)

    def run(mm, stream=None, algorithm=None, tune=None):  # mm: an argument, not a cycle
        ops = mm._ops
        if stream is None:
            s, foreign = current(), False
        else:
            s, foreign = stream, True
        if multi or s != res.last:
            enter(s)
        ptr = held = aux = state = None
        if staged_:  # host operands: one pipelined upload of every input
            ptr = _upload(mm, ops, inputs, s)
            a, b = ptr[x], ptr[y]
            out = ops["c"] if inplace else mm._new_result(0, pinned=True)
            d = ptr["c"] if inplace else eng.device_buffer("d", 0, s)
        else:
            a, b = ops[x].ptr, ops[y].ptr
            if copies:  # alive until the call is queued: the pool must not hand them out as D
                held = [dense_copy(ops[k].obj, shape, order, s, dev)
                        for k, shape, order, _ in copies]
                for (k, _, _, is_x), copy in zip(copies, held):
                    copy_ptr = wrap_operand(copy, k).ptr
                    a, b = (copy_ptr, b) if is_x else (a, copy_ptr)
            if new is not None and not foreign:  # a new result on the current stream
                out = new()
                d = pointer(out)
            elif alloc is None:  # in place: the result is c
                out, d = ops["c"].obj, ops["c"].ptr
            else:
                out, d = alloc(s, foreign)
        c = d if c_mode == 0 else (
            (ptr["c"] if staged_ else ops["c"].ptr) if c_mode == 1 else eng.workspace_ptr or 0)
        if inputs:  # set_pointer makes a library call only for a pointer that changed
            bound = mm._binding.inputs
            for k, attr in inputs:
                set_pointer(attr, ptr["in_" + k] if staged_ else bound[k].ptr)
        if bind_more:
            if outputs:
                aux = _bind_outputs(mm, outputs, s, foreign)
            if extras:
                state = {"amax_steps": amax_steps}
                _bind_extras(mm, out, d, s, state)
        if tune is not None:
            return tune(a, b, c, d, (out, aux, state, held))
        call(a, b, c, d, algorithm, s)
        if not finish:  # the copies' memory goes back to the pool in stream order, now
            return (out, aux) if aux else out
        del held
        if staged_:
            out, aux = _collect(mm, out, d, aux, state, s)
        elif blocking:
            cuda.synchronize(s)
        if amax:
            aux = aux or {}
            for key, op, _ptr in state["amax"]:
                aux[key] = op.obj
        if squeezed:
            out = squeeze(out, squeezed)
        if deliver is not None:
            out, aux = deliver_results(deliver, out, aux)
        return (out, aux) if aux else out

    lean = not (staged_ or outputs or extras or blocking or squeezed or copies)
    return (_settling(run, current) if staged_ else run), lean


def _settling(run, current):
    """``run`` on host operands, waiting for its stream when it fails (its direct uploads may
    still read the operands, which the caller may change or drop after the error)."""

    def staged_run(mm, stream=None, algorithm=None, tune=None):
        try:
            return run(mm, stream, algorithm, tune)
        except BaseException:
            if stream is None:
                try:
                    stream = current()
                except Exception:  # noqa: BLE001 - the run's own error is the one raised
                    stream = 0
            cuda.settle(stream)
            raise

    return staged_run


# ---- epilog outputs ------------------------------------------------------------------------------
def _output_steps(mm) -> tuple:
    """Per aux output: (user name, lt name, descriptor attribute, allocator or None (host),
    (shape, dtype, perm), the frame to remember or None)."""
    p, bind = mm._problem, mm._binding
    steps = []
    for user, ltname, shape, strides, dtype in bind.outputs:
        perm = perm_from_strides(shape, strides)
        is_aux = ltname == bind.lt.aux_output  # an aux matrix, else a bias gradient
        attr = _A.EPILOGUE_AUX_POINTER if is_aux else _A.BIAS_POINTER
        # frames are remembered only where a backward pass could not tell them apart
        remember = shape if is_aux and p.user_m == p.user_n else None
        alloc = None if mm._host else mm._adapter.result_allocator(shape, dtype, perm,
                                                                   mm._device_id)
        steps.append((user, ltname, attr, alloc, (shape, dtype, perm), remember))
    return tuple(steps)


def _bind_outputs(mm, outputs, s, foreign):
    """New aux outputs bound to the descriptor: ``{user: array}`` (device), or ``[(user,
    host Operand, device buffer)]`` to download (host operands)."""
    eng, swap = mm._engine, mm._problem.swap
    if not mm._host:
        aux = {}
        for user, _lt, attr, alloc, _layout, remember in outputs:
            aux[user], ptr = alloc(s, foreign)
            eng.set_pointer(attr, ptr)
            if remember is not None:
                remember_aux_frame(aux[user], ptr, remember, swap)
        return aux
    aux, ref = [], mm._ops["a"]
    for user, ltname, attr, _alloc, (shape, dtype, perm), remember in outputs:
        op = empty(ref, shape, dtype, perm=perm)
        dptr = eng.device_buffer("out_" + ltname, op.size * op.itemsize, s)
        eng.set_pointer(attr, dptr)
        aux.append((user, op, dptr))
        if remember is not None:
            remember_aux_frame(op.obj, op.ptr, remember, swap)
    return aux


# ---- host operands -------------------------------------------------------------------------------
def _upload(mm, ops, inputs, s) -> dict:
    """Every host input in one pipelined transfer: name -> device pointer."""
    p, bind = mm._problem, mm._binding
    items = [(k, _flat(arr)) for k, (arr, _) in mm._staged.items()
             if k != "c" or p.c is not None]
    items += [("in_" + k, _flat(staged(bind.inputs[k])[0])) for k, _ in inputs]
    return dict(zip([name for name, _ in items], mm._engine.upload(items, s)))


def _collect(mm, out, d, aux, state, s):
    """Download the result, aux outputs and amax of a run on host operands."""
    _download(mm, out, d, s)
    got = {}
    for user, op, dptr in aux or ():
        _download(mm, op, dptr, s)
        got[user] = op.obj
    for _key, op, ptr in (state or {}).get("amax", ()):
        _download(mm, op, ptr, s)
    return out.obj, got


def _download(mm, op, ptr, s) -> None:
    host = op.host_array()
    flat = dense_bytes(host)
    if flat is not None:
        mm._engine.download(ptr, flat, s)
        return
    tmp = np.empty(host.shape, host.dtype)
    mm._engine.download(ptr, tmp, s)
    host[...] = tmp


# ---- extras: c broadcast, fp8 --------------------------------------------------------------------
def _bind_extras(mm, out, d_ptr, s, state) -> None:
    if mm._problem.c_broadcast:
        _materialize_c(mm, out, s)
    if mm._types["fp8"]:
        _bind_fp8(mm, state, s)


def _materialize_c(mm, out, s) -> None:
    """D = broadcast(c) before the run (beta·C then reads D in place)."""
    p = mm._problem
    full = p.batch_shape + (p.user_m, p.user_n)
    if mm._host:
        host = out.host_array()
        np.copyto(host, np.broadcast_to(mm._staged["c"][0], full), casting="unsafe")
        mm._engine.upload([("d", _flat(host))], s)
        return
    mm._adapter.broadcast_into(out, mm._ops["c"].obj, full, s, mm._device_id)


def _bind_fp8(mm, state, s) -> None:
    """Scale pointers (host scales uploaded: no host pointer ever reaches cuBLASLt) and the
    amax output."""
    eng, sc = mm._engine, mm._scale_ops
    x, y = mm._problem.lt_users  # swapped: cuBLASLt's A scale is the user's b scale
    for name, attr in ((x, _A.A_SCALE_POINTER), (y, _A.B_SCALE_POINTER),
                       ("c", _A.C_SCALE_POINTER), ("d", _A.D_SCALE_POINTER)):
        v = sc.get(name)
        if v is None:
            continue
        if isinstance(v, float) or v.device == "cpu":  # host: uploaded, never passed
            host = np.array([scale_value(v)], np.float32)
            eng.set_pointer(attr, eng.upload([("scale_" + name, host)], s)[0])
        else:  # checked: float32 on the operands' device
            eng.set_pointer(attr, v.ptr)
    aux_scale = mm._aux_scale
    if aux_scale is not None:
        if isinstance(aux_scale, float) or aux_scale.device == "cpu":
            host = np.array([scale_value(aux_scale)], np.float32)
            ptr = eng.upload([("scale_aux", host)], s)[0]
        else:
            ptr = aux_scale.ptr
        eng.set_pointer(_A.EPILOGUE_AUX_SCALE_POINTER, ptr)
    state["amax"] = []
    for key, attr in state["amax_steps"]:  # chosen at plan time (build_run)
        amax = empty(mm._ops["a"], (1,), "float32", device_id=mm._device_id, stream=s)
        ptr = eng.device_buffer(key, 4, s) if mm._host else amax.ptr
        state["amax"].append((key, amax, ptr))
        eng.set_pointer(attr, ptr)


def amax_outputs(mm) -> tuple:
    """``(aux key, descriptor attribute)`` of each amax an fp8 run returns: the result's
    (``options.result_amax``) and the fp8 aux output's (``preferences.epilog.aux_amax``)."""
    out = ()
    if mm.options.result_amax:
        out += (("result_amax", _A.AMAX_D_POINTER),)
    prefs = getattr(mm, "_prefs", None)
    if prefs is not None and prefs.epilog.aux_amax:
        out += ((f"{mm._binding.spec.aux_output}_amax", _A.EPILOGUE_AUX_AMAX_POINTER),)
    return out
