"""``nvmath.bindings.cublasLt``'s error class (and the record type of
``Algorithm.as_numpy``), so that nvmath programs' ``except
nvmath.bindings.cublasLt.cuBLASLtError`` clauses catch cuweave's cuBLASLt failures after the
import is renamed.

Examples
--------
>>> from cuweave.bindings import cublasLt
>>> from cuweave._internal.errors import CublasLtError
>>> cublasLt.cuBLASLtError is CublasLtError
True
>>> str(cublasLt.cuBLASLtError(15, "cublasLtMatmul")).startswith("cuBLASLt cublasLtMatmul failed")
True
"""

from __future__ import annotations

from .._internal.errors import CublasLtError as cuBLASLtError
from ..linalg.advanced._algorithm import matmul_heuristic_result_dtype

__all__ = ["cuBLASLtError", "matmul_heuristic_result_dtype"]
