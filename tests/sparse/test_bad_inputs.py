"""Bad input to cuweave.sparse.advanced: a typed error naming the parameter, raised before any
work, and nothing half-done (a solver keeps its previous operands and factorization)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from cuweave import InvalidOptionError, InvalidStateError
from cuweave.sparse.advanced import (
    DirectSolver,
    DirectSolverOptions,
    SingularMatrixError,
    SparseOperandError,
    _cpu_backends,
    direct_solver,
)
from cuweave.sparse.advanced import DirectSolverMatrixType as T

from .systems import random_matrix, reference, rel_err, rhs


def _a(n=8, seed=0):
    return random_matrix(n, T.GENERAL, False, seed=seed)


def _raises(exc, match, a, b, **kw):
    with pytest.raises(exc, match=match) as info:
        direct_solver(a, b, execution="cpu", **kw)
    return info.value


def test_non_square():
    a = sp.random(4, 5, density=0.5, format="csr", random_state=0)
    e = _raises(SparseOperandError, r"a must be square \(N, N\), got shape \(4, 5\)", a,
                np.ones(4))
    assert isinstance(e, TypeError) and isinstance(e, ValueError)


def test_not_csr():
    _raises(SparseOperandError, "a must be .*CSR.*got a 'csc'", _a().tocsc(), np.ones(8))
    _raises(SparseOperandError, "a must be .*got 'ndarray'", np.eye(8), np.ones(8))


def test_unsorted_and_duplicate_indices():
    a = _a()
    bad = sp.csr_matrix((a.data.copy(), a.indices.copy(), a.indptr.copy()), shape=a.shape)
    row = int(np.argmax(np.diff(a.indptr) >= 2))
    lo = a.indptr[row]
    bad.indices[lo:lo + 2] = bad.indices[lo:lo + 2][::-1]
    _raises(SparseOperandError, f"sorted column indices.*row {row}", bad, np.ones(8))
    dup = sp.csr_matrix((a.data.copy(), a.indices.copy(), a.indptr.copy()), shape=a.shape)
    dup.indices[lo + 1] = dup.indices[lo]
    _raises(SparseOperandError, f"no duplicate entries.*row {row}", dup, np.ones(8))


def test_index_dtype_mismatch_and_range():
    a = _a()
    mixed = sp.csr_matrix(a.shape)
    mixed.indptr, mixed.indices, mixed.data = a.indptr.astype(np.int64), a.indices, a.data
    _raises(SparseOperandError, "a.indices must have the dtype of a.indptr", mixed, np.ones(8))
    out = sp.csr_matrix((a.data.copy(), a.indices.copy(), a.indptr.copy()), shape=a.shape)
    out.indices[-1] = 8
    _raises(SparseOperandError, r"a.indices must lie in \[0, 8\)", out, np.ones(8))
    wrong = sp.csr_matrix((a.data.copy(), a.indices.copy(), a.indptr.copy()), shape=a.shape)
    wrong.indptr[-1] -= 1
    _raises(SparseOperandError, "a.indptr must start at 0 and end at nnz", wrong, np.ones(8))


def test_rhs_shape_dtype_package():
    a = _a()
    _raises(SparseOperandError, r"b must have N = 8 rows.*shape \(7,\)", a, np.ones(7))
    _raises(SparseOperandError, "b must have a's dtype 'float64', got", a,
            np.ones(8, np.float32))
    _raises(SparseOperandError, "b must be a batch", [a, a], np.ones(8))
    _raises(SparseOperandError, "b must be a vector or a matrix for a single", a,
            [np.ones(8), np.ones(8)])
    _raises(SparseOperandError, r"b must hold as many systems as a \(2\), got 3", [a, a],
            [np.ones(8)] * 3)


def test_nan_values():
    a = _a()
    nan = a.copy()
    nan.data[3] = np.nan
    _raises(SparseOperandError, "a must hold finite values", nan, np.ones(8))
    b = np.ones(8)
    b[2] = np.inf
    _raises(SparseOperandError, "b must hold finite values", a, b)


def test_value_dtype():
    a = _a().astype(np.int64)
    _raises(SparseOperandError, "a must have values of dtype float32.*got 'int64'", a,
            np.ones(8, np.int64))


@pytest.mark.parametrize("backend", _cpu_backends.available())
def test_singular(backend, monkeypatch):
    monkeypatch.setenv(_cpu_backends.ENV_CHOICE, backend)
    a = sp.csr_matrix(np.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 1.0]]))
    if backend == "cholmod":  # indefinite: not SPD
        a = sp.csr_matrix(np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
        with pytest.raises(SingularMatrixError, match="a must be positive definite"):
            direct_solver(a, np.ones(3), options={"sparse_system_type": T.SPD},
                          execution="cpu")
        return
    with pytest.raises(SingularMatrixError, match="a must be non-singular") as info:
        direct_solver(a, np.ones(3), execution="cpu")
    assert isinstance(info.value, ValueError)


def test_options_and_execution():
    a, b = _a(), np.ones(8)
    with pytest.raises(InvalidOptionError, match="sparse_system_type must be"):
        DirectSolverOptions(sparse_system_type="nope")
    with pytest.raises(InvalidOptionError, match="blocking must be True or 'auto'"):
        DirectSolverOptions(blocking=False)
    with pytest.raises(TypeError, match="options keys must be among"):
        direct_solver(a, b, options={"bogus": 1}, execution="cpu")
    with pytest.raises(InvalidOptionError, match="execution must be"):
        direct_solver(a, b, execution="tpu")
    with pytest.raises(InvalidOptionError, match="reordering_algorithm must be"):
        direct_solver(a, b, plan_preferences={"reordering_algorithm": 99}, execution="cpu")
    with pytest.raises(TypeError, match="plan_preferences keys"):
        direct_solver(a, b, plan_preferences={"bogus": 1}, execution="cpu")


def test_states_and_nothing_half_done():
    a, b = _a(), rhs(8, None, False)
    s = DirectSolver(a, b, execution="cpu")
    with pytest.raises(InvalidStateError, match="plan"):
        s.factorize()
    s.plan()
    with pytest.raises(InvalidStateError, match="factorize"):
        s.solve()
    s.factorize()
    x = s.solve()
    with pytest.raises(SparseOperandError, match=r"a must match the planned operand's shape"):
        s.reset_operands(a=_a(9))
    with pytest.raises(SparseOperandError, match="b must match the planned operand's shape"):
        s.reset_operands(b=np.ones(9))
    nan = np.ones(8)
    nan[0] = np.nan
    with pytest.raises(SparseOperandError, match="b must hold finite values"):
        s.reset_operands(b=nan)
    assert rel_err(s.solve(), x) == 0  # still the first operands and factorization
    with pytest.raises(SparseOperandError, match="needs a, b or both"):
        s.reset_operands()
    s.release_operands()
    with pytest.raises(InvalidStateError, match="release_operands"):
        s.solve()
    with pytest.raises(SparseOperandError, match="needs both a and b"):
        s.reset_operands(b=b)
    s.reset_operands(a=a, b=b)
    s.factorize()  # a new a needs a factorization (the plan stays: same pattern)
    assert rel_err(s.solve(), reference(a, b)) < 1e-12
    s.free()
    s.free()  # idempotent
    with pytest.raises(InvalidStateError, match="free"):
        s.solve()
    with pytest.raises(InvalidStateError, match="free"):
        _ = s.plan_config.reordering_algorithm


def test_device_structure_checks_agree_with_the_host_ones():
    """The structure checks run with the package's own array operations for device operands;
    NumPy has the same operations, so both paths see the same corrupted structures."""
    from cuweave._internal.packages import wrap_operand
    from cuweave.sparse.advanced._layout import Csr, _check_host_structure, _device_structure_ok

    rng = np.random.default_rng(0)
    a = random_matrix(30, T.GENERAL, False, seed=1, density=0.2)
    base = (a.indptr.copy(), a.indices.copy())
    cases = [base]
    for _ in range(40):
        ip, ix = base[0].copy(), base[1].copy()
        kind = rng.integers(0, 4)
        k = int(rng.integers(0, ix.size))
        if kind == 0:
            ix[k] = ix[k - 1] if k else ix[1]           # duplicate or unsorted
        elif kind == 1:
            ix[k] = rng.integers(0, 30)                 # anything
        elif kind == 2:
            ip[int(rng.integers(1, 30))] += int(rng.integers(-2, 3))  # indptr shift
        else:
            ix[k] = 30 + int(rng.integers(0, 3)) - 1    # 29 (fine) .. 31 (out of range)
        cases.append((ip, ix))
    for ip, ix in cases:
        csr = Csr(30, ix.size, wrap_operand(ip), wrap_operand(ix), wrap_operand(a.data))
        try:
            _check_host_structure(ip, ix, 30, ix.size, "a")
            host_ok = True
        except SparseOperandError:
            host_ok = False
        assert _device_structure_ok(csr) == host_ok, (ip, ix)
