"""cuweave.tensor's surface and its errors: every bad input raises a typed error naming the
parameter before any work; lifecycle; plan preferences; the function forms' plan cache."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import cuweave
from cuweave import InvalidOperandError, InvalidOptionError, InvalidStateError
from cuweave import tensor as ct
from cuweave.tensor import (
    BinaryContraction,
    ComputeDesc,
    ContractionAlgo,
    ContractionAutotuneMode,
    ContractionJitMode,
    ContractionOptions,
    Operator,
    TernaryContraction,
    binary_contraction,
    ternary_contraction,
)

A = np.ones((3, 4))
B = np.ones((4, 5))


def test_surface_matches_nvmath():
    for name in ("binary_contraction", "ternary_contraction", "BinaryContraction",
                 "TernaryContraction", "ContractionOptions", "ContractionPlanPreference",
                 "ContractionAlgo", "ContractionAutotuneMode", "ContractionCacheMode",
                 "ContractionJitMode", "ComputeDesc", "Operator", "ExecutionCUDA",
                 "tensor_qualifiers_dtype"):
        assert name in ct.__all__, name
    assert ct.tensor_qualifiers_dtype is np.int32
    assert Operator.OP_CONJ == 9 and ContractionAlgo.DEFAULT == -1
    assert ContractionJitMode.DEFAULT == 1 and ContractionAutotuneMode.INCREMENTAL == 1
    assert cuweave.tensor is ct  # the lazy submodule


@pytest.mark.parametrize("expr, match", [
    ("ij,jk->ik->k", "at most one '->'"),
    ("ij->ij", "exactly 2"),
    ("ij,jk,kl->il", "exactly 2"),
    ("i j,jk->ik", "single characters"),
    ("ij,jk->iz", "appear in no input"),
    ("ij,jk->ii", "each output mode once"),
    ("i.j,jk->ik", "single characters"),
    ("ij,jk->...ik", "'...' only where an input"),
    ("...i...,jk", "at most one '...'"),
    (42, "einsum expression string"),
])
def test_bad_expressions(expr, match):
    with pytest.raises(InvalidOperandError, match=match) as e:
        binary_contraction(expr, A, B, execution="cpu")
    assert "expr" in str(e.value)


@pytest.mark.parametrize("a, b, match", [
    (np.ones((3, 4)), np.ones((5, 5)), "b must have extent 4"),
    (np.ones((3, 4, 1)), B, "a must have 2 dimensions"),
    (np.ones((3, 3)).astype(np.float32), B, "dtype of a"),
    (np.ones((3, 4), np.int32), B, "a dtype must be one of"),
    (A, [[1.0]], "b must be"),
])
def test_bad_operands(a, b, match):
    with pytest.raises(InvalidOperandError, match=match):
        binary_contraction("ij,jk->ik", a, b, execution="cpu")


def test_bad_addend_and_out():
    with pytest.raises(InvalidOperandError, match="c must have the result's shape"):
        binary_contraction("ij,jk->ik", A, B, c=np.ones((4, 4)), beta=1.0, execution="cpu")
    with pytest.raises(InvalidOperandError, match="out must have the result's shape"):
        binary_contraction("ij,jk->ik", A, B, out=np.ones((5, 3)), execution="cpu")
    with pytest.raises(InvalidOperandError, match="out must not overlap the input 'a'"):
        big = np.ones((3, 5))
        binary_contraction("ij,jk->ik", big[:, :4], np.ones((4, 5)), out=big, execution="cpu")
    with pytest.raises(InvalidOperandError, match="out must not reach an element twice"):
        binary_contraction("ij,jk->ik", A, B, out=np.broadcast_to(np.ones(5), (3, 5)),
                           execution="cpu")
    c = np.ones((3, 6))
    with pytest.raises(InvalidOperandError, match="out must be c itself or not overlap"):
        binary_contraction("ij,jk->ik", A, B, c=c[:, :5], beta=1.0, out=c[:, 1:], execution="cpu")
    with pytest.raises(InvalidOperandError, match="out must have the dtype of a"):
        binary_contraction("ij,jk->ik", A, B, out=np.ones((3, 5), np.float32), execution="cpu")


@pytest.mark.parametrize("kw, match", [
    ({"beta": 1.0}, "beta must be None without c"),
    ({"c": np.ones((3, 5))}, "beta must be given when c"),
    ({"alpha": "2"}, "alpha must be a real or complex number"),
    ({"alpha": 1j}, "alpha must be real for real operands"),
    ({"qualifiers": np.array([1, 1], np.int32)}, "qualifiers must be 3 Operator values"),
    ({"qualifiers": np.array([1, 1, 9], np.int32)}, r"qualifiers\[2\]"),
    ({"qualifiers": np.array([2, 1, 1], np.int32)}, "OP_IDENTITY or Operator.OP_CONJ"),
    ({"qualifiers": np.array([9, 1, 1], np.int32)}, "must not conjugate the real operand 'a'"),
    ({"qualifiers": np.array([77, 1, 1], np.int32)}, r"qualifiers\[0\] must be an Operator"),
    ({"options": {"compute_type": ComputeDesc.COMPUTE_TF32()}}, "compute_type must be one of"),
    ({"options": {"compute_type": "bogus"}}, "compute_type must be None or one of"),
    ({"options": {"result_layout": "K"}}, "result_layout must be one of"),
    ({"options": {"blocking": False}}, "blocking must be True or 'auto'"),
    ({"options": {"memory_limit": "lots"}}, "memory_limit must be"),
    ({"options": {"colour": 1}}, "options keys must be among"),
    ({"options": {"handle": -3}}, "handle must be"),
    ({"options": {"logger": "me"}}, "logger must be"),
    ({"execution": "tpu"}, "execution must be"),
    ({"stream": "fast"}, "stream must be"),
    ({"stream": -1}, "stream must be"),
])
def test_bad_options(kw, match):
    kw.setdefault("execution", "cpu")
    with pytest.raises(InvalidOptionError, match=match):
        binary_contraction("ij,jk->ik", A, B, **kw)


def test_cached_plans_check_aliasing_again():
    big = np.ones((3, 9))
    a, b = big[:, :4], np.ones((4, 5))
    binary_contraction("ij,jk->ik", a, b, out=big[:, 4:], execution="cpu")  # disjoint: planned
    with pytest.raises(InvalidOperandError, match="out must not overlap the input 'a'"):
        binary_contraction("ij,jk->ik", a, b, out=big[:, 3:8], execution="cpu")


def test_errors_are_builtin_value_errors():
    with pytest.raises(ValueError):
        binary_contraction("ij,jk->ik", A, B, beta=1.0, execution="cpu")
    with pytest.raises(ValueError):
        binary_contraction("ij,kk->ik", A, np.ones((5, 4)), execution="cpu")


def test_optimized_layout_refused_where_nvmath_refuses():
    with pytest.raises(InvalidOptionError, match="optimized"):
        binary_contraction("ij,jk->ik", A, B, c=np.ones((3, 5)), beta=1.0,
                           options={"result_layout": "optimized"}, execution="cpu")
    with pytest.raises(InvalidOptionError, match="optimized"):
        ternary_contraction("ij,jk,kl->il", A, B, np.ones((5, 2)),
                            options={"result_layout": "optimized"}, execution="cpu")


def test_device_execution_for_cuda_requires_a_gpu(monkeypatch):
    from cuweave._internal import cuda

    if cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(cuweave.CudaUnavailableError):
        binary_contraction("ij,jk->ik", A, B, execution="cuda")


def test_lifecycle():
    bc = BinaryContraction("ij,jk->ik", A, B, execution="cpu")
    with pytest.raises(InvalidStateError, match="plan"):
        bc.execute()
    bc.plan()
    with pytest.raises(InvalidOptionError, match="beta must be None"):
        bc.execute(beta=1.0)
    bc.release_operands()
    with pytest.raises(InvalidOperandError, match="reset_operands"):
        bc.execute()
    with pytest.raises(InvalidOperandError, match="needs every operand"):
        bc.reset_operands(a=A)
    bc.reset_operands(a=A, b=B)
    assert bc.execute().shape == (3, 5)
    with pytest.raises(InvalidOperandError, match="needs at least one"):
        bc.reset_operands()
    with pytest.raises(InvalidOperandError, match="strides"):
        bc.reset_operands(a=np.asfortranarray(A))
    with pytest.raises(InvalidOperandError, match="shape"):
        bc.reset_operands(b=np.ones((4, 6)))
    with pytest.raises(InvalidOperandError, match="c was not given"):
        bc.reset_operands(c=np.ones((3, 5)))
    pref = bc.plan_preference
    bc.free()
    bc.free()  # idempotent
    with pytest.raises(InvalidStateError):
        bc.plan()
    with pytest.raises(RuntimeError):
        pref.algo  # noqa: B018
    with pytest.raises(TypeError):
        TernaryContraction("ij,jk,kl->il", A, B)  # c is required


def test_plan_preference_values():
    with BinaryContraction("ij,jk->ik", A, B, execution="cpu") as bc:
        p = bc.plan_preference
        assert p.algo == ContractionAlgo.DEFAULT and p.jit == ContractionJitMode.NONE
        p.autotune_mode = "incremental"
        p.incremental_count = 3
        p.jit = ContractionJitMode.DEFAULT
        p.algo = 2  # a specific GEMM-like algorithm
        assert p.values() == {"autotune_mode": ContractionAutotuneMode.INCREMENTAL,
                              "incremental_count": 3, "jit": ContractionJitMode.DEFAULT,
                              "algo": 2}
        with pytest.raises(InvalidOptionError, match="incremental_count"):
            p.incremental_count = -1
        with pytest.raises(InvalidOptionError, match="jit must be"):
            p.jit = "always"


def test_function_form_caches_plans():
    ct.plan_cache.clear()
    a, b = np.random.rand(3, 4), np.random.rand(4, 5)
    r1 = binary_contraction("ij,jk->ik", a, b, execution="cpu")
    hits = ct.plan_cache.hits
    r2 = binary_contraction("ij,jk->ik", a * 2, b, execution="cpu")
    assert ct.plan_cache.hits == hits + 1
    np.testing.assert_allclose(r2, 2 * r1)
    binary_contraction("ij,jk->ik", a.T.copy().T, b, execution="cpu")  # other strides: a miss
    assert ct.plan_cache.hits == hits + 1


def test_info_logging_names_the_phases(caplog):
    logger = logging.getLogger("cuweave.tensor.test")
    with caplog.at_level(logging.INFO, logger="cuweave.tensor.test"):
        binary_contraction("ij,jk->ik", A, B, options={"logger": logger}, execution="cpu")
    assert any("compute COMPUTE_64F" in r.getMessage() for r in caplog.records)


def test_compute_descriptors_by_name_member_or_library_pointer():
    from cuweave._bindings import cutensor
    from cuweave.tensor import TensorComputeType

    assert ContractionOptions(compute_type="tf32").compute_type == TensorComputeType.COMPUTE_TF32
    assert ContractionOptions(compute_type=int(ComputeDesc.COMPUTE_64F())).compute_type == \
        TensorComputeType.COMPUTE_64F
    if not cutensor.is_loadable():
        pytest.skip("libcutensor is not installed here")
    ptr = cutensor.compute_descriptor("3XTF32")
    assert ContractionOptions(compute_type=ptr).compute_type == TensorComputeType.COMPUTE_3XTF32
