"""CPU tests of cuweave.device.ldcs/stcs (streaming whole-element accesses) and of the device-FFT
benchmark's streaming kernels: compiled for sm_90 (no GPU needed), checked in the PTX.

Skipped without numba-cuda / nvidia-mathdx / NVRTC / libNVVM / nvJitLink.
"""

from __future__ import annotations

import re
import types as pytypes
from collections import Counter

import numpy as np
import pytest

from tests.device._nvjitlink import link_sm90

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")


@pytest.fixture
def sm90(monkeypatch):
    """``sm90(pyfunc, sig, output)``: numba-compile a kernel for sm_90 (numba asks the current
    device for device functions' compute capability: pinned to 9.0 here)."""
    from numba import cuda
    from numba.cuda import dispatcher

    monkeypatch.setattr(dispatcher, "get_current_device",
                        lambda: pytypes.SimpleNamespace(compute_capability=(9, 0)))

    def run(pyfunc, sig, output="ptx"):
        try:
            code, _ = cuda.compile(pyfunc, sig, cc=(9, 0), output=output, device=False,
                                   abi="numba")
        except Exception as e:  # libNVVM missing here: not what these tests are about
            if "NVVM" in type(e).__name__ or "libNVVM" in str(e):
                pytest.skip(f"libNVVM is not available: {e}")
            raise
        return code

    return run


def _entry_ops(ptx: str) -> Counter:
    """Global/local/shared accesses and shuffles in the kernel's ``.entry`` body."""
    body = ptx[ptx.index(".entry"):] + "\n"
    body = body[:body.index("\n}\n")]
    ops = Counter(re.findall(r"\b((?:ld|st)\.(?:global|local|shared)[.\w]*|shfl[.\w]*)", body))
    ops["local depot"] = int("__local_depot" in body)
    return ops


def test_streaming_accesses_are_one_vector_instruction_per_element(sm90):
    from numba import cuda

    from cuweave.device import float16x4_type, float32x4_type, ldcs, stcs, uint32x4_type

    def kernel(c64, c128, f32, h4, u4, out64, out128, out32):
        j = cuda.threadIdx.x
        b = cuda.blockIdx.x  # an index tuple of mixed integer widths
        stcs(out64, (b, j), ldcs(c64, (b, j)) * 2)
        stcs(out128, j, ldcs(c128, j))
        stcs(out32, j, ldcs(f32, j))
        x4, y4 = c64.view(float32x4_type), out64.view(float32x4_type)
        stcs(y4, (b, j), ldcs(x4, (b, j)))           # two complex64 in one access
        stcs(h4.view(float16x4_type), j, ldcs(h4.view(float16x4_type), j + 1))
        stcs(u4.view(uint32x4_type), j, ldcs(u4.view(uint32x4_type), j + 1))

    sig = ("void(complex64[:, ::1], complex128[::1], float32[::1], float16[::1], uint32[::1], "
           "complex64[:, ::1], complex128[::1], float32[::1])")
    ops = _entry_ops(sm90(kernel, sig))
    expected = {
        "ld.global.cs.v2.f32": 1, "st.global.cs.v2.f32": 1,   # complex64: 8 bytes
        "ld.global.cs.v4.f32": 1, "st.global.cs.v4.f32": 1,   # float32x4: 16 bytes
        "ld.global.cs.v2.f64": 1, "st.global.cs.v2.f64": 1,   # complex128
        "ld.global.cs.f32": 1, "st.global.cs.f32": 1,         # float32, as numba's ldcs
        "ld.global.cs.v2.b32": 1, "st.global.cs.v2.b32": 1,   # float16x4 as 32-bit words
        "ld.global.cs.v4.b32": 1, "st.global.cs.v4.b32": 1,   # uint32x4
    }
    assert {k: ops[k] for k in expected} == expected
    # nothing else touches global memory (no element split into smaller accesses)
    assert sum(v for k, v in ops.items() if ".global." in k) == sum(expected.values())


