"""The numba-cuda half of device solvers: ``execute``/``factorize``/``solve``/... in kernels.

Imported only when a kernel refers to a solver's device function, so ``import cuweave.device``
never imports numba. A call lowers to a call of the ``extern "C"`` function libmathdx generated
(its LTO-IR added to the kernel's link once) and links cuSOLVERDx's fatbin. Arguments follow
libmathdx's C ABI: every array as a generic ``i8*`` to its first element, every leading
dimension as a pointer to a local ``unsigned``.
"""

from __future__ import annotations

import threading

from llvmlite import ir
from numba.core import cgutils
from numba.cuda import types
from numba.cuda.extending import intrinsic
from numba.np.numpy_support import from_dtype

from .._internal.errors import InvalidOptionError
from ._solver_core import Solver, execute_code, fatbin_code

__all__ = ["signatures", "execute_function", "method_function", "strides_function",
           "size_function"]

_lock = threading.Lock()
_I8P = ir.IntType(8).as_pointer()

# Arguments of each function in cuSOLVERDx's order, compile-time and run-time leading
# dimensions: (name, kind), kind 'v' an array of value_type, 'p' of the precision (real parts),
# 'i' of int32, 'l' an integer leading dimension.
_A, _B, _C, _TAU = ("a", "v"), ("b", "v"), ("c", "v"), ("tau", "v")
_INFO, _IPIV = ("info", "i"), ("ipiv", "i")
_LDA, _LDB, _LDC = ("lda", "l"), ("ldb", "l"), ("ldc", "l")
_SIGNATURES = {
    **dict.fromkeys(("potrf", "getrf_no_pivot"), ((_A, _INFO), (_A, _LDA, _INFO))),
    "getrf_partial_pivot": ((_A, _IPIV, _INFO), (_A, _LDA, _IPIV, _INFO)),
    **dict.fromkeys(("potrs", "getrs_no_pivot", "trsm"), ((_A, _B), (_A, _LDA, _B, _LDB))),
    "getrs_partial_pivot": ((_A, _IPIV, _B), (_A, _LDA, _IPIV, _B, _LDB)),
    **dict.fromkeys(("posv", "gesv_no_pivot"), ((_A, _B, _INFO), (_A, _LDA, _B, _LDB, _INFO))),
    "gesv_partial_pivot": ((_A, _IPIV, _B, _INFO), (_A, _LDA, _IPIV, _B, _LDB, _INFO)),
    **dict.fromkeys(("geqrf", "gelqf", "ungqr", "unglq"), ((_A, _TAU), (_A, _LDA, _TAU))),
    **dict.fromkeys(("unmqr", "unmlq"), ((_A, _TAU, _C), (_A, _LDA, _TAU, _C, _LDC))),
    "gels": ((_A, _TAU, _B), (_A, _LDA, _TAU, _B, _LDB)),
    "gtsv_no_pivot": ((("dl", "v"), ("d", "v"), ("du", "v"), _B, _INFO),
                      (("dl", "v"), ("d", "v"), ("du", "v"), _B, _LDB, _INFO)),
    "heev": ((_A, ("lambda", "p"), ("workspace", "v"), _INFO),
             (_A, _LDA, ("lambda", "p"), ("workspace", "v"), _INFO)),
}
_HTEV_VECTORS = (("d", "v"), ("e", "v"), ("v", "v"))


def signatures(solver: Solver) -> tuple:
    """``(compile-time form, run-time leading-dimension form)`` of ``solver``'s arguments."""
    f = solver.function
    if f == "htev":
        plain = (("d", "v"), ("e", "v"), _INFO)
        vectors = (*_HTEV_VECTORS, _INFO)
        if solver.job == "no_vectors":
            return plain, None
        return vectors, (*_HTEV_VECTORS, ("ldv", "l"), _INFO)
    return _SIGNATURES[f]


def _is_none(t) -> bool:
    return t is None or isinstance(t, (types.NoneType, types.Omitted))


def _element_type(solver: Solver, kind: str):
    if kind == "v":
        return from_dtype(solver.value_type)
    if kind == "p":
        return from_dtype(solver.precision)
    return types.int32


def _check(solver: Solver, form, given) -> str | None:
    """Why ``given`` (numba types) do not fit ``form``, or None when they do."""
    for (name, kind), t in zip(form, given, strict=True):
        if kind == "l":
            if not isinstance(t, types.Integer):
                return f"{name} must be an integer, got {t}"
            continue
        want = _element_type(solver, kind)
        if not isinstance(t, types.Array):
            return f"{name} must be an array of {want}, got {t}"
        if t.dtype != want:
            return f"{name} must hold {want} elements for this solver, got {t.dtype}"
    return None


