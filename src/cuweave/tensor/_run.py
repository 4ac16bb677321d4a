"""The one run of a planned contraction, specialized at plan time, and autotuning.

:func:`build_run` returns ``run(obj, alpha, beta, stream)`` (``stream``: a handle, or None for
the package's current stream) that ``execute()`` and the function forms call. Three shapes,
chosen once:

============  ================================================================================
CPU           the CPU plan (:mod:`._cpu`) on host views; the product itself is the result
              when it already has the result's dtype and layout, else it is copied into a new
              result (or ``out``)
device        the cuTENSOR call on the operands' pointers, the result from the package's
              allocator on the stream (or ``out``); an addend of another layout copied into
              the result first (C is then D)
host on GPU   the inputs uploaded in one pipelined transfer (dense views), the call, the
              result downloaded into a new host array (pinned where allowed) or ``out``
============  ================================================================================
"""

from __future__ import annotations

import math

import numpy as np

from .._bindings.cutensor import AutotuneMode, CacheMode
from .._internal import cuda
from .._internal.dtypes import ITEMSIZE, from_float32
from .._internal.errors import too_large
from .._internal.packages import adapter, empty
from ._cpu import CpuPlan, host_view
from ._options import Operator

__all__ = ["build_run", "tune"]


def build_run(obj):
    """The run of the planned contraction ``obj`` (module docstring)."""
    p = obj._problem
    if p.cpu:
        return _cpu_run(p)
    if p.host:
        return _staged_run(obj, p)
    return _device_run(obj, p)


# ---- CPU -----------------------------------------------------------------------------------------
def _store(v, host, dtype) -> None:
    """``host[...] = v`` rounded to ``dtype`` (bfloat16 stored raw, without ml_dtypes: encoded
    here; ml_dtypes' own cast is ~5x faster and rounds the same way, to nearest even)."""
    if dtype == "bfloat16" and host.dtype.kind == "u":
        from_float32(v, dtype, out=host)
    else:
        np.copyto(host, v, casting="unsafe")


def _cpu_run(p):
    plan = CpuPlan(p.views, p.bound.out, p.bound.extents, p.dtype, p.compute,
                   tuple(o == Operator.OP_CONJ for o in p.ops))
    pkg = adapter(p.package)
    names, addend, shape, perm, dtype = p.names, p.addend, p.out_shape, p.perm, p.dtype
    keep = [i for i in perm if shape[i] != 1]
    native = dtype not in ("float16", "bfloat16") and plan.cdt == np.dtype(dtype)
    # the product is the result when it has the result's dtype and memory order
    direct = native and not plan.fills and plan.product_perm == keep
    threads = p.space.num_threads
    deliver = pkg.deliver
    scale = p.sum_scale  # summed modes every input broadcasts (contraction._specify)

    def run(obj, alpha, beta, stream):
        ops = obj._ops
        if scale != 1:
            alpha = alpha * scale
        arrays = [ops[k].host_array() for k in names]
        c = ops.get(addend)
        c = None if c is None else np.broadcast_to(c.host_array(), shape)
        try:
            if threads is None:
                v = plan.run(arrays, alpha, beta, c)
            else:
                from threadpoolctl import threadpool_limits

                with threadpool_limits(limits=threads, user_api="blas"):
                    v = plan.run(arrays, alpha, beta, c)
        except MemoryError as e:  # the product (or a pair's) is too large for this machine
            raise too_large("the contraction's result", shape, dtype, e) from e
        if p.has_out:
            out = ops["out"]
            _store(v, out.host_array(), dtype)
            return out.obj
        if direct:
            res = pkg.from_numpy(v)
        else:
            r = empty(ops["a"], shape, dtype, perm=perm)
            _store(v, r.host_array(), dtype)
            res = r.obj
        return deliver(res) if deliver is not None else res

    return run


