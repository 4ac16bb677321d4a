"""Streaming (evict-first) global loads and stores of whole elements inside numba kernels.

``ldcs(array, index)`` and ``stcs(array, index, value)`` are ``numba.cuda.ldcs`` /
``numba.cuda.stcs`` (PTX ``ld.global.cs`` / ``st.global.cs``: data touched once, kept out of
the way of the caches) for the element types numba's accept nothing of: ``complex64``,
``complex128`` and cuweave's vector types of up to 16 bytes (``float32x2``, ``float32x4``,
``float16x4``, ``float64x2``, ``uint32x4``, ...), each element moved in **one** vector access::

    z = ldcs(x, (b, j))           # complex64 array: one ld.global.cs.v2.f32 (8 bytes)
    stcs(y, (b, j), z)
    w = ldcs(x.view(float32x4_type), (b, j // 2))  # elements j, j + 1 (j even): one
    #                                                ld.global.cs.v4.f32 (16 bytes)

(numba itself aligns ``complex64`` to 4 bytes and moves it as two 4-byte accesses.) Integer and
float arrays work too, as with numba's functions. The element's address must be aligned to its
size (``complex64``: 8 bytes, ``float32x4``: 16), which arrays from CUDA allocations are when the
index is (for a ``float32x4`` view of a ``complex64`` row: an even column and an even row length).
As numba's ``ldcs``, a load is not ordered by the compiler against other memory accesses of the
thread: read with it only data the kernel does not write.

Imports numba; loaded when a name is first used.
"""

from __future__ import annotations

from llvmlite import ir
from numba.cuda import types
from numba.cuda.cache_hints import _get_element_pointer
from numba.cuda.core.errors import NumbaTypeError
from numba.cuda.extending import intrinsic, overload

from ._vector_types import VectorType

__all__ = ["ldcs", "stcs"]

_F32, _F64 = ir.FloatType(), ir.DoubleType()


def ldcs(array, index):
    """``ldcs(array, index)`` inside a numba CUDA kernel: element ``index`` of a global-memory
    ``array`` read with one streaming (``ld.global.cs``) access of the element's full width
    (``complex64``: ``.v2.f32``, ``float32x4``: ``.v4.f32``, ``complex128``: ``.v2.f64``).

    Parameters
    ----------
    array : device array
        In global memory.
    index : int or tuple of int
        The element's index (one integer per dimension).

    Returns
    -------
    scalar or vector
        The element, of the array's element type.
    """
    raise TypeError("cuweave.device.ldcs is called inside numba CUDA kernels only")


def stcs(array, index, value):
    """``stcs(array, index, value)`` inside a numba CUDA kernel: ``value`` (converted to the
    array's element type) written to element ``index`` of a global-memory ``array`` with one
    streaming (``st.global.cs``) access of the element's full width.

    Parameters
    ----------
    array : device array
        In global memory.
    index : int or tuple of int
        The element's index (one integer per dimension).
    value : scalar or vector
        What is written (converted to the array's element type).
    """
    raise TypeError("cuweave.device.stcs is called inside numba CUDA kernels only")


def _check(name, array, index):
    """An array and an integer index, or a tuple of integers (of any mix of widths; numba's
    ``ldcs`` takes only tuples of one integer type) with one per dimension."""
    if not isinstance(array, types.Array):
        raise NumbaTypeError(f"{name}: array must be an array, got {array}")
    ints = ([index] if isinstance(index, types.Integer) else
            list(index) if isinstance(index, types.BaseTuple) else [None])
    if not all(isinstance(i, types.Integer) for i in ints):
        raise NumbaTypeError(
            f"{name}: index must be an integer or a tuple of integers, got {index}")
    if len(ints) != array.ndim:
        raise NumbaTypeError(f"{name}: index must have {array.ndim} integer(s) for a "
                             f"{array.ndim}-d array, got {len(ints)}")


def _element_error(dtype) -> NumbaTypeError:
    return NumbaTypeError(f"ldcs/stcs: the array's elements must be integers, floats, complex "
                          f"numbers or cuweave vector types, got {dtype}")


