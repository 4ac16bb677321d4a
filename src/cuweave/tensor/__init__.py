"""Tensor contractions on cuTENSOR (nvmath-python 1.0's ``nvmath.tensor``), with a CPU path.

``binary_contraction("ij,jk->ik", a, b)`` and ``ternary_contraction("ij,jk,kl->il", a, b, c)``
contract NumPy, CuPy or torch arrays in Einstein notation (``alpha * product + beta * addend``,
conjugation qualifiers, in-place ``out``); :class:`BinaryContraction` and
:class:`TernaryContraction` plan once and execute many times. Device arrays run on cuTENSOR
(the ``tensor`` extra: ``pip install 'cuweave[tensor]'``; or point ``CUWEAVE_CUTENSOR_PATH``
at ``libcutensor.so.2``), results in the caller's package and stream; host arrays run on the GPU
when there is one (copies hidden), else on the CPU, as does ``execution="cpu"``.

Examples
--------
>>> import numpy as np
>>> from cuweave.tensor import binary_contraction
>>> a = np.random.default_rng(0).standard_normal((8, 4, 5))
>>> b = np.random.default_rng(1).standard_normal((8, 5, 3))
>>> r = binary_contraction("bij,bjk->bik", a, b, execution="cpu")
>>> np.allclose(r, a @ b)
True
"""

from __future__ import annotations

from .._bindings.cutensor import CutensorError
from ._function import binary_contraction, plan_cache, ternary_contraction
from ._options import (
    ComputeDesc,
    ContractionAlgo,
    ContractionAutotuneMode,
    ContractionCacheMode,
    ContractionJitMode,
    ContractionOptions,
    ExecutionCPU,
    ExecutionCUDA,
    Operator,
    TensorComputeType,
    tensor_qualifiers_dtype,
)
from ._preference import ContractionPlanPreference
from .contraction import BinaryContraction, TernaryContraction

__all__ = [
    "binary_contraction",
    "ternary_contraction",
    "BinaryContraction",
    "TernaryContraction",
    "ContractionOptions",
    "ContractionPlanPreference",
    "ContractionAlgo",
    "ContractionAutotuneMode",
    "ContractionCacheMode",
    "ContractionJitMode",
    "ComputeDesc",
    "TensorComputeType",
    "Operator",
    "ExecutionCUDA",
    "ExecutionCPU",
    "tensor_qualifiers_dtype",
    "CutensorError",
    "plan_cache",
]
