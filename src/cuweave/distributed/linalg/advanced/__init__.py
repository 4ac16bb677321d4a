"""Distributed matrix products with epilogs (nvmath-python's
``nvmath.distributed.linalg.advanced``): :func:`matmul` and the stateful :class:`Matmul`."""

from ....linalg.advanced import MatmulEpilog
from ._matmul import Matmul, MatmulOptions, matmul, matrix_qualifiers_dtype

__all__ = ["Matmul", "MatmulEpilog", "MatmulOptions", "matmul", "matrix_qualifiers_dtype"]
