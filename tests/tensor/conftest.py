"""Fixtures of the tensor-contraction tests: the computing fake cuTENSOR of tests/fakes."""

from tests.fakes.cutensor import cutensor_gpu  # noqa: F401 - a fixture
