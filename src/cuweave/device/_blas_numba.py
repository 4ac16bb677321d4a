"""The numba-cuda half of device GEMMs: ``MM.execute`` and the opaque-tensor API in kernels.

Imported only when a kernel refers to a :class:`~cuweave.device.matmul.Matmul` attribute that
needs code (``execute``, a layout method) or calls a tensor function (``make_tensor``,
``copy``, ...), so ``import cuweave.device`` never imports numba.

Calls go to ``extern "C"`` functions that libmathdx generated as LTO-IR; each call site adds
its LTO-IR to the kernel's link (nvJitLink inlines it). Arguments follow libmathdx's C ABI:
pointers as ``i8*`` (generic address space), scalars through pointers to a local copy in C's
value type, and opaque tensors by value as ``{i8*}`` (shared and register tensors) or
``{i8*, [1 x i64]}`` (global-memory tiles with their leading dimension).
"""

from __future__ import annotations

import threading

import numpy as np
from llvmlite import ir
from numba.core import cgutils
from numba.cuda import types
from numba.cuda.extending import intrinsic, overload
from numba.cuda.models import StructModel, register_model
from numba.np.numpy_support import as_dtype, from_dtype

from .._internal.errors import InvalidOptionError
from . import _blas_mathdx, _cache
from ._blas_layout import _LAYOUTS, Layout
from ._blas_mathdx import cache_versions as _versions
from ._numba_objects import KernelObjectType

__all__ = ["OpaqueTensorType", "execute_function", "layout_function", "make_tensor", "copy",
           "copy_fragment", "clear", "axpby", "copy_wait"]

_lock = threading.Lock()
_I8P = ir.IntType(8).as_pointer()
_NONE = (types.NoneType, types.Omitted)


def numba_dtype(value_type):
    """numba type of elements of ``value_type`` (a NumPy type, or one of
    :mod:`cuweave.device.types` such as ``complex32``, which is ``float16x2`` in kernels)."""
    numba_type = getattr(value_type, "numba_type", None)
    return numba_type() if numba_type is not None else from_dtype(np.dtype(value_type))


class OpaqueTensorType(types.Type):
    """numba type of an opaque cuBLASDx tensor: a buffer viewed through a :class:`Layout`.

    Parameters
    ----------
    layout : Layout
        The layout the buffer is viewed through (its element type is the tensor's).
    """

    def __init__(self, layout: Layout):
        self.layout = layout
        self.dtype = numba_dtype(layout.dtype)
        super().__init__(name=f"OpaqueTensor{layout._kernel_key()!r}")

    @property
    def gmem(self) -> bool:
        """Whether the tensor is in global memory (it then carries a leading dimension)."""
        return self.layout.memory_space == "gmem"


@register_model(OpaqueTensorType)
class _TensorModel(StructModel):
    def __init__(self, dmm, fe_type):
        members = [("ptr", types.voidptr)]
        if fe_type.gmem:
            members.append(("ld", types.int64))
        super().__init__(dmm, fe_type, members)


def _desc(t: OpaqueTensorType) -> tuple:
    """``(tensor kind, alignment, element type if not the operand's)`` of libmathdx's tensor."""
    return (t.layout.tensor_kind, None, t.layout.value_type_override)


def _abi_struct(gmem: bool) -> ir.Type:
    """libmathdx's in-register tensor struct (identified type, as its generated code names it)."""
    name = "struct.libmathdx_tensor_1s_0s" if gmem else "struct.libmathdx_tensor_0s_0s"
    t = ir.global_context.get_identified_type(name)
    if t.is_opaque:
        t.set_body(*([_I8P, ir.ArrayType(ir.IntType(64), 1)] if gmem else [_I8P]))
    return t


def _tensor_value(context, builder, ty: OpaqueTensorType, value):
    proxy = cgutils.create_struct_proxy(ty)(context, builder, value=value)
    st = _abi_struct(ty.gmem)
    out = builder.insert_value(ir.Constant(st, ir.Undefined), proxy.ptr, 0)
    if ty.gmem:
        out = builder.insert_value(out, proxy.ld, [1, 0])
    return out


