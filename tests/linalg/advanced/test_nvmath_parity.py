"""Behaviour parity of the host matmul API with nvmath-python 1.0: what it accepts (and
ignores with a warning), what it refuses and with which builtin exception type.

GPU-side logic runs under the recording fakes of tests/fakes/cublaslt.py (``gpu`` fixture)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from cuweave import CudaDataType
from cuweave._internal.errors import CuweaveError, InvalidStateError
from cuweave.linalg.advanced import (
    Matmul,
    MatmulEpilog,
    MatmulOptions,
    matmul,
    matrix_qualifiers_dtype,
)
from tests.references import rng_array

CPU = {"execution": "cpu"}


@pytest.fixture
def ops():
    return tuple(rng_array(shape, np.float32, seed=7 + i)
                 for i, shape in enumerate(((4, 3), (3, 5), (4, 5))))


def _ref(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


# ---- ignored with a warning, as nvmath-python does -----------------------------------------
def test_beta_without_c_is_ignored_with_a_warning(ops, caplog):
    a, b, _ = ops
    with caplog.at_level(logging.WARNING):
        r = matmul(a, b, alpha=2.0, beta=5.0, **CPU)
    np.testing.assert_allclose(r, 2 * _ref(a, b), rtol=1e-5, atol=1e-5)
    assert "beta=5.0 is ignored" in caplog.text
    with Matmul(a, b, beta=1j, **CPU) as mm:  # not even read: a complex beta is no error
        assert mm.beta == 0.0
        mm.plan()
        mm.reset_operands(beta=3.0)
        assert mm.beta == 0.0
        np.testing.assert_allclose(mm.execute(), _ref(a, b), rtol=1e-5, atol=1e-5)


def test_quantization_scales_of_non_fp8_operands_are_ignored(ops, caplog):
    a, b, _ = ops
    with caplog.at_level(logging.WARNING):
        r = matmul(a, b, quantization_scales={"a": 4.0, "b": 4.0}, **CPU)
        r2 = matmul(a, b, quantization_scales={"a": 4.0, "b": 4.0}, **CPU)  # cached plan
    np.testing.assert_allclose(r, _ref(a, b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r2, _ref(a, b), rtol=1e-5, atol=1e-5)
    assert "quantization_scales" in caplog.text


def test_epilog_inputs_without_an_epilog_are_ignored(ops, caplog):
    a, b, _ = ops
    bias = np.ones(4, np.float32)
    with caplog.at_level(logging.WARNING):
        r = matmul(a, b, epilog_inputs={"bias": bias}, **CPU)
        with Matmul(a, b, **CPU) as mm:
            mm.plan(epilog_inputs={"bias": bias})
            r2 = mm.execute()
    for x in (r, r2):
        assert not isinstance(x, tuple)
        np.testing.assert_allclose(x, _ref(a, b), rtol=1e-5, atol=1e-5)
    assert "epilog_inputs=['bias'] is ignored since no epilog is given" in caplog.text


def test_inplace_ignores_result_type(ops, caplog):
    a, b, c = ops
    target = c.copy()
    with caplog.at_level(logging.WARNING):
        r = matmul(a, b, target, beta=1.0, options={"inplace": True, "result_type": "float64"},
                   **CPU)
    assert r is target and r.dtype == np.float32
    np.testing.assert_allclose(r, _ref(a, b) + c, rtol=1e-5, atol=1e-5)
    assert "result_type='float64' is ignored" in caplog.text


# ---- accepted as nvmath-python accepts them ------------------------------------------------
@pytest.mark.parametrize("make", [lambda v: np.array(v), lambda v: np.float32(v),
                                  lambda v: pytest.importorskip("torch").tensor(v)])
def test_zero_dimensional_alpha_and_beta(ops, make):
    a, b, c = ops
    r = matmul(a, b, c, alpha=make(2.0), beta=make(-1.0), **CPU)
    np.testing.assert_allclose(r, 2 * _ref(a, b) - c, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"^alpha must be a real or complex scalar"):
        matmul(a, b, alpha=np.array([2.0, 3.0]), **CPU)


def test_result_type_as_a_cuda_data_type_value(ops):
    a, b, _ = ops
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    for rt in (CudaDataType.CUDA_R_32F, int(CudaDataType.CUDA_R_32F)):
        r = matmul(a16, b16, options={"result_type": rt}, **CPU)
        assert r.dtype == np.float32
        np.testing.assert_allclose(r, _ref(a16, b16), rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match=r"^result_type must be a dtype name or a CudaDataType"):
        MatmulOptions(result_type=123456)


def test_conjugate_qualifier_of_real_operands_changes_nothing(ops):
    a, b, _ = ops
    q = np.zeros(3, dtype=matrix_qualifiers_dtype)
    q["is_conjugate"][:2] = True
    r = matmul(a, b, qualifiers=q, **CPU)
    np.testing.assert_allclose(r, _ref(a, b), rtol=1e-5, atol=1e-5)
    assert r.flags.c_contiguous  # the result follows a's order, as without the qualifier


def test_conjugate_qualifier_of_real_device_operands_plans_as_without(gpu):
    q = np.zeros(3, dtype=matrix_qualifiers_dtype)
    q["is_conjugate"][0] = True
    plain = Matmul(gpu.tensor(16, 8), gpu.tensor(8, 4))
    qual = Matmul(gpu.tensor(16, 8), gpu.tensor(8, 4), qualifiers=q)
    plain.plan()
    qual.plan()
    p, pq = plain._plan.problem, qual._plan.problem
    assert (pq.a, pq.b, pq.d, pq.swap) == (p.a, p.b, p.d, p.swap)
    qual.execute()
    plain.free()
    qual.free()


# ---- refused, with nvmath-python's builtin exception type ----------------------------------
def test_operands_of_two_packages_are_a_type_error(ops):
    torch = pytest.importorskip("torch")
    a, b, _ = ops
    with pytest.raises(TypeError, match=r"^b must come from the same package as a") as e:
        matmul(torch.from_numpy(a), b, **CPU)
    assert isinstance(e.value, CuweaveError) and isinstance(e.value, ValueError)


def test_allocator_without_the_protocol_is_a_type_error():
    with pytest.raises(TypeError, match=r"^allocator must be") as e:
        MatmulOptions(allocator=3)
    assert isinstance(e.value, CuweaveError)


@pytest.mark.parametrize("limit", ["200%", "-5%", "abc"])
def test_memory_limit_percentage_is_checked_up_front(limit):
    with pytest.raises(ValueError, match=r"^memory_limit"):
        MatmulOptions(memory_limit=limit)
    assert MatmulOptions(memory_limit="100%").memory_limit == "100%"


def test_reset_operands_without_anything_is_a_value_error(ops):
    a, b, _ = ops
    with Matmul(a, b, **CPU) as mm:
        mm.plan()
        with pytest.raises(ValueError, match=r"^reset_operands\(\) must be given at least one"):
            mm.reset_operands()
        mm.reset_operands(alpha=3.0)
        np.testing.assert_allclose(mm.execute(), 3 * _ref(a, b), rtol=1e-5, atol=1e-5)


def test_release_operands_after_free_is_a_state_error(ops):
    a, b, _ = ops
    mm = Matmul(a, b, **CPU)
    mm.free()
    with pytest.raises(InvalidStateError, match=r"release_operands\(\) cannot be called after"):
        mm.release_operands()
    mm.free()  # still idempotent


@pytest.mark.parametrize("epilog", [MatmulEpilog.RELU_AUX, MatmulEpilog.BGRADA,
                                    MatmulEpilog.BGRADB])
def test_aux_type_of_fixed_type_aux_outputs_is_refused(ops, epilog):
    a, b, _ = ops
    with pytest.raises(ValueError, match=r"^preferences.epilog.aux_type must be None for epilog"):
        matmul(a, b, epilog=epilog, preferences={"epilog": {"aux_type": "float32"}}, **CPU)
    r, aux = matmul(a, b, epilog=MatmulEpilog.GELU_AUX,  # a typed aux output: allowed
                    preferences={"epilog": {"aux_type": "float32"}}, **CPU)
    assert aux["gelu_aux"].dtype == np.float32
