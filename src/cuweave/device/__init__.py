"""Device-side math inside numba ``@cuda.jit`` kernels (cuFFTDx through NVRTC).

``import cuweave.device`` imports neither numba nor any CUDA library: numba is imported when an
:class:`FFT` is built or its ``execute`` is resolved, NVRTC when a configuration is compiled.
"""

from __future__ import annotations

from ._options import ComplexLayout, Direction, Execution, FFTType, RealMode
from .fft import FFT, Dim3, valid_sizes, warm_cache

__all__ = [
    "FFT",
    "Dim3",
    "valid_sizes",
    "warm_cache",
    "FFTType",
    "Direction",
    "Execution",
    "ComplexLayout",
    "RealMode",
]
