"""The one execute path of a :class:`~._plan.Plan`, specialized when the plan is made.

:func:`build_run` turns a plan into one function ``run(call, algorithm=None, tune=None)`` that
every entry point calls (``Matmul.execute()``, the function form, autotuning). On CUDA its steps
are chosen once, at plan time:

=====================  ===========================================================
step                   chosen at plan time
=====================  ===========================================================
stream                 the package's current-stream getter (a call without stream)
ordering               the engine's :class:`~cuweave._internal.resources.StreamResources`
scalars                written into the argument buffers when the call's change
operands               device pointers, or one pipelined upload (host operands)
result                 :func:`_allocators`: ``c`` in place, the package's result
                       allocator, or a staged buffer
C pointer              D, ``c``, or the workspace (a C layout of another type)
epilog pointers        bias / aux inputs, aux outputs (allocated per run)
extras                 ``c`` broadcast into D, fp8 scales and amax
finish                 download (host operands), synchronize (``blocking=True``), squeeze
=====================  ===========================================================

A step that does not apply costs one test of a constant: the common run (device operands, the
current stream, no aux outputs) is the raw ``cublasLtMatmul`` call plus the stream query, the
result allocation and three pointer patches (four where C is not D). ``tune`` (autotuning)
receives the bound pointers instead of the call. With CPU execution the run computes the same
cuBLASLt-frame problem in NumPy (:func:`~._cpu.execute_cpu`).

:func:`_allocators` is the one place results and auxiliary outputs are made.
"""

from __future__ import annotations

import numpy as np

from ..._internal import cuda
from ..._internal.dtypes import to_float32
from ..._internal.packages import empty, wrap_operand
from ._binding import _A, perm_from_strides
from ._fit import dense_bytes, staged
from ._layout import host_view, remember_aux_frame
from ._spec import scale_value

__all__ = ["build_run"]


def _squeeze(obj, axes):
    """``obj`` with the promoted axes of 1-D operands removed."""
    if not hasattr(obj, "squeeze"):
        return obj
    for ax in sorted(axes):
        obj = obj.squeeze(ax)
    return obj


def _deliver(deliver, out, aux):
    """``out`` and the values of ``aux`` through the adapter's ``deliver``."""
    return deliver(out), ({k: deliver(v) for k, v in aux.items()} if aux else aux)


def _flat(arr: np.ndarray) -> np.ndarray:
    """The bytes of a dense host array as they go to the device (any axis order)."""
    flat = dense_bytes(arr)
    return arr if flat is None else flat


