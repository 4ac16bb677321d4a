"""FFTs on cuFFT (device operands, or host operands with ``execution="cuda"``) and scipy.fft.

Function forms :func:`fft`, :func:`ifft`, :func:`rfft`, :func:`irfft` cache their plans; the
stateful :class:`FFT` plans once and executes many times. Prolog/epilog callbacks written in
Python are compiled to LTO-IR with :func:`compile_prolog` / :func:`compile_epilog`.
"""

from __future__ import annotations

from .._internal.errors import UnsupportedLayoutError
from . import _numpy_api as numpy  # noqa: F401  (the NumPy-style namespace cuweave.fft.numpy)
from . import scipy_backend  # for scipy.fft.set_backend
from ._callbacks import compile_epilog, compile_prolog
from ._numpy_api import fft2, fftn, hfft, ifft2, ifftn, ihfft, irfft2, irfftn, rfft2, rfftn
from ._options import DeviceCallable, ExecutionCPU, ExecutionCUDA, FFTDirection, FFTOptions
from .fft import FFT, estimate_workspace_size, fft, ifft, irfft, plan_cache, rfft

__all__ = [
    "FFT",
    "fft",
    "ifft",
    "rfft",
    "irfft",
    "FFTOptions",
    "FFTDirection",
    "DeviceCallable",
    "ExecutionCUDA",
    "ExecutionCPU",
    "compile_prolog",
    "compile_epilog",
    "plan_cache",
    "UnsupportedLayoutError",
    "estimate_workspace_size",
    "fft2",
    "ifft2",
    "fftn",
    "ifftn",
    "rfft2",
    "irfft2",
    "rfftn",
    "irfftn",
    "hfft",
    "ihfft",
    "scipy_backend",
]