def _generic_pointer(builder, ptr):
    if ptr.type.addrspace != 0:
        ptr = builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee), "generic")
    return builder.bitcast(ptr, _I8P)


def _scalar_pointer(context, builder, value, from_ty, to_ty):
    """Pointer to a 16-byte aligned local copy of ``value`` converted to ``to_ty``."""
    v = context.cast(builder, value, from_ty, to_ty)
    slot = cgutils.alloca_once(builder, v.type)
    slot.align = 16
    builder.store(v, slot)
    return builder.bitcast(slot, _I8P)


def _link(context, code) -> None:
    """Add ``code`` (a linkable object of :func:`_linkable` or a device-function group) to
    the link of the function being lowered. numba links each object once per kernel."""
    context.active_code_library.add_linking_file(code)


def _call_extern(builder, symbol: str, values) -> None:
    fnty = ir.FunctionType(ir.VoidType(), [v.type for v in values])
    fn = cgutils.get_or_insert_function(builder.module, fnty, symbol)
    builder.call(fn, values)


# ---------------------------------------------------------------------------------------------
# Code of device functions (cached on disk)
# ---------------------------------------------------------------------------------------------


_linkables: dict = {}


def _linkable(code: dict):
    """One numba ``LTOIR`` object per generated symbol (a kernel calling it twice links it
    once)."""
    from numba.cuda import LTOIR

    with _lock:
        obj = _linkables.get(code["symbol"])
        if obj is None:
            obj = LTOIR(code["ltoir"], name=f"{code['symbol']}.ltoir")
            obj.symbols = (code["symbol"],)
            _linkables[code["symbol"]] = obj
    return obj


def execute_parts(mm, dynamic_ld: bool = False) -> list:
    """The disk-cache key parts of ``mm``'s pointer execute (:func:`_execute_code`)."""
    return [list(mm._resolved.key()), "execute-dynamic-ld" if dynamic_ld else "execute",
            _versions()]


def _execute_code(mm, dynamic_ld: bool = False) -> dict:
    spec = mm._resolved

    def build(key):
        ltoir, symbol = _blas_mathdx.compile_execute(spec, spec.block_dim,
                                                     spec.leading_dimension,
                                                     dynamic_ld=dynamic_ld)
        return {"traits": None, "symbol": symbol, "ltoir": ltoir}

    return _cache.cached(execute_parts(mm, dynamic_ld), build)


def _device_call(context, builder, mm, kind: str, tensors: tuple, values,
                 copy_alignment=None) -> None:
    """Call libmathdx's tensor device function ``kind`` over ``tensors`` (see :func:`_desc`)
    with the C-ABI ``values``; the code is generated when the kernel is linked, together with
    every other function of ``mm`` the kernel calls (:mod:`._blas_groups`)."""
    from ._blas_groups import Request, require

    request = Request.make(mm, kind, tensors, copy_alignment, _abi(values))
    for code in require(request):
        _link(context, code)
    if request.shim is None:
        _call_extern(builder, request.symbol, values)
    else:
        _call_extern(builder, request.shim, _flatten(builder, values))


def _abi(values) -> str:
    """One letter per argument: ``g`` a global tile struct, ``t`` another tensor struct,
    ``i`` an ``int*``, ``p`` another pointer (``void*``)."""
    out = []
    for v in values:
        if isinstance(v.type, ir.IdentifiedStructType):
            out.append("g" if len(v.type.elements) == 2 else "t")
        elif isinstance(v.type, ir.PointerType) and v.type.pointee == ir.IntType(32):
            out.append("i")
        else:
            out.append("p")
    return "".join(out)


def _flatten(builder, values) -> list:
    """The tensor structs of ``values`` as their members (pointer, leading dimension)."""
    out = []
    for v in values:
        if isinstance(v.type, ir.IdentifiedStructType):
            out.append(builder.extract_value(v, 0))
            if len(v.type.elements) == 2:
                out.append(builder.extract_value(v, [1, 0]))
        else:
            out.append(v)
    return out