def build_run(plan):
    """``(run, lean)`` of ``plan`` (see the module docstring); ``lean``: no optional step
    applies."""
    if plan.spec.on_cpu:
        return _cpu_run(plan), True
    spec, p, bind, eng = plan.spec, plan.problem, plan.binding, plan.engine
    t, staged_, inplace = spec.types, spec.host, spec.options.inplace
    current = spec.adapter.stream_getter(spec.device_id)
    res, enter, call_lt, set_pointer = eng.res, eng.enter, eng.call, eng.set_pointer
    set_scalars = eng.set_scalars
    multi, swap = eng.multi_device, p.swap
    # the C pointer: 0 D itself, 1 the user's c, 2 the workspace (C layout of another type,
    # never read with beta=0)
    c_mode = 1 if p.c is not None else (2 if t["c_layout"] != t["d"] else 0)
    new_result, new_aux, new_amax, fresh = _allocators(plan)
    make, pointer = fresh or (None, None)
    inputs = tuple((k, _A.BIAS_POINTER if k == "bias" else _A.EPILOGUE_AUX_POINTER)
                   for k in bind.signatures)
    outputs = bind.outputs
    extras = p.c_broadcast or t["fp8"]
    amax_steps = _amax_outputs(plan) if t["fp8"] else ()  # (aux key, descriptor attribute)
    blocking = spec.options.blocking is True and not staged_
    squeezed = () if inplace else p.squeeze  # in place: the result is c itself
    # device operands in a layout cuBLASLt cannot address: a dense copy per run (_fit)
    copies = () if staged_ else tuple((k, shape, order, k == p.lt_users[0])
                                      for k, (shape, order) in plan.fit.dev_copies.items())
    dense_copy, dev = spec.adapter.dense_copy, spec.device_id
    deliver = spec.adapter.deliver  # results made writable, handed over as the package's
    # the optional steps grouped, so that a lean run tests a few constants only
    bind_more = bool(outputs or extras)  # aux outputs; c broadcast, fp8 scales and amax
    finish = bool(staged_ or blocking or amax_steps or squeezed or deliver)
    held = None  # the scalars in the argument buffers

    def run(call, algorithm=None, tune=None):
        nonlocal held
        stream = call.stream
        if stream is None:
            s, foreign = current(), False
        else:
            s, foreign = stream, True
        if multi or s != res.last:
            enter(s)
        scalars = call.scalars
        if scalars is not held:
            set_scalars(*scalars)
            held = scalars
        ptr = kept = aux = state = None
        if staged_:  # host operands: one pipelined upload of every input
            ptr = _upload(plan, call, inputs, s)
            a, b = (ptr["b"], ptr["a"]) if swap else (ptr["a"], ptr["b"])
            if inplace:
                out, d = call.ops["c"], ptr["c"]
            else:
                out, d = new_result(call, s, foreign)
        else:
            a, b = (call.b, call.a) if swap else (call.a, call.b)
            if copies:  # alive until the call is queued: the pool must not hand them out as D
                ops = call.ops
                kept = [dense_copy(ops[k].obj, shape, order, s, dev)
                        for k, shape, order, _ in copies]
                for (k, _, _, is_x), copy in zip(copies, kept):
                    copy_ptr = wrap_operand(copy, k).ptr
                    a, b = (copy_ptr, b) if is_x else (a, copy_ptr)
            if make is not None and not foreign:  # the package's own maker, inline
                out = make()
                d = pointer(out)
            else:
                out, d = new_result(call, s, foreign)
        c = d if c_mode == 0 else (
            (ptr["c"] if staged_ else call.ops["c"].ptr) if c_mode == 1 else
            eng.workspace_ptr or 0)
        if inputs:  # set_pointer makes a library call only for a pointer that changed
            given = call.inputs
            for k, attr in inputs:
                set_pointer(attr, ptr["in_" + k] if staged_ else given[k].ptr)
        if bind_more:
            if outputs:
                aux = _bind_outputs(plan, new_aux, s, foreign)
            if extras:
                state = {"amax_steps": amax_steps}
                _bind_extras(plan, call, out, s, state, new_amax)
        if tune is not None:
            return tune(a, b, c, d, (out, aux, state, kept))
        call_lt(a, b, c, d, algorithm, s)
        if not finish:  # the copies' memory goes back to the pool in stream order, now
            return (out, aux) if aux else out
        del kept
        if staged_:
            out, aux = _collect(eng, out, d, aux, state, s)
        elif blocking:
            cuda.synchronize(s)
        if amax_steps:
            aux = aux or {}
            for key, op, _ptr in state["amax"]:
                aux[key] = op.obj
        if squeezed:
            out = _squeeze(out, squeezed)
        if deliver is not None:
            out, aux = _deliver(deliver, out, aux)
        return (out, aux) if aux else out

    lean = not (staged_ or outputs or extras or blocking or squeezed or copies)
    return (_settling(run, current) if staged_ else run), lean


def _settling(run, current):
    """``run`` on host operands, waiting for its stream when it fails (its direct uploads may
    still read the operands, which the caller may change or drop after the error)."""

    def staged_run(call, algorithm=None, tune=None):
        try:
            return run(call, algorithm, tune)
        except BaseException:
            stream = call.stream
            if stream is None:
                try:
                    stream = current()
                except Exception:  # noqa: BLE001 - the run's own error is the one raised
                    stream = 0
            cuda.settle(stream)
            raise

    return staged_run


