"""Callback code generation (CPU only): numba-compiled callbacks inline into a cuFFT-like caller.

Each callback is linked by nvJitLink with a kernel that NVRTC compiles against cuFFT's own
declaration of the callback; the linked PTX must contain no call (the callback was inlined) and
access elements with single global loads/stores (vector ones for complex elements).
Skipped when numba-cuda, NVRTC, nvJitLink or libNVVM is not installed.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda (the 'numba' extra) is not installed")
nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is not installed")
nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink", reason="cuda-bindings too old")

import cuweave.fft as F  # noqa: E402
from cuweave._internal.errors import InvalidOptionError  # noqa: E402
from cuweave.fft import _numba_callbacks  # noqa: E402
from cuweave.fft._callbacks import default_symbol  # noqa: E402

_CTYPE = {"complex64": "float2", "complex128": "double2", "float32": "float", "float64": "double"}
_SUFFIX = {"complex64": "Complex", "complex128": "DoubleComplex", "float32": "Real",
           "float64": "DoubleReal"}
CASES = [(kind, dt) for kind in ("prolog", "epilog") for dt in _CTYPE]
N = np.uint64(1024)


def _caller(kind: str, dtype: str) -> str:
    t = _CTYPE[dtype]
    if kind == "epilog":
        name = f"cufftJITCallbackStore{_SUFFIX[dtype]}"
        return (f"__device__ void {name}(void*, unsigned long long, {t}, void*, void*);\n"
                f'extern "C" __global__ void k({t}* out, const {t}* in, void* info) {{\n'
                f"  unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                f"  {name}(out, i, in[i], info, 0); }}\n")
    name = f"cufftJITCallbackLoad{_SUFFIX[dtype]}"
    return (f"__device__ {t} {name}(void*, unsigned long long, void*, void*);\n"
            f'extern "C" __global__ void k({t}* out, {t}* in, void* info) {{\n'
            f"  unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  out[i] = {name}(in, i, info, 0); }}\n")


def _nvrtc_ltoir(src: str) -> bytes:
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"caller.cu", 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    try:
        opts = [b"-arch=compute_90", b"-dlto", b"-rdc=true"]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            pytest.skip(f"NVRTC cannot compile the caller here: {err}")
        _, size = nvrtc.nvrtcGetLTOIRSize(prog)
        buf = bytearray(size)  # NVRTC writes into it: never an immutable (maybe cached) bytes
        nvrtc.nvrtcGetLTOIR(prog, buf)
        return bytes(buf)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _linked_ptx(*ltoirs: bytes) -> str:
    try:
        h = nvjitlink.create(3, ["-arch=sm_90", "-lto", "-ptx"])
    except Exception as e:
        pytest.skip(f"nvJitLink unavailable: {e}")
    try:
        for i, code in enumerate(ltoirs):
            nvjitlink.add_data(h, nvjitlink.InputType.LTOIR, code, len(code), f"m{i}")
        nvjitlink.complete(h)
        size = nvjitlink.get_linked_ptx_size(h)
        out = bytearray(size)
        nvjitlink.get_linked_ptx(h, out)
        return bytes(out).decode()
    finally:
        nvjitlink.destroy(h)


def _filter_epilog(data_out, offset, element, user_info, reserved):
    data_out[offset] = element * user_info[offset % N]


def _scale_prolog(data_in, offset, user_info, reserved):
    return data_in[offset] * user_info[0]


@pytest.fixture(scope="module")
def inlinable():
    try:
        from cuda.bindings import nvvm

        nvvm.version()
    except Exception as e:
        pytest.skip(f"libNVVM is not installed: {e}")


@pytest.mark.parametrize("kind,dtype", CASES)
def test_callback_inlines_with_vector_accesses(inlinable, kind, dtype):
    fn = _filter_epilog if kind == "epilog" else _scale_prolog
    compile_ = F.compile_epilog if kind == "epilog" else F.compile_prolog
    code = compile_(fn, dtype, dtype, compute_capability="90")
    ptx = _linked_ptx(_nvrtc_ltoir(_caller(kind, dtype)), bytes(code))
    body = ptx[ptx.index(".entry"):]
    assert "call" not in body, f"{kind} {dtype} callback was not inlined:\n{body}"
    width = ".v2" if dtype.startswith("complex") else ""
    suffix = "f64" if dtype in ("complex128", "float64") else "f32"
    assert f"st.global{width}.{suffix}" in body, body
    assert f"ld.global{width}.{suffix}" in body, body


def _dividing_epilog(data_out, offset, element, user_info, reserved):
    data_out[offset] = element * user_info[offset] / 1024  # numba: libdevice + an env global


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_callback_with_complex_division_links_self_contained(inlinable, dtype):
    """nvmath's example19 divides a complex element by an int: numba's complex division calls
    libdevice (``__nv_fabs``) and exports a ``common`` exception-environment global. cuFFT's
    link of such a callback failed (CUFFT_INTERNAL_ERROR, H200 2026-12-01): the LTO-IR must
    carry libdevice's code and no exported ``common`` global."""
    code = F.compile_epilog(_dividing_epilog, dtype, dtype, compute_capability="90")
    ptx = _linked_ptx(_nvrtc_ltoir(_caller("epilog", dtype)), bytes(code))
    assert ".extern" not in ptx and ".common" not in ptx, ptx
    body = ptx[ptx.index(".entry"):]
    assert "call" not in body, body


