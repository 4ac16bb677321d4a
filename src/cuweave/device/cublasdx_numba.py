"""nvmath-python's ``nvmath.device.cublasdx_numba`` names: ``pipeline_extensions`` and the numba
side of cuBLASDx pipelines (``cuweave.device._blas_pipeline`` is the host side).

* A :class:`~cuweave.device.cublasdx.DevicePipeline` kernel argument is typed by its
  configuration (traits are compile-time constants: ``device_pipeline.buffer_alignment`` can
  align ``cuda.shared.array``) and passed as the address of its device-side object: kernels
  are compiled with ``@cuda.jit(extensions=pipeline_extensions)``.
* ``device_pipeline.get_tile(smem, x, y)`` makes a tile pipeline whose state lives in the
  calling kernel's frame; ``tile.execute(acc)``, ``device_pipeline.reset_tile(tile, x, y)`` and
  ``tile._del()`` call libmathdx's generated functions through pointer-argument shims.
* ``MM.suggest_accumulator()`` of a pipelined GEMM: cuBLASDx requires pipelined accumulators to
  come from a tile pipeline, so the accumulator's state is created by its first
  ``tile.execute`` (a flag and the tile pipeline's address sit after the state), and its
  fragment copies to and from global memory go through that tile pipeline (cuBLASDx rejects
  plain fragment copies in pipelined mode).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils
from numba.core.typing.templates import AttributeTemplate
from numba.cuda import types
from numba.cuda.cudadecl import registry as _typing_registry
from numba.cuda.cudaimpl import lower_getattr_generic
from numba.cuda.extending import intrinsic, overload_method, typeof_impl
from numba.cuda.models import StructModel, register_model

from .._internal.errors import InvalidOptionError
from . import _blas_numba
from ._blas_fragments import AccumulatorType, _empty_fragment, _is_thread_active
from ._blas_layout import Layout
from ._blas_numba import _I8P, OpaqueTensorType, _generic_pointer, _TensorModel
from ._blas_pipeline import DevicePipeline, PipelineInfo, TilePipeline

__all__ = ["pipeline_extensions", "DevicePipelineType", "TilePipelineType",
           "PipelineAccumulatorType", "DevicePipeline", "TilePipeline"]

_I64 = ir.IntType(64)
_I32 = ir.IntType(32)
_FRAME = {"inline": "always"}   # state buffers are allocas of the calling kernel


class DevicePipelineType(types.Type):
    """numba type of a DevicePipeline argument (one type per pipeline configuration).

    Parameters
    ----------
    info : PipelineInfo
        The pipeline's configuration and traits.
    """

    def __init__(self, info: PipelineInfo):
        self.info = info
        _PIPELINE_OF[info.mm._kernel_key()] = info
        super().__init__(name=f"DevicePipeline{info.config!r}")


class TilePipelineType(types.Type):
    """numba type of a tile pipeline inside a kernel.

    Parameters
    ----------
    info : PipelineInfo
        The configuration and traits of the device pipeline it comes from.
    """

    def __init__(self, info: PipelineInfo):
        self.info = info
        super().__init__(name=f"TilePipeline{info.config!r}")


class PipelineAccumulatorType(AccumulatorType):
    """``MM.suggest_accumulator()`` of a pipelined GEMM (see the module notes).

    Parameters
    ----------
    mm : Matmul
        The pipelined GEMM.
    suggested : bool
        cuBLASDx's suggested partition (the only one pipelines take).
    """


for _cls in (DevicePipelineType, TilePipelineType):
    @register_model(_cls)
    class _PointerModel(StructModel):
        def __init__(self, dmm, fe_type):
            super().__init__(dmm, fe_type, [("ptr", types.voidptr)])
register_model(PipelineAccumulatorType)(_TensorModel)


class _PipelineArguments:
    """numba-cuda launch extension: a DevicePipeline argument becomes its object's address."""

    def prepare_args(self, ty, val, stream=None, retr=None):
        if isinstance(val, DevicePipeline):
            return types.uint64, val._storage_pointer
        return ty, val


#: Pass as ``@cuda.jit(extensions=pipeline_extensions)`` to kernels taking a DevicePipeline.
pipeline_extensions = [_PipelineArguments()]

_CONSTANTS = ("buffer_size", "buffer_alignment", "storage_bytes", "storage_alignment")