# ---- results: the one place they are made ----------------------------------------------------
def _allocators(plan):
    """``(new_result, new_aux, new_amax, fresh)``, the plan's only makers of results:

    - ``new_result(call, stream, foreign) -> (result, device pointer)``: a device result
      (the package's array; ``c`` itself in place), or with host operands the host result (an
      Operand, pinned where the pool allows) and the device buffer the run writes;
    - ``new_aux(stream, foreign) -> [(user name, cuBLASLt name, attribute, result, device pointer,
      frame to remember)]`` for the epilog's aux outputs (host operands: host Operands and
      device buffers to download);
    - ``new_amax(stream) -> (Operand, device pointer)`` for an fp8 amax;
    - ``fresh``: ``(make, pointer)`` where the package makes a device result on its current
      stream with a callable of its own (``make()``, ``pointer(result)``), which the run then
      calls inline (``new_result`` calls them too), else ``None``.

    ``foreign``: the stream is not the package's current one (memory is ordered on it).
    """
    spec, p, eng = plan.spec, plan.problem, plan.engine
    ref, dev, pkg, host = plan.ref, spec.device_id, spec.adapter, spec.host
    shape, dtype, perm = p.result_shape, spec.types["d"], p.result_perm
    maker = None
    if spec.options.inplace:
        def new_result(call, s, foreign):
            c = call.ops["c"]
            return (c, c.ptr) if spec.on_cpu else (c.obj, c.ptr)
    elif host:
        def new_result(call, s, foreign):
            out = empty(ref, shape, dtype, perm=perm, pinned=not spec.on_cpu)
            return out, (eng.device_buffer("d", 0, s) if eng is not None else out.ptr)
    else:
        alloc = pkg.result_allocator(shape, dtype, perm, dev)
        maker = pkg.result_maker(shape, dtype, perm, dev)
        if maker is None:
            def new_result(call, s, foreign):
                return alloc(s, foreign)
        else:  # a result on the current stream straight from the package's callables
            make, pointer = maker

            def new_result(call, s, foreign):
                if foreign:
                    return alloc(s, True)
                out = make()
                return out, pointer(out)

    square = p.user_m == p.user_n
    aux_steps = []
    for user, ltname, ashape, strides, adtype in plan.binding.outputs:
        aperm = perm_from_strides(ashape, strides)
        is_aux = ltname == plan.binding.lt.aux_output  # an aux matrix, else a bias gradient
        attr = _A.EPILOGUE_AUX_POINTER if is_aux else _A.BIAS_POINTER
        # frames are remembered only where a backward pass could not tell them apart
        remember = ashape if is_aux and square else None
        alloc_aux = None if host else pkg.result_allocator(ashape, adtype, aperm, dev)
        aux_steps.append((user, ltname, attr, alloc_aux, (ashape, adtype, aperm), remember))

    def new_aux(s, foreign):
        made = []
        for user, ltname, attr, alloc_aux, (ashape, adtype, aperm), remember in aux_steps:
            if alloc_aux is not None:
                obj, ptr = alloc_aux(s, foreign)
            else:
                op = empty(ref, ashape, adtype, perm=aperm)
                obj = op
                ptr = (eng.device_buffer("out_" + ltname, op.size * op.itemsize, s)
                       if eng is not None else op.ptr)
            made.append((user, ltname, attr, obj, ptr, remember))
        return made

    def new_amax(s):
        return empty(ref, (1,), "float32", device_id=dev, stream=s)

    return new_result, new_aux, new_amax, maker


# ---- epilog outputs ------------------------------------------------------------------------------
def _bind_outputs(plan, new_aux, s, foreign):
    """New aux outputs bound to the descriptor: ``{user: array}`` (device), or ``[(user,
    host Operand, device buffer)]`` to download (host operands)."""
    eng, swap, host = plan.engine, plan.problem.swap, plan.spec.host
    aux = [] if host else {}
    for user, _lt, attr, obj, ptr, remember in new_aux(s, foreign):
        eng.set_pointer(attr, ptr)
        if host:
            aux.append((user, obj, ptr))
            if remember is not None:
                remember_aux_frame(obj.obj, obj.ptr, remember, swap)
        else:
            aux[user] = obj
            if remember is not None:
                remember_aux_frame(obj, ptr, remember, swap)
    return aux


# ---- host operands -------------------------------------------------------------------------------
def _upload(plan, call, inputs, s) -> dict:
    """Every host input in one pipelined transfer: name -> device pointer."""
    p = plan.problem
    items = [(k, _flat(arr)) for k, (arr, _) in call.staged.items()
             if k != "c" or p.c is not None]
    items += [("in_" + k, _flat(staged(call.inputs[k])[0])) for k, _ in inputs]
    return dict(zip([name for name, _ in items], plan.engine.upload(items, s)))