def _describe(form) -> str:
    return "(" + ", ".join(name for name, _ in form) + ")"


# ---------------------------------------------------------------------------------------------
# Code generation of one call
# ---------------------------------------------------------------------------------------------

_linkables: dict = {}


def _linkable(code: dict, fatbin: bool = False):
    """One numba linkable object per generated symbol (a kernel calling it twice links it
    once), and one for cuSOLVERDx's fatbin."""
    from numba.cuda import LTOIR, Fatbin

    with _lock:
        obj = _linkables.get(code["symbol"])
        if obj is None:
            if fatbin:
                obj = Fatbin(bytes(code["ltoir"]), name="cusolverdx_universal.fatbin")
            else:
                obj = LTOIR(bytes(code["ltoir"]), name=f"{code['symbol']}.ltoir")
            _linkables[code["symbol"]] = obj
    return obj


def _pointer(context, builder, ty, value):
    """Generic ``i8*`` to the first element of the array ``value``."""
    ptr = context.make_array(ty)(context, builder, value).data
    if ptr.type.addrspace != 0:
        ptr = builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee), "generic")
    return builder.bitcast(ptr, _I8P)


def _ld_pointer(context, builder, ty, value):
    v = context.cast(builder, value, ty, types.uint32)
    return builder.bitcast(cgutils.alloca_once_value(builder, v), _I8P)


def _emit(solver: Solver, dynamic: bool, form, arg_types, context, builder, args) -> None:
    code = execute_code(solver._resolved, dynamic)
    library = context.active_code_library
    library.add_linking_file(_linkable(code))
    library.add_linking_file(_linkable(fatbin_code(), fatbin=True))
    values = [_ld_pointer(context, builder, t, v) if kind == "l"
              else _pointer(context, builder, t, v)
              for (_, kind), t, v in zip(form, arg_types, args, strict=True)]
    fnty = ir.FunctionType(ir.VoidType(), [v.type for v in values])
    fn = cgutils.get_or_insert_function(builder.module, fnty, code["symbol"])
    builder.call(fn, values)


def _choose(solver: Solver, given: list, what: str):
    """The form (compile-time or run-time leading dimensions) that ``given`` fits."""
    static, dynamic = signatures(solver)
    reasons = []
    for form, is_dynamic in ((static, False), (dynamic, True)):
        if form is None or len(form) != len(given):
            continue
        why = _check(solver, form, given)
        if why is None:
            return form, is_dynamic
        reasons.append(why)
    forms = " or ".join(_describe(f) for f in (static, dynamic) if f is not None)
    got = ", ".join(str(t) for t in given)
    detail = f" ({'; '.join(reasons)})" if reasons else ""
    raise InvalidOptionError(f"{what} takes {forms} for function {solver.function!r}, "
                             f"got ({got}){detail}")


# ---------------------------------------------------------------------------------------------
# Solver.execute and the methods of the specialised classes
# ---------------------------------------------------------------------------------------------

_functions: dict = {}


def _cached(key, make):
    fn = _functions.get(key)
    if fn is None:
        with _lock:
            fn = _functions.get(key)
            if fn is None:
                fn = _functions[key] = make()
    return fn


def _device(pyfunc):
    from numba import cuda

    return cuda.jit(device=True, forceinline=True)(pyfunc)


def execute_function(solver: Solver):
    """``solver.execute(...)`` in kernels: arguments in cuSOLVERDx's order."""

    @intrinsic
    def dispatch(typingctx, a0, a1, a2, a3, a4, a5):
        given = [t for t in (a0, a1, a2, a3, a4, a5) if not _is_none(t)]
        form, dynamic = _choose(solver, given, "Solver.execute")
        n = len(given)

        def codegen(context, builder, sig, args):
            _emit(solver, dynamic, form, sig.args[:n], context, builder, args[:n])
            return context.get_dummy_value()

        return types.void(a0, a1, a2, a3, a4, a5), codegen

    def make():
        def execute(a0, a1, a2=None, a3=None, a4=None, a5=None):
            dispatch(a0, a1, a2, a3, a4, a5)

        return _device(execute)

    return _cached(("execute", solver._kernel_key()), make)


