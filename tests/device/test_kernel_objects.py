"""CPU tests of device objects inside kernels: numba typing and lowering to LTO-IR for sm_90
(no GPU needed), the helper types, and host-side behaviour.

Skipped without numba-cuda / nvidia-mathdx / NVRTC / libNVVM.
"""

from __future__ import annotations

import types as pytypes

import numpy as np
import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
pytest.importorskip("nvidia.mathdx", reason="nvidia-mathdx (the 'dx' extra) is not installed")

from cuweave.device import common_cuda  # noqa: E402


@pytest.fixture
def compile_ltoir(monkeypatch):
    """``compile_ltoir(pyfunc, signature)``: numba-compile a kernel for sm_90 to LTO-IR.

    numba-cuda asks the current device for the compute capability of device functions; this
    pins it to 9.0 so typing and lowering run on a machine without a GPU.
    """
    from numba import cuda
    from numba.cuda import dispatcher

    monkeypatch.setattr(dispatcher, "get_current_device",
                        lambda: pytypes.SimpleNamespace(compute_capability=(9, 0)))

    def run(pyfunc, sig):
        try:
            ir, _ = cuda.compile(pyfunc, sig, cc=(9, 0), output="ltoir")
        except Exception as e:  # libNVVM missing here: not what these tests are about
            if "NVVM" in type(e).__name__ or "libNVVM" in str(e):
                pytest.skip(f"libNVVM is not available: {e}")
            raise
        assert len(ir) > 100
        return ir

    return run


@pytest.fixture(scope="module")
def ffts():
    try:
        import cuweave.device as dx

        made = dx.warm_cache([
            dict(fft_type="c2c", size=64, precision=np.float32, sm=90, ffts_per_block=2),
            dict(fft_type="c2c", size=64, precision=np.float32, sm=90, direction="inverse",
                 ffts_per_block=2),
            dict(fft_type="r2c", size=64, precision=np.float32, sm=90, ffts_per_block=2),
            dict(fft_type="c2c", size=128, precision=np.float16, sm=90, ffts_per_block=4,
                 elements_per_thread=8),
            dict(fft_type="c2c", size=8, precision=np.float16, sm=90, execution="Thread"),
        ])
    except ImportError as e:  # NVRTC / CCCL headers missing
        pytest.skip(f"optional package missing: {e}")
    return dict(zip(("c2c", "ic2c", "r2c", "half", "half_thread"), made))


def test_object_referenced_in_kernel_compiles(ffts, compile_ltoir):
    from numba import cuda

    fft, ifft = ffts["c2c"], ffts["ic2c"]

    def kernel(data):
        thread_data = cuda.local.array(shape=(fft.storage_size,), dtype=fft.value_type)
        shared_mem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        fft_id = cuda.blockIdx.x * fft.ffts_per_block + cuda.threadIdx.y
        for i in range(fft.elements_per_thread):
            thread_data[i] = data[fft_id, cuda.threadIdx.x + i * fft.stride]
        fft.execute(thread_data, shared_mem)
        for i in range(fft.elements_per_thread):
            thread_data[i] = np.complex64(thread_data[i]) / fft.size
        cuda.syncthreads()
        ifft(thread_data, shared_mem)      # calling the object is execute
        ifft.execute(shared_mem)           # shared-memory API
        for i in range(fft.elements_per_thread):
            data[fft_id, cuda.threadIdx.x + i * fft.stride] = thread_data[i]

    compile_ltoir(kernel, "void(complex64[:, :])")


def test_trait_hoisting_style_still_compiles(ffts, compile_ltoir):
    from numba import cuda

    fft = ffts["r2c"]
    execute, storage, vt, stride = fft.execute, fft.storage_size, fft.value_type, fft.stride

    def kernel(x, y):
        td = cuda.local.array(storage, dtype=vt)
        smem = cuda.shared.array(0, dtype=vt)
        real = td.view(np.float32)
        for i in range(fft.input_ept):
            real[i] = x[cuda.threadIdx.y, cuda.threadIdx.x + i * stride]
        execute(td, smem)
        for i in range(fft.output_ept):
            y[cuda.threadIdx.y, cuda.threadIdx.x + i * stride] = td[i]

    compile_ltoir(kernel, "void(float32[:, :], complex64[:, :])")


