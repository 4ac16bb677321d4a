"""Short vector types for numba kernels: ``float16x2``, ``float16x4``, ``float32x2``, ...

Each name comes as a pair: the constructor usable in a kernel (``float16x4(r0, r1, i0, i1)``,
``float32x2(re, im)``, ``float32x2(z)`` from a complex) and its numba type (``float16x4_type``)
usable as ``dtype=`` of ``cuda.local.array``/``cuda.shared.array``. Components are read as
``.x``, ``.y`` (and ``.z``, ``.w`` for 4-wide vectors). Values are stored as one integer of the
vector's full width, so they have CUDA's alignment for ``half2``/``float2``/``double2``
(the size of the vector).

Two-wide float vectors convert implicitly to and from numba complex numbers (``float32x2`` is
exactly ``complex64``), so they take part in complex arithmetic: ``v * z``, ``v / n`` and
``numpy.complex64(v)`` compute on the complex value, the way nvmath-python's vector types do.
cuFFTDx's half-precision ``value_type`` is ``float16x4`` (two FFTs batched: ``(re0, re1, im0,
im1)``); its real side is ``float16x2``.

Imports numba; it is loaded when a device FFT is built or a vector name is first used.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core.typeconv import Conversion
from numba.core.typing.templates import AttributeTemplate
from numba.cuda import types
from numba.cuda.cudadecl import registry as _typing_registry
from numba.cuda.cudaimpl import lower_attr
from numba.cuda.extending import lower_builtin, lower_cast, register_model, type_callable
from numba.cuda.models import PrimitiveModel

__all__ = [
    "VectorType", "float16x2", "float16x4", "float32x2", "float32x4", "float64x2", "float64x4",
    "uint32x4", "float16x2_type", "float16x4_type", "float32x2_type", "float32x4_type",
    "float64x2_type", "float64x4_type", "uint32x4_type", "vector_type_of",
]

_FIELDS = ("x", "y", "z", "w")


class VectorType(types.Number):
    """numba type of a short vector of ``count`` ``scalar`` values.

    Parameters
    ----------
    scalar : numba number type
        The components' type.
    count : int
        The number of components (2 or 4).
    """

    def __init__(self, scalar, count):
        self.dtype = scalar
        self.count = count
        self.bitwidth = scalar.bitwidth * count
        super().__init__(name=f"cuweave.{scalar.name}x{count}")

    @property
    def complex_like(self) -> bool:
        return self.count == 2 and isinstance(self.dtype, types.Float)

    def _complex_conversion(self, other, narrower, wider):
        if not (self.complex_like and isinstance(other, types.Complex)):
            return None
        if other.bitwidth == self.bitwidth:
            return Conversion.exact
        return narrower if other.bitwidth < self.bitwidth else wider

    def can_convert_from(self, typingctx, other):
        return self._complex_conversion(other, Conversion.safe, Conversion.unsafe)

    def can_convert_to(self, typingctx, other):
        return self._complex_conversion(other, Conversion.unsafe, Conversion.safe)


class _VectorModel(PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.IntType(fe_type.bitwidth))


register_model(VectorType)(_VectorModel)


def _llvm_vector(context, ty: VectorType):
    return ir.VectorType(context.get_value_type(ty.dtype), ty.count)


def _component(context, builder, ty: VectorType, value, index: int):
    vec = builder.bitcast(value, _llvm_vector(context, ty))
    return builder.extract_element(vec, ir.Constant(ir.IntType(32), index))


def _pack(context, builder, ty: VectorType, scalars):
    vec = ir.Constant(_llvm_vector(context, ty), ir.Undefined)
    for i, s in enumerate(scalars):
        vec = builder.insert_element(vec, s, ir.Constant(ir.IntType(32), i))
    return builder.bitcast(vec, context.get_value_type(ty))


def _make(scalar, count):
    ty = VectorType(scalar, count)
    # numba-cuda allocates local/shared arrays only of types in its number domain
    types.number_domain = types.number_domain | frozenset([ty])
    fields = _FIELDS[:count]

    def constructor(x, y=None, z=None, w=None):
        raise TypeError(f"{ty.name} values are built inside numba CUDA kernels only")

    constructor.__name__ = constructor.__qualname__ = f"{scalar.name}x{count}"
    complex_note = ("; ``x`` alone may be a complex number (its real and imaginary parts)"
                    if ty.complex_like else "")
    unused = "".join(f"\n{f} : None\n    Not taken by a {count}-wide vector."
                     for f in _FIELDS[count:])
    constructor.__doc__ = (
        f"``{scalar.name}x{count}({', '.join(fields)})`` inside a numba kernel builds a "
        f"vector" + (" (or from one complex value)." if ty.complex_like else ".") +
        f"\n\nParameters\n----------\n{', '.join(fields)} : numbers\n    The components "
        f"(converted to {scalar.name}){complex_note}." + unused + "\n")

    @type_callable(constructor)
    def _type_ctor(context):
        def typer(x, y=None, z=None, w=None):
            args = [a for a in (x, y, z, w) if a is not None and not isinstance(a, types.Omitted)]
            if len(args) == count and all(isinstance(a, (types.Integer, types.Float))
                                          for a in args):
                return ty
            if ty.complex_like and len(args) == 1 and isinstance(args[0], types.Complex):
                return ty
            return None

        return typer

    @lower_builtin(constructor, *([types.Number] * count))
    def _lower_ctor(context, builder, sig, args):
        scalars = [context.cast(builder, a, t, scalar) for a, t in zip(args, sig.args)]
        return _pack(context, builder, ty, scalars)

    @_typing_registry.register_attr
    class _Attributes(AttributeTemplate):
        key = ty

        def generic_resolve(self, typ, attr):
            return scalar if attr in fields else None

    for index, name in enumerate(fields):
        lower_attr(ty, name)(
            lambda context, builder, typ, value, index=index: _component(context, builder, typ,
                                                                        value, index))

    if ty.complex_like:

        @lower_builtin(constructor, types.Complex)
        def _lower_from_complex(context, builder, sig, args):
            return context.cast(builder, args[0], sig.args[0], ty)

        @lower_cast(types.Complex, ty)
        def _complex_to_vector(context, builder, fromty, toty, value):
            z = context.make_complex(builder, fromty, value=value)
            parts = [context.cast(builder, p, fromty.underlying_float, scalar)
                     for p in (z.real, z.imag)]
            return _pack(context, builder, ty, parts)

        @lower_cast(ty, types.Complex)
        def _vector_to_complex(context, builder, fromty, toty, value):
            z = context.make_complex(builder, toty)
            z.real, z.imag = (context.cast(builder, _component(context, builder, ty, value, i),
                                           scalar, toty.underlying_float) for i in (0, 1))
            return z._getvalue()

    return constructor, ty


float16x2, float16x2_type = _make(types.float16, 2)
float16x4, float16x4_type = _make(types.float16, 4)
float32x2, float32x2_type = _make(types.float32, 2)
float32x4, float32x4_type = _make(types.float32, 4)
float64x2, float64x2_type = _make(types.float64, 2)
float64x4, float64x4_type = _make(types.float64, 4)
uint32x4, uint32x4_type = _make(types.uint32, 4)

_BY_NAME = {t.name.removeprefix("cuweave."): t for t in (
    float16x2_type, float16x4_type, float32x2_type, float32x4_type, float64x2_type,
    float64x4_type, uint32x4_type)}


def vector_type_of(name: str) -> VectorType:
    """The vector type named ``'float16x4'`` etc."""
    return _BY_NAME[name]


def register_element_types(complex_cls, vector_cls) -> None:
    """Type :mod:`cuweave.device.types` objects (``complex64``, ``half4``, ...: instances of
    ``complex_cls`` and ``vector_cls``) as dtypes (``types`` calls this when it is imported with
    numba present)."""
    from numba.cuda.extending import typeof_impl

    def _typeof_element(val, c):
        return types.NumberClass(val.numba_type())

    typeof_impl.register(complex_cls)(_typeof_element)
    typeof_impl.register(vector_cls)(_typeof_element)


def _register_complex_components() -> None:
    """Give numba complex numbers the ``.x``/``.y`` components of their vector twins."""

    @_typing_registry.register_attr
    class _ComplexComponents(AttributeTemplate):
        key = types.Complex

        def generic_resolve(self, typ, attr):
            return typ.underlying_float if attr in ("x", "y") else None

    for index, name in enumerate(("x", "y")):
        lower_attr(types.Complex, name)(
            lambda context, builder, typ, value, index=index: getattr(
                context.make_complex(builder, typ, value=value), ("real", "imag")[index]))


_register_complex_components()
