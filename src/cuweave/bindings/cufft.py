"""``nvmath.bindings.cufft``'s error class, so that nvmath programs' ``except
nvmath.bindings.cufft.cuFFTError`` clauses catch cuweave's cuFFT failures after the import is
renamed.

Examples
--------
>>> from cuweave.bindings import cufft
>>> from cuweave._internal.errors import CufftError
>>> cufft.cuFFTError is CufftError
True
"""

from __future__ import annotations

from .._internal.errors import CufftError as cuFFTError

__all__ = ["cuFFTError"]
