"""GPU tests of cuweave.device.FFT inside numba kernels, against NumPy float64 references."""

from __future__ import annotations

import numpy as np
import pytest

from tests.device.conftest import WARM_WORKERS

pytestmark = pytest.mark.gpu

F32, F64 = np.float32, np.float64
# every fft_type x precision, powers of two and not (12, 100, 1000), both executions, knobs
BLOCK = [
    ("c2c", 100, F32, "forward", {}), ("c2c", 100, F64, "forward", {}),
    ("c2c", 256, F32, "forward", {}), ("c2c", 256, F64, "forward", {}),
    ("c2c", 2048, F32, "forward", {}),
    ("c2c", 1000, F64, "inverse", {"ffts_per_block": 2}),
    ("c2c", 100, F32, "inverse", {"ffts_per_block": "suggested"}),
    ("c2c", 256, F32, "inverse", {"elements_per_thread": 8, "ffts_per_block": 2}),
    ("r2c", 100, F32, None, {}), ("r2c", 256, F32, None, {}), ("r2c", 12, F64, None, {}),
    ("c2r", 12, F32, None, {}), ("c2r", 100, F64, None, {}), ("c2r", 256, F64, None, {}),
]
THREAD = [("c2c", 12, F32, "forward"), ("c2c", 8, F64, "inverse"), ("r2c", 16, F32, None),
          ("c2r", 10, F64, None)]


def _config(t, n, p, d, execution="Block", **knobs):
    return dict(fft_type=t, size=n, precision=p, direction=d, execution=execution, **knobs)


CONFIGS = [_config(t, n, p, d, **k) for t, n, p, d, k in BLOCK] + [
    _config(t, n, p, d, "Thread") for t, n, p, d in THREAD]


@pytest.fixture(scope="module")
def ffts():
    import cuweave.device as dx

    built = dx.warm_cache(CONFIGS, max_workers=WARM_WORKERS)  # all compiled in parallel up front
    return {id(c): f for c, f in zip(CONFIGS, built)}


def _ids(c):
    extra = "-".join(f"{k}={c[k]}" for k in ("elements_per_thread", "ffts_per_block") if k in c)
    return (f"{c['execution']}-{c['fft_type']}-{c['size']}-{np.dtype(c['precision']).name}-"
            f"{c['direction']}{'-' + extra if extra else ''}")


def _element_io(fft):
    """Device functions moving element ``i`` between global memory and the thread's registers;
    the real side of r2c/c2r is addressed through ``thread_data.view(precision)``."""
    from numba import cuda

    rt = fft.precision

    @cuda.jit(device=True, forceinline=True)
    def load_complex(td, x, b, j, i):
        td[i] = x[b, j]

    @cuda.jit(device=True, forceinline=True)
    def load_real(td, x, b, j, i):
        td.view(rt)[i] = x[b, j].real

    @cuda.jit(device=True, forceinline=True)
    def store_complex(td, y, b, j, i):
        y[b, j] = td[i]

    @cuda.jit(device=True, forceinline=True)
    def store_real(td, y, b, j, i):
        y[b, j] = td.view(rt)[i]

    return (load_real if fft.fft_type == "r2c" else load_complex,
            store_real if fft.fft_type == "c2r" else store_complex)


def _make_kernel(fft):
    from numba import cuda

    execute, storage, vt = fft.execute, fft.storage_size, fft.value_type
    stride, fpb = fft.stride, fft.ffts_per_block
    in_ept, out_ept, in_len, out_len = fft.input_ept, fft.output_ept, fft.input_length, \
        fft.output_length
    load, store = _element_io(fft)

    if fft.execution == "Block":

        @cuda.jit
        def kernel(x, y):
            td = cuda.local.array(storage, dtype=vt)
            smem = cuda.shared.array(0, dtype=vt)
            b = cuda.blockIdx.x * fpb + cuda.threadIdx.y
            for i in range(in_ept):
                j = cuda.threadIdx.x + i * stride
                if j < in_len:
                    load(td, x, b, j, i)
            execute(td, smem)
            for i in range(out_ept):
                j = cuda.threadIdx.x + i * stride
                if j < out_len:
                    store(td, y, b, j, i)

    else:

        @cuda.jit
        def kernel(x, y):
            td = cuda.local.array(storage, dtype=vt)
            b = cuda.grid(1)
            for i in range(in_len):
                load(td, x, b, i, i)
            execute(td)
            for i in range(out_len):
                store(td, y, b, i, i)

    return kernel


