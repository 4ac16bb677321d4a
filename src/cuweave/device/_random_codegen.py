"""C++ generation and NVRTC compilation of the cuRAND device API shim (``curand_kernel.h``).

One translation unit defines an ``extern "C" __device__`` wrapper for every (function, bit
generator) pair cuRAND offers, and reports ``sizeof``/``alignof`` of every state type through
the compiler log (the trick of :mod:`._codegen`). It is compiled once per architecture to
LTO-IR and kept in the device cache; kernels link only the wrappers they call, and the LTO link
inlines them. Vector results (``float4``, ``uint4``, ...) are written through an out pointer.
No numba and no GPU are needed here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from . import _cache, _codegen

__all__ = ["STATES", "FUNCTIONS", "Function", "symbol", "generate_source", "compiled",
           "curand_include"]

SOURCE_VERSION = 1
# bit generator -> (C state type, init form)
STATES = {
    "XORWOW": ("curandStateXORWOW_t", "seed"),
    "MRG32k3a": ("curandStateMRG32k3a_t", "seed"),
    "Philox4_32_10": ("curandStatePhilox4_32_10_t", "seed"),
    "Sobol32": ("curandStateSobol32_t", "sobol32"),
    "ScrambledSobol32": ("curandStateScrambledSobol32_t", "scrambled32"),
    "Sobol64": ("curandStateSobol64_t", "sobol64"),
    "ScrambledSobol64": ("curandStateScrambledSobol64_t", "scrambled64"),
}
_PSEUDO = ("XORWOW", "MRG32k3a", "Philox4_32_10")
_ALL = tuple(STATES)
_SOBOL64 = ("Sobol64", "ScrambledSobol64")


@dataclass(frozen=True)
class Function:
    """One cuRAND device function: C name, result kind, extra C parameters, generators."""

    c_name: str
    result: str                    # C scalar type, a vector type name, or 'void'
    params: tuple[str, ...]        # C types of the arguments after the state
    states: tuple[str, ...]
    state_last: bool = False       # skipahead(n, state): the state comes last


_VECTORS = {"float2", "float4", "double2", "double4", "uint4"}
FUNCTIONS = {
    "rand": Function("curand", "unsigned int", (), tuple(s for s in _ALL if s not in _SOBOL64)),
    "rand64": Function("curand", "unsigned long long", (), _SOBOL64),
    "rand4": Function("curand4", "uint4", (), ("Philox4_32_10",)),
    "uniform": Function("curand_uniform", "float", (), _ALL),
    "uniform_double": Function("curand_uniform_double", "double", (), _ALL),
    "uniform2_double": Function("curand_uniform2_double", "double2", (), ("Philox4_32_10",)),
    "uniform4": Function("curand_uniform4", "float4", (), ("Philox4_32_10",)),
    "normal": Function("curand_normal", "float", (), _ALL),
    "normal_double": Function("curand_normal_double", "double", (), _ALL),
    "normal2": Function("curand_normal2", "float2", (), _PSEUDO),
    "normal2_double": Function("curand_normal2_double", "double2", (), _PSEUDO),
    "normal4": Function("curand_normal4", "float4", (), ("Philox4_32_10",)),
    "log_normal": Function("curand_log_normal", "float", ("float", "float"), _ALL),
    "log_normal_double": Function("curand_log_normal_double", "double", ("double", "double"),
                                  _ALL),
    "log_normal2": Function("curand_log_normal2", "float2", ("float", "float"), _PSEUDO),
    "log_normal2_double": Function("curand_log_normal2_double", "double2",
                                   ("double", "double"), _PSEUDO),
    "log_normal4": Function("curand_log_normal4", "float4", ("float", "float"),
                            ("Philox4_32_10",)),
    "poisson": Function("curand_poisson", "unsigned int", ("double",), _ALL),
    "poisson4": Function("curand_poisson4", "uint4", ("double",), ("Philox4_32_10",)),
    "skipahead": Function("skipahead", "void", ("unsigned long long",), _PSEUDO, True),
    "skipahead_sequence": Function("skipahead_sequence", "void", ("unsigned long long",),
                                   _PSEUDO, True),
    "skipahead_subsequence": Function("skipahead_subsequence", "void", ("unsigned long long",),
                                      ("MRG32k3a",), True),
}
_INIT_PARAMS = {
    "seed": ("unsigned long long", "unsigned long long", "unsigned long long"),
    "sobol32": ("unsigned int*", "unsigned int"),
    "scrambled32": ("unsigned int*", "unsigned int", "unsigned int"),
    "sobol64": ("unsigned long long*", "unsigned long long"),
    "scrambled64": ("unsigned long long*", "unsigned long long", "unsigned long long"),
}


def init_params(state: str) -> tuple[str, ...]:
    """C types of ``init``'s arguments before the state."""
    return _INIT_PARAMS[STATES[state][1]]