@_typing_registry.register_attr
class _PipelineAttributes(AttributeTemplate):
    key = DevicePipelineType

    def generic_resolve(self, typ, attr):
        if attr in _CONSTANTS:
            return types.literal(int(typ.info.traits["device"][attr]))
        return None


@lower_getattr_generic(DevicePipelineType)
def _lower_pipeline_attribute(context, builder, typ, value, attr):
    return context.get_constant(types.int64, int(typ.info.traits["device"][attr]))


# ---------------------------------------------------------------------------------------------
# Calls
# ---------------------------------------------------------------------------------------------


def _call(context, builder, info: PipelineInfo, name: str, values) -> None:
    """Call the shim of libmathdx's ``name`` function of ``info``'s pipeline."""
    from numba.cuda import LTOIR

    code = _code_objects(info, LTOIR)
    for obj in code:
        _blas_numba._link(context, obj)
    symbol = info.code()["symbols"][f"{name}_shim"]
    _blas_numba._call_extern(builder, symbol, values)


_objects: dict = {}


def _code_objects(info: PipelineInfo, ltoir_class) -> tuple:
    """numba LTO-IR objects of ``info``'s functions and shims (one pair per configuration)."""
    objs = _objects.get(info.config)
    if objs is None:
        code = info.code()
        tag = code["symbols"]["tile_execute"]
        objs = (ltoir_class(code["functions"], name=f"{tag}.ltoir"),
                ltoir_class(code["shims"], name=f"{tag}_shims.ltoir"))
        names = code["symbols"]
        objs[0].symbols = tuple(v for k, v in names.items()
                                if not k.endswith(("_shim", "_kernel")))
        objs[1].symbols = tuple(v for k, v in names.items() if k.endswith(("_shim", "_kernel")))
        _objects[info.config] = objs
    return objs


def _pointer(context, builder, ty, value):
    return cgutils.create_struct_proxy(ty)(context, builder, value=value).ptr


def _coordinates(context, builder, ty, value, count: int):
    """An ``int*`` to ``count`` int32 coordinates (an integer or a tuple of integers)."""
    values = cgutils.unpack_tuple(builder, value) if isinstance(ty, types.BaseTuple) else [value]
    tys = list(ty) if isinstance(ty, types.BaseTuple) else [ty]
    slot = cgutils.alloca_once(builder, ir.ArrayType(_I32, count))
    for i, (v, t) in enumerate(zip(values, tys)):
        builder.store(context.cast(builder, v, t, types.int32),
                      builder.gep(slot, [ir.Constant(_I32, 0), ir.Constant(_I32, i)]))
    return builder.bitcast(slot, _I32.as_pointer())


def _check_coordinates(info: PipelineInfo, *coords) -> None:
    count = info.rank - 1
    for c in coords:
        if count == 1 and isinstance(c, types.Integer):
            continue
        if isinstance(c, types.BaseTuple) and len(c) == count and \
                all(isinstance(t, types.Integer) for t in c):
            continue
        want = "an integer" if count == 1 else f"a tuple of {count} integers (tile, batch)"
        raise InvalidOptionError(f"tile coordinates must be {want} for this pipeline's "
                                 f"{info.rank}-D operands, got {c}")


def _state(context, builder, nbytes: int, alignment: int):
    slot = cgutils.alloca_once(builder, ir.ArrayType(ir.IntType(8), nbytes))
    slot.align = max(16, alignment)
    builder.store(ir.Constant(slot.type.pointee, None), slot)
    return builder.bitcast(slot, _I8P)


@intrinsic
def _get_tile(typingctx, pipeline, smem, x, y):
    if not isinstance(pipeline, DevicePipelineType) or not isinstance(smem, types.Array):
        return None
    info = pipeline.info
    _check_coordinates(info, x, y)
    out = TilePipelineType(info)
    n = info.rank - 1

    def codegen(context, builder, sig, args):
        tile = info.traits["tile"]
        tp = _state(context, builder, int(tile["storage_bytes"]), int(tile["storage_alignment"]))
        smem_ptr = _generic_pointer(builder, context.make_array(sig.args[1])(
            context, builder, args[1]).data)
        _call(context, builder, info, "tile_create",
              [_pointer(context, builder, sig.args[0], args[0]), tp, smem_ptr,
               _coordinates(context, builder, sig.args[2], args[2], n),
               _coordinates(context, builder, sig.args[3], args[3], n)])
        proxy = cgutils.create_struct_proxy(out)(context, builder)
        proxy.ptr = tp
        return proxy._getvalue()

    return out(pipeline, smem, x, y), codegen


