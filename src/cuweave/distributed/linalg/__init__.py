"""Distributed linear algebra (nvmath-python's ``nvmath.distributed.linalg``)."""

from ..._bindings.library_types import ComputeType
from . import advanced

__all__ = ["advanced", "ComputeType"]
