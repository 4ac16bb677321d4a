"""The one execute path of an FFT :class:`~._plan.Plan`, specialized when the plan is made.

:func:`build_run` turns a plan into one function ``run(call, direction=None)`` that every entry
point calls (``FFT.execute()`` with or without arguments, and the function forms). On CUDA its
steps are chosen once, at plan time:

=====================  ===========================================================
step                   chosen at plan time
=====================  ===========================================================
device                 the plan's device made current (the caller's one restored)
stream                 the call's stream, else the package's current-stream getter,
                       else the stored stream of the call
ordering               ``cufftSetStream`` and the shared buffers' ordering
                       (:class:`~cuweave._internal.resources.StreamResources`),
                       only when the stream changes
work area              set on the plan when it is missing (``release_workspace``)
input                  the operand, one staged upload (host operands) or a scratch
                       copy (C2R overwrites its input; an R2C input not aligned to
                       its complex element)
output                 :func:`_allocators`: in place, the package's result allocator,
                       a staged buffer
finish                 download (host operands), an unfused ``norm`` scale,
                       synchronize (``blocking=True``)
=====================  ===========================================================

The input and output addresses travel in ``c_void_p`` objects through the untyped
``cufftXtExec`` (:func:`cuweave._bindings.cufft.bare`): no argument conversion per call.

With CPU execution the run transforms a host operand with the plan's
:class:`~._cpu.CpuPlan`; a device operand is first downloaded to the host through the shared
pinned stager (its whole span, then viewed with its own strides) and its result uploaded into
a new array of its package on its device, on the call's stream (in place: into the operand
itself, through a dense temporary where the operand is not dense), as nvmath-python does.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .._internal import cuda
from .._internal.dtypes import ITEMSIZE, numpy_dtype
from .._internal.errors import CufftError
from .._internal.packages import empty
from .._internal.staging import shared_stager
from ._options import FFTDirection

__all__ = ["build_run", "nbytes", "allocate_buffers"]


def nbytes(shape, strides, dtype) -> int:
    """Bytes spanned by an array of ``shape`` and element ``strides``."""
    return (1 + sum((n - 1) * st for n, st in zip(shape, strides) if n > 1)) * ITEMSIZE[dtype]


def build_run(plan):
    """The run of ``plan`` (module docstring)."""
    spec = plan.spec
    if not spec.cuda:
        return _device_on_cpu_run(plan) if spec.to_host else _cpu_run(plan)
    cplan, bufs, pkg = plan.cuda_plan, plan.bufs, plan.adapter
    device_id, staged, inplace = spec.device_id, spec.staged, spec.inplace
    get_device, set_device = cuda.current_device, cuda.set_device
    current = pkg.stream_getter(device_id) if not staged and pkg.owns_stream else None
    new_result, fresh = _allocators(plan)
    c2r_copy = spec.fft_type == "C2R" and not staged
    r2c_align = _r2c_copy_alignment(spec)
    in_bytes = nbytes(spec.shape, spec.dev_strides, spec.dtype)
    out_bytes = nbytes(spec.out_shape, spec.layout.out_strides, spec.out_dtype)
    exec_bare, handle, set_stream = cplan.exec_bare, cplan.handle, cplan.set_stream
    work = cplan.workspace_size
    planned = int(plan.direction)
    scale = cplan.unfused_scale
    blocking = spec.options.blocking is True and not staged
    cur = plan.stream_state  # the stream last set on the plan (None: order again)
    deliver = None if inplace else pkg.deliver  # results handed over as the package's arrays
    in_c, tmp_in, out_c = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    held = None  # the input address in_c holds

    def run(call, direction=None):
        nonlocal held
        prev = get_device()
        if prev != device_id:
            set_device(device_id)
        s = None
        stream = call.stream
        try:
            if stream is not None:
                s = stream
            elif current is not None:
                s = current()
            else:
                s = call.stored or 0
            if s != cur[0]:
                # the shared buffers: order s after their last user stream (a capturing s:
                # nothing ordered, so the next run enters again)
                ordered = bufs.enter(s)
                set_stream(s)
                cur[0] = s if ordered else None
            if work and not bufs.has("work"):
                cplan.set_work_area(bufs.get("work", work, s))
            src = in_c
            if staged:
                tmp_in.value = bufs.get("in", in_bytes, s)
                # direct: the run downloads its result after, waiting for the stream
                shared_stager().upload(host_in(spec, call.op), tmp_in.value, s, direct=True)
                src = tmp_in
            else:
                ptr = call.ptr
                if ptr is not held:  # patched only when the address changes
                    in_c.value = held = ptr
                if c2r_copy or (r2c_align and ptr % r2c_align):
                    # C2R overwrites its input; R2C needs it aligned: transform a copy
                    tmp_in.value = bufs.get("copy_in", in_bytes, s)
                    cuda.memcpy_async(tmp_in.value, ptr, in_bytes, s)
                    src = tmp_in
            res = None
            if inplace:
                out = src
            elif staged:
                out_c.value = bufs.get("out", out_bytes, s)
                out = out_c
            else:
                if fresh is not None and stream is None:  # the package's allocator, inline
                    res, out_c.value = fresh(s, False)
                else:
                    made = new_result(s)
                    res, out_c.value = made.obj, made.ptr
                out = out_c
            status = exec_bare(handle, src, out, planned if direction is None else direction)
            if status:
                raise CufftError(status, "cufftXtExec")
            if staged:
                res = _stage_out(plan, call.op, out.value, s, new_result)
            elif inplace:
                res = call.obj
            if scale != 1.0:  # a scale that could not be fused
                if staged:
                    res *= scale
                else:
                    pkg.scale_(res, scale, s, device_id)
            if blocking:
                cuda.synchronize(s)
            if stream is not None and bufs.mark(s):
                cur[0] = None  # an explicit stream may die: the next run orders by the event
            return res if deliver is None else deliver(res)
        except BaseException:
            if staged and s is not None:  # a direct upload may still read the host operand
                cuda.settle(s)
            raise
        finally:
            if prev != device_id and prev is not None:
                set_device(prev)  # the caller's device again

    return run


def _r2c_copy_alignment(spec) -> int:
    """The alignment (bytes) below which a device R2C input is transformed from a copy, or 0.
    cuFFT's R2C refuses (CUFFT_INVALID_VALUE) a real input not aligned to its complex element,
    e.g. a view at an odd element offset."""
    if spec.fft_type == "R2C" and not spec.staged and not spec.inplace:
        return 2 * ITEMSIZE[spec.dtype]
    return 0


def allocate_buffers(plan, call) -> None:
    """Allocate at plan time the buffers the run would otherwise allocate on its first call:
    the work area, and the input copy of a C2R transform (cuFFT overwrites its input) or of
    a bound R2C operand not aligned to its complex element; ordered on the stream the runs
    use (the call's, else its stored one, else the package's current one). A first run then does no
    lazy work: it can be captured into a CUDA graph."""
    spec, cplan, bufs, pkg = plan.spec, plan.cuda_plan, plan.bufs, plan.adapter
    given = None if call is None else (call.stream if call.stream is not None else
                                       call.stored)
    if given is not None:
        s = given
    else:
        s = pkg.stream_getter(spec.device_id)() if pkg.owns_stream and not spec.staged else 0
    if cplan.workspace_size and not bufs.has("work"):
        cplan.set_work_area(bufs.get("work", cplan.workspace_size, s))
    if spec.staged:
        return
    align = _r2c_copy_alignment(spec)
    if spec.fft_type == "C2R" or (align and call is not None and call.ptr % align):
        bufs.get("copy_in", nbytes(spec.shape, spec.dev_strides, spec.dtype), s)


# ---- results: the one place they are made ----------------------------------------------------
def _allocators(plan):
    """``(new_result, fresh)``: ``new_result(stream, shape=None, perm=..., pinned=False) ->
    Operand`` makes every result of the plan (a device result of the transform's layout; with
    ``shape``, a host or device array of that shape and the result's dtype, for the staged and
    CPU paths); ``fresh(stream, foreign) -> (result, pointer)`` is the package's own allocator
    of device results on its current stream, which the run calls inline, or ``None``."""
    spec, ref, pkg = plan.spec, plan.ref, plan.adapter
    allocator = spec.options.allocator
    fresh = None
    layout_perm = spec.layout.out_perm if spec.layout is not None else None
    if spec.cuda and not spec.staged and not spec.inplace and allocator is None and (
            pkg.owns_stream):
        fresh = pkg.result_allocator(spec.out_shape, spec.out_dtype, layout_perm,
                                     spec.device_id)

    def new_result(s, shape=None, perm=layout_perm, pinned=False):
        if pinned:  # a host result a GPU run downloads into (page-locked where allowed)
            return empty(ref, shape, spec.out_dtype, pinned=True)
        return empty(ref, spec.out_shape if shape is None else shape, spec.out_dtype,
                     perm=perm, stream=s, allocator=allocator)

    return new_result, fresh


# ---- host operands on CUDA -------------------------------------------------------------------
def host_in(spec, op):
    """The host operand as the stager uploads it: in its own dense order, or transposed into
    the order of a layout cuFFT can express (``spec.stage_perm``; the copy is C-dense)."""
    x = op.host_array()
    perm = spec.stage_perm
    return x if perm is None else np.ascontiguousarray(x.transpose(perm))


def _stage_out(plan, op, out_ptr, s, new_result):
    """Download the result of a run on a host operand (into it, when in place)."""
    spec = plan.spec
    if spec.inplace:
        x, perm = op.host_array(), spec.stage_perm
        if perm is None:
            shared_stager().download(out_ptr, x, s)
        else:
            tmp = np.empty(tuple(spec.shape[p] for p in perm), dtype=x.dtype)
            shared_stager().download(out_ptr, tmp, s)
            x.transpose(perm)[...] = tmp
        return op.obj
    perm = spec.layout.out_perm
    shape = tuple(spec.out_shape[p] for p in perm)
    host = new_result(s, shape, None, pinned=True)
    shared_stager().download(out_ptr, host.host_array(), s)  # a pinned block: the DMA alone
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return plan.adapter.permute(host.obj, inv)


# ---- CPU execution ---------------------------------------------------------------------------
def _cpu_run(plan):
    """The run of a host operand on the CPU: the CPU plan on its NumPy view."""
    spec, cpu, norm, pkg = plan.spec, plan.cpu_plan, plan.norm, plan.adapter
    planned, inplace = plan.direction, spec.inplace

    def run(call, direction=None):
        x = call.op.host_array()
        res = cpu.run(x, planned if direction is None else FFTDirection(direction), norm)
        if inplace:
            x[...] = res
            return call.obj
        return pkg.from_numpy(res)

    return run


def _device_on_cpu_run(plan):
    """The run of a device operand on the CPU: to the host and back (module docstring)."""
    spec, cpu, norm, pkg = plan.spec, plan.cpu_plan, plan.norm, plan.adapter
    planned, inplace = plan.direction, spec.inplace
    blocking = spec.options.blocking is True
    deliver = None if inplace else pkg.deliver
    new_result, _ = _allocators(plan)
    device_id, current = spec.device_id, pkg.stream_getter(spec.device_id)

    def run(call, direction=None):
        prev = cuda.current_device()
        if prev != device_id:
            cuda.set_device(device_id)
        try:
            s = call.stream if call.stream is not None else call.stored
            if s is None:
                s = current()
            d = planned if direction is None else FFTDirection(direction)
            res = cpu.run(_download(call.op, s), d, norm)
            out = _upload_result(plan, call.op, res, s, new_result)
            if blocking:
                cuda.synchronize(s)
        finally:
            if prev != device_id and prev is not None:
                cuda.set_device(prev)
        return out if deliver is None else deliver(out)

    return run


def _download(op, stream: int) -> np.ndarray:
    """A host copy of the device operand ``op`` with its own strides (synchronous)."""
    lo, hi = op.span()
    flat = np.empty(max(hi - lo, 1), dtype=numpy_dtype(op.dtype))
    shared_stager().download(op.ptr + lo * op.itemsize, flat, stream)
    return np.lib.stride_tricks.as_strided(
        flat[-lo:], shape=op.shape, strides=tuple(s * op.itemsize for s in op.strides))


def _upload_result(plan, op, res: np.ndarray, stream: int, new_result):
    """``res`` on ``op``'s device: a new array of ``op``'s package (dense, its axes in the CPU
    plan's ``perm`` order in memory, outermost first; ``None``: C order), or ``op`` itself."""
    perm = plan.cpu_plan.perm
    if not plan.spec.inplace:
        out = new_result(stream, res.shape, perm)
        src = res if perm is None else res.transpose(perm)
        shared_stager().upload(np.ascontiguousarray(src), out.ptr, stream)
        return out.obj
    if op.is_dense():  # in its own memory order, straight into the operand
        order = sorted(range(len(op.shape)), key=lambda a: (op.shape[a] != 1, -op.strides[a]))
        shared_stager().upload(np.ascontiguousarray(res.transpose(order)), op.ptr, stream)
        return op.obj
    tmp = new_result(stream, res.shape, None)
    shared_stager().upload(np.ascontiguousarray(res), tmp.ptr, stream)
    plan.adapter.broadcast_into(op.obj, tmp.obj, op.shape, stream, op.device_id)
    return op.obj