# ---- device operands -----------------------------------------------------------------------------
def _device_run(obj, p):
    eng = obj._engine
    pkg, dev, shape = adapter(p.package), p.device_id, p.out_shape
    call, enter, current = eng.make_call(), eng.enter, pkg.stream_getter(dev)
    alloc = None if p.has_out else pkg.result_allocator(shape, p.dtype, p.perm, dev)
    made = pkg.result_maker(shape, p.dtype, p.perm, dev) if alloc is not None else None
    new, pointer = made if made is not None else (None, None)
    names, addend, has_out, has_addend = p.names, p.addend, p.has_out, p.has_addend
    direct, broadcast = p.addend_direct, pkg.broadcast_into
    blocking = obj.options.blocking is True
    deliver = pkg.deliver
    alpha_buf, beta_buf = eng.alpha, eng.beta
    scale = p.sum_scale  # summed modes left out of every descriptor (contraction._specify)

    def run(obj, alpha, beta, stream):
        ops = obj._ops
        if stream is None:
            s, foreign = current(), False
        else:
            s, foreign = stream, True
        enter(s)
        alpha_buf[0], beta_buf[0] = alpha * scale, beta
        if has_out:
            out = ops["out"]
            res, d = out.obj, out.ptr
        elif new is not None and not foreign:
            res = new()
            d = pointer(res)
        else:
            res, d = alloc(s, foreign)
        c = d
        if has_addend:
            if direct:
                c = ops[addend].ptr
            else:  # another layout, or broadcast: copied into the result (C is D)
                broadcast(res, ops[addend].obj, shape, s, dev)
        call([ops[k].ptr for k in names] + [c, d], s)
        if blocking:
            cuda.synchronize(s)
        return deliver(res) if deliver is not None else res

    return run


# ---- host operands on the GPU --------------------------------------------------------------------
def _staged_inputs(p, ops) -> list:
    items = []
    for k, view in zip(p.names, p.views):
        arr = host_view(ops[k].host_array(), view)
        if p.staged[k] == "C" and not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        items.append((k, arr))
    return items


def _staged_run(obj, p):
    eng = obj._engine
    call, enter = eng.make_call(), eng.enter
    shape, d_perm, n = p.out_shape, p.d_perm, p.n
    nbytes = max(math.prod(shape) * ITEMSIZE[p.dtype], 1)
    blocking_shape = [shape[i] for i in d_perm]

    def run(obj, alpha, beta, stream):
        ops = obj._ops
        s = 0 if stream is None else stream
        try:
            enter(s)
            eng.alpha[0], eng.beta[0] = alpha * p.sum_scale, beta
            items = _staged_inputs(p, ops)
            if p.has_addend:
                host_c = ops[p.addend].host_array()
                hc = np.empty(blocking_shape, host_c.dtype)
                np.copyto(hc, np.broadcast_to(host_c, shape).transpose(d_perm))
                items.append(("addend", hc))
            ptrs = eng.upload(items, s)
            d = eng.device_buffer("d", nbytes, s)
            call(ptrs[:n] + [ptrs[n] if p.has_addend else d, d], s)
            if p.has_out:
                out = ops["out"]
                eng.download(d, out.host_array().transpose(d_perm), s)
                return out.obj
            r = empty(ops["a"], shape, p.dtype, perm=d_perm, pinned=True)
            eng.download(d, r.host_array().transpose(d_perm), s)
            return r.obj
        except BaseException:
            cuda.settle(s)  # uploads may still read the host arrays
            raise

    return run


# ---- autotuning ----------------------------------------------------------------------------------
def tune(obj, iterations: int, stream) -> None:
    """cuTENSOR's incremental autotuning: ``iterations`` plans, each run once on a scratch
    result (beta 0, C = D), the plan cache timing them; then one more plan under the same
    preference, which the cache answers with the fastest."""
    p, eng = obj._problem, obj._engine
    pkg = adapter(p.package)
    s = (0 if p.host else pkg.stream_getter(p.device_id)()) if stream is None else stream
    base = obj._plan_preference.values()
    tuning = dict(base, autotune_mode=AutotuneMode.INCREMENTAL, cache_mode=CacheMode.PEDANTIC,
                  incremental_count=iterations)
    call = eng.make_call()
    _, ext, strides, _ = p.layouts["d"]  # the scratch result spans what D's layout reaches
    nbytes = (1 + sum((n - 1) * st for n, st in zip(ext, strides))) * ITEMSIZE[p.dtype]
    try:
        for _ in range(iterations):
            eng.plan(tuning)
            eng.enter(s)
            eng.alpha[0], eng.beta[0] = 1.0, 0.0
            if p.host:
                ptrs = eng.upload(_staged_inputs(p, obj._ops), s)[:p.n]
            else:
                ptrs = [obj._ops[k].ptr for k in p.names]
            d = eng.device_buffer("tune", nbytes, s)
            call(ptrs + [d, d], s)
            cuda.synchronize(s)
    finally:
        eng.res.release("tune")
    # one more plan under the same preference: cuTENSOR's plan cache now serves the fastest of
    # the kernels tried (its documented incremental-autotuning loop: count + 1 plans)
    eng.plan(tuning)
    obj._run = build_run(obj)
    obj._mark_planned()