# ---------------------------------------------------------------------------------------------
# MM.execute
# ---------------------------------------------------------------------------------------------


def _is_none(t) -> bool:
    return t is None or isinstance(t, _NONE)


def _check_dtype(mm, got, which: str):
    want = numba_dtype(getattr(mm, f"{which}_value_type"))
    if got != want:
        raise InvalidOptionError(f"{which} must hold {want} elements for this Matmul, got {got}")
    return want


def _pointer_execute(mm):
    """Intrinsic ``(alpha, a, b, beta, c)`` on shared-memory arrays (static leading dims)."""

    @intrinsic
    def call(typingctx, alpha, a, b, beta, c):
        if not all(isinstance(x, types.Array) for x in (a, b, c)):
            return None
        if not all(isinstance(x, (types.Number, types.Boolean)) for x in (alpha, beta)):
            return None
        for arr, which in ((a, "a"), (b, "b"), (c, "c")):
            _check_dtype(mm, arr.dtype, which)

        def codegen(context, builder, sig, args):
            code = _execute_code(mm)
            _link(context, _linkable(code))
            ct = sig.args[4].dtype
            ptrs = [_generic_pointer(builder, context.make_array(t)(context, builder, v).data)
                    for t, v in ((sig.args[1], args[1]), (sig.args[2], args[2]),
                                 (sig.args[4], args[4]))]
            alpha_p = _scalar_pointer(context, builder, args[0], sig.args[0], ct)
            beta_p = _scalar_pointer(context, builder, args[3], sig.args[3], ct)
            _call_extern(builder, code["symbol"], [alpha_p, ptrs[0], ptrs[1], beta_p, ptrs[2]])
            return context.get_dummy_value()

        return types.void(alpha, a, b, beta, c), codegen

    return call


def _dynamic_ld_execute(mm):
    """Intrinsic ``(alpha, a, lda, b, ldb, beta, c, ldc)``: shared-memory arrays with leading
    dimensions given at run time."""

    @intrinsic
    def call(typingctx, alpha, a, lda, b, ldb, beta, c, ldc):
        if not all(isinstance(x, types.Array) for x in (a, b, c)):
            return None
        if not all(isinstance(x, types.Number) for x in (alpha, beta)):
            return None
        if not all(isinstance(x, types.Integer) for x in (lda, ldb, ldc)):
            return None
        for arr, which in ((a, "a"), (b, "b"), (c, "c")):
            _check_dtype(mm, arr.dtype, which)

        def codegen(context, builder, sig, args):
            code = _execute_code(mm, dynamic_ld=True)
            _link(context, _linkable(code))
            ct = sig.args[6].dtype

            def data(i):
                ary = context.make_array(sig.args[i])(context, builder, args[i])
                return _generic_pointer(builder, ary.data)

            def ld(i):
                v = context.cast(builder, args[i], sig.args[i], types.uint32)
                return builder.bitcast(cgutils.alloca_once_value(builder, v), _I8P)

            values = [_scalar_pointer(context, builder, args[0], sig.args[0], ct), data(1), ld(2),
                      data(3), ld(4), _scalar_pointer(context, builder, args[5], sig.args[5], ct),
                      data(6), ld(7)]
            _call_extern(builder, code["symbol"], values)
            return context.get_dummy_value()

        return types.void(alpha, a, lda, b, ldb, beta, c, ldc), codegen

    return call