def test_half_precision_kernels_compile(ffts, compile_ltoir):
    from numba import cuda

    from cuweave.device import float16x2_type, float16x4

    fft, tfft = ffts["half"], ffts["half_thread"]

    def kernel(data):
        td = cuda.local.array(shape=(fft.storage_size,), dtype=fft.value_type)
        smem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        pair = cuda.threadIdx.y
        for i in range(fft.elements_per_thread):
            k = cuda.threadIdx.x + i * fft.stride
            td[i] = float16x4(data[2 * pair, 2 * k], data[2 * pair + 1, 2 * k],
                              data[2 * pair, 2 * k + 1], data[2 * pair + 1, 2 * k + 1])
        fft.execute(td, smem)
        t2 = cuda.local.array(shape=(tfft.storage_size,), dtype=tfft.value_type)
        tfft.execute(t2)
        real = td.view(float16x2_type)
        v = td[0]
        data[0, 0] = v.x + v.w
        data[0, 1] = real[1].y

    compile_ltoir(kernel, "void(float16[:, :])")


def test_packed_folded_real_pair_matches_nvmath_and_compiles(compile_ltoir):
    """nvmath-python 1.0's cufftdx_convolution_r2c_c2r_packed_fold_optimized example: an r2c
    and a c2r FFT of 64 points in folded mode with the packed layout. The traits are the values
    nvmath-python 1.0 reports for the same FFTs (libmathdx, sm_90; the example asserts them),
    and the example's kernel (real view of the registers, complex pairs loaded per element,
    both FFTs on one shared array) compiles."""
    from numba import cuda

    import cuweave.device as dx
    from cuweave.device.types import complex64

    try:
        fft, ifft = dx.warm_cache([
            dict(fft_type=t, size=64, precision=np.float32, ffts_per_block=2,
                 elements_per_thread=4, execution="Block", sm=90,
                 real_fft_options={"complex_layout": "packed", "real_mode": "folded"})
            for t in ("r2c", "c2r")])
    except ImportError as e:
        pytest.skip(f"optional package missing: {e}")
    for f in (fft, ifft):
        assert f.value_type == complex64 and f.input_type is complex64
        assert f.output_type is complex64
        assert (f.storage_size, f.ffts_per_block, f.stride, f.size) == (2, 2, 16, 64)
        assert f.elements_per_thread == 4 and f.block_dim == (16, 2, 1)
        assert f.shared_memory_size == 512 and f.implicit_type_batching == 1
        # a folded FFT's database entries are those of the half-size complex FFT, with twice
        # the (real) elements per thread; restricted to the given elements_per_thread
        assert f.valid("elements_per_thread") == [(4,)]
        assert all(e == 4 for e, _ in f.valid("elements_per_thread", "ffts_per_block"))
    assert fft.real_fft_options == {"complex_layout": "packed", "real_mode": "folded"}

    def kernel(inout):
        complex_thread_data = cuda.local.array(shape=(fft.storage_size,), dtype=fft.value_type)
        real_thread_data = complex_thread_data.view(np.float32)
        global_fft_id = cuda.blockIdx.x * fft.ffts_per_block + cuda.threadIdx.y
        for i in range(fft.elements_per_thread):
            idx = i * fft.stride + cuda.threadIdx.x
            if idx < fft.size // 2:
                real_thread_data[2 * i + 0] = inout[global_fft_id, 2 * idx + 0]
                real_thread_data[2 * i + 1] = inout[global_fft_id, 2 * idx + 1]
        shared_mem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        fft.execute(complex_thread_data, shared_mem)
        for i in range(fft.elements_per_thread):
            if i * fft.stride + cuda.threadIdx.x < fft.size // 2:
                complex_thread_data[i] = complex_thread_data[i] / fft.size
        ifft.execute(complex_thread_data, shared_mem)
        for i in range(fft.elements_per_thread):
            idx = i * fft.stride + cuda.threadIdx.x
            if idx < fft.size // 2:
                inout[global_fft_id, 2 * idx + 0] = real_thread_data[2 * i + 0]
                inout[global_fft_id, 2 * idx + 1] = real_thread_data[2 * i + 1]

    compile_ltoir(kernel, "void(float64[:, :])")


def test_vector_arithmetic_compiles(compile_ltoir):
    from numba import cuda

    from cuweave.device import float32x2, float32x2_type, float64x2, uint32x4

    def kernel(z, out):
        a = cuda.local.array(2, dtype=float32x2_type)
        a[0] = float32x2(np.float32(1.5), np.float32(-2.0))
        a[1] = z[0]
        out[0] = a[0] * z[1]
        out[1] = np.complex64(a[1]) / 2
        w = float64x2(z[0])
        u = uint32x4(1, 2, 3, 4)
        out[2] = complex(w.x + a[0].y, u.w)

    compile_ltoir(kernel, "void(complex64[:], complex64[:])")


