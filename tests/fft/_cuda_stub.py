"""Kept for tests that still import the cuFFT fakes from here: they live in tests/fakes/cufft.py."""

from tests.fakes.cufft import FakeCufft, build_native, fake_cuda

__all__ = ["FakeCufft", "build_native", "fake_cuda"]