def _tensor_execute(mm, with_scalars: bool):
    """Intrinsic on opaque tensors: ``(alpha, A, B, beta, C)`` (C in shared memory) or
    ``(A, B, C)`` (C a register fragment, accumulated)."""

    def check(tensors):
        if not all(isinstance(t, OpaqueTensorType) for t in tensors):
            return None
        for t, which in zip(tensors, "abc"):
            if t.layout.operand != which:
                raise InvalidOptionError(f"{which} must be a tensor of operand {which!r}, got "
                                         f"one of operand {t.layout.operand!r}")
        space = tensors[2].layout.memory_space
        if with_scalars != (space == "smem"):
            raise InvalidOptionError(
                "C must be a shared-memory tensor for execute(alpha, A, B, beta, C) and a "
                f"register fragment for execute(A, B, C), got a {space} tensor")
        return tuple(_desc(t) for t in tensors)

    def codegen_for(kinds):
        def codegen(context, builder, sig, llargs):
            if with_scalars:
                ct = sig.args[4].dtype
                values = [_scalar_pointer(context, builder, llargs[0], sig.args[0], ct),
                          _tensor_value(context, builder, sig.args[1], llargs[1]),
                          _tensor_value(context, builder, sig.args[2], llargs[2]),
                          _scalar_pointer(context, builder, llargs[3], sig.args[3], ct),
                          _tensor_value(context, builder, sig.args[4], llargs[4])]
            else:
                values = [_tensor_value(context, builder, t, v)
                          for t, v in zip(sig.args, llargs)]
            _device_call(context, builder, mm, "EXECUTE", kinds, values)
            return context.get_dummy_value()

        return codegen

    if with_scalars:
        @intrinsic
        def call(typingctx, alpha, a, b, beta, c):
            kinds = check((a, b, c))
            if kinds is None or not all(isinstance(x, types.Number) for x in (alpha, beta)):
                return None
            return types.void(alpha, a, b, beta, c), codegen_for(kinds)
    else:
        @intrinsic
        def call(typingctx, a, b, c):
            kinds = check((a, b, c))
            if kinds is None:
                return None
            return types.void(a, b, c), codegen_for(kinds)

    return call


_executes: dict = {}


def _execute_dispatch(mm):
    """One intrinsic for every form of ``MM.execute``, chosen by the argument types."""
    pointer, smem_t, rmem_t = (_pointer_execute(mm), _tensor_execute(mm, True),
                               _tensor_execute(mm, False))
    dynamic = _dynamic_ld_execute(mm)

    @intrinsic
    def dispatch(typingctx, a1, a2, a3, a4, a5, a6, a7, a8):
        given = (a1, a2, a3, a4, a5, a6, a7, a8)
        if not all(_is_none(x) for x in (a6, a7, a8)):
            target, args = dynamic, given
        elif _is_none(a4) and _is_none(a5):
            target, args = rmem_t, (a1, a2, a3)
        elif isinstance(a2, OpaqueTensorType):
            target, args = smem_t, (a1, a2, a3, a4, a5)
        else:
            target, args = pointer, (a1, a2, a3, a4, a5)
        template = target._defn(typingctx, *args)
        if template is None:
            raise InvalidOptionError(
                "MM.execute takes (alpha, smem_a, smem_b, beta, smem_c) with arrays in shared "
                "memory or opaque tensors, (alpha, a, lda, b, ldb, beta, c, ldc) with arrays, or "
                "(smem_a, smem_b, rmem_c) with opaque tensors; got "
                f"({', '.join(str(x) for x in given if not _is_none(x))})")
        inner_sig, inner_codegen = template
        n = len(args)

        def codegen(context, builder, sig, llargs):
            inner = inner_codegen(context, builder, inner_sig, llargs[:n])
            return inner

        return types.void(*given), codegen

    return dispatch


def execute_function(mm):
    """``MM.execute`` inside kernels: a device function over :func:`_execute_dispatch`."""
    from ._numba_ext import numba_modules

    key = mm._kernel_key()
    fn = _executes.get(key)
    if fn is None:
        cuda = numba_modules()[0]
        dispatch = _execute_dispatch(mm)

        def execute(a1, a2, a3, a4=None, a5=None, a6=None, a7=None, a8=None):
            dispatch(a1, a2, a3, a4, a5, a6, a7, a8)

        fn = _executes.setdefault(key, cuda.jit(device=True, forceinline=True)(execute))
    return fn


_layout_fns: dict = {}


class RuntimeLdLayoutType(KernelObjectType):
    """A global-memory layout whose leading dimension is a run-time integer, carried by the
    value (``MM.get_layout_gmem_c(ld)`` with ``ld`` a kernel variable)."""

    def __init__(self, obj):
        super().__init__(obj)
        self.name = f"RuntimeLd{self.name}"