def _collect(eng, out, d, aux, state, s):
    """Download the result, aux outputs and amax of a run on host operands."""
    _download(eng, out, d, s)
    got = {}
    for user, op, dptr in aux or ():
        _download(eng, op, dptr, s)
        got[user] = op.obj
    for _key, op, ptr in (state or {}).get("amax", ()):
        _download(eng, op, ptr, s)
    return out.obj, got


def _download(eng, op, ptr, s) -> None:
    host = op.host_array()
    flat = dense_bytes(host)
    if flat is not None:
        eng.download(ptr, flat, s)
        return
    tmp = np.empty(host.shape, host.dtype)
    eng.download(ptr, tmp, s)
    host[...] = tmp


# ---- extras: c broadcast, fp8 --------------------------------------------------------------------
def _bind_extras(plan, call, out, s, state, new_amax) -> None:
    if plan.problem.c_broadcast:
        _materialize_c(plan, call, out, s)
    if plan.spec.types["fp8"]:
        _bind_fp8(plan, call, state, s, new_amax)


def _materialize_c(plan, call, out, s) -> None:
    """D = broadcast(c) before the run (beta·C then reads D in place)."""
    p, spec = plan.problem, plan.spec
    full = p.batch_shape + (p.user_m, p.user_n)
    if spec.host:
        host = out.host_array()
        np.copyto(host, np.broadcast_to(call.staged["c"][0], full), casting="unsafe")
        plan.engine.upload([("d", _flat(host))], s)
        return
    spec.adapter.broadcast_into(out, call.ops["c"].obj, full, s, spec.device_id)


def _bind_fp8(plan, call, state, s, new_amax) -> None:
    """Scale pointers (host scales uploaded: no host pointer ever reaches cuBLASLt) and the
    amax output."""
    eng, sc = plan.engine, call.scales
    x, y = plan.problem.lt_users  # swapped: cuBLASLt's A scale is the user's b scale
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
    aux_scale = call.aux_scale
    if aux_scale is not None:
        if isinstance(aux_scale, float) or aux_scale.device == "cpu":
            host = np.array([scale_value(aux_scale)], np.float32)
            ptr = eng.upload([("scale_aux", host)], s)[0]
        else:
            ptr = aux_scale.ptr
        eng.set_pointer(_A.EPILOGUE_AUX_SCALE_POINTER, ptr)
    state["amax"] = []
    for key, attr in state["amax_steps"]:  # chosen at plan time (build_run)
        amax = new_amax(s)
        ptr = eng.device_buffer(key, 4, s) if plan.spec.host else amax.ptr
        state["amax"].append((key, amax, ptr))
        eng.set_pointer(attr, ptr)


def _amax_outputs(plan) -> tuple:
    """``(aux key, descriptor attribute)`` of each amax an fp8 run returns: the result's
    (``options.result_amax``) and the fp8 aux output's (``preferences.epilog.aux_amax``)."""
    out = ()
    if plan.spec.options.result_amax:
        out += (("result_amax", _A.AMAX_D_POINTER),)
    if plan.prefs.epilog.aux_amax:
        out += ((f"{plan.epilog.aux_output}_amax", _A.EPILOGUE_AUX_AMAX_POINTER),)
    return out


