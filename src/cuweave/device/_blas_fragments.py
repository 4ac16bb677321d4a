"""Register fragments and accumulators of device GEMMs inside numba kernels.

Element access on register fragments (``frag[i]``, ``frag[i] = v``), ``make_fragment_like``,
and ``MM.suggest_accumulator()`` / ``MM.get_accumulator()`` with cuBLASDx's partitioner queries
(``map_fragment_index``, ``is_thread_active``, ``is_predicated``, ``is_index_in_bounds``) and
the copies between accumulators, fragments and global memory. Imported by
:mod:`._blas_numba`; calls follow its C-ABI conventions.
"""

from __future__ import annotations

import operator

from llvmlite import ir
from numba.core import cgutils
from numba.cuda import types
from numba.cuda.extending import intrinsic, overload, overload_attribute, overload_method
from numba.cuda.models import register_model
from numba.np.numpy_support import as_dtype

from .._internal.errors import InvalidOptionError
from . import _blas_numba
from ._blas_layout import Layout
from ._blas_numba import (
    _I8P,
    OpaqueTensorType,
    _clear,
    _copy_fragment,
    _desc,
    _tensor_value,
    _TensorModel,
)

__all__ = ["AccumulatorType", "accumulator_function", "make_fragment_like"]


@overload_attribute(OpaqueTensorType, "layout")
def _ol_tensor_layout(tensor):
    layout = tensor.layout
    return lambda tensor: layout


def _element_pointer(context, builder, ty: OpaqueTensorType, value, index, index_ty):
    proxy = cgutils.create_struct_proxy(ty)(context, builder, value=value)
    base = builder.bitcast(proxy.ptr, context.get_data_type(ty.dtype).as_pointer())
    index = context.cast(builder, index, index_ty, types.intp)
    return builder.gep(base, [index])