@register_model(RuntimeLdLayoutType)
class _RuntimeLdModel(StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("ld", types.int64)])


def layout_function(mm, method: str):
    """A device-side ``MM.<method>(leading_dimension=None)`` returning the Layout constant."""
    from ._numba_ext import numba_modules

    key = (mm._kernel_key(), method)
    fn = _layout_fns.get(key)
    if fn is not None:
        return fn
    gmem = _LAYOUTS[method][2] == "gmem"
    keep: list = []

    @intrinsic
    def make(typingctx, leading_dimension):
        runtime = False
        if _is_none(leading_dimension):
            layout = getattr(mm, method)()
        elif gmem and isinstance(leading_dimension, types.IntegerLiteral):
            layout = getattr(mm, method)(leading_dimension.literal_value)
        elif gmem and isinstance(leading_dimension, types.Integer):
            layout, runtime = getattr(mm, method)(), True
        else:
            raise InvalidOptionError(
                f"leading_dimension of {method} must be an integer (global-memory layouts "
                f"only), got {leading_dimension}")
        keep.append(layout)  # the type holds the object; keep it alive with the function
        ty = RuntimeLdLayoutType(layout) if runtime else KernelObjectType(layout)

        def codegen(context, builder, sig, args):
            if not runtime:
                return ir.Constant(context.get_value_type(ty), None)
            value = cgutils.create_struct_proxy(ty)(context, builder)
            value.ld = context.cast(builder, args[0], sig.args[0], types.int64)
            return value._getvalue()

        return ty(leading_dimension), codegen

    def get_layout(leading_dimension=None):
        return make(leading_dimension)

    cuda = numba_modules()[0]
    fn = _layout_fns.setdefault(key, cuda.jit(device=True, forceinline=True)(get_layout))
    return fn


# ---------------------------------------------------------------------------------------------
# Tensor functions (module level, as in nvmath-python: cuweave.device.make_tensor, ...)
# ---------------------------------------------------------------------------------------------


def _layout_of(ty) -> Layout | None:
    obj = getattr(ty, "obj", None)
    return obj if isinstance(obj, Layout) else None


@intrinsic
def _make_tensor(typingctx, array, layout_ty):
    layout = _layout_of(layout_ty)
    if layout is None or not isinstance(array, types.Array):
        return None
    if layout.memory_space == "acc":
        raise InvalidOptionError("accumulators come from MM.suggest_accumulator() or "
                                 "MM.get_accumulator(), not make_tensor")
    if numba_dtype(layout.dtype) != array.dtype:
        layout = layout.like(as_dtype(array.dtype))      # same layout over the array's type
    out = OpaqueTensorType(layout)

    def codegen(context, builder, sig, args):
        arrty = sig.args[0]
        ary = context.make_array(arrty)(context, builder, args[0])
        proxy = cgutils.create_struct_proxy(out)(context, builder)
        proxy.ptr = _generic_pointer(builder, ary.data)
        if isinstance(sig.args[1], RuntimeLdLayoutType):
            proxy.ld = cgutils.create_struct_proxy(sig.args[1])(context, builder,
                                                                value=args[1]).ld
        elif out.gmem:
            proxy.ld = _leading_dimension(context, builder, layout, arrty, ary)
        return proxy._getvalue()

    return out(array, layout_ty), codegen


def _leading_dimension(context, builder, layout: Layout, arrty, ary):
    i64 = ir.IntType(64)
    if layout.leading_dimension is not None:
        return ir.Constant(i64, layout.leading_dimension)
    rows, cols = layout._dims()
    order = layout.MM._orders()["abc".index(layout.operand)]
    if arrty.ndim != 2:
        return ir.Constant(i64, cols if order == "row_major" else rows)
    strides = cgutils.unpack_tuple(builder, ary.strides, 2)
    item = ir.Constant(i64, context.get_abi_sizeof(context.get_data_type(arrty.dtype)))
    return builder.sdiv(strides[0 if order == "row_major" else 1], item)


