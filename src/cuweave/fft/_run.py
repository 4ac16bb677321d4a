"""The one cuFFT execute path of :class:`~cuweave.fft.FFT`, specialized at plan time.

:func:`build_run` turns a planned FFT object into one function ``run(f, direction=None,
stream=None, x=None, ptr=None)`` that every CUDA entry point calls (``FFT.execute()`` with or
without arguments, and the function forms; a cache hit passes its array ``x`` and its address
``ptr`` instead of binding them to the object). Its steps are chosen once, at plan time:

=====================  ===========================================================
step                   chosen at plan time
=====================  ===========================================================
device                 the plan's device made current (the caller's one restored)
stream                 the package's current-stream getter, else the stored stream
ordering               ``cufftSetStream`` and the shared buffers' ordering
                       (:class:`~cuweave._internal.resources.StreamResources`),
                       only when the stream changes
work area              set on the plan when it is missing (``release_workspace``)
input                  the operand, one staged upload (host operands) or a scratch
                       copy (C2R overwrites its input; an R2C input not aligned to
                       its complex element)
output                 in place, the package's result allocator, a staged buffer
finish                 download (host operands), an unfused ``norm`` scale,
                       synchronize (``blocking=True``)
=====================  ===========================================================

The input and output addresses travel in ``c_void_p`` objects through the untyped
``cufftXtExec`` (:func:`cuweave._bindings.cufft.bare`): no argument conversion per call.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .._internal import cuda
from .._internal.dtypes import ITEMSIZE
from .._internal.errors import CufftError
from .._internal.packages import adapter, empty
from .._internal.staging import shared_stager

__all__ = ["build_run", "nbytes", "allocate_buffers"]


def nbytes(shape, strides, dtype) -> int:
    """Bytes spanned by an array of ``shape`` and element ``strides``."""
    return (1 + sum((n - 1) * st for n, st in zip(shape, strides) if n > 1)) * ITEMSIZE[dtype]


def build_run(f):
    """The run of the planned FFT object ``f`` (module docstring)."""
    spec, plan, bufs = f._spec, f._cuda_plan, f._bufs
    pkg = adapter(spec.package)
    device_id, staged, inplace = spec.device_id, spec.staged, spec.inplace
    get_device, set_device = cuda.current_device, cuda.set_device
    current = pkg.stream_getter(device_id) if not staged and pkg.owns_stream else None
    alloc = None
    if current is not None and f.options.allocator is None and not inplace:
        alloc = pkg.result_allocator(spec.out_shape, spec.out_dtype, spec.layout.out_perm,
                                     device_id)
    c2r_copy = spec.fft_type == "C2R" and not staged
    r2c_align = _r2c_copy_alignment(spec)
    in_bytes = nbytes(spec.shape, spec.dev_strides, spec.dtype)
    out_bytes = nbytes(spec.out_shape, spec.layout.out_strides, spec.out_dtype)
    exec_bare, handle, set_stream = plan.exec_bare, plan.handle, plan.set_stream
    work = plan.workspace_size
    planned = int(f._plan_direction)
    scale = plan.unfused_scale
    blocking = f.options.blocking is True and not staged
    cur = f._cur_stream  # the stream last set on the plan (None: order again)
    deliver = None if inplace else pkg.deliver  # results handed over as the package's arrays
    tmp_in, out_c, given = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()

    def run(f, direction=None, stream=None, x=None, ptr=None):  # f: an argument (no cycle)
        prev = get_device()
        if prev != device_id:
            set_device(device_id)
        s = None
        try:
            if stream is not None:
                s = stream
            elif current is not None:
                s = current()
            else:
                s = f._stream or 0
            if s != cur[0]:
                # the shared buffers: order s after their last user stream (a capturing s:
                # nothing ordered, so the next run enters again)
                ordered = bufs.enter(s)
                set_stream(s)
                cur[0] = s if ordered else None
            if work and not bufs.has("work"):
                plan.set_work_area(bufs.get("work", work, s))
            if ptr is None:
                in_c = f._in_c
            else:
                in_c = given
                given.value = ptr
            if staged:
                tmp_in.value = bufs.get("in", in_bytes, s)
                # direct: the run downloads its result after, waiting for the stream
                shared_stager().upload(host_in(f), tmp_in.value, s, direct=True)
                in_c = tmp_in
            elif c2r_copy or (r2c_align and in_c.value % r2c_align):
                # C2R overwrites its input; R2C needs it aligned: transform a copy
                tmp_in.value = bufs.get("copy_in", in_bytes, s)
                cuda.memcpy_async(tmp_in.value, in_c.value, in_bytes, s)
                in_c = tmp_in
            res = None
            if inplace:
                out = in_c
            elif staged:
                out_c.value = bufs.get("out", out_bytes, s)
                out = out_c
            elif alloc is not None and stream is None:
                res, out_c.value = alloc(s, False)
                out = out_c
            else:
                op = empty(f._op, spec.out_shape, spec.out_dtype, perm=spec.layout.out_perm,
                           stream=s, allocator=f.options.allocator)
                res, out_c.value = op.obj, op.ptr
                out = out_c
            status = exec_bare(handle, in_c, out, planned if direction is None else direction)
            if status:
                raise CufftError(status, "cufftXtExec")
            if staged:
                res = _stage_out(f, pkg, out.value, s)
            elif inplace:
                res = f._in_obj if x is None else x
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


def allocate_buffers(f) -> None:
    """Allocate at plan time the buffers the run would otherwise allocate on its first call:
    the work area, and the input copy of a C2R transform (cuFFT overwrites its input) or of
    a bound R2C operand not aligned to its complex element; ordered on the stream the runs
    use (the stored one, else the package's current one). A first run then does no lazy
    work: it can be captured into a CUDA graph."""
    spec, plan, bufs = f._spec, f._cuda_plan, f._bufs
    pkg = adapter(spec.package)
    if f._stream is not None:
        s = f._stream
    else:
        s = pkg.stream_getter(spec.device_id)() if pkg.owns_stream and not spec.staged else 0
    if plan.workspace_size and not bufs.has("work"):
        plan.set_work_area(bufs.get("work", plan.workspace_size, s))
    if spec.staged:
        return
    align = _r2c_copy_alignment(spec)
    if spec.fft_type == "C2R" or (align and f._in_ptr is not None and f._in_ptr % align):
        bufs.get("copy_in", nbytes(spec.shape, spec.dev_strides, spec.dtype), s)


def host_in(f):
    """The host operand as the stager uploads it: in its own dense order, or transposed into
    the order of a layout cuFFT can express (``spec.stage_perm``; the copy is C-dense)."""
    x = f._op.host_array()
    perm = f._spec.stage_perm
    return x if perm is None else np.ascontiguousarray(x.transpose(perm))


def _stage_out(f, pkg, out_ptr, s):
    """Download the result of a run on a host operand (into it, when in place)."""
    spec = f._spec
    if spec.inplace:
        x, perm = f._op.host_array(), spec.stage_perm
        if perm is None:
            shared_stager().download(out_ptr, x, s)
        else:
            tmp = np.empty(tuple(spec.shape[p] for p in perm), dtype=x.dtype)
            shared_stager().download(out_ptr, tmp, s)
            x.transpose(perm)[...] = tmp
        return f._in_obj
    perm = spec.layout.out_perm
    host = empty(f._op, tuple(spec.out_shape[p] for p in perm), spec.out_dtype, pinned=True)
    shared_stager().download(out_ptr, host.host_array(), s)  # a pinned block: the DMA alone
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return pkg.permute(host.obj, inv)
