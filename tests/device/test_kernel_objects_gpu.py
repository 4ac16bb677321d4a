"""GPU tests: FFT objects referenced inside kernels (nvmath.device style), half precision,
vector types, the shared-memory API and calling the object, against NumPy references."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

F16, F32, F64 = np.float16, np.float32, np.float64


def _rel_err(got, ref):
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def _complex_input(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


@pytest.mark.parametrize("precision, direction", [(F32, "forward"), (F64, "inverse")])
def test_block_c2c_object_in_kernel(precision, direction):
    from numba import cuda

    from cuweave.device import FFT

    fft = FFT(fft_type="c2c", size=128, precision=precision, direction=direction,
              execution="Block", ffts_per_block=2, elements_per_thread=8)

    @cuda.jit
    def kernel(data):
        thread_data = cuda.local.array(shape=(fft.storage_size,), dtype=fft.value_type)
        shared_mem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        fft_id = cuda.blockIdx.x * fft.ffts_per_block + cuda.threadIdx.y
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            thread_data[i] = data[fft_id, index]
            index += fft.stride
        fft.execute(thread_data, shared_mem)
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            data[fft_id, index] = thread_data[i]
            index += fft.stride

    x = _complex_input((8, 128), 1)
    cdt = np.complex64 if precision is F32 else np.complex128
    d = cuda.to_device(x.astype(cdt))
    kernel[8 // fft.ffts_per_block, fft.block_dim, 0, fft.shared_memory_size](d)
    ref = np.fft.fft(x, axis=-1) if direction == "forward" else np.fft.ifft(x, axis=-1) * 128
    assert _rel_err(d.copy_to_host(), ref) < (1e-5 if precision is F32 else 1e-12)


def test_traits_are_compile_time_constants_in_kernels():
    from numba import cuda

    from cuweave.device import FFT

    fft = FFT(fft_type="r2c", size=64, precision=F32, ffts_per_block=2)

    @cuda.jit
    def kernel(out):
        scratch = cuda.local.array(fft.storage_size, dtype=fft.value_type)  # literal shape
        scratch[0] = 0
        out[0] = fft.size
        out[1] = fft.storage_size
        out[2] = fft.stride
        out[3] = fft.elements_per_thread
        out[4] = fft.ffts_per_block
        out[5] = fft.shared_memory_size
        out[6] = fft.block_dim.x
        out[7] = fft.implicit_type_batching
        out[8] = fft.requires_workspace
        out[9] = fft.output_length

    out = cuda.to_device(np.full(10, -1, dtype=np.int64))
    kernel[1, 1](out)
    expected = [fft.size, fft.storage_size, fft.stride, fft.elements_per_thread,
                fft.ffts_per_block, fft.shared_memory_size, fft.block_dim.x,
                fft.implicit_type_batching, int(fft.requires_workspace), fft.output_length]
    assert out.copy_to_host().tolist() == expected


def _pack_half_pairs(x):
    """(2*B, N) complex -> (2*B, 2N) float16, re/im interleaved (as nvmath's examples do)."""
    out = np.empty((*x.shape[:-1], 2 * x.shape[-1]), dtype=np.float16)
    out[..., 0::2], out[..., 1::2] = x.real, x.imag
    return out


def _unpack_half_pairs(a):
    return a[..., 0::2].astype(np.float64) + 1j * a[..., 1::2].astype(np.float64)


def test_half_precision_block_c2c():
    from numba import cuda

    from cuweave.device import FFT, float16x4

    fft = FFT(fft_type="c2c", size=128, precision=F16, direction="forward", execution="Block",
              ffts_per_block=4, elements_per_thread=8)
    assert fft.implicit_type_batching == 2 and fft.block_dim.y == 2

    @cuda.jit
    def kernel(data):
        thread_data = cuda.local.array(shape=(fft.storage_size,), dtype=fft.value_type)
        shared_mem = cuda.shared.array(shape=(0,), dtype=fft.value_type)
        pair = cuda.blockIdx.x * fft.block_dim.y + cuda.threadIdx.y
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            thread_data[i] = float16x4(data[2 * pair, 2 * index], data[2 * pair + 1, 2 * index],
                                       data[2 * pair, 2 * index + 1],
                                       data[2 * pair + 1, 2 * index + 1])
            index += fft.stride
        fft.execute(thread_data, shared_mem)
        index = cuda.threadIdx.x
        for i in range(fft.elements_per_thread):
            v = thread_data[i]
            data[2 * pair, 2 * index], data[2 * pair, 2 * index + 1] = v.x, v.z
            data[2 * pair + 1, 2 * index], data[2 * pair + 1, 2 * index + 1] = v.y, v.w
            index += fft.stride

    x = _complex_input((8, 128), 2) * 0.25
    d = cuda.to_device(_pack_half_pairs(x))
    kernel[8 // fft.ffts_per_block, fft.block_dim, 0, fft.shared_memory_size](d)
    got = _unpack_half_pairs(d.copy_to_host())
    assert _rel_err(got, np.fft.fft(x, axis=-1)) < 1e-2


def test_half_precision_thread_r2c():
    from numba import cuda

    from cuweave.device import FFT, float16x2, float16x2_type

    fft = FFT(fft_type="r2c", size=16, precision=F16, execution="Thread")
    assert fft.implicit_type_batching == 2

    @cuda.jit
    def kernel(x, y):
        thread_data = cuda.local.array(fft.storage_size, dtype=fft.value_type)
        real = thread_data.view(float16x2_type)
        pair = cuda.grid(1)
        for i in range(fft.size):
            real[i] = float16x2(x[2 * pair, i], x[2 * pair + 1, i])
        fft.execute(thread_data)
        for i in range(fft.size // 2 + 1):
            v = thread_data[i]
            y[2 * pair, 2 * i], y[2 * pair, 2 * i + 1] = v.x, v.z
            y[2 * pair + 1, 2 * i], y[2 * pair + 1, 2 * i + 1] = v.y, v.w

    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 16))
    y = cuda.to_device(np.zeros((64, 2 * 9), dtype=np.float16))
    kernel[1, 32](cuda.to_device(x.astype(np.float16)), y)
    got = _unpack_half_pairs(y.copy_to_host())
    assert _rel_err(got, np.fft.rfft(x.astype(np.float16).astype(np.float64), axis=-1)) < 1e-2


def test_call_object_and_shared_memory_api():
    """``fft(thread_data, smem)`` equals ``fft.execute``; ``fft(smem)`` transforms data that
    lies in shared memory (cuFFTDx's shared-memory API)."""
    from numba import cuda

    from cuweave.device import FFT

    fft = FFT(fft_type="c2c", size=128, precision=F32, direction="forward",
              elements_per_thread=8, ffts_per_block=2)

    @cuda.jit
    def registers(data):
        thread_data = cuda.local.array(fft.storage_size, dtype=fft.value_type)
        shared_mem = cuda.shared.array(0, dtype=fft.value_type)
        row = cuda.threadIdx.y
        for i in range(fft.elements_per_thread):
            thread_data[i] = data[row, cuda.threadIdx.x + i * fft.stride]
        fft(thread_data, shared_mem)
        for i in range(fft.elements_per_thread):
            data[row, cuda.threadIdx.x + i * fft.stride] = thread_data[i]

    @cuda.jit
    def shared(data):
        shared_mem = cuda.shared.array(0, dtype=fft.value_type)
        row = cuda.threadIdx.y
        for i in range(fft.elements_per_thread):
            k = cuda.threadIdx.x + i * fft.stride
            shared_mem[row * fft.size + k] = data[row, k]
        cuda.syncthreads()
        fft(shared_mem)
        cuda.syncthreads()
        for i in range(fft.elements_per_thread):
            k = cuda.threadIdx.x + i * fft.stride
            data[row, k] = shared_mem[row * fft.size + k]

    x = _complex_input((2, 128), 4)
    ref = np.fft.fft(x, axis=-1)
    a = cuda.to_device(x.astype(np.complex64))
    registers[1, fft.block_dim, 0, fft.shared_memory_size](a)
    assert _rel_err(a.copy_to_host(), ref) < 1e-5
    b = cuda.to_device(x.astype(np.complex64))
    smem = max(fft.shared_memory_size, 2 * 128 * 8)
    shared[1, fft.block_dim, 0, smem](b)
    assert _rel_err(b.copy_to_host(), ref) < 1e-5


def test_vector_types_in_kernels():
    from numba import cuda

    from cuweave.device import float16x2, float32x2, float32x2_type, float64x2, float64x2_type

    @cuda.jit
    def kernel(z, out32, out64, halves):
        a = cuda.local.array(2, dtype=float32x2_type)
        a[0] = float32x2(np.float32(1.5), np.float32(-2.0))
        a[1] = z[0]                       # complex64 -> float32x2
        out32[0] = a[0] * z[1]            # complex arithmetic through the conversion
        out32[1] = np.complex64(a[1]) / 2
        out32[2] = complex(a[0].x, a[1].y)
        b = cuda.local.array(1, dtype=float64x2_type)
        b[0] = float64x2(z[2])
        out64[0] = b[0]
        h = float16x2(np.float16(0.5), np.float16(3.0))
        halves[0], halves[1] = h.x, h.y

    z = np.array([1 + 2j, 3 - 1j, -0.5 + 0.25j], dtype=np.complex64)
    out32 = cuda.to_device(np.zeros(3, np.complex64))
    out64 = cuda.to_device(np.zeros(1, np.complex128))
    halves = cuda.to_device(np.zeros(2, np.float16))
    kernel[1, 1](cuda.to_device(z), out32, out64, halves)
    np.testing.assert_allclose(out32.copy_to_host(),
                               [(1.5 - 2j) * z[1], z[0] / 2, 1.5 + 2j], rtol=1e-6)
    np.testing.assert_allclose(out64.copy_to_host(), [z[2]])
    assert halves.copy_to_host().tolist() == [0.5, 3.0]


def _readme_device_block() -> str:
    readme = Path(__file__).resolve().parents[2] / "README.md"
    text = readme.read_text(encoding="utf-8")
    section = text[text.index("FFTs inside your own Numba kernel"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_device_example_runs_as_written():
    from numba import cuda

    namespace: dict = {}
    exec(compile(_readme_device_block(), "README.md", "exec"), namespace)  # noqa: S102
    fwd, convolve = namespace["fwd"], namespace["convolve"]
    batch = 4 * fwd.ffts_per_block
    x = _complex_input((batch, 256), 5)
    h = np.exp(-0.5 * (np.fft.fftfreq(256) * 12) ** 2)
    y = cuda.device_array((batch, 256), np.complex64)
    convolve[batch // fwd.ffts_per_block, fwd.block_dim, 0, fwd.shared_memory_size](
        cuda.to_device(x.astype(np.complex64)), cuda.to_device(h.astype(np.complex64)), y)
    ref = np.fft.ifft(np.fft.fft(x, axis=-1) * h, axis=-1) * 256
    assert _rel_err(y.copy_to_host(), ref) < 1e-5