class _Lanes:
    """How an element moves: ``count`` lanes of PTX type ``ptx`` (LLVM type ``llvm``,
    inline-asm constraint ``letter``), and the element's value <-> lane values."""

    def __init__(self, dtype):
        self.dtype = dtype
        if isinstance(dtype, types.Complex):
            scalar, self.count = dtype.underlying_float, 2
        elif isinstance(dtype, VectorType):
            scalar, self.count = dtype.dtype, dtype.count
        elif isinstance(dtype, (types.Integer, types.Float)):
            scalar, self.count = dtype, 1
        else:
            raise _element_error(dtype)
        if scalar == types.float32:
            self.ptx, self.llvm, self.letter = "f32", _F32, "f"
        elif scalar == types.float64:
            self.ptx, self.llvm, self.letter = "f64", _F64, "d"
        elif dtype.bitwidth in (16, 32, 64) and self.count == 1:  # one integer or half
            self.ptx, self.llvm = f"b{dtype.bitwidth}", ir.IntType(dtype.bitwidth)
            self.letter = {16: "h", 32: "r", 64: "l"}[dtype.bitwidth]
        elif dtype.bitwidth % 32 == 0:  # other vectors (float16x4, uint32x4): 32-bit words
            self.ptx, self.llvm, self.letter = "b32", ir.IntType(32), "r"
            self.count = dtype.bitwidth // 32
        else:
            raise _element_error(dtype)
        if dtype.bitwidth > 128 or self.count not in (1, 2, 4):
            raise NumbaTypeError(
                f"ldcs/stcs: the array's elements must fit one 16-byte access, got {dtype}")

    def operands(self, first: int) -> str:
        names = ", ".join(f"${first + i}" for i in range(self.count))
        return names if self.count == 1 else "{" + names + "}"

    def instruction(self, op: str) -> str:
        vec = "" if self.count == 1 else f".v{self.count}"
        return f"{op}.global.cs{vec}.{self.ptx}"

    def to_value(self, context, builder, lanes):
        if isinstance(self.dtype, types.Complex):
            z = context.make_complex(builder, self.dtype)
            z.real, z.imag = lanes
            return z._getvalue()
        if self.count == 1:
            return builder.bitcast(lanes[0], context.get_value_type(self.dtype))
        vec = ir.Constant(ir.VectorType(self.llvm, self.count), ir.Undefined)
        for i, lane in enumerate(lanes):
            vec = builder.insert_element(vec, lane, ir.Constant(ir.IntType(32), i))
        return builder.bitcast(vec, context.get_value_type(self.dtype))

    def from_value(self, context, builder, value):
        if isinstance(self.dtype, types.Complex):
            z = context.make_complex(builder, self.dtype, value=value)
            return [z.real, z.imag]
        if self.count == 1:
            return [builder.bitcast(value, self.llvm)]
        vec = builder.bitcast(value, ir.VectorType(self.llvm, self.count))
        return [builder.extract_element(vec, ir.Constant(ir.IntType(32), i))
                for i in range(self.count)]


@intrinsic
def _ldcs(typingctx, array, index):
    _check("ldcs", array, index)
    lanes = _Lanes(array.dtype)

    def codegen(context, builder, sig, args):
        ptr = _get_element_pointer(context, builder, sig.args[1], args[1], sig.args[0], args[0])
        n = lanes.count
        ret = lanes.llvm if n == 1 else ir.LiteralStructType([lanes.llvm] * n)
        asm = ir.InlineAsm(ir.FunctionType(ret, [ptr.type]),
                           f"{lanes.instruction('ld')} {lanes.operands(0)}, [${n}];",
                           ",".join([f"={lanes.letter}"] * n + ["l"]))
        out = builder.call(asm, [ptr])
        values = [out] if n == 1 else [builder.extract_value(out, i) for i in range(n)]
        return lanes.to_value(context, builder, values)

    return array.dtype(array, index), codegen


@intrinsic
def _stcs(typingctx, array, index, value):
    _check("stcs", array, index)
    lanes = _Lanes(array.dtype)
    if value != array.dtype and typingctx.can_convert(value, array.dtype) is None:
        raise NumbaTypeError(f"stcs: value must convert to the array's {array.dtype}, got {value}")

    def codegen(context, builder, sig, args):
        array_type, index_type, value_type = sig.args
        ptr = _get_element_pointer(context, builder, index_type, args[1], array_type, args[0])
        value = context.cast(builder, args[2], value_type, array_type.dtype)
        parts = lanes.from_value(context, builder, value)
        n = lanes.count
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [ptr.type] + [lanes.llvm] * n),
                           f"{lanes.instruction('st')} [$0], {lanes.operands(1)};",
                           ",".join(["l"] + [lanes.letter] * n + ["~{memory}"]),
                           side_effect=True)
        builder.call(asm, [ptr, *parts])

    return types.void(array, index, value), codegen


@overload(ldcs, target="cuda")
def _ol_ldcs(array, index):
    return lambda array, index: _ldcs(array, index)


@overload(stcs, target="cuda")
def _ol_stcs(array, index, value):
    return lambda array, index, value: _stcs(array, index, value)
