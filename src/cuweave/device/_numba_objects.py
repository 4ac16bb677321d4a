"""Device objects usable inside numba kernels: the numba half (see :mod:`._kernel_object`).

One numba type class, :class:`KernelObjectType`, serves every registered host class. A type
instance carries its host object; attribute access inside a kernel asks the object
(``_kernel_attribute``) at compile time and

* types ints and bools as *literals* (so ``cuda.local.array(fft.storage_size, ...)`` and
  ``range(fft.elements_per_thread)`` see compile-time constants) and lowers them to constants;
* types numba types / NumPy scalar types as dtype specs and device functions as dispatchers,
  which need no runtime value (a call through them is a direct call, inlined by numba/LTO);
* types plain tuples of ints (``MM.a_dim``) as tuples of literals, so that
  ``cuda.shared.array(shape=MM.a_dim[::-1], ...)`` sees a constant shape;
* types other constants (floats, other tuples, namedtuples such as ``Dim3``) by their value;
* makes the object callable (``fft(thread_data, smem)``) when it has a ``__call__`` attribute
  (a device function): the call compiles to a direct call of that function.

The object itself has an empty data model: passing it around costs nothing.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils
from numba.core.typing.templates import AbstractTemplate, AttributeTemplate, signature
from numba.cuda import types
from numba.cuda.cudadecl import registry as _typing_registry
from numba.cuda.cudaimpl import lower, lower_constant, lower_getattr_generic
from numba.cuda.extending import typeof_impl
from numba.cuda.models import StructModel, register_model

__all__ = ["KernelObjectType", "register", "constant_type"]

# Types whose values carry no runtime data: a dummy value stands in when lowering.
_DATALESS = (types.Dispatcher, types.NumberClass, types.TypeRef, types.Function,
             types.DTypeSpec, types.Module)


class KernelObjectType(types.Type):
    """numba type of one host device object (equal ``_kernel_key()`` => one type)."""

    def __init__(self, obj):
        self.obj = obj
        cls = type(obj)
        super().__init__(name=f"{cls.__module__}.{cls.__qualname__}{obj._kernel_key()!r}")


@register_model(KernelObjectType)
class _EmptyModel(StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [])


@lower_constant(KernelObjectType)
def _lower_object(context, builder, ty, pyval):
    return ir.Constant(context.get_value_type(ty), None)


def constant_type(context, value):
    """The numba type of a compile-time constant ``value`` (ints and bools as literals)."""
    if isinstance(value, bool) or (isinstance(value, int) and not isinstance(value, type)):
        return types.literal(value)
    if _int_tuple(value):
        return types.Tuple(tuple(types.literal(int(v)) for v in value))
    return context.resolve_value_type(value)


def _int_tuple(value) -> bool:
    """A plain tuple (not a namedtuple) of ints."""
    return (type(value) is tuple and bool(value) and
            all(isinstance(v, int) and not isinstance(v, bool) for v in value))


def _lower_value(context, builder, ty, value):
    if isinstance(ty, (types.IntegerLiteral, types.BooleanLiteral)):
        return context.get_constant(ty.literal_type, value)
    if isinstance(ty, _DATALESS):
        return context.get_dummy_value()
    if isinstance(ty, types.Tuple) and _int_tuple(value):
        return context.make_tuple(builder, ty, [context.get_constant(t.literal_type, v)
                                                for t, v in zip(ty.types, value)])
    return context.get_constant_generic(builder, ty, value)


_call_types: dict = {}


def _call_type(typ):
    """A function type for calling the object ``typ`` (its ``__call__`` device function)."""
    fnty = _call_types.get(typ)
    if fnty is None:
        target = typ.obj._kernel_attribute("__call__")

        class _Call(AbstractTemplate):
            key = ("cuweave.call", typ)

            def generic(self, args, kws):
                found = self.context.resolve_function_type(
                    self.context.resolve_value_type(target), args, kws)
                if found is None:
                    return None
                return signature(found.return_type, *args)

        fnty = _call_types[typ] = types.Function(_Call)

        @lower(typ, types.VarArg(types.Any))
        def _lower_call(context, builder, sig, args):
            target_type = context.typing_context.resolve_value_type(target)
            target_sig = context.typing_context.resolve_function_type(target_type, sig.args, {})
            values = list(args)
            for ty in target_sig.args[len(values):]:  # defaults the call left out
                values.append(cgutils.get_null_value(context.get_value_type(ty)))
            return context.get_function(target_type, target_sig)(builder, values)

    return fnty


@_typing_registry.register_attr
class _KernelObjectAttributes(AttributeTemplate):
    key = KernelObjectType

    def generic_resolve(self, typ, attr):
        try:
            value = typ.obj._kernel_attribute(attr)
        except AttributeError:
            return None
        if attr == "__call__":
            return _call_type(typ)
        return constant_type(self.context, value)


@lower_getattr_generic(KernelObjectType)
def _lower_attribute(context, builder, typ, value, attr):
    constant = typ.obj._kernel_attribute(attr)
    ty = constant_type(context.typing_context, constant)
    return _lower_value(context, builder, ty, constant)


def register(cls: type) -> None:
    """Type every instance of ``cls`` as a :class:`KernelObjectType` in numba-cuda kernels."""

    @typeof_impl.register(cls)
    def _typeof(val, c):
        return KernelObjectType(val)