def make_tensor(array, layout):
    """Inside kernels: an opaque tensor viewing ``array`` through ``layout``.

    Parameters
    ----------
    array : device array
        A global-memory array, or a shared-memory buffer (a 1-D ``cuda.shared.array``
        slice). A 2-D global array's leading dimension comes from its strides unless the
        layout fixes one.
    layout : Layout
        From ``MM.get_layout_gmem_a()``, ``MM.suggest_layout_smem_a()``, ...

    Returns
    -------
    OpaqueTensorType
        The tensor, an argument of ``MM.execute``, :func:`copy` and the other tensor
        functions.
    """
    raise RuntimeError("make_tensor runs inside @cuda.jit kernels only")


@overload(make_tensor, jit_options={"forceinline": True})
def _ol_make_tensor(array, layout):
    if _layout_of(layout) is None:
        return None
    return lambda array, layout: _make_tensor(array, layout)


def _copy_intrinsic(fragment: bool, alignment: int | None):
    @intrinsic
    def call(typingctx, src, dst):
        if not (isinstance(src, OpaqueTensorType) and isinstance(dst, OpaqueTensorType)):
            return None
        spaces = {src.layout.memory_space, dst.layout.memory_space}
        if fragment != bool({"rmem", "acc"} & spaces):
            raise InvalidOptionError(
                "copy_fragment copies a register fragment to or from memory and copy moves "
                f"tiles between global and shared memory, got {src.layout.memory_space} -> "
                f"{dst.layout.memory_space}")
        if src.layout.operand != dst.layout.operand:
            raise InvalidOptionError(f"src and dst must be views of one operand, got "
                                     f"{src.layout.operand!r} and {dst.layout.operand!r}")
        if alignment is not None and alignment < np.dtype(src.layout.dtype).itemsize:
            raise InvalidOptionError(f"alignment must be at least the element size "
                                     f"({np.dtype(src.layout.dtype).itemsize}), got {alignment}")
        mm = dst.layout.MM if dst.layout.memory_space != "gmem" else src.layout.MM
        kinds = (_desc(src), _desc(dst))

        def codegen(context, builder, sig, args):
            values = [_tensor_value(context, builder, t, v) for t, v in zip(sig.args, args)]
            _device_call(context, builder, mm, "COPY", kinds, values, alignment)
            return context.get_dummy_value()

        return types.void(src, dst), codegen

    return call


_COPIES = {(f, a): _copy_intrinsic(f, a) for f in (False, True) for a in (None, 1, 2, 4, 8, 16)}


def _alignment_value(alignment):
    """The constant copy alignment (None when omitted; ``False`` for a not-yet-literal int,
    which numba retries as a literal); raises for anything else."""
    if _is_none(alignment):
        return None
    if isinstance(alignment, types.IntegerLiteral) and \
            alignment.literal_value in (1, 2, 4, 8, 16):
        return alignment.literal_value
    if isinstance(alignment, types.Integer) and not isinstance(alignment, types.Literal):
        return False
    raise InvalidOptionError(f"alignment must be one of 1, 2, 4, 8, 16 (bytes, a compile-time "
                             f"constant), got {alignment}")


def copy(src, dst, alignment=None):
    """Inside kernels: block-wide copy between a global tile and shared memory.

    The copy may be asynchronous: call :func:`copy_wait` before reading ``dst``.

    Parameters
    ----------
    src, dst : opaque tensors
        From :func:`make_tensor`: one in global memory, the other in shared memory.
    alignment : int, optional
        Bytes, a power of two known at compile time: lets the copy assume that both ends are
        that aligned (vectorized accesses). Default: the element size.
    """
    raise RuntimeError("copy runs inside @cuda.jit kernels only")


def copy_fragment(src, dst, alignment=None):
    """Inside kernels: per-thread copy between a register fragment and global/shared memory.

    Parameters
    ----------
    src, dst : opaque tensors
        A register fragment (an accumulator's results, :func:`make_fragment_like`) and a
        global- or shared-memory tensor, either way round.
    alignment : int, optional
        Bytes, a power of two known at compile time, as in :func:`copy`.
    """
    raise RuntimeError("copy_fragment runs inside @cuda.jit kernels only")


