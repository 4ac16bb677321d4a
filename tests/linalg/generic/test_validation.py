"""Bad inputs to cuweave.linalg's generic layer raise typed errors (ValueError / TypeError
subclasses, as nvmath-python's builtins) naming the parameter, before any work."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave.linalg import (
    DiagonalMatrixQualifier,
    DiagType,
    DirectSolver,
    FillMode,
    GeneralMatrixQualifier,
    HermitianMatrixQualifier,
    InvalidDirectSolverState,
    Matmul,
    MatmulOptions,
    SymmetricMatrixQualifier,
    TriangularMatrixQualifier,
    advanced,
    matmul,
    matrix_qualifiers_dtype,
)
from cuweave.linalg.generic._qualifiers import _Constructor
from tests.linalg.generic._reference import qualifiers, record


def _q(*recs):
    return qualifiers(*recs)


A, B = np.ones((4, 4)), np.ones((4, 3))


@pytest.mark.parametrize("q, match", [
    (np.zeros(2, advanced.matrix_qualifiers_dtype), "matrix_qualifiers_dtype"),
    ([GeneralMatrixQualifier.create()] * 2, "matrix_qualifiers_dtype"),
    (np.zeros(4, matrix_qualifiers_dtype), "length"),
    (np.zeros((2, 1), matrix_qualifiers_dtype), "length"),
    (np.array([("xx", False, 0, 0, 0), ("ge", False, 2, 0, 0)], matrix_qualifiers_dtype),
     "abbreviation"),
    (np.array([("sy", False, 2, 0, 0), ("ge", False, 2, 0, 0)], matrix_qualifiers_dtype),
     "uplo"),
    (np.array([("tr", False, 0, 7, 0), ("ge", False, 2, 0, 0)], matrix_qualifiers_dtype),
     "diag"),
    (np.array([("dg", False, 2, 0, 0), ("ge", False, 2, 0, 0)], matrix_qualifiers_dtype),
     "incx"),
    (_q(record("tr"), record("sy")), "general"),
])
def test_bad_qualifier_arrays(q, match):
    with pytest.raises(ValueError, match=match):
        matmul(A, B, qualifiers=q, execution="cpu")


def test_qualifiers_of_c_and_their_count_with_c():
    c = np.ones((4, 3))
    with pytest.raises(ValueError, match="length 3"):
        matmul(A, B, c, beta=1, qualifiers=_q(record("ge"), record("ge")), execution="cpu")
    with pytest.raises(ValueError, match=r"qualifiers\[2\]"):
        matmul(A, B, c, beta=1, qualifiers=_q(record("ge"), record("ge"), record("tr")),
               execution="cpu")
    with pytest.raises(ValueError, match="conjugate"):
        matmul(A, B, c, beta=1, qualifiers=_q(record("ge"), record("ge"),
                                              record("ge", conj=True)), execution="cpu")


def test_qualifiers_that_do_not_fit_their_operand():
    for kind in ("tr", "sy", "he"):
        with pytest.raises(ValueError, match="square"):
            matmul(np.ones((4, 3)), np.ones((3, 2)), qualifiers=_q(record(kind), record("ge")),
                   execution="cpu")
    with pytest.raises(ValueError, match="inner dimensions"):
        matmul(np.ones(5), np.ones((4, 2)), qualifiers=_q(record("dg"), record("ge")),
               execution="cpu")


def test_constructor_arguments():
    with pytest.raises(RuntimeError, match="create"):
        TriangularMatrixQualifier()
    with pytest.raises(ValueError, match="uplo"):
        SymmetricMatrixQualifier.create(uplo=FillMode.FULL)
    with pytest.raises(ValueError, match="uplo"):
        HermitianMatrixQualifier.create(uplo=5)
    with pytest.raises(ValueError, match="diag"):
        TriangularMatrixQualifier.create(diag=3)
    with pytest.raises(ValueError, match="incx"):
        DiagonalMatrixQualifier.create(incx=2)
    with pytest.raises(ValueError, match="conjugate"):
        GeneralMatrixQualifier.create(conjugate="yes")
    rec = TriangularMatrixQualifier.create(uplo=FillMode.UPPER, diag=DiagType.UNIT)
    assert TriangularMatrixQualifier.is_valid(rec) and not SymmetricMatrixQualifier.is_valid(rec)
    assert "UPPER" in _Constructor.to_string(rec) and "UNIT" in _Constructor.to_string(rec)
    assert int(FillMode.LOWER) == 0 and int(DiagType.UNIT) == 1


def test_operands_and_options():
    cases = [
        (lambda: matmul(A.astype(np.float16), B.astype(np.float16), execution="cpu"), "dtype"),
        (lambda: matmul(A, B.astype(np.float32), execution="cpu"), "one dtype"),
        (lambda: matmul(A, np.ones((5, 3)), execution="cpu"), "inner dimensions"),
        (lambda: matmul(np.ones((2, 4, 4)), np.ones((3, 4, 3)), execution="cpu"), "broadcast"),
        (lambda: matmul(A, B, np.ones((4, 3)), execution="cpu"), "beta"),
        (lambda: matmul(A, B, np.ones((3, 4)), beta=1, execution="cpu"), "shape"),
        (lambda: matmul(A, B, alpha="x", execution="cpu"), "alpha"),
        (lambda: matmul(A, B, options={"inplace": True}, execution="cpu"), "inplace"),
        (lambda: matmul(A, B, options={"structured": "fast"}, execution="cpu"), "structured"),
        (lambda: matmul(A, B, options={"nope": 1}, execution="cpu"), "nope"),
        (lambda: matmul(A, B, execution="tpu"), "execution"),
        (lambda: matmul([A], B, execution="cpu"), "sequences"),
        (lambda: matmul([A, A, A], [B, B], execution="cpu"), "length"),
    ]
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()
    with pytest.raises(TypeError):
        MatmulOptions(nope=1)


def test_state_errors_are_runtime_errors():
    s = DirectSolver(A + 4 * np.eye(4), np.ones(4), execution="cpu")
    with pytest.raises(RuntimeError, match="plan"):
        s.factorize()
    s.plan()
    s.release_operands()
    with pytest.raises(InvalidDirectSolverState):
        s.factorize()
    mm = Matmul(A, B, execution="cpu")
    with pytest.raises(RuntimeError, match="plan"):
        mm.execute()
