"""Fixtures of the advanced-matmul tests: ``gpu``, the recording fakes of tests/fakes."""

from tests.fakes.cublaslt import gpu  # noqa: F401 - a fixture
