"""Operands from the array objects themselves: NumPy arrays, torch tensors, objects with
``__cuda_array_interface__`` or ``__dlpack__`` (the package adapters' wrapping, kept apart
from :mod:`.packages` so that module stays about the adapters). Nothing here imports torch.
"""

from __future__ import annotations

import numpy as np

from . import dlpack as _dl
from .arrays import (
    ALIGNMENT,
    Operand,
    bytes_to_elems,
    c_strides,
    dtype_name,
    new_operand,
    numpy_pointer,
)
from .dtypes import canonical_name
from .errors import InvalidOperandError

__all__ = ["wrap_numpy", "wrap_torch", "probe_torch", "probe_torch_pair", "wrap_cai",
           "wrap_dlpack"]


def wrap_numpy(x, name):
    itemsize = x.itemsize
    strides = x.strides
    if any(s % itemsize for s in strides):
        bytes_to_elems(strides, itemsize, name)  # raises
    return new_operand(x, "numpy", numpy_pointer(x), x.shape,
                       tuple(s // itemsize for s in strides), dtype_name(x.dtype), "cpu", None)


def wrap_torch(x, name):
    if getattr(x, "requires_grad", False):  # autograd will not see this call: say so
        from .autograd import warn_autograd_lost

        warn_autograd_lost(name)
    if x.is_neg():  # lazy negation (e.g. ``t.conj().imag``): memory holds -values
        x = x.resolve_neg()
    dtype = dtype_name(x.dtype)
    if x.is_cuda:
        return new_operand(x, "torch", x.data_ptr(), tuple(x.shape), x.stride(), dtype, "cuda",
                           x.get_device(), x.is_conj())
    if x.device.type != "cpu":
        raise InvalidOperandError(f"{name} must be on the CPU or a CUDA device, got {x.device}")
    return new_operand(x, "torch", x.data_ptr(), tuple(x.shape), x.stride(), dtype, "cpu", None,
                       x.is_conj())


def probe_torch(x):
    try:
        dev = x.get_device()  # -1 on the CPU
        if dev < 0 or x.is_conj() or x.is_neg() or x.requires_grad:  # (grad: warned on wrap)
            return None
        return ("torch", x.dtype, x.shape, x.stride(), dev), x.data_ptr()
    except AttributeError:  # another object of the torch module: wrapping reports it
        return None


def probe_torch_pair(a, b, extra):
    """:func:`packages.pair_prober`'s probe of two torch tensors: their metadata and pointer
    alignments in one flat tuple ending with ``extra``, read in one frame."""
    try:
        da, db = a.get_device(), b.get_device()  # -1 on the CPU
        ta, tb = a.dtype, b.dtype
        # the conjugate bits are asked where a tensor is complex (a real tensor never has
        # one); one dtype test where both tensors have the same type
        if da < 0 or db < 0 or a.is_neg() or b.is_neg() or a.requires_grad or b.requires_grad or (
                (ta.is_complex or tb is not ta and tb.is_complex)
                and (a.is_conj() or b.is_conj())):
            return None
        pa, pb = a.data_ptr(), b.data_ptr()
        return ("torch", ta, a.shape, a.stride(), da, ALIGNMENT[pa & 255], tb,
                b.shape, b.stride(), db, ALIGNMENT[pb & 255], extra), pa, pb
    except AttributeError:  # another object of the torch module: wrapping reports it
        return None


def pointer_device(ptr: int) -> int:
    from . import cuda

    drv = cuda.driver()
    attr = drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    return int(cuda.check(drv.cuPointerGetAttribute(attr, ptr), "cuPointerGetAttribute"))


def wrap_cai(x, cai, name):
    shape = tuple(cai["shape"])
    try:
        np_dtype = np.dtype(cai["typestr"])
    except TypeError as e:
        raise InvalidOperandError(f"{name} typestr must be a NumPy type string, got "
                                  f"{cai['typestr']!r}") from e
    dtype = canonical_name(np_dtype)
    ptr = cai["data"][0] or 0
    if cai.get("strides") is None:
        strides = c_strides(shape)
    else:
        strides = bytes_to_elems(cai["strides"], np_dtype.itemsize, name)
    device_id = pointer_device(ptr) if ptr else 0
    op = Operand(x, "cai", ptr, shape, strides, dtype, "cuda", device_id)
    op.readonly = bool(cai["data"][1])  # the interface's read-only bit
    return op


def wrap_dlpack(x, name):
    try:
        dev_type, dev_id = x.__dlpack_device__()
    except Exception as e:
        raise InvalidOperandError(f"{name} must implement __dlpack_device__, got {e}") from e
    if dev_type == _dl.KDL_CPU:
        arr = np.from_dlpack(x)  # NumPy keeps DLPack's READ_ONLY flag as writeable=False
        op = wrap_numpy(arr, name)
        op.obj, op.package, op.keepalive = x, "dlpack", arr
        op.readonly = not arr.flags.writeable
        return op
    if dev_type not in (_dl.KDL_CUDA, _dl.KDL_CUDA_MANAGED):
        raise InvalidOperandError(f"{name} must live on the CPU or a CUDA device, got DLPack "
                                  f"device type {dev_type}")
    v = _dl.import_dlpack(x, name)
    op = Operand(x, "dlpack", v.ptr, v.shape, v.strides, v.dtype, "cuda", int(dev_id),
                 keepalive=v.capsule)
    op.readonly = v.readonly
    return op