def _ol_copy_generic(fragment: bool):
    def ol(src, dst, alignment=None):
        value = _alignment_value(alignment)
        if value is False:
            return None
        target = _COPIES[(fragment, value)]
        return lambda src, dst, alignment=None: target(src, dst)

    return ol


overload(copy, jit_options={"forceinline": True})(_ol_copy_generic(False))
overload(copy_fragment, jit_options={"forceinline": True})(_ol_copy_generic(True))
_copy_fragment = _COPIES[(True, None)]


@intrinsic
def _clear(typingctx, tensor):
    if not isinstance(tensor, OpaqueTensorType):
        return None
    if tensor.layout.memory_space not in ("rmem", "acc"):
        raise InvalidOptionError(f"clear takes a register fragment or accumulator, got a "
                                 f"{tensor.layout.memory_space} tensor")
    kinds = (_desc(tensor),)

    def codegen(context, builder, sig, args):
        _device_call(context, builder, tensor.layout.MM, "CLEAR", kinds,
                     [_tensor_value(context, builder, sig.args[0], args[0])])
        return context.get_dummy_value()

    return types.void(tensor), codegen


def clear(tensor):
    """Inside kernels: zero a register fragment.

    Parameters
    ----------
    tensor : opaque tensor
        A register fragment.
    """
    raise RuntimeError("clear runs inside @cuda.jit kernels only")


@overload(clear, jit_options={"forceinline": True})
def _ol_clear(tensor):
    return lambda tensor: _clear(tensor)


@intrinsic
def _axpby(typingctx, alpha, x, beta, y):
    if not (isinstance(x, OpaqueTensorType) and isinstance(y, OpaqueTensorType)):
        return None
    if {x.layout.memory_space, y.layout.memory_space} != {"rmem"}:
        raise InvalidOptionError("axpby takes two register fragments (y = alpha x + beta y)")
    kinds = (_desc(x), _desc(y))

    def codegen(context, builder, sig, args):
        values = [_scalar_pointer(context, builder, args[0], sig.args[0], x.dtype),
                  _tensor_value(context, builder, x, args[1]),
                  _scalar_pointer(context, builder, args[2], sig.args[2], y.dtype),
                  _tensor_value(context, builder, y, args[3])]
        _device_call(context, builder, y.layout.MM, "AXPBY", kinds, values)
        return context.get_dummy_value()

    return types.void(alpha, x, beta, y), codegen


def axpby(alpha, x, beta, y):
    """Inside kernels: ``y = alpha * x + beta * y`` on register fragments.

    Parameters
    ----------
    alpha, beta : scalars
        The factors.
    x : opaque tensor
        A register fragment (read).
    y : opaque tensor
        A register fragment of the same partition (updated).
    """
    raise RuntimeError("axpby runs inside @cuda.jit kernels only")


@overload(axpby, jit_options={"forceinline": True})
def _ol_axpby(alpha, x, beta, y):
    return lambda alpha, x, beta, y: _axpby(alpha, x, beta, y)


@intrinsic
def _copy_wait(typingctx):
    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.VoidType(), [])
        builder.call(ir.InlineAsm(fnty, "cp.async.wait_all;", "", side_effect=True), [])
        barrier = cgutils.get_or_insert_function(builder.module, fnty, "llvm.nvvm.barrier0")
        builder.call(barrier, [])
        return context.get_dummy_value()

    return types.void(), codegen


def copy_wait():
    """Inside kernels: wait for this block's asynchronous copies, then synchronize the block
    (``cp.async.wait_all`` + ``__syncthreads()``; needs sm_80 or newer)."""
    raise RuntimeError("copy_wait runs inside @cuda.jit kernels only")


@overload(copy_wait, jit_options={"forceinline": True})
def _ol_copy_wait():
    return lambda: _copy_wait()
