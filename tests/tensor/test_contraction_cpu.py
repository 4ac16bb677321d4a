"""The CPU path of cuweave.tensor against float64 einsum: every dtype x operator x alpha/beta x
layout on small tensors, ternary contractions, result layouts and in-place results."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave.tensor import (
    BinaryContraction,
    ContractionOptions,
    Operator,
    TernaryContraction,
    binary_contraction,
    ternary_contraction,
)
from tests.tensor.cases import (
    BINARY,
    DTYPES,
    LAYOUTS,
    TERNARY,
    check,
    laid_out,
    random,
    reference,
)

pytest.importorskip("ml_dtypes")  # bfloat16 operands in NumPy

OPERATORS = ("identity", "conj")
SCALARS = ((1.0, None), (-0.75, 0.5))


def _ops(dtype, op, n):
    if op == "conj" and not dtype.startswith("complex"):
        return None
    q = [Operator.OP_IDENTITY] * (n + 1)
    if op == "conj":
        q[0] = Operator.OP_CONJ
        q[n - 1] = Operator.OP_CONJ
    return np.array(q, np.int32)


#: every dtype with each operator it takes (conjugation: complex data only)
DTYPE_OPS = [(d, op) for d in DTYPES for op in OPERATORS if op == "identity" or "complex" in d]


@pytest.mark.parametrize("dtype, op", DTYPE_OPS)
@pytest.mark.parametrize("alpha, beta", SCALARS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_binary_grid(dtype, op, alpha, beta, layout):
    """Each (dtype, operator, scalars, layout) on a transpose-heavy contraction."""
    q = _ops(dtype, op, 2)
    expr, shapes = BINARY[1]
    a = laid_out(random(shapes[0], dtype, 1), layout)
    b = laid_out(random(shapes[1], dtype, 2), "transposed" if layout == "dense" else layout)
    c = None if beta is None else random((3, 4), dtype, 3)
    r = binary_contraction(expr, a, b, c=c, alpha=alpha, beta=beta, qualifiers=q,
                           execution="cpu")
    assert r.dtype == a.dtype and r.shape == (3, 4)
    conj = (op == "conj", op == "conj")
    check(r, reference(expr, [a, b], conj, alpha, beta, c), dtype, f"{expr} {layout}")


@pytest.mark.parametrize("expr, shapes", BINARY + [("ij,jk", [(3, 4), (4, 5)])])
@pytest.mark.parametrize("dtype", ("float32", "complex128"))
def test_binary_expressions(expr, shapes, dtype):
    a, b = (random(s, dtype, i) for i, s in enumerate(shapes))
    check(binary_contraction(expr, a, b, execution="cpu"), reference(expr, [a, b]), dtype, expr)


@pytest.mark.parametrize("expr, shapes", TERNARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_ternary(expr, shapes, dtype):
    a, b, c = (random(s, dtype, i) for i, s in enumerate(shapes))
    out_shape = np.einsum(expr, *(np.zeros(s) for s in shapes)).shape
    d = random(out_shape, dtype, 9)
    r = ternary_contraction(expr, a, b, c, d=d, alpha=0.5, beta=-1.5, execution="cpu")
    check(r, reference(expr, [a, b, c], (), 0.5, -1.5, d), dtype, expr)


def test_ternary_conjugates_each_input():
    expr, shapes = TERNARY[1]
    a, b, c = (random(s, "complex64", i) for i, s in enumerate(shapes))
    q = np.array([Operator.OP_CONJ, 1, Operator.OP_CONJ, 1], np.int32)
    r = ternary_contraction(expr, a, b, c, qualifiers=q, execution="cpu")
    check(r, reference(expr, [a, b, c], (True, False, True)), "complex64")


@pytest.mark.parametrize("expr, shapes", [
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 2)]),      # ellipsis batch broadcast
    ("bij,bjk->bik", [(1, 4, 5), (3, 5, 2)]),               # extent-1 broadcast mode
    ("ii,ij->j", [(4, 4), (4, 3)]),                          # a diagonal
    ("ijk,jl->il", [(3, 4, 5), (4, 2)]),                     # k summed in a alone
    ("i,j->ij", [(3,), (4,)]),                               # outer product
    ("ij,ij->", [(3, 4), (3, 4)]),                           # full contraction to a scalar
])
def test_special_modes(expr, shapes):
    a, b = (random(s, "float64", i) for i, s in enumerate(shapes))
    r = binary_contraction(expr, a, b, execution="cpu")
    check(r, reference(expr, [a, b]), "float64", expr)


@pytest.mark.parametrize("layout, order", [("C", "C"), ("F", "F")])
def test_result_layouts(layout, order):
    a, b = random((4, 5, 6), "float32", 0), random((6, 3), "float32", 1)
    r = binary_contraction("ijk,kl->ijl", a, b, options={"result_layout": layout},
                           execution="cpu")
    assert r.flags[f"{order}_CONTIGUOUS"]
    check(r, reference("ijk,kl->ijl", [a, b]), "float32")


def test_optimized_layout_puts_the_larger_free_group_first():
    a, b = random((2, 3), "float64", 0), random((3, 50), "float64", 1)
    r = binary_contraction("ij,jk->ik", a, b, execution="cpu")  # auto: optimized
    assert r.strides[0] < r.strides[1]  # k (50) is outermost
    check(r, reference("ij,jk->ik", [a, b]), "float64")


@pytest.mark.parametrize("dtype", ("float16", "float32", "complex128"))
def test_in_place_out_and_addend_alias(dtype):
    a, b = random((4, 5), dtype, 0), random((5, 3), dtype, 1)
    c = random((4, 3), dtype, 2)
    want = reference("ij,jk->ik", [a, b], (), 2.0, 0.5, c)
    out = np.full((3, 4), np.nan, a.dtype).T  # a transposed target
    r = binary_contraction("ij,jk->ik", a, b, c=c, alpha=2.0, beta=0.5, out=out,
                           execution="cpu")
    assert r is out
    check(out, want, dtype)
    r = binary_contraction("ij,jk->ik", a, b, c=c, alpha=2.0, beta=0.5, out=c, execution="cpu")
    assert r is c
    check(c, want, dtype)


def test_broadcast_addend():
    a, b = random((4, 5), "float64", 0), random((5, 3), "float64", 1)
    row = random((3,), "float64", 2)
    r = binary_contraction("ij,jk->ik", a, b, c=row, beta=1.0, execution="cpu")
    check(r, reference("ij,jk->ik", [a, b], (), 1.0, 1.0, np.broadcast_to(row, (4, 3))),
          "float64")


def test_mixed_precision_compute_type():
    """float64 data with COMPUTE_32F computes in float32 (as cuTENSOR does)."""
    a, b = random((64, 64), "float64", 0), random((64, 64), "float64", 1)
    want = reference("ij,jk->ik", [a, b])
    r = binary_contraction("ij,jk->ik", a, b, options=ContractionOptions(compute_type="32F"),
                           execution="cpu")
    err = np.linalg.norm(r - want) / np.linalg.norm(want)
    assert 1e-12 < err < 1e-5


def test_stateful_objects_execute_again_and_reset():
    a, b = random((4, 5), "float32", 0), random((5, 3), "float32", 1)
    with BinaryContraction("ij,jk->ik", a, b, execution="cpu") as bc:
        bc.plan()
        check(bc.execute(), reference("ij,jk->ik", [a, b]), "float32")
        a[...] = random((4, 5), "float32", 5)  # in place: seen by the next execute
        check(bc.execute(), reference("ij,jk->ik", [a, b]), "float32")
        a2 = random((4, 5), "float32", 6)
        bc.reset_operands(a=a2)
        check(bc.execute(alpha=3.0), reference("ij,jk->ik", [a2, b], (), 3.0), "float32")
        bc.release_operands()
        bc.reset_operands(a=a, b=b)
        check(bc.execute(), reference("ij,jk->ik", [a, b]), "float32")
    args = [random(s, "float64", i) for i, s in enumerate(TERNARY[0][1])]
    with TernaryContraction(TERNARY[0][0], *args, execution={"name": "cpu",
                                                             "num_threads": 1}) as tc:
        tc.autotune(iterations=2)  # the CPU has nothing to tune: it plans
        check(tc.execute(), reference(TERNARY[0][0], args), "float64")


def test_torch_cpu_tensors_come_back_as_torch():
    torch = pytest.importorskip("torch")
    a, b = torch.randn(4, 5, dtype=torch.bfloat16), torch.randn(5, 3, dtype=torch.bfloat16)
    r = binary_contraction("ij,jk->ik", a, b, execution="cpu")
    assert isinstance(r, torch.Tensor) and r.dtype == torch.bfloat16
    want = reference("ij,jk->ik", [a.float().numpy(), b.float().numpy()])
    check(r.float().numpy(), want, "bfloat16")