@overload_method(DevicePipelineType, "get_tile", **_FRAME)
def _ol_get_tile(pipeline, smem, x, y):
    return lambda pipeline, smem, x, y: _get_tile(pipeline, smem, x, y)


@intrinsic
def _reset_tile(typingctx, pipeline, tile, x, y):
    if not (isinstance(pipeline, DevicePipelineType) and isinstance(tile, TilePipelineType)):
        return None
    info = pipeline.info
    _check_coordinates(info, x, y)
    n = info.rank - 1

    def codegen(context, builder, sig, args):
        _call(context, builder, info, "tile_reset",
              [_pointer(context, builder, sig.args[0], args[0]),
               _pointer(context, builder, sig.args[1], args[1]),
               _coordinates(context, builder, sig.args[2], args[2], n),
               _coordinates(context, builder, sig.args[3], args[3], n)])
        return context.get_dummy_value()

    return types.void(pipeline, tile, x, y), codegen


@overload_method(DevicePipelineType, "reset_tile", jit_options={"forceinline": True})
def _ol_reset_tile(pipeline, tile, x, y):
    return lambda pipeline, tile, x, y: _reset_tile(pipeline, tile, x, y)


def _header(context, builder, acc_ty, acc_value):
    """Pointer to the accumulator's i64 slot holding its tile pipeline's address (0 before
    its first execute)."""
    base = _pointer(context, builder, acc_ty, acc_value)
    offset = _state_bytes(acc_ty.layout)
    return builder.bitcast(builder.gep(base, [ir.Constant(_I64, offset)]), _I64.as_pointer())