# ---- the CPU -------------------------------------------------------------------------------------
def _cpu_run(plan):
    """The run of a plan with CPU execution: the cuBLASLt-frame problem in NumPy."""
    from ._cpu import execute_cpu

    spec, p, bind = plan.spec, plan.problem, plan.binding
    t, options = spec.types, spec.options
    new_result, new_aux, _, _ = _allocators(plan)
    count, swap = p.batch_count, p.swap
    squeezed = () if options.inplace else p.squeeze  # in place: the result is c itself
    deliver = spec.adapter.deliver
    dtypes = _cpu_dtypes(plan)
    conj_a, conj_b = spec.conj[::-1] if swap else spec.conj
    aux_amax = plan.prefs.epilog.aux_amax  # checked: an fp8 gelu_aux, stored scaled

    def run(call, algorithm=None, tune=None):
        arrays = {k: v[0] for k, v in call.staged.items()}
        res, _ = new_result(call, 0, False)
        # in place: the problem was analyzed on c's staged (dense) layout; a non-dense c is
        # computed in that copy and written back through the user's own view below
        d_arr = arrays["c"] if options.inplace else res.host_array()
        a = host_view(arrays["b"] if swap else arrays["a"], p.a, count)
        b = host_view(arrays["a"] if swap else arrays["b"], p.b, count)
        d = host_view(d_arr, p.d, count)
        c = None
        if "c" in arrays:
            full = p.batch_shape + (p.user_m, p.user_n)
            cv = np.broadcast_to(arrays["c"], full).reshape((count, p.user_m, p.user_n))
            c = cv.swapaxes(-1, -2) if swap else cv
        bias = aux_in = None
        if bind.spec.bias:
            bias = call.inputs["bias"].host_array().reshape(-1, p.m)
        if bind.spec.aux_input:
            aux_in = call.inputs[bind.spec.aux_input].host_array()
        made = new_aux(0, False)
        aux_out = {ltname: _batched_view(op.host_array(), count)
                   for _user, ltname, _attr, op, _ptr, _r in made}
        alpha, beta = call.scalars
        sd = 1.0
        if t["fp8"]:
            sc = call.scales
            sa, sb, scc, sd = (scale_value(sc[k]) if k in sc else 1.0 for k in "abcd")
            alpha, beta = alpha * sa * sb * sd, beta * scc * sd
        aux_scale = call.aux_scale
        execute_cpu(a, b, c, d, alpha=alpha, beta=beta, epilog=bind.lt, bias=bias,
                    aux_in=aux_in, aux_out=aux_out, dtypes=dtypes, compute_type=t["compute"],
                    conj_a=conj_a, conj_b=conj_b, num_threads=spec.space.num_threads,
                    aux_scale=None if aux_scale is None else scale_value(aux_scale))
        if options.inplace and d_arr.ctypes.data != call.ops["c"].ptr:  # a staged copy
            np.copyto(call.ops["c"].host_array(), d_arr)
        aux = {user: op.obj for user, _lt, _attr, op, _ptr, _r in made}
        if options.result_amax:
            aux["result_amax"] = np.float32(np.max(np.abs(to_float32(d_arr, t["d"])),
                                                   initial=0.0) / (sd if sd else 1.0))
        by_user = {user: op for user, _lt, _attr, op, _ptr, _r in made}
        if aux_amax:
            name = bind.spec.aux_output
            su = scale_value(aux_scale) if aux_scale is not None else 1.0
            got = by_user[name]
            aux[f"{name}_amax"] = np.float32(np.max(np.abs(to_float32(
                got.host_array(), str(got.dtype))), initial=0.0) / (su or 1.0))
        for user, _lt, _attr, op, _ptr, _remember in made:
            if user == bind.spec.aux_output:
                remember_aux_frame(op.obj, op.ptr, op.shape, swap)
        out = res.obj
        if squeezed:
            out = _squeeze(out, squeezed)
        if deliver is not None:
            out, aux = _deliver(deliver, out, aux)
        return (out, aux) if aux else out

    return run


def _batched_view(arr, count):
    """``(count, rows, n)`` / ``(count, length)`` view of an aux output (no copy)."""
    v = arr.view()
    matrices = (arr.shape[-1:] != (1,) and arr.ndim >= 2
                and arr.size // count != arr.shape[-1])
    v.shape = (count, *arr.shape[-2:]) if matrices else (count, arr.size // count)
    return v


def _cpu_dtypes(plan) -> dict:
    """Storage dtypes of the CPU run's arrays in cuBLASLt's frame: C's is the layout type
    (fp8 results: float16 by default), the bias's and aux's the bound/planned ones."""
    t, bind, swap = plan.spec.types, plan.binding, plan.problem.swap
    dtypes = {"a": t["b"] if swap else t["a"], "b": t["a"] if swap else t["b"],
              "c": t["c"] or t["c_layout"], "d": t["d"]}
    if bind.spec.bias:
        dtypes["bias"] = bind.input_dtypes["bias"]
    if bind.spec.aux_input:
        dtypes["aux_in"] = bind.input_dtypes[bind.spec.aux_input]
    for _user, ltname, _shape, _strides, dtype in bind.outputs:
        dtypes[ltname] = dtype
    return dtypes