@pytest.mark.gpu  # numba-cuda types a nested device function for the current device
def test_folded_scale_inlines(inlinable):
    from cuweave.fft._callbacks import fold_scale

    code = F.compile_epilog(_filter_epilog, "complex64", "complex64", compute_capability="90")
    folded = fold_scale(code, 0.5)
    ptx = _linked_ptx(_nvrtc_ltoir(_caller("epilog", "complex64")), bytes(folded))
    body = ptx[ptx.index(".entry"):]
    assert "call" not in body
    assert "0f3F000000" in body  # the 0.5 scale (float32 0x3F000000) is in the inlined code


def test_shim_rejects_an_unexpected_signature():
    module = 'define i8* @"impl"(i8* %"a", i64 %"b")\n'
    assert _numba_callbacks._shim("epilog", "complex64", "sym", "impl", [module]) is None
    assert _numba_callbacks._shim("epilog", "complex64", "sym", "other", [module]) is None


def _func_signature(ptx: str, symbol: str) -> list[str]:
    """The PTX parameter (and return) declarations of ``.func symbol``, names stripped."""
    start = ptx.index(".func")
    head = ptx[start:ptx.index("{", start)]
    assert symbol in head, head
    decls = re.findall(r"\.param\s+[^,)]*", head)
    return [re.sub(r"\s+\S*(param_\d+|retval0)(\[\d+\])?\s*$", r" \2", d).strip() for d in decls]


def _nvrtc_ptx(src: str) -> str:
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"decl.cu", 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    try:
        opts = [b"-arch=compute_90", b"-rdc=true"]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            pytest.skip(f"NVRTC cannot compile here: {err}")
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        buf = bytearray(size)
        nvrtc.nvrtcGetPTX(prog, buf)
        return bytes(buf).decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _definition(kind: str, dtype: str) -> str:
    """A definition with cuFFT's exact declaration (cufftXt.h's cufftJITCallback* types)."""
    t = _CTYPE[dtype]
    if kind == "epilog":
        return (f"__device__ void cufftJITCallbackStore{_SUFFIX[dtype]}(void* p, "
                f"unsigned long long o, {t} v, void* info, void* smem) {{ (({t}*)p)[o] = v; }}\n")
    return (f"__device__ {t} cufftJITCallbackLoad{_SUFFIX[dtype]}(void* p, unsigned long long o, "
            f"void* info, void* smem) {{ return (({t}*)p)[o]; }}\n")


@pytest.mark.parametrize("kind,dtype", CASES)
def test_callback_abi_matches_cuffts_declaration(inlinable, kind, dtype):
    """Called out of line, the callback must take and return exactly what cuFFT passes: the
    PTX parameters, with their alignment (double2 is 16-byte aligned), equal NVRTC's."""
    from cuweave.fft._callbacks import _compile, default_symbol

    fn = _filter_epilog if kind == "epilog" else _scale_prolog
    ours = _compile(kind, fn, dtype, dtype, "90", output="ptx").decode()
    want = _nvrtc_ptx(_definition(kind, dtype))
    symbol = default_symbol(kind, dtype)
    assert _func_signature(ours, symbol) == _func_signature(want, symbol)


@pytest.mark.gpu
@pytest.mark.parametrize("kind,dtype", CASES)
def test_gpu_machine_takes_the_shim_path(monkeypatch, kind, dtype):
    """Where the GPU tests run, callbacks compile behind the shim (libNVVM found): numba's own C
    ABI wrapper, the fallback, passes a complex element unlike cuFFT's declaration. A failure
    here explains a callback plan failing there."""
    real, used = _numba_callbacks.compile_inlinable, []

    def spy(*args, **kwargs):
        code = real(*args, **kwargs)
        used.append(code is not None)
        return code

    monkeypatch.setattr(_numba_callbacks, "compile_inlinable", spy)
    fn = _filter_epilog if kind == "epilog" else _scale_prolog
    (F.compile_epilog if kind == "epilog" else F.compile_prolog)(fn, dtype, dtype)
    assert used == [True]


def test_nvmath_compile_arguments_name_phase_representation():
    """nvmath-python 1.0's ``name=``, ``phase=`` and ``representation=`` (issue 33 item 5)."""
    ptx = F.compile_prolog(_scale_prolog, "complex64", "complex64", compute_capability="90",
                           representation="ptx", name="my_load")
    assert b"my_load" in bytes(ptx)
    # phase='Store' compiles an epilog, whichever function is called
    store = F.compile_prolog(_dividing_epilog, "float32", "float32", compute_capability="90",
                             phase="Store", representation="ptx")
    assert default_symbol("epilog", "float32").encode() in bytes(store)
    with pytest.raises(InvalidOptionError, match="phase must be 'Load' or 'Store'"):
        F.compile_epilog(_dividing_epilog, "float32", "float32", phase="load")
    with pytest.raises(InvalidOptionError, match="representation must be 'ltoir' or 'ptx'"):
        F.compile_epilog(_dividing_epilog, "float32", "float32", representation="cubin")
