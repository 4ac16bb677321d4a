"""Kept for tests that still import the FFT references from here: they live in
tests/references.py (one module for every engine)."""

from tests.references import COMPLEX_OF, REAL_OF, rel_l2, rng_array, to_numpy
from tests.references import FFT_TOL as TOL
from tests.references import fft_reference as reference
from tests.references import fft_tol as tol

__all__ = ["COMPLEX_OF", "REAL_OF", "TOL", "reference", "rel_l2", "rng_array", "to_numpy", "tol"]