def _reference(fft, x):
    n = fft.size
    if fft.fft_type == "r2c":
        return np.fft.rfft(x.real, axis=-1)
    if fft.fft_type == "c2r":
        return np.fft.irfft(x, n=n, axis=-1) * n
    return np.fft.fft(x, axis=-1) if fft.direction == "forward" else np.fft.ifft(x, axis=-1) * n


def _inputs(fft, batch, rng):
    n = fft.size
    if fft.fft_type == "c2r":  # a Hermitian spectrum: the rfft of real data
        return np.fft.rfft(rng.standard_normal((batch, n)), axis=-1)
    x = rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))
    return x.real + 0j if fft.fft_type == "r2c" else x


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_fft_matches_numpy(ffts, config):
    from numba import cuda

    fft = ffts[id(config)]
    rng = np.random.default_rng(abs(hash(_ids(config))) % 2**32)
    per_launch = fft.ffts_per_block if fft.execution == "Block" else 32
    batch = per_launch * 6
    x64 = _inputs(fft, batch, rng)
    cdt = np.complex64 if fft.precision is np.float32 else np.complex128
    ref = _reference(fft, x64)
    out_dtype = fft.precision if fft.fft_type == "c2r" else cdt
    x = cuda.to_device(x64.astype(cdt))
    y = cuda.to_device(np.full((batch, fft.output_length), np.nan, dtype=out_dtype))
    kernel = _make_kernel(fft)
    if fft.execution == "Block":
        kernel[batch // fft.ffts_per_block, fft.block_dim, 0, fft.shared_memory_size](x, y)
    else:
        kernel[batch // 32, 32](x, y)
    got = y.copy_to_host()
    assert got.shape == ref.shape
    assert np.isfinite(got).all(), "unwritten (poisoned) outputs remain"
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    bound = 2e-5 * max(1.0, np.log2(fft.size)) if fft.precision is np.float32 else 1e-12
    assert err < bound, f"relative L2 error {err:.3e} >= {bound:.1e}"


@pytest.mark.parametrize("precision", [F32, F64], ids=["complex64", "complex128"])
def test_vector_views_move_whole_elements(ffts, precision):
    """The documented fast path: the complex arrays viewed as ``float32x2``/``float64x2`` inside
    the kernel (one 8/16-byte access per element) give the same transform."""
    from numba import cuda

    from cuweave.device import float32x2_type, float64x2_type

    config = next(c for c in CONFIGS if c["fft_type"] == "c2c" and c["size"] == 256
                  and c["precision"] is precision and c["execution"] == "Block")
    fft = ffts[id(config)]
    vec = float32x2_type if precision is F32 else float64x2_type
    execute, storage, vt = fft.execute, fft.storage_size, fft.value_type
    ept, stride, fpb = fft.elements_per_thread, fft.stride, fft.ffts_per_block

    @cuda.jit
    def kernel(x, y):
        td = cuda.local.array(storage, dtype=vt)
        smem = cuda.shared.array(0, dtype=vt)
        b = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        xv, yv = x.view(vec), y.view(vec)
        for i in range(ept):
            td[i] = xv[b, cuda.threadIdx.x + i * stride]
        execute(td, smem)
        for i in range(ept):
            yv[b, cuda.threadIdx.x + i * stride] = td[i]

    cdt = np.complex64 if precision is F32 else np.complex128
    rng = np.random.default_rng(7)
    batch = fpb * 6
    x64 = _inputs(fft, batch, rng)
    x, y = cuda.to_device(x64.astype(cdt)), cuda.to_device(np.full((batch, 256), np.nan, cdt))
    kernel[batch // fpb, fft.block_dim, 0, fft.shared_memory_size](x, y)
    got, ref = y.copy_to_host(), _reference(fft, x64)
    assert np.isfinite(got).all(), "unwritten (poisoned) outputs remain"
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < (2e-5 * 8 if precision is F32 else 1e-12), err
