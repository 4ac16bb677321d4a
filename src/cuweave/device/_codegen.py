"""C++ generation and NVRTC compilation of cuFFTDx device functions.

For one :class:`~cuweave.device._options.FFTSpec` we emit a translation unit that

* describes the FFT with cuFFTDx operators (``Size<> + Precision<> + Type<> + ...``),
* checks it with ``cufftdx::is_supported_v`` (an unsupported description never reaches a
  ``static_assert``),
* defines an ``extern "C" __device__`` wrapper around ``FFT().execute(...)``, and
* reports the traits (block_dim, storage_size, shared_memory_size, ...) and the valid
  elements-per-thread values as template arguments of a ``[[deprecated]]`` marker, which NVRTC
  prints in its log. So one compile (to LTO-IR) yields both the code and the traits, on any
  machine with NVRTC; no GPU is needed.

Headers come from the ``nvidia-mathdx`` wheel (cuFFTDx, commonDx) and CCCL (libcu++), found
through cuda.pathfinder, ``CUDA_HOME``/``CUDA_PATH``, ``/usr/local/cuda`` or the
``nvidia-cuda-cccl`` wheel.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import tempfile
import time

from .._bindings.nvrtc import compile_ltoir
from .._bindings.nvrtc import module as _nvrtc
from .._internal.errors import InvalidOptionError, LibraryNotFoundError, NvrtcError
from .._internal.logging import get_logger
from ._options import Execution, FFTSpec, FFTType, RealMode

__all__ = [
    "SOURCE_VERSION",
    "TRAIT_NAMES",
    "mathdx_include",
    "cccl_include",
    "cuda_include",
    "database_sizes",
    "toolchain_versions",
    "generate_source",
    "parse_report",
    "compile_spec",
    "lut_ltoir",
    "NvrtcError",
]

_log = get_logger("device.codegen")
# Bump when the generated source changes meaning: it is part of every cache key.
SOURCE_VERSION = 6
TRAIT_NAMES = (
    "ok", "block_dim_x", "block_dim_y", "block_dim_z", "storage_size", "shared_memory_size",
    "stride", "elements_per_thread", "ffts_per_block", "requires_workspace", "input_ept",
    "output_ept", "input_length", "output_length", "implicit_type_batching",
    "suggested_ffts_per_block",
)


# ---------------------------------------------------------------------------------------------
# Toolchain discovery
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def mathdx_include() -> str:
    """The ``include`` folder of the nvidia-mathdx wheel (raises LibraryNotFoundError)."""
    try:
        spec = importlib.util.find_spec("nvidia.mathdx")
    except (ImportError, ValueError):
        spec = None
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        inc = os.path.join(root, "include")
        if os.path.isfile(os.path.join(inc, "cufftdx.hpp")):
            return inc
    raise LibraryNotFoundError("nvidia-mathdx", "dx", "cuFFTDx headers (cufftdx.hpp) not found")


def _header_candidates(ctk_name: str, toolkit_sub: str, wheel_subs: tuple[str, ...]):
    try:
        from cuda import pathfinder

        finder = getattr(pathfinder, "find_nvidia_header_directory", None)
        if finder is not None:
            yield finder(ctk_name)
    except Exception:  # older pathfinder, or nothing found
        pass
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            yield os.path.join(os.environ[var], "include", toolkit_sub)
    yield os.path.join("/usr/local/cuda/include", toolkit_sub)
    for pkg in ("nvidia", "numba_cuda"):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            spec = None
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            for sub in wheel_subs:
                yield os.path.join(root, sub)


def _find_headers(ctk_name, toolkit_sub, wheel_subs, marker, what, hint) -> str:
    for path in _header_candidates(ctk_name, toolkit_sub, wheel_subs):
        if path and os.path.exists(os.path.join(path, marker)):
            return os.path.normpath(path)
    raise LibraryNotFoundError(what, "dx", hint)


@functools.lru_cache(maxsize=1)
def cccl_include() -> str:
    """A CCCL include folder (holding ``cuda/std``); raises LibraryNotFoundError."""
    return _find_headers("cccl", "cccl", ("cu13/include/cccl", "cuda_cccl/include"),
                         os.path.join("cuda", "std", "version"), "CCCL headers (libcu++)",
                         "install a CUDA toolkit, set CUDA_HOME, or `pip install nvidia-cuda-cccl`")


@functools.lru_cache(maxsize=1)
def cuda_include() -> str:
    """A folder holding the CUDA runtime headers cuFFTDx needs (``cuda_fp16.h``)."""
    return _find_headers("cudart", "", ("cu13/include", "numba/cuda/include/13"),
                         "cuda_fp16.h", "CUDA headers (cuda_fp16.h)",
                         "install a CUDA toolkit, set CUDA_HOME, or `pip install "
                         "nvidia-cuda-runtime`")


@functools.lru_cache(maxsize=4)
def database_sizes(precision: str) -> tuple[int, ...]:
    """FFT sizes cuFFTDx implements directly (no Bluestein workspace) in ``precision``."""
    tag = {"float16": "fp16", "float32": "fp32", "float64": "fp64"}[precision]
    folder = os.path.join(mathdx_include(), "cufftdx", "database")
    pattern = re.compile(rf"fft_(\d+)_{tag}_fwd\.hpp\.inc$")
    sizes = {int(m.group(1)) for m in map(pattern.match, os.listdir(folder)) if m}
    return tuple(sorted(sizes))


# Architectures without database records of their own use another's (cuFFTDx's
# cufftdx/database/detail/block_fft.hpp).
_RECORD_ALIASES = {720: 700, 860: 700, 870: 800, 1010: 1000, 1030: 1000, 1210: 1200}


@functools.cache
def _database_records(precision: str, sm: int) -> dict:
    """``{size: ((ept, fpb), ...)}`` of cuFFTDx's tuned block implementations for ``sm``, read
    from the machine-readable copy of the records that nvidia-mathdx ships (no compilation)."""
    arch = _RECORD_ALIASES.get(sm, sm)
    path = os.path.join(mathdx_include(), "cufftdx", "database", "records", str(arch),
                        f"database_{_PRECISION_TAG[precision]}_fwd.json")
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f).get("database", [])
    except (OSError, ValueError, AttributeError):
        return {}
    out = {}
    for entry in entries:
        try:
            pairs = {(int(b["ept"]), int(b["fpb"])) for b in entry["blobs"]}
            out[int(entry["size"])] = tuple(sorted(pairs))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def database_knobs(precision: str, sm: int, size: int) -> tuple[tuple[int, int], ...]:
    """The ``(elements_per_thread, ffts_per_block)`` pairs cuFFTDx's database holds a tuned
    implementation of, for a ``size``-point complex block FFT in ``precision`` on ``sm``
    (empty when the architecture or size has none). ``ffts_per_block`` counts FFTs (two per
    value in half precision)."""
    return _database_records(precision, sm).get(size, ())


@functools.lru_cache(maxsize=1)
def toolchain_versions() -> dict:
    """Versions that decide generated code: cuFFTDx/mathdx, NVRTC, cuweave."""
    from importlib import metadata

    from .._version import __version__

    inc = mathdx_include()
    try:
        mathdx = metadata.version("nvidia-mathdx")
    except metadata.PackageNotFoundError:
        mathdx = "unknown"
    with open(os.path.join(inc, "cufftdx", "cufftdx_version.hpp"), encoding="utf-8") as f:
        m = re.search(r"#define\s+CUFFTDX_VERSION\s+(\d+)", f.read())
    _, major, minor = _nvrtc().nvrtcVersion()
    return {"mathdx": mathdx, "cufftdx": int(m.group(1)) if m else 0,
            "nvrtc": f"{major}.{minor}", "cuweave": __version__, "source": SOURCE_VERSION,
            "extern_twiddles": extern_twiddles()}


# ---------------------------------------------------------------------------------------------
# Source generation
# ---------------------------------------------------------------------------------------------

_TRAITS_EXPR = {
    Execution.Block: (
        "1u, F::block_dim.x, F::block_dim.y, F::block_dim.z, F::storage_size, "
        "F::shared_memory_size, F::stride, F::elements_per_thread, F::ffts_per_block, "
        "unsigned(F::requires_workspace), F::input_ept, F::output_ept, F::input_length, "
        "F::output_length, F::implicit_type_batching, D::suggested_ffts_per_block"
    ),
    Execution.Thread: (
        "1u, 1u, 1u, 1u, F::storage_size, 0u, F::stride, F::elements_per_thread, 1u, 0u, "
        "F::input_ept, F::output_ept, F::input_length, F::output_length, "
        "F::implicit_type_batching, 1u"
    ),
}


def _description(spec: FFTSpec) -> str:
    ops = [
        f"Size<{spec.size}u>()",
        f"Precision<{spec.cxx_precision}>()",
        f"Type<fft_type::{spec.fft_type.name}>()",
        f"Direction<fft_direction::{spec.direction.name}>()",
        f"SM<{spec.sm}u>()",
        f"{spec.execution.name}()",
    ]
    if spec.fft_type is not FFTType.c2c and (
        spec.complex_layout.name != "natural" or spec.real_mode is not RealMode.normal
    ):
        ops.append(f"RealFFTOptions<complex_layout::{spec.complex_layout.name}, "
                   f"real_mode::{spec.real_mode.name}>()")
    return " + ".join(ops)


_PRECISION_TAG = {"float16": "fp16", "float32": "fp32", "float64": "fp64"}


def _implementation_file(spec: FFTSpec) -> str:
    """cuFFTDx's implementation (PTX blobs) of the execution size, relative to the include
    folder. The database records of size ``n`` name only functions defined in this file (every
    architecture and precision of nvidia-mathdx 25.6 checked)."""
    tag = _PRECISION_TAG[spec.precision]
    return f"cufftdx/database/fft_{spec.execution_size}_{tag}_fwd.hpp.inc"


def _implementation_block(spec: FFTSpec) -> str:
    """The one implementation file this FFT executes, included after ``cufftdx.hpp`` (whose
    own list of every size's implementation is an empty in-memory header): the headers before it
    are then the same for every size, so NVRTC's precompiled header serves them all. A
    definition of cuFFTDx's generic function stops the compilation should the FFT need a
    function of another file (it is compiled again with every file)."""
    include = ""
    try:
        here = os.path.isfile(os.path.join(mathdx_include(), _implementation_file(spec)))
    except LibraryNotFoundError:  # source text without the headers (compiling it needs them)
        here = True
    if here:
        include = f'#include "{_implementation_file(spec)}"'
    return f"""\
namespace cufftdx {{ namespace database {{ namespace detail {{
template <unsigned int I, typename T, unsigned int B>
__device__ void cufftdx_private_function(
    typename cufftdx::detail::make_complex_type<T>::cufftdx_type*, unsigned) {{
  static_assert(sizeof(T) == 0, "cuweave: cuFFTDx implementation file not included");
}}
#define __HALF2_TO_UI(h) (*reinterpret_cast<unsigned int*>(&(h)))
{include}
#undef __HALF2_TO_UI
}} }} }}"""


SHARED_API_SUFFIX = "_shared_api"


def generate_source(spec: FFTSpec, symbol: str) -> str:
    """The C++ translation unit for ``spec`` exporting ``extern "C"`` function ``symbol`` (and,
    for block execution, ``symbol + SHARED_API_SUFFIX``: cuFFTDx's shared-memory API)."""
    block = spec.execution is Execution.Block
    ept = spec.elements_per_thread
    d1 = f"decltype(cw_d0() + ElementsPerThread<{ept}u>())" if isinstance(ept, int) else "cw_d0"
    fpb = spec.ffts_per_block
    if not block:
        final = "D"
    else:
        fpb_expr = f"{fpb}u" if isinstance(fpb, int) else (
            "D::suggested_ffts_per_block" if fpb == "suggested" else
            # half precision batches two FFTs per value: at least (and by default) two
            "2u" if spec.precision == "float16" else "1u")
        final = f"decltype(D() + FFTsPerBlock<{fpb_expr}>())"
    if block:
        epts = ", ".join(
            f"unsigned(is_supported_v<decltype(cw_d0() + ElementsPerThread<{e}u>()), {spec.sm}u>)"
            for e in spec.ept_candidates())
        run_args, run_call, c_params = "void* td, void* sm", "td, sm", "void* td, void* sm"
        body = ("if constexpr (!F::requires_workspace) "
                "F().execute(static_cast<V*>(td), static_cast<V*>(sm));")
        # cuFFTDx's shared-memory API (the data lies in ``td``, shared) has a symbol of its own:
        # one run-time branch between the two APIs kept both bodies in every kernel (0.58x).
        shared_exec = """
template <class F, bool OK> struct cw_exec_s { static __device__ void run(void*) {} };
template <class F> struct cw_exec_s<F, true> {
  static __device__ __forceinline__ void run(void* td) {
    using V = typename F::value_type;
    if constexpr (!F::requires_workspace) F().execute(static_cast<V*>(td));
  }
};"""
        shared_export = f"""
extern "C" __device__ int {symbol}{SHARED_API_SUFFIX}(void* td) {{
  cw_exec_s<cw_fft, cw_ok>::run(td);
  return 0;
}}"""
    else:
        epts = "0u"
        run_args, run_call, c_params = "void* td", "td", "void* td"
        body = "F().execute(static_cast<V*>(td));"
        shared_exec = shared_export = ""
    traits = _TRAITS_EXPR[spec.execution]
    return f"""\
#include <cufftdx.hpp>
{_implementation_block(spec)}
namespace {{
using namespace cufftdx;
using cw_d0 = decltype({_description(spec)});
using cw_d1 = {d1};
constexpr bool cw_ok = is_supported_v<cw_d1, {spec.sm}u>;
template <class D, bool OK> struct cw_final {{ using type = void; }};
template <class D> struct cw_final<D, true> {{ using type = {final}; }};
using cw_fft = typename cw_final<cw_d1, cw_ok>::type;
template <unsigned... V> struct cw_traits_report {{}};
template <unsigned... V> struct cw_ept_report {{}};
template <class R> [[deprecated]] __device__ constexpr int cw_emit() {{ return 0; }}
template <class F, bool OK> struct cw_traits {{ using type = cw_traits_report<0u>; }};
template <class F> struct cw_traits<F, true> {{
  using D = cw_d1;
  using type = cw_traits_report<{traits}>;
}};
template <class F, bool OK> struct cw_exec {{ static __device__ void run({run_args}) {{}} }};
template <class F> struct cw_exec<F, true> {{
  static __device__ __forceinline__ void run({run_args}) {{
    using V = typename F::value_type;
    {body}
  }}
}};
{shared_exec}
__device__ int cw_report() {{
  return cw_emit<typename cw_traits<cw_fft, cw_ok>::type>() + cw_emit<cw_ept_report<{epts}>>();
}}
}}  // namespace
extern "C" __device__ int {symbol}({c_params}) {{
  cw_exec<cw_fft, cw_ok>::run({run_call});
  return cw_report() * 0;
}}{shared_export}
"""


_REPORT_RE = re.compile(r"(cw_traits_report|cw_ept_report)<([0-9uUlL ,]*)>")


def parse_report(log: str, spec: FFTSpec) -> dict:
    """Traits and valid elements-per-thread values from an NVRTC log of generated code."""
    found = {}
    for name, args in _REPORT_RE.findall(log):
        values = [int(v.strip().rstrip("uUlL")) for v in args.split(",") if v.strip()]
        if name not in found and values:
            found[name] = values
    if "cw_traits_report" not in found:
        raise NvrtcError(3, "nvrtcCompileProgram",
                         hint="the cuFFTDx traits report was not found in the compiler log")
    values = found["cw_traits_report"]
    traits = dict(zip(TRAIT_NAMES, values + [0] * (len(TRAIT_NAMES) - len(values))))
    flags = found.get("cw_ept_report", [])
    if spec.execution is Execution.Block:
        cands = list(spec.ept_candidates())
        traits["valid_elements_per_thread"] = [e for e, ok in zip(cands, flags) if ok]
    else:
        traits["valid_elements_per_thread"] = [spec.size]
    return traits


# ---------------------------------------------------------------------------------------------
# Compilation
# ---------------------------------------------------------------------------------------------


def _options(spec: FFTSpec) -> list[bytes]:
    inc = mathdx_include()
    opts = [
        "-std=c++17", f"-arch=sm_{spec.sm // 10}", "-rdc=true", "-dlto", "-default-device",
        "-DCUFFTDX_DISABLE_CUTLASS_DEPENDENCY", "-DNDEBUG",
        # parse only this precision's part of the implementation database (~30% faster)
        "-DCUFFTDX_DETAIL_MANUAL_IMPL_FILTER",
        f"-DCUFFTDX_DETAIL_INCLUDE_PRECISION_{_PRECISION_TAG[spec.precision].upper()}",
        f"-I{inc}", f"-I{os.path.join(inc, 'commondx')}", f"-I{cccl_include()}",
        f"-I{cuda_include()}",
    ]
    if extern_twiddles():
        # twiddle tables declared only; defined once per architecture in lut_ltoir() (their
        # definitions were 40% of a compilation and 2/3 of the LTO-IR)
        opts.append("-DCUFFTDX_DETAIL_USE_EXTERN_LUT")
    return [o.encode() for o in opts]


def extern_twiddles() -> bool:
    """Whether device FFTs declare cuFFTDx's twiddle tables and link them from one LTO-IR
    (:func:`lut_ltoir`, compiled once per machine and architecture) instead of defining them in
    each FFT. On by default: a new configuration compiled in 2.3 s instead of 5.1 s on the H200
    host (2026-12-01), and kernels ran as fast either way (65536 FFTs of 256: 0.947x / 0.952x
    cupy.fft; fused convolution 3.09x / 3.05x CuPy's three passes).
    ``CUWEAVE_DX_EXTERN_TWIDDLES=0`` defines the tables in each FFT."""
    return os.environ.get("CUWEAVE_DX_EXTERN_TWIDDLES", "1") != "0"


# cuFFTDx's database header includes the implementation records of every architecture and the
# implementation of every size; a compilation needs only its own (see _implementation_block).
# Empty in-memory headers stand in for the others (about half the parse time). Should a
# configuration fail that way, it is compiled again with the complete headers.
_RECORD_ARCHS = ("700", "750", "800", "890", "900", "1000", "1200")
# NVRTC's automatic precompiled header (in-process): the third and later configurations of a
# process reuse the parsed cuFFTDx headers (one PCH per architecture and precision; 0.75 s
# instead of 1.3 s here). Making the PCH costs ~0.5 s more, so the first compilation of a process
# (often its only one) skips it and the second makes it. NVRTC's PCH files are valid only in the
# process that made them (the heap's address is part of them): nothing is kept on disk.
_PCH_HEAP = 1 << 30
_pch_state: dict = {"compiles": 0, "ok": None}


def _overlays(spec: FFTSpec) -> tuple[list[bytes], list[bytes]]:
    tag = _PRECISION_TAG[spec.precision]
    names = [f"cufftdx/database/records/definitions_{tag}_fwd.hpp.inc".encode()]
    own = str(spec.sm)
    if own in _RECORD_ARCHS:
        names += [f"cufftdx/database/records/{arch}/database_{p}_fwd.hpp.inc".encode()
                  for arch in _RECORD_ARCHS if arch != own for p in ("fp16", "fp32", "fp64")]
    return [b"\n"] * len(names), names


def _pch_options(nvrtc) -> list[bytes]:
    _pch_state["compiles"] += 1
    if _pch_state["compiles"] == 1:
        return []
    if _pch_state["ok"] is None:
        try:
            _pch_state["ok"] = int(nvrtc.nvrtcSetPCHHeapSize(_PCH_HEAP)[0]) == 0
        except Exception:  # NVRTC before 12.8: no PCH
            _pch_state["ok"] = False
    return [b"-pch"] if _pch_state["ok"] else []


def _run_nvrtc(source: str, name: str, options: list[bytes], headers=((), ()), *,
               pch: bool = True) -> tuple[bool, str, bytes | None]:
    """NVRTC with the automatic precompiled header unless ``pch`` is False. NVRTC tells PCHs
    apart by options and file names, not by the contents of in-memory headers: a compilation
    whose headers differ from others' under the same names must not use (or make) one.

    A compilation that fails with the PCH is compiled again without it; when that succeeds
    the PCH is turned off for the rest of the process (a warning says so), so a bad PCH costs
    one compilation, never a wrong answer or an error."""
    extra = _pch_options(_nvrtc()) if pch else []
    ok, log, ir = compile_ltoir(source, name, options + extra, headers)
    if ok or not extra:
        return ok, log, ir
    ok, log_plain, ir = compile_ltoir(source, name, options, headers)
    if ok:
        _pch_state["ok"] = False
        _log.warning("NVRTC failed on %s with its precompiled header and succeeded without; "
                     "precompiled headers are off for this process. The failing log: %s",
                     name, failure_detail(log, name, options + extra))
    return ok, log_plain, ir


def _first_errors(log: str, limit: int = 3) -> str:
    lines = [ln.strip() for ln in log.splitlines() if "error" in ln]
    return " | ".join(lines[:limit]) or log[-500:]


def failure_detail(log: str, name: str, options) -> str:
    """The first errors of a failed compilation and where its whole log, options and include
    folders were saved (a temporary file), for error messages and bug reports."""
    try:
        _, major, minor = _nvrtc().nvrtcVersion()
        version = f"{major}.{minor}"
    except Exception:  # diagnostics only
        version = "unknown"
    text = "\n".join(["options: " + " ".join(o.decode(errors="replace") for o in options),
                      f"NVRTC version: {version}", "", log])
    try:
        fd, path = tempfile.mkstemp(prefix=f"cuweave-nvrtc-{name}-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        where = f" (whole log: {path})"
    except OSError:
        where = ""
    return _first_errors(log) + where


def compile_spec(spec: FFTSpec, symbol: str) -> dict:
    """Compile ``spec``; return ``{'traits': {...}, 'symbol': str, 'ltoir': bytes|None}``.

    ``ltoir`` is None when cuFFTDx does not support the description (``traits['ok'] == 0``).
    Raises InvalidOptionError when the description fails to compile at all.
    """
    t0 = time.perf_counter()
    source = generate_source(spec, symbol)
    ok, log, ir = _run_nvrtc(source, f"{symbol}.cu", _options(spec), _overlays(spec))
    if not ok or "cw_traits_report<0u>" in log:  # retry with the complete headers
        ok, log, ir = _run_nvrtc(source, f"{symbol}.cu", _options(spec), pch=False)
    if not ok:
        raise InvalidOptionError(
            f"the FFT description {spec.key()!r} is not supported by cuFFTDx: "
            f"{failure_detail(log, f'{symbol}.cu', _options(spec))}"
        )
    traits = parse_report(log, spec)
    if _log.isEnabledFor(20):
        _log.info("compiled device FFT %s in %.2f s (ok=%d)", spec.key(),
                  time.perf_counter() - t0, traits["ok"])
    return {"traits": traits, "symbol": symbol, "ltoir": ir if traits["ok"] else None}


# ---------------------------------------------------------------------------------------------
# Twiddle tables
# ---------------------------------------------------------------------------------------------

_LUT_SOURCE = """\
#include <cufftdx.hpp>
namespace cufftdx { namespace database { namespace detail {
#define CUFFTDX_DETAIL_LUT_LINKAGE extern
#include "cufftdx/database/lut_fp32.hpp.inc"
#include "cufftdx/database/lut_fp64.hpp.inc"
#undef CUFFTDX_DETAIL_LUT_LINKAGE
} } }
"""


def lut_ltoir(sm: int) -> bytes:
    """LTO-IR defining cuFFTDx's twiddle tables (both precisions) for ``sm``; every device FFT's
    code declares them only, and a kernel links this once. Cached on disk (one per
    architecture and toolchain); the first compilation takes ~2.5 s here."""
    from . import _cache

    key = _cache.make_key(["cufftdx-twiddle-tables", sm, toolchain_versions()])
    entry = _cache.load(key)
    if entry is None:
        t0 = time.perf_counter()
        opts = _options(FFTSpec.from_knobs("c2c", 2, "float32", sm=sm))
        # the tables alone (declared by cufftdx.hpp, defined here): every size's
        # implementation and every record stays out
        names = [f"cufftdx/database/records/definitions_{p}_fwd.hpp.inc".encode()
                 for p in ("fp16", "fp32", "fp64")]
        names += [f"cufftdx/database/records/{a}/database_{p}_fwd.hpp.inc".encode()
                  for a in _RECORD_ARCHS for p in ("fp16", "fp32", "fp64")]
        ok, log, ir = compile_ltoir(_LUT_SOURCE, "cuweave_cufftdx_lut.cu", opts,
                                    ([b"\n"] * len(names), names))
        if not ok:
            raise NvrtcError(6, "nvrtcCompileProgram",
                             hint="cuFFTDx's twiddle tables: "
                             + failure_detail(log, "cuweave_cufftdx_lut.cu", opts))
        entry = {"traits": None, "symbol": None, "ltoir": ir}
        _cache.store(key, entry)
        if _log.isEnabledFor(20):
            _log.info("compiled cuFFTDx's twiddle tables for sm_%d in %.2f s", sm // 10,
                      time.perf_counter() - t0)
    return entry["ltoir"]