def test_host_traits_match_nvmath_conventions(ffts):
    from cuweave.device import Dim3
    from cuweave.device.types import complex64, half2, half4

    fft, half = ffts["c2c"], ffts["half"]
    assert fft.value_type == complex64 and fft.input_type is complex64
    assert ffts["r2c"].input_type is np.float32 and ffts["r2c"].output_type is complex64
    assert half.value_type is half4 and half.precision is np.float16
    assert half.implicit_type_batching == 2 and fft.implicit_type_batching == 1
    assert isinstance(fft.block_dim, Dim3) and fft.block_dim.y == 2
    assert ffts["half_thread"].value_type is half4 and half2.size == 2
    with pytest.raises(RuntimeError, match="inside a numba CUDA kernel"):
        fft(None, None)


def test_element_types_host_side():
    from cuweave.device import types as t

    assert t.complex64.dtype == np.dtype(np.complex64)
    assert t.complex32.dtype == t.np_float16x2 and t.half4.dtype.itemsize == 8
    assert repr(t.complex128) == "complex128" and repr(t.half2) == "half2"
    with pytest.raises(ValueError, match="size"):
        t.Vector(np.float16, 3)
    with pytest.raises(ValueError, match="real_dtype"):
        t.Complex(np.int32)


def test_common_cuda_helpers():
    cc = common_cuda.ComputeCapability(9, 0)
    assert cc.integer == 900 and str(cc) == "9.0" and cc == (9, 0, "")
    assert common_cuda.Dim3(4) == (4, 1, 1) and common_cuda.Dim3(2, 3).y == 3


def test_fft_accepts_compute_capability_for_sm(ffts):
    import cuweave.device as dx

    f = dx.FFT("c2c", size=64, precision=np.float32, ffts_per_block=2,
               sm=common_cuda.ComputeCapability(9, 0))
    assert f.sm == 900 and f._kernel_key() == ffts["c2c"]._kernel_key()


def test_building_does_not_import_numba_cuda_and_registers_on_import(ffts):
    """FFT() stays light (no numba.cuda import); importing numba.cuda afterwards registers the
    FFT type, so a kernel may still refer to an object built before numba was imported."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, cuweave.device as dx\n"
        "f = dx.FFT('c2c', size=64, precision=np.float32, sm=90, ffts_per_block=2)\n"
        "assert 'numba.cuda' not in sys.modules, 'FFT() imported numba.cuda'\n"
        "from numba.cuda.typing.typeof import typeof\n"
        "print(type(typeof(f)).__name__, typeof(f) == typeof(dx.FFT('c2c', size=64, "
        "precision=np.float32, sm=90, ffts_per_block=2)))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["KernelObjectType", "True"]


def test_nvmath_positional_order_is_accepted(ffts):
    import cuweave.device as dx

    f = dx.FFT(64, np.float32, "c2c", "Block", sm=90, ffts_per_block=2)
    assert f._kernel_key() == ffts["c2c"]._kernel_key() and f.size == 64
    g = dx.FFT(8, np.float16, "c2c", "Thread", sm=90)
    assert g.execution == "Thread" and g._kernel_key() == ffts["half_thread"]._kernel_key()


def test_execute_first_in_a_fresh_process_registers_the_objects():
    """A fresh interpreter whose first numba import comes from ``FFT.execute`` (numba-cuda's
    import hook re-enters the registration while ``_numba_objects`` is half imported; on the
    H200 the benchmark's second process failed there with a circular-import AttributeError)."""
    import os
    import subprocess
    import sys

    from cuweave._internal.errors import LibraryNotFoundError
    from cuweave.device import _codegen

    try:
        _codegen.toolchain_versions()
    except LibraryNotFoundError as e:
        pytest.skip(f"optional package missing: {e}")
    code = ("import sys, numpy as np, cuweave.device as dx\n"
            "assert 'numba' not in sys.modules\n"
            "f = dx.FFT('c2c', 64, np.float32, 'forward', sm=90)\n"
            "f.execute\n"
            "from cuweave.device import _kernel_object as k\n"
            "assert dx.FFT in k._registered and not k._pending\n"
            "print('OK')\n")
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr[-3000:]