@intrinsic
def _fragment_load(typingctx, tensor, index):
    if not (isinstance(tensor, OpaqueTensorType) and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        return context.unpack_value(builder, sig.return_type, ptr)

    return tensor.dtype(tensor, index), codegen


@intrinsic
def _fragment_store(typingctx, tensor, index, value):
    if not (isinstance(tensor, OpaqueTensorType) and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        v = context.cast(builder, args[2], sig.args[2], sig.args[0].dtype)
        context.pack_value(builder, sig.args[0].dtype, v, ptr)
        return context.get_dummy_value()

    return types.void(tensor, index, value), codegen


def _register_space(tensor) -> bool:
    return isinstance(tensor, OpaqueTensorType) and tensor.layout.memory_space == "rmem"


@overload(operator.getitem)
def _ol_getitem(tensor, index):
    if _register_space(tensor) and isinstance(index, types.Integer):
        return lambda tensor, index: _fragment_load(tensor, index)
    return None


@overload(operator.setitem)
def _ol_setitem(tensor, index, value):
    if _register_space(tensor) and isinstance(index, types.Integer):
        return lambda tensor, index, value: _fragment_store(tensor, index, value)
    return None


#: Overloads that create a register fragment are inlined into their caller by numba (IR
#: inlining), so the fragment's buffer is an alloca of the calling function. Compiled as
#: separate (LLVM-inlined) functions, they would return a pointer into their own frame, and
#: LLVM's inliner ends such a buffer's lifetime where the call ends: two live fragments could
#: then share one stack slot.
_FRAME = {"inline": "always"}


def _new_buffer(context, builder, layout: Layout, count: int):
    """A 16-byte aligned local buffer of ``count`` elements of ``layout.dtype`` (as i8*)."""
    elem = context.get_data_type(_blas_numba.numba_dtype(layout.dtype))
    slot = cgutils.alloca_once(builder, ir.ArrayType(elem, count))
    slot.align = 16
    builder.store(ir.Constant(slot.type.pointee, None), slot)
    return builder.bitcast(slot, _I8P)


def _empty_fragment(layout: Layout):
    """Intrinsic ``() -> OpaqueTensor`` over a new zeroed local buffer laid out as ``layout``."""
    out = OpaqueTensorType(layout)

    @intrinsic
    def make(typingctx):
        def codegen(context, builder, sig, args):
            proxy = cgutils.create_struct_proxy(out)(context, builder)
            proxy.ptr = _new_buffer(context, builder, layout, layout.cosize)
            return proxy._getvalue()

        return out(), codegen

    return make


def make_fragment_like(tensor, dtype):
    """Inside kernels: a new register fragment with ``tensor``'s partition over ``dtype``.

    Parameters
    ----------
    tensor : opaque tensor
        A register fragment (an accumulator's results, say).
    dtype : NumPy number type
        The new fragment's element type.

    Returns
    -------
    OpaqueTensorType
        An uninitialized register fragment.
    """
    raise RuntimeError("make_fragment_like runs inside @cuda.jit kernels only")


@overload(make_fragment_like, **_FRAME)
def _ol_make_fragment_like(tensor, dtype):
    if not isinstance(tensor, OpaqueTensorType) or tensor.layout.memory_space != "rmem":
        raise InvalidOptionError(f"tensor must be a register fragment, got {tensor}")
    target = getattr(dtype, "instance_type", getattr(dtype, "dtype", None))
    if not isinstance(target, types.Number):
        raise InvalidOptionError(f"dtype must be a NumPy number type, got {dtype}")
    make = _empty_fragment(tensor.layout.like(as_dtype(target)))
    return lambda tensor, dtype: make()


# ---------------------------------------------------------------------------------------------
# Accumulators and their partitioner queries
# ---------------------------------------------------------------------------------------------


class AccumulatorType(OpaqueTensorType):
    """numba type of ``MM.suggest_accumulator()`` / ``MM.get_accumulator()``: a stateful
    register accumulator with the partitioner queries of cuBLASDx.

    Parameters
    ----------
    mm : Matmul
        The GEMM the accumulator belongs to.
    suggested : bool
        cuBLASDx's suggested partition (``suggest_accumulator``), else the default one.
    """

    def __init__(self, mm, suggested: bool):
        self.suggested = suggested
        self.fragment_layout = (mm.suggest_layout_rmem_c() if suggested
                                else mm.get_layout_rmem_c())
        super().__init__(Layout(mm, "_suggest_accumulator_c" if suggested
                                else "_get_accumulator_c"))


register_model(AccumulatorType)(_TensorModel)


def _void_call(mm, kind: str, tensors: tuple, context, builder, values):
    _blas_numba._device_call(context, builder, mm, kind, tensors, values)


_accumulators: dict = {}


def accumulator_function(mm, suggested: bool):
    """``MM.suggest_accumulator()`` / ``MM.get_accumulator()`` inside kernels: a cleared,
    created accumulator over a local buffer."""
    from ._numba_ext import numba_modules

    key = (mm._kernel_key(), suggested)
    fn = _accumulators.get(key)
    if fn is not None:
        return fn
    acc_ty = AccumulatorType(mm, suggested)

    @intrinsic
    def make(typingctx):
        def codegen(context, builder, sig, args):
            proxy = cgutils.create_struct_proxy(acc_ty)(context, builder)
            proxy.ptr = _new_buffer(context, builder, acc_ty.layout, acc_ty.layout.cosize)
            value = proxy._getvalue()
            abi = [_tensor_value(context, builder, acc_ty, value)]
            _void_call(mm, "CLEAR", (_desc(acc_ty),), context, builder, abi)
            _void_call(mm, "CREATE", (_desc(acc_ty),), context, builder, abi)
            return value

        return acc_ty(), codegen

    def get_accumulator():
        return make()

    # inlined by numba into the caller, so the buffer belongs to the caller's frame (_FRAME)
    cuda = numba_modules()[0]
    return _accumulators.setdefault(key, cuda.jit(device=True, **_FRAME)(get_accumulator))


def _flag_query(kind: str, with_index: bool):
    """Intrinsic ``(acc[, index]) -> bool`` over libmathdx's
    ``void f(T acc, [int* idx,] void* yes)`` (the accumulator holds the thread's state)."""
    i32 = ir.IntType(32)

    def codegen(context, builder, sig, args):
        acc_ty = sig.args[0]
        values = [_tensor_value(context, builder, acc_ty, args[0])]
        if with_index:
            values.append(cgutils.alloca_once_value(
                builder, context.cast(builder, args[1], sig.args[1], types.int32)))
        yes = cgutils.alloca_once_value(builder, ir.Constant(i32, 0))
        values.append(builder.bitcast(yes, _I8P))
        _void_call(acc_ty.layout.MM, kind, (_desc(acc_ty),), context, builder, values)
        return builder.icmp_signed("!=", builder.load(yes), ir.Constant(i32, 0))

    if with_index:
        @intrinsic
        def query(typingctx, acc, index):
            if not isinstance(acc, AccumulatorType) or not isinstance(index, types.Integer):
                return None
            return types.boolean(acc, index), codegen
    else:
        @intrinsic
        def query(typingctx, acc):
            if not isinstance(acc, AccumulatorType):
                return None
            return types.boolean(acc), codegen
    return query


_is_thread_active = _flag_query("IS_THREAD_ACTIVE", False)
_is_predicated = _flag_query("IS_PREDICATED", False)
_is_index_in_bounds = _flag_query("IS_INDEX_IN_BOUNDS", True)


@intrinsic
def _map_fragment_index(typingctx, acc, index):
    if not isinstance(acc, AccumulatorType) or not isinstance(index, types.Integer):
        return None
    ret = types.UniTuple(types.int32, 2)

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        idx = cgutils.alloca_once_value(builder, context.cast(builder, args[1], sig.args[1],
                                                              types.int32))
        row = cgutils.alloca_once_value(builder, ir.Constant(i32, 0))
        col = cgutils.alloca_once_value(builder, ir.Constant(i32, 0))
        _void_call(acc.layout.MM, "MAP_IDX2CRD_PARTITIONER", (_desc(acc),), context, builder,
                   [_tensor_value(context, builder, acc, args[0]), idx, row, col])
        return context.make_tuple(builder, ret, (builder.load(row), builder.load(col)))

    return ret(acc, index), codegen


@overload_method(AccumulatorType, "is_thread_active", jit_options={"forceinline": True})
def _ol_acc_active(acc):
    return lambda acc: _is_thread_active(acc)


@overload_method(AccumulatorType, "is_predicated", jit_options={"forceinline": True})
def _ol_acc_predicated(acc):
    return lambda acc: _is_predicated(acc)


@overload_method(AccumulatorType, "is_index_in_bounds", jit_options={"forceinline": True})
def _ol_acc_in_bounds(acc, index):
    return lambda acc, index: _is_index_in_bounds(acc, index)


@overload_method(AccumulatorType, "map_fragment_index", jit_options={"forceinline": True})
def _ol_acc_map(acc, index):
    return lambda acc, index: _map_fragment_index(acc, index)


@overload_method(AccumulatorType, "clear", jit_options={"forceinline": True})
def _ol_acc_clear(acc):
    return lambda acc: _clear(acc)


@overload_method(AccumulatorType, "make_empty_fragment", **_FRAME)
def _ol_acc_empty(acc):
    make = _empty_fragment(acc.fragment_layout)
    return lambda acc: make()


@overload_method(AccumulatorType, "get_results", **_FRAME)
def _ol_acc_results(acc):
    make = _empty_fragment(acc.fragment_layout)

    def impl(acc):
        frag = make()
        _copy_fragment(acc, frag)
        return frag

    return impl


@overload_method(AccumulatorType, "partition_and_copy", jit_options={"forceinline": True})
def _ol_acc_partition_and_copy(acc, src, dst):
    def impl(acc, src, dst):
        if _is_thread_active(acc):
            _copy_fragment(src, dst)

    return impl


@overload_method(AccumulatorType, "make_partition_and_copy", **_FRAME)
def _ol_acc_make_partition_and_copy(acc, src):
    if not isinstance(src, OpaqueTensorType):
        return None
    make = _empty_fragment(acc.fragment_layout.like(src.layout.dtype))

    def impl(acc, src):
        frag = make()
        if _is_thread_active(acc):
            _copy_fragment(src, frag)
        return frag

    return impl
