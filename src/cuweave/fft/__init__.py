"""FFTs on cuFFT (device operands, or host operands with ``execution="cuda"``) and scipy.fft.

Function forms :func:`fft`, :func:`ifft`, :func:`rfft`, :func:`irfft` cache their plans; the
stateful :class:`FFT` plans once and executes many times. Prolog/epilog callbacks written in
Python are compiled to LTO-IR with :func:`compile_prolog` / :func:`compile_epilog`.
"""

from __future__ import annotations

from ._callbacks import compile_epilog, compile_prolog
from ._options import DeviceCallable, ExecutionCPU, ExecutionCUDA, FFTDirection, FFTOptions
from .fft import FFT, fft, ifft, irfft, plan_cache, rfft

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
]