def test_stored_value_is_converted_to_the_element_type(sm90):
    from numba import cuda

    from cuweave.device import float32x2, float32x2_type, ldcs, stcs

    def kernel(x, y):
        j = cuda.threadIdx.x
        v = ldcs(x.view(float32x2_type), j)  # a float32x2 value into a complex64 array
        stcs(y, j, float32x2(v.y, v.x))

    ops = _entry_ops(sm90(kernel, "void(complex64[::1], complex64[::1])"))
    assert ops["ld.global.cs.v2.f32"] == 1 and ops["st.global.cs.v2.f32"] == 1


@pytest.mark.parametrize("body, message", [
    ("stcs(y, 0, ldcs(x.view(float64x4_type), 0))", "must fit one 16-byte access"),
    ("stcs(y, 0, ldcs(x, (0, 0)))", "index must have 1 integer.*got 2"),
    ("stcs(y, 0, ldcs(x, 0.5))", "index must be an integer or a tuple of integers"),
])
def test_rejected_uses(sm90, body, message):
    from numba.core.errors import TypingError

    import cuweave.device as dx

    namespace = {"ldcs": dx.ldcs, "stcs": dx.stcs, "float64x4_type": dx.float64x4_type}
    exec(f"def kernel(x, y):\n    {body}\n", namespace)
    with pytest.raises(TypingError, match=message):
        sm90(namespace["kernel"], "void(complex64[::1], complex64[::1])")


def test_host_calls_are_refused():
    from cuweave.device import ldcs, stcs

    with pytest.raises(TypeError, match="inside numba CUDA kernels"):
        ldcs(np.zeros(2, np.complex64), 0)
    with pytest.raises(TypeError, match="inside numba CUDA kernels"):
        stcs(np.zeros(2, np.complex64), 0, 1j)


# ---------------------------------------------------------------------------------------------
# The benchmark's standalone kernels, linked with cuFFTDx for sm_90
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fft256():
    pytest.importorskip("nvidia.mathdx", reason="nvidia-mathdx (the 'dx' extra) is not installed")
    try:
        import cuweave.device as dx

        return dx.FFT("c2c", 256, np.float32, "forward", elements_per_thread=8,
                      ffts_per_block=4, sm=90)
    except ImportError as e:  # NVRTC / CCCL headers missing
        pytest.skip(f"optional package missing: {e}")


def _link(ltoir: bytes, fft, ptx: bool) -> bytes:
    """The kernel's LTO-IR linked with the FFT's and cuFFTDx's twiddle tables by nvJitLink:
    the post-LTO PTX, or (ptxas run on it) the cubin."""
    from cuweave.device import _numba_ext

    return link_sm90([(ltoir, "kernel"), (fft._ltoir, "fft"),
                      (_numba_ext.fft_tables(900).data, "tables")], ptx=ptx)


# elements_per_thread = 8: each way's data load and store, how many of each per thread, and
# its shuffles (the 16-byte ways hand one float32x2 per pair over, two 4-byte shuffles, on the
# way in and out)
BENCH_IO = {
    "stream": ("ld.global.cs.v2.f32", "st.global.cs.v2.f32", 8, 0),
    "wide": ("ld.global.v4.f32", "st.global.v4.f32", 4, 16),
    "stream16": ("ld.global.cs.v4.f32", "st.global.cs.v4.f32", 4, 16),
}


@pytest.mark.parametrize("io", ["stream", "wide", "stream16"])
def test_benchmark_streaming_kernels_compile_for_sm90(bench, fft256, sm90, io):
    assert io in bench.IO_VARIANTS
    kernel = bench._block_fft_kernel(fft256, io)
    ltoir = sm90(kernel.py_func, "void(complex64[:, ::1], complex64[:, ::1])", output="ltoir")
    ops = _entry_ops(_link(ltoir, fft256, ptx=True).decode())
    load, store, count, shuffles = BENCH_IO[io]
    assert ops[load] == count and ops[store] == count  # one access per element / pair
    assert ops["shfl.sync.bfly.b32"] == shuffles
    # the only other global accesses are the FFT's twiddle loads, none of the data's
    others = {k: v for k, v in ops.items() if ".global." in k and k not in (load, store)}
    assert set(others) <= {"ld.global.v2.f32", "ld.global.f32"}, others
    assert ops["local depot"] == 0 and not any(".local" in k for k in ops)  # registers only
    cubin = _link(ltoir, fft256, ptx=False)  # ptxas accepts the inline PTX
    assert cubin[:4] == b"\x7fELF"
