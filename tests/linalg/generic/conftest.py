"""Fixtures of the generic linalg tests: ``fake_gpu`` (tests/linalg/generic/fake_gpu.py)."""

from tests.linalg.generic.fake_gpu import fake_gpu  # noqa: F401 - a fixture
