"""Distributed FFTs across processes (nvmath-python's ``nvmath.distributed.fft``).

C2C, R2C and C2R transforms of 2-D and 3-D arrays (a cuweave extension: 1-D) distributed as
``Slab.X`` / ``Slab.Y`` (uneven splits allowed) or as custom input/output boxes. Host operands run
on CPU ranks over MPI with the CPU FFT engine.
"""

from ..distribution import Slab
from ._fft import FFT, FFTDirection, FFTOptions, allocate_operand, fft, ifft, irfft, rfft

__all__ = ["FFT", "FFTDirection", "FFTOptions", "Slab", "allocate_operand", "fft", "ifft",
           "irfft", "rfft"]