def _state_bytes(layout: Layout) -> int:
    import numpy as np

    nbytes = layout.cosize * np.dtype(layout.dtype).itemsize
    return -(-nbytes // 16) * 16


@intrinsic
def _execute(typingctx, tile, acc):
    if not (isinstance(tile, TilePipelineType) and isinstance(acc, PipelineAccumulatorType)):
        return None
    info = tile.info
    if acc.layout.MM._kernel_key() != info.mm._kernel_key():
        raise InvalidOptionError("accumulator must come from the pipeline's Matmul "
                                 "(MM.suggest_accumulator())")

    def codegen(context, builder, sig, args):
        tp = _pointer(context, builder, sig.args[0], args[0])
        acc_ptr = _pointer(context, builder, sig.args[1], args[1])
        slot = _header(context, builder, sig.args[1], args[1])
        with builder.if_then(builder.icmp_unsigned("==", builder.load(slot),
                                                   ir.Constant(_I64, 0))):
            _call(context, builder, info, "accumulator_create", [tp, acc_ptr])
            acc_abi = [_blas_numba._tensor_value(context, builder, sig.args[1], args[1])]
            _blas_numba._device_call(context, builder, info.mm, "CLEAR",
                                     (_blas_numba._desc(sig.args[1]),), acc_abi)
        builder.store(builder.ptrtoint(tp, _I64), slot)
        _call(context, builder, info, "tile_execute", [tp, acc_ptr])
        _call(context, builder, info, "finish_accumulation", [acc_ptr])
        return context.get_dummy_value()

    return types.void(tile, acc), codegen


@overload_method(TilePipelineType, "execute", jit_options={"forceinline": True})
def _ol_execute(tile, acc):
    return lambda tile, acc: _execute(tile, acc)


@intrinsic
def _destroy(typingctx, tile):
    if not isinstance(tile, TilePipelineType):
        return None
    info = tile.info

    def codegen(context, builder, sig, args):
        _call(context, builder, info, "tile_destroy",
              [_pointer(context, builder, sig.args[0], args[0])])
        return context.get_dummy_value()

    return types.void(tile), codegen


@overload_method(TilePipelineType, "_del", jit_options={"forceinline": True})
def _ol_del(tile):
    return lambda tile: _destroy(tile)


# ---------------------------------------------------------------------------------------------
# Accumulators of pipelined GEMMs
# ---------------------------------------------------------------------------------------------


_accumulators: dict = {}


def accumulator_function(mm, suggested: bool = True):
    """``MM.suggest_accumulator()`` of a pipelined GEMM: zeroed state plus the tile-pipeline
    slot, created by the first ``tile.execute``."""
    if not suggested:
        raise InvalidOptionError("pipelined GEMMs take MM.suggest_accumulator() (the tile "
                                 "pipeline's accumulator), not MM.get_accumulator()")
    key = mm._kernel_key()
    fn = _accumulators.get(key)
    if fn is not None:
        return fn
    acc_ty = PipelineAccumulatorType(mm, True)

    @intrinsic
    def make(typingctx):
        def codegen(context, builder, sig, args):
            proxy = cgutils.create_struct_proxy(acc_ty)(context, builder)
            proxy.ptr = _state(context, builder, _state_bytes(acc_ty.layout) + 16, 16)
            return proxy._getvalue()

        return acc_ty(), codegen

    def suggest_accumulator():
        return make()

    # inlined by numba into the caller: the state belongs to the caller's frame
    from ._numba_ext import numba_modules

    cuda = numba_modules()[0]
    return _accumulators.setdefault(key, cuda.jit(device=True, **_FRAME)(suggest_accumulator))


def _fragment_copy(to_fragment: bool):
    """Intrinsic ``(acc, src, dst)``: a copy between a global tile of C and a register
    fragment through the accumulator's tile pipeline."""

    @intrinsic
    def copy(typingctx, acc, src, dst):
        if not (isinstance(acc, PipelineAccumulatorType) and isinstance(src, OpaqueTensorType)
                and isinstance(dst, OpaqueTensorType)):
            return None
        gmem = src if to_fragment else dst
        if not gmem.gmem or gmem.layout.operand != "c" or gmem.layout.value_type_override:
            raise InvalidOptionError(f"pipelined accumulators copy register fragments to and "
                                     f"from global tiles of C in C's precision, got {gmem}")
        info_mm = acc.layout.MM

        def codegen(context, builder, sig, args):
            tp = builder.inttoptr(builder.load(_header(context, builder, sig.args[0], args[0])),
                                  _I8P)
            g = cgutils.create_struct_proxy(gmem)(context, builder,
                                                  value=args[1 if to_fragment else 2])
            r = _pointer(context, builder, sig.args[2 if to_fragment else 1],
                         args[2 if to_fragment else 1])
            values = [tp, g.ptr, g.ld, r] if to_fragment else [tp, r, g.ptr, g.ld]
            info = _PIPELINE_OF.get(info_mm._kernel_key())
            if info is None:
                raise InvalidOptionError("a pipelined accumulator's fragment copies need a "
                                         "tile pipeline in the same kernel (tile.execute)")
            _call(context, builder, info,
                  "copy_to_fragment" if to_fragment else "copy_from_fragment", values)
            return context.get_dummy_value()

        return types.void(acc, src, dst), codegen

    return copy


#: Matmul kernel key -> the PipelineInfo of the last pipeline typed with it (the fragment
#: copies of its accumulators go through that configuration's generated functions).
_PIPELINE_OF: dict = {}
_to_fragment, _from_fragment = _fragment_copy(True), _fragment_copy(False)


def _typeof_pipeline(val, c):
    return DevicePipelineType(val._info)


# numba-cuda's registry, and numba's own where it is another one (``numba.typeof`` of a
# launch argument, as nvmath's examples call it)
typeof_impl.register(DevicePipeline)(_typeof_pipeline)
try:
    from numba.core.typing.typeof import typeof_impl as _core_typeof_impl
except ImportError:  # pragma: no cover - numba-cuda without numba
    _core_typeof_impl = typeof_impl
if _core_typeof_impl is not typeof_impl:
    _core_typeof_impl.register(DevicePipeline)(_typeof_pipeline)


@overload_method(PipelineAccumulatorType, "make_partition_and_copy", **_FRAME)
def _ol_make_partition_and_copy(acc, src):
    if not isinstance(src, OpaqueTensorType):
        return None
    make = _empty_fragment(acc.fragment_layout)

    def impl(acc, src):
        frag = make()
        if _is_thread_active(acc):
            _to_fragment(acc, src, frag)
        return frag

    return impl


@overload_method(PipelineAccumulatorType, "partition_and_copy",
                 jit_options={"forceinline": True})
def _ol_partition_and_copy(acc, src, dst):
    def impl(acc, src, dst):
        if _is_thread_active(acc):
            _from_fragment(acc, src, dst)

    return impl
