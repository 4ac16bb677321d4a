"""nvmath-python 1.0's names in cuweave.linalg.advanced: the numerical-implementation flags,
the emulated compute types, and algorithms saved as NumPy arrays."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest

from cuweave._internal.errors import InvalidOperandError
from cuweave.linalg.advanced import (
    Algorithm,
    MatmulComputeType,
    MatmulNumericalImplFlags,
    MatmulPlanPreferences,
)

#: cublasLt.h's CUBLASLT_NUMERICAL_IMPL_FLAGS_* under nvmath-python 1.0's 22 names
_FLAGS = {
    "OP_TYPE_FMA": 0x1, "OP_TYPE_TENSOR_HMMA": 0x2, "OP_TYPE_TENSOR_IMMA": 0x4,
    "OP_TYPE_TENSOR_DMMA": 0x8, "OP_TYPE_TENSOR_MASK": 0xFE, "OP_TYPE_MASK": 0xFF,
    "ACCUMULATOR_16F": 0x100, "ACCUMULATOR_32F": 0x200, "ACCUMULATOR_64F": 0x400,
    "ACCUMULATOR_32I": 0x800, "ACCUMULATOR_TYPE_MASK": 0xFF00,
    "INPUT_TYPE_16F": 0x10000, "INPUT_TYPE_16BF": 0x20000, "INPUT_TYPE_TF32": 0x40000,
    "INPUT_TYPE_32F": 0x80000, "INPUT_TYPE_64F": 0x100000, "INPUT_TYPE_8I": 0x200000,
    "INPUT_TYPE_8F_E4M3": 0x400000, "INPUT_TYPE_8F_E5M2": 0x800000,
    "INPUT_TYPE_MASK": 0xFF0000, "GAUSSIAN": 1 << 32, "ALL": (1 << 64) - 1,
}


def test_numerical_impl_flags_have_nvmath_names_and_header_values():
    assert {m.name: m.value for m in MatmulNumericalImplFlags} == _FLAGS
    mask = MatmulNumericalImplFlags.OP_TYPE_FMA | MatmulNumericalImplFlags.OP_TYPE_TENSOR_HMMA
    assert MatmulPlanPreferences(numerical_impl_mask=mask).numerical_impl_mask == 0x3


def test_emulated_compute_types():
    assert MatmulComputeType.COMPUTE_32F_EMULATED_16BFX9 == 78  # cublas_api.h
    assert MatmulComputeType.COMPUTE_64F_EMULATED_FIXEDPOINT == 79


def test_algorithm_round_trips_through_a_numpy_file():
    alg = Algorithm(bytes(range(64)), workspace_size=4096, waves_count=1.5)
    record = alg.as_numpy()
    assert record.shape == (1,) and record.dtype == Algorithm.dtype
    buf = io.BytesIO()
    np.save(buf, record, allow_pickle=False)
    buf.seek(0)
    back = Algorithm.from_numpy(np.load(buf))
    assert back == alg and back.workspace_size == 4096 and back.waves_count == 1.5
    assert pickle.loads(pickle.dumps(back)) == alg


@pytest.mark.parametrize("bad", ["x", np.zeros(2, Algorithm.dtype), np.zeros(1)])
def test_from_numpy_refuses_other_arrays(bad):
    with pytest.raises(InvalidOperandError, match="matmul_heuristic_result_dtype"):
        Algorithm.from_numpy(bad)


@pytest.mark.parametrize("bad", ["x", b"short", 3])
def test_algorithm_from_other_data_is_a_typed_error(bad):
    with pytest.raises(InvalidOperandError, match="data must be the 64 bytes"):
        Algorithm(bad)
    with pytest.raises(InvalidOperandError, match="CPU algorithm"):
        Algorithm.cpu().as_numpy()
