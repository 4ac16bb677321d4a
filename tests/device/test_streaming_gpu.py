"""GPU tests of cuweave.device.ldcs/stcs and of the device-FFT benchmark's standalone kernels
(every way of moving the data, streaming ones included) against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

KNOBS = [(8, 4), (16, "suggested"), (32, 4)]


def test_streaming_copies_are_exact():
    from numba import cuda

    from cuweave.device import float32x4_type, ldcs, stcs

    @cuda.jit
    def copy(x, y, w, p, q):
        b, j = cuda.blockIdx.x, cuda.threadIdx.x
        stcs(y, (b, j), ldcs(x, (b, j)))                       # complex64, 8 bytes
        if j < x.shape[1] // 2:                                  # pairs of complex64, 16 bytes
            stcs(w.view(float32x4_type), (b, j), ldcs(x.view(float32x4_type), (b, j)))
        if b == 0:
            stcs(q, j, ldcs(p, j) * 2)                         # complex128

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 64)) + 1j * rng.standard_normal((5, 64))).astype(np.complex64)
    p = rng.standard_normal(64) + 1j * rng.standard_normal(64)
    dx, dp = cuda.to_device(x), cuda.to_device(p)
    dy, dw = cuda.device_array_like(x), cuda.device_array_like(x)
    dq = cuda.device_array_like(p)
    copy[5, 64](dx, dy, dw, dp, dq)
    np.testing.assert_array_equal(dy.copy_to_host(), x)
    np.testing.assert_array_equal(dw.copy_to_host(), x)
    np.testing.assert_array_equal(dq.copy_to_host(), 2 * p)


@pytest.mark.parametrize("ept, fpb", KNOBS, ids=[f"ept{e}-fpb{b}" for e, b in KNOBS])
def test_benchmark_standalone_kernels_match_numpy(bench, ept, fpb):
    """Every way of moving the data (``bench.IO_VARIANTS``: streaming and 16-byte ones too)
    computes the same FFTs (the benchmark checks each variant too, but reports, not fails)."""
    from numba import cuda

    import cuweave.device as dx

    fft = dx.FFT("c2c", bench.N, np.float32, "forward", elements_per_thread=ept,
                 ffts_per_block=fpb)
    batch = 16 * fft.ffts_per_block
    rng = np.random.default_rng(4)
    host = (rng.standard_normal((batch, bench.N)) + 1j * rng.standard_normal((batch, bench.N)))
    host = host.astype(np.complex64)
    ref = np.fft.fft(host.astype(np.complex128), axis=-1)
    x = cuda.to_device(host)
    ran = []
    for io in bench.IO_VARIANTS:
        kernel = bench._block_fft_kernel(fft, io)
        if kernel is None:
            continue
        y = cuda.to_device(np.zeros_like(host))
        kernel[batch // fft.ffts_per_block, fft.block_dim, 0, fft.shared_memory_size](x, y)
        got = y.copy_to_host()
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert err < bench.TOLERANCE, (io, err)
        ran.append(io)
    assert {"stream", "wide", "stream16"} <= set(ran)