def symbol(name: str, state: str) -> str:
    return f"cuweave_curand_{name}_{state}"


def _wrapper(name: str, state: str, fn: Function) -> str:
    ctype = STATES[state][0]
    params = [f"{t} a{i}" for i, t in enumerate(fn.params)]
    args = [f"a{i}" for i in range(len(fn.params))]
    st = f"static_cast<{ctype}*>(s)"
    call_args = ", ".join([*args, st] if fn.state_last else [st, *args])
    if fn.result in _VECTORS:
        sig = ", ".join(["void* s", *params, "void* out"])
        body = f"*static_cast<{fn.result}*>(out) = {fn.c_name}({call_args});"
        result = "void"
    else:
        sig = ", ".join(["void* s", *params])
        result = fn.result
        body = (f"{fn.c_name}({call_args});" if result == "void"
                else f"return {fn.c_name}({call_args});")
    return f'extern "C" __device__ {result} {symbol(name, state)}({sig}) {{ {body} }}'


def _init_wrapper(state: str) -> str:
    ctype = STATES[state][0]
    params = init_params(state)
    decl = ", ".join([f"{t} a{i}" for i, t in enumerate(params)] + ["void* s"])
    args = ", ".join([f"a{i}" for i in range(len(params))] + [f"static_cast<{ctype}*>(s)"])
    return f'extern "C" __device__ void {symbol("init", state)}({decl}) {{ curand_init({args}); }}'


def generate_source() -> str:
    """The shim translation unit."""
    lines = ["#include <curand_kernel.h>", "namespace {",
             "template <unsigned... V> struct cw_state_report {};",
             "template <class R> [[deprecated]] __device__ constexpr int cw_emit() { return 0; }",
             "__device__ int cw_report() { return cw_emit<cw_state_report<"
             + ", ".join(f"sizeof({c}), alignof({c})" for c, _ in STATES.values())
             + ">>(); }", "}  // namespace"]
    lines.append('extern "C" __device__ int cuweave_curand_report() { return cw_report() * 0; }')
    for state in STATES:
        lines.append(_init_wrapper(state))
    for name, fn in FUNCTIONS.items():
        for state in fn.states:
            lines.append(_wrapper(name, state, fn))
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=1)
def curand_include() -> str:
    """A folder holding ``curand_kernel.h`` (the nvidia-curand wheel or a CUDA toolkit)."""
    return _codegen._find_headers(
        "curand", "", ("cu13/include", "cu12/include", "curand/include"), "curand_kernel.h",
        "cuRAND device headers (curand_kernel.h)",
        "install a CUDA toolkit, set CUDA_HOME, or `pip install nvidia-curand`")


_REPORT_RE = re.compile(r"cw_state_report<([0-9uUlL ,]*)>")


def _compile(sm: int) -> dict:
    source = generate_source()
    opts = [b"-std=c++17", f"-arch=sm_{sm // 10}".encode(), b"-rdc=true", b"-dlto",
            b"-default-device", f"-I{curand_include()}".encode(),
            f"-I{_codegen.cuda_include()}".encode(), f"-I{_codegen.cccl_include()}".encode()]
    # compiled once per machine and architecture: nothing to gain from a precompiled header
    ok, log, ir = _codegen._run_nvrtc(source, "cuweave_curand.cu", opts, pch=False)
    if not ok:
        raise _codegen.NvrtcError(
            6, "nvrtcCompileProgram",
            hint="the cuRAND shim: " + _codegen.failure_detail(log, "cuweave_curand.cu", opts))
    found = _REPORT_RE.search(log)
    if not found:
        raise _codegen.NvrtcError(3, "nvrtcCompileProgram",
                                  hint="the cuRAND state report was not found in the compiler log")
    values = [int(v.strip().rstrip("uUlL")) for v in found.group(1).split(",")]
    layout = {state: (values[2 * i], values[2 * i + 1]) for i, state in enumerate(STATES)}
    return {"traits": layout, "symbol": "cuweave_curand", "ltoir": ir}


@functools.lru_cache(maxsize=8)
def compiled(sm: int) -> dict:
    """``{'traits': {state: (size, alignment)}, 'ltoir': bytes}`` for architecture ``sm``
    (cuFFTDx-style SM value, 900 for 9.0), from the device cache or compiled now."""
    versions = dict(_codegen.toolchain_versions(), curand_source=SOURCE_VERSION)
    key = _cache.make_key(["curand", sm, versions, curand_include()])
    entry = _cache.load(key)
    if entry is None:
        entry = _compile(sm)
        _cache.store(key, entry)
    return entry
