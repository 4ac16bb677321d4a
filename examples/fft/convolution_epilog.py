"""Batched 1-D convolution with the filter applied inside cuFFT (an epilog callback).

The forward FFT's epilog multiplies each frequency by the filter's spectrum as cuFFT stores it,
and the inverse FFT's 1/n scaling (``norm="backward"``) is fused too: two passes over memory
instead of CuPy's fft → multiply → ifft (→ scale). The same filter can instead be applied as the
inverse FFT loads its input (a prolog): for long transforms that is the faster placement, since
cuFFT then runs only one of the two transforms with callbacks (see
``benchmarks/results/fft_callbacks_probe.md``). Both results are checked against CuPy.

    python examples/fft/convolution_epilog.py      (needs a GPU, CuPy and numba-cuda)
"""

from __future__ import annotations

import cupy as cp
import numpy as np

import cuweave.fft as F

BATCH, N = 64, 4096
N_U = np.uint64(N)  # unsigned, like the callback's offset (keeps the index integral)


def main() -> float:
    rng = cp.random.default_rng(0)
    signal = (rng.standard_normal((BATCH, N)) + 1j * rng.standard_normal((BATCH, N))).astype(
        cp.complex64)
    kernel = cp.exp(-cp.arange(N, dtype=cp.float32) / 20.0).astype(cp.complex64)
    spectrum = cp.fft.fft(kernel)  # the filter in the frequency domain, shape (N,)

    def multiply_by_filter(data_out, offset, element, user_info, reserved):
        # the result is C-ordered (BATCH, N): offset % N is the frequency index
        data_out[offset] = element * user_info[offset % N_U]

    def load_filtered(data_in, offset, user_info, reserved):
        return data_in[offset] * user_info[offset % N_U]

    epilog = F.compile_epilog(multiply_by_filter, "complex64", "complex64")
    filtered = F.fft(signal, axes=(1,), epilog={"ltoir": epilog, "data": spectrum.data.ptr})
    result = F.ifft(filtered, axes=(1,), norm="backward")

    prolog = F.compile_prolog(load_filtered, "complex64", "complex64")
    result_2 = F.ifft(F.fft(signal, axes=(1,)), axes=(1,), norm="backward",
                      prolog={"ltoir": prolog, "data": spectrum.data.ptr})

    reference = cp.fft.ifft(cp.fft.fft(signal, axis=1) * spectrum, axis=1)
    err = float(cp.linalg.norm(result - reference) / cp.linalg.norm(reference))
    err_2 = float(cp.linalg.norm(result_2 - reference) / cp.linalg.norm(reference))
    print(f"relative L2 error vs CuPy fft -> multiply -> ifft: {err:.2e} (filter in the "
          f"forward's epilog), {err_2:.2e} (in the inverse's prolog)")
    assert err < 1e-5 and err_2 < 1e-5, (err, err_2)
    return max(err, err_2)


if __name__ == "__main__":
    main()