def method_function(solver: Solver, method: str, params: tuple, key: tuple):
    """A specialised class's ``method(x0, x1, ..., lda=None, ldb=None, ldc=None)``: the
    positional ``params`` (names in cuSOLVERDx's signature) and the leading dimensions by
    keyword, all of them (run-time form) or none (compile-time form)."""
    static, dynamic = signatures(solver)

    @intrinsic
    def call(typingctx, x0, x1, x2, x3, x4, lda, ldb, ldc):
        positional = [t for t in (x0, x1, x2, x3, x4) if not _is_none(t)]
        if len(positional) != len(params) or \
                any(_is_none(t) for t in (x0, x1, x2, x3, x4)[:len(params)]):
            raise InvalidOptionError(f"{method} takes ({', '.join(params)}) and optional "
                                     f"leading dimensions, got {len(positional)} arrays")
        by_name = dict(zip(params, positional))
        lds = {n: t for n, t in (("lda", lda), ("ldb", ldb), ("ldc", ldc)) if not _is_none(t)}
        form, is_dynamic = static, False
        if lds:
            form, is_dynamic = dynamic, True
            wanted = [n for n, kind in dynamic if kind == "l"]
            if sorted(lds) != sorted(wanted):
                raise InvalidOptionError(
                    f"{method} with run-time leading dimensions takes "
                    f"{' and '.join(wanted)} together, got {', '.join(sorted(lds)) or 'none'}")
            by_name.update(lds)
        order = [name for name, _ in form]
        given = [by_name[name] for name in order]
        why = _check(solver, form, given)
        if why is not None:
            raise InvalidOptionError(f"{method}: {why}")
        slots = {**{p: i for i, p in enumerate(params)}, "lda": 5, "ldb": 6, "ldc": 7}
        index = [slots[name] for name in order]

        def codegen(context, builder, sig, args):
            _emit(solver, is_dynamic, form, [sig.args[i] for i in index], context, builder,
                  [args[i] for i in index])
            return context.get_dummy_value()

        return types.void(x0, x1, x2, x3, x4, lda, ldb, ldc), codegen

    def make():
        def fn(x0, x1, x2=None, x3=None, x4=None, lda=None, ldb=None, ldc=None):
            call(x0, x1, x2, x3, x4, lda, ldb, ldc)

        return _device(fn)

    return _cached(("method", method, params, key), make)


def strides_function(rows: int, cols: int, default_ld: int, col_major: bool, ld_name: str,
                     key: tuple):
    """``xx_strides(lda=None)`` in kernels: ``(batch, row, column)`` strides in elements for
    a leading dimension given at run time or the compile-time one (the keyword is
    ``ld_name``)."""

    def make():
        pick_ld = _ld_picker(ld_name, default_ld)
        if col_major:
            def strides(arg0=None, lda=None, ldb=None, ldc=None):
                ld = pick_ld(lda, ldb, ldc)
                return (ld * cols, 1, ld)
        else:
            def strides(arg0=None, lda=None, ldb=None, ldc=None):
                ld = pick_ld(lda, ldb, ldc)
                return (ld * rows, ld, 1)

        return _device(strides)

    return _cached(("strides", key), make)


def _ld_picker(ld_name: str, default_ld: int):
    """A device function returning the keyword ``ld_name`` when given, else ``default_ld``."""

    @intrinsic
    def pick(typingctx, lda, ldb, ldc):
        chosen = {"lda": lda, "ldb": ldb, "ldc": ldc}[ld_name]
        for name, t in (("lda", lda), ("ldb", ldb), ("ldc", ldc)):
            if not _is_none(t) and not isinstance(t, types.Integer):
                raise InvalidOptionError(f"{name} must be an integer, got {t}")
        if not _is_none(chosen) and not isinstance(chosen, types.Integer):
            raise InvalidOptionError(f"{ld_name} must be an integer, got {chosen}")
        position = ("lda", "ldb", "ldc").index(ld_name)

        def codegen(context, builder, sig, args):
            if _is_none(chosen):
                return context.get_constant(types.int64, default_ld)
            return context.cast(builder, args[position], chosen, types.int64)

        return types.int64(lda, ldb, ldc), codegen

    return pick


def size_function(strides, batches: int, key: tuple):
    """``xx_size(lda=None)`` in kernels: elements of the operand's buffer."""

    def make():
        def size(arg0=None, lda=None, ldb=None, ldc=None):
            return strides(lda=lda, ldb=ldb, ldc=ldc)[0] * batches

        return _device(size)

    return _cached(("size", key), make)
