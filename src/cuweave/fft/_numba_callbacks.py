"""numba-cuda callbacks that cuFFT can inline.

A store callback that numba-cuda compiles directly under cuFFT's symbol (``abi="c"``) does not
match the declaration in cuFFT's kernel: numba's C ABI passes a complex element as two scalars
and returns a pointer from a ``void`` function. nvJitLink then keeps an out-of-line call per
element, which costs about 40% of the transform for a callback that only stores (see
``benchmarks/results/fft_callbacks_probe.md``). Here

* the user's function is compiled by numba-cuda under a private name, its operand pointers
  typed as :func:`global_pointer` (naturally aligned global memory), so an element is one
  vector ``ld.global`` / ``st.global`` instead of two scalar generic accesses;
* a shim written in NVVM IR carries cuFFT's exact C++ signature (a complex element is an
  identified ``{T, T}`` struct passed directly, as NVRTC passes ``float2``) and calls it;
* libNVVM compiles the shim and numba's modules into one LTO-IR (the shim first: with numba's
  modules first the linked shim's type no longer matches cuFFT's declaration).

:func:`compile_inlinable` returns None where numba-cuda's internals or libNVVM are not there
(the caller then compiles the plain way). ``tests/fft/test_callback_codegen.py`` links the
result with an NVRTC caller declared as in cuFFT and checks that no call is left.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re

from .._internal.dtypes import ITEMSIZE
from .._internal.logging import get_logger

__all__ = ["global_pointer", "compile_inlinable"]

_log = get_logger("fft")
_names = itertools.count()
_SCALAR = {"complex64": "float", "complex128": "double", "float32": "float",
           "float64": "double"}


@functools.lru_cache(maxsize=1)
def _pointer_class():
    """The numba type of an aligned global-memory pointer, its data model and lowering."""
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import core_models, lower_builtin, register_model

    class GlobalPointer(types.CPointer):
        """``dtype*`` into global memory, aligned to ``align`` bytes (an operand of cuFFT)."""

        def __init__(self, dtype, align):
            self.align = align
            super().__init__(dtype)
            self.name = f"global {dtype}* (align {align})"

        @property
        def key(self):
            return self.dtype, "global", self.align

    register_model(GlobalPointer)(core_models.PointerModel)

    def element(builder, base, index):
        ptr = builder.gep(base, [index])
        return builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee, addrspace=1))

    @lower_builtin(operator.getitem, GlobalPointer, types.Integer)
    def load(context, builder, sig, args):
        return builder.load(element(builder, *args), align=sig.args[0].align)

    @lower_builtin(operator.setitem, GlobalPointer, types.Integer, types.Any)
    def store(context, builder, sig, args):
        base, index, value = args
        value = context.cast(builder, value, sig.args[2], sig.args[0].dtype)
        builder.store(value, element(builder, base, index), align=sig.args[0].align)

    return GlobalPointer


def global_pointer(dtype: str):
    """The numba type of a pointer to ``dtype`` elements in global memory (natural alignment)."""
    from numba.cuda import types

    return _pointer_class()(getattr(types, dtype), ITEMSIZE[dtype])


def compile_inlinable(kind, fn, sig, element_dtype, symbol, cc, output="ltoir") -> bytes | None:
    """LTO-IR (``output="ptx"``: PTX, for tests) of ``fn`` (numba signature ``sig``) behind a
    shim named ``symbol`` with cuFFT's exact signature; None when numba-cuda's internals or
    libNVVM are unavailable."""
    try:
        from numba.cuda.compiler import _compile_pyfunc_with_fixup
    except ImportError:
        return None
    name = f"cuweave_{kind}_impl_{next(_names)}"
    try:
        lib, _ = _compile_pyfunc_with_fixup(
            fn, sig, debug=False, lineinfo=False, device=True, fastmath=False, cc=cc, opt=None,
            abi="c", abi_info={"abi_name": name}, forceinline=True, launch_bounds=None,
            lto=True)
        modules = _private_globals(list(lib.llvm_strs))
    except TypeError as e:  # another numba-cuda version: its signature changed
        _log.info("inlinable callback unavailable (numba-cuda internals): %s", e)
        return None
    shim = _shim(kind, element_dtype, symbol, name, modules)
    if shim is None:
        return None
    return _nvvm_compile([shim] + modules, cc, lto=output == "ltoir")


_COMMON = re.compile(r'^(@"[^"]+") = common global', re.M)


def _private_globals(modules: list[str]) -> list[str]:
    """numba's modules with their ``common`` globals (the environment an exception would be
    reported through, e.g. by complex division) made internal: cuFFT's link of the callback
    fails (CUFFT_INTERNAL_ERROR) on a ``.common`` global the callback exports."""
    external = {m.group(1) for text in modules
                for m in re.finditer(r'^(@"[^"]+") = external global', text, re.M)}
    return [_COMMON.sub(lambda m: m.group(0) if m.group(1) in external
                        else f"{m.group(1)} = internal global", text) for text in modules]


def _libdevice() -> bytes | None:
    """libdevice's bitcode (the ``__nv_*`` math functions numba's code calls), or None."""
    try:
        from numba.cuda.cudadrv.libs import get_libdevice

        path = get_libdevice()
    except Exception:  # numba-cuda's internals moved: ask cuda.pathfinder
        try:
            from cuda.pathfinder import find_bitcode_lib

            path = find_bitcode_lib("device")
        except Exception:
            return None
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except (OSError, TypeError):
        return None


def _define_line(modules, name):
    for text in modules:
        for line in text.splitlines():
            if line.startswith("define") and f'@"{name}"(' in line:
                return line
    return None


def _split_params(text: str) -> list[str]:
    """Top-level comma split of an LLVM parameter list, each reduced to its type."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "{[<("
        depth -= ch in "}]>)"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip().rsplit(" %", 1)[0].strip() for p in parts if p.strip()]


def _shim(kind, element_dtype, symbol, name, modules) -> str | None:
    """NVVM IR of ``symbol`` with cuFFT's signature calling numba's ``name``."""
    line = _define_line(modules, name)
    if line is None:
        return None
    head, params = line.split(f'@"{name}"(', 1)
    ret = head.strip().removeprefix("define").strip()  # numba writes `define <type> @name(`
    params = _split_params(params[:params.rindex(")")])
    opaque = "ptr" in params
    vp = "ptr" if opaque else "i8*"
    s = _SCALAR[element_dtype]
    complex_ = element_dtype.startswith("complex")
    elem = "%cuweave.elem" if complex_ else s
    types_line = f"%cuweave.elem = type {{ {s}, {s} }}\n" if complex_ else ""
    n_elem = 2 if complex_ else 1
    expected = 4 + (n_elem if kind == "epilog" else 0)
    if len(params) != expected:
        _log.info("inlinable callback unavailable: unexpected numba signature %s", line)
        return None
    body, args = [], []

    def pointer(i, src):
        if params[i] in (vp, "ptr"):
            args.append(f"{params[i]} {src}")
        else:
            body.append(f"  %a{i} = bitcast {vp} {src} to {params[i]}")
            args.append(f"{params[i]} %a{i}")

    pointer(0, "%p")
    args.append(f"{params[1]} %o")
    if kind == "epilog":
        if complex_:
            for j in (0, 1):
                body.append(f"  %e{j} = extractvalue {elem} %v, {j}")
                args.append(f"{s} %e{j}")
        else:
            args.append(f"{s} %v")
    k = 2 + (n_elem if kind == "epilog" else 0)
    pointer(k, "%info")
    pointer(k + 1, "%smem")
    call = f"call {ret} @\"{name}\"({', '.join(args)})"
    if kind == "epilog":
        sig = f"void @\"{symbol}\"({vp} %p, i64 %o, {elem} %v, {vp} %info, {vp} %smem)"
        body += [f"  %r = {call}", "  ret void"]
    else:
        sig = f"{elem} @\"{symbol}\"({vp} %p, i64 %o, {vp} %info, {vp} %smem)"
        body.append(f"  %r = {call}")
        if complex_:
            body += [f"  %r{j} = extractvalue {ret} %r, {j}" for j in (0, 1)]
            body += [f"  %s0 = insertvalue {elem} undef, {s} %r0, 0",
                     f"  %s1 = insertvalue {elem} %s0, {s} %r1, 1", f"  ret {elem} %s1"]
        else:
            body.append(f"  ret {elem} %r")
    declare = f"declare {ret} @\"{name}\"({', '.join(params)})"
    header = [line for line in modules[0].splitlines()
              if line.startswith(("target triple", "target datalayout"))]
    meta = ["!nvvmir.version = !{!0}", "!0 = !{i32 2, i32 0, i32 3, i32 2}"]
    if complex_:
        # cuFFT passes float2/double2 with their own alignment (double2: 16), the struct type
        # alone gives its scalars' (8): a mismatched .param is what failed complex128 plans
        fptr = "ptr" if opaque else (
            f"void ({vp}, i64, {elem}, {vp}, {vp})*" if kind == "epilog"
            else f"{elem} ({vp}, i64, {vp}, {vp})*")
        # NVVM's "align" annotation: (parameter index << 16) | alignment; index 0 is the
        # return value, 1 the first parameter (the element of a store is the third)
        align = ((3 if kind == "epilog" else 0) << 16) | ITEMSIZE[element_dtype]
        meta += ["!nvvm.annotations = !{!1}",
                 f'!1 = !{{{fptr} @"{symbol}", !"align", i32 {align}}}']
    return "\n".join(header + [types_line + declare, f"define {sig} alwaysinline {{",
                               *body, "}", *meta, ""])


def _nvvm_compile(modules: list[str], cc, lto: bool = True) -> bytes | None:
    try:
        from cuda.bindings import nvvm
    except ImportError:
        return None
    try:
        prog = nvvm.create_program()
    except Exception as e:  # libNVVM not found
        _log.info("inlinable callback unavailable (libNVVM): %s", e)
        return None
    try:
        for i, text in enumerate(modules):
            data = text.encode()
            nvvm.add_module_to_program(prog, data, len(data), f"m{i}")
        libdevice = _libdevice()
        if libdevice is not None and "@\"__nv_" in "".join(modules):  # calls into libdevice:
            nvvm.lazy_add_module_to_program(prog, libdevice, len(libdevice), "libdevice")
        opts = [f"-arch=compute_{cc[0]}{cc[1]}"] + (["-gen-lto"] if lto else [])
        try:
            nvvm.compile_program(prog, len(opts), opts)
        except Exception as e:
            size = nvvm.get_program_log_size(prog)
            log = bytearray(size)
            nvvm.get_program_log(prog, log)
            _log.info("inlinable callback unavailable: libNVVM: %s %s", e,
                      log.decode(errors="replace"))
            return None
        size = nvvm.get_compiled_result_size(prog)
        out = bytearray(size)
        nvvm.get_compiled_result(prog, out)
        return bytes(out)
    finally:
        nvvm.destroy_program(prog)
