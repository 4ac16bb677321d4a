"""cuweave.linalg.matmul on the CPU against float64 NumPy references: every dtype x qualifier
(general, diagonal, symmetric, Hermitian, triangular) x side x fill x diagonal kind x
conjugation x operand layout (row-, column-major, strided) x batch (none, batched, broadcast,
explicit) x addend (none, c with beta, in place). Each test walks the full product of the
main factors (fill, each operand's layout, batch form; for general products the addend too),
the others cycling through their values along the cases; small matrices: the whole file runs
in a few seconds. The same plans drive the GPU (cuBLAS) run; see test_matmul_gpu.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cuweave.linalg import Matmul, MatmulOptions, matmul
from tests.linalg.generic._reference import (
    DTYPES,
    TOL,
    layout,
    logical,
    qualifiers,
    rand,
    record,
    rel_err,
)

KINDS = ("dg", "sy", "he", "tr")


def _sample(factors: dict, n: int, seed: int) -> list[dict]:
    """``n`` combinations of ``factors`` (seeded), covering every value of every factor."""
    keys = list(factors)
    combos = list(itertools.product(*(factors[k] for k in keys)))
    rng = np.random.default_rng(seed)
    picked = set(rng.choice(len(combos), size=min(n, len(combos)), replace=False).tolist())
    for k_i, k in enumerate(keys):  # every value of every factor at least once
        for v in factors[k]:
            if not any(combos[i][k_i] == v for i in picked):
                picked.add(next(i for i, c in enumerate(combos) if c[k_i] == v))
    return [dict(zip(keys, combos[i])) for i in sorted(picked)]


def _run_case(dtype, kind, side, case, rng, execution="cpu", wrap=None, unwrap=None,
              options=None):
    """One qualified product against its reference (``wrap``: the operands' device form)."""
    complex_ = dtype.startswith("complex")
    n_s, n_o = 4, 3
    batch = {"none": (), "batched": (2,), "bcast_s": (2,), "bcast_g": (2,)}[case["batch"]]
    s_batch = () if case["batch"] == "bcast_s" else batch
    g_batch = () if case["batch"] == "bcast_g" else batch
    # the structured operand
    s_shape = s_batch + ((n_s,) if kind == "dg" else (n_s, n_s))
    s = layout(rand(s_shape, dtype, rng), case["order_s"] if kind != "dg" else "C")
    if kind == "dg" and case["order_s"] == "F":
        s = rand(s_batch + (2 * n_s,), dtype, rng)[..., ::2]  # a strided diagonal
    g_shape = g_batch + ((n_s, n_o) if side == "a" else (n_o, n_s))
    g = layout(rand(g_shape, dtype, rng), case["order_g"])
    conj_s = case["conj_s"] and complex_
    conj_g = case["conj_g"] and complex_
    sq = dict(conj=conj_s, lower=case["lower"], unit=case["unit"], incx=case["incx"])
    rec_s = record(kind, **sq)
    rec_g = record("ge", conj=conj_g)
    a, b = (s, g) if side == "a" else (g, s)
    recs = [rec_s, rec_g] if side == "a" else [rec_g, rec_s]
    la = logical(s, kind, **sq) if side == "a" else logical(g, "ge", conj=conj_g)
    lb = logical(g, "ge", conj=conj_g) if side == "a" else logical(s, kind, **sq)
    alpha = 1.5 - (0.5j if complex_ else 0)
    want = alpha * (la @ lb)
    c, beta, opts = None, None, None
    if case["c"] != "none":
        c = layout(rand(want.shape, dtype, rng), case["order_c"])
        beta = -0.75
        want = want + beta * c.astype(np.complex128)
        recs.append(record("ge"))
        if case["c"] == "inplace":
            opts = MatmulOptions(inplace=True)
    if options:
        opts = MatmulOptions(**{**options, "inplace": case["c"] == "inplace"})
    wrap = wrap or (lambda x: x)
    dc = wrap(c) if c is not None else None
    got = matmul(wrap(a), wrap(b), dc, alpha=alpha, beta=beta, qualifiers=qualifiers(*recs),
                 options=opts, execution=execution)
    if case["c"] == "inplace":
        assert got is dc
    got = unwrap(got) if unwrap else got
    assert got.dtype == np.dtype(dtype)
    err = rel_err(got, want)
    assert err < TOL[dtype], (case, err)


def structured_factors(dtype, kind):
    return dict(
        lower=[True, False] if kind != "dg" else [True],
        unit=[False, True] if kind == "tr" else [False],
        incx=[1, -1] if kind == "dg" else [1],
        conj_s=[False, True] if dtype.startswith("complex") else [False],
        conj_g=[False, True] if dtype.startswith("complex") else [False],
        order_s=["C", "F", "S"] if kind != "dg" else ["C", "F"],
        order_g=["C", "F", "S"],
        batch=["none", "batched", "bcast_s", "bcast_g"],
        c=["none", "c", "inplace"],
        order_c=["C", "F"],
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("side", ["a", "b"])
def test_structured_products(dtype, kind, side):
    """Every fill x layout of each operand x batch form (the full product), the other factors
    (unit diagonal, reversed diagonal, conjugations, addend and its layout) cycling through
    their values along the cases."""
    rng = np.random.default_rng(7)
    f = structured_factors(dtype, kind)
    core = ("lower", "order_s", "order_g", "batch")
    rest = [k for k in f if k not in core]
    for i, values in enumerate(itertools.product(*(f[k] for k in core))):
        case = dict(zip(core, values))
        for j, k in enumerate(rest):  # a different phase per factor: combinations vary
            case[k] = f[k][(i + j * (i // len(f[k]) + 1)) % len(f[k])]
        _run_case(dtype, kind, side, case, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_general_products(dtype):
    complex_ = dtype.startswith("complex")
    factors = dict(order_a=["C", "F", "S"], order_b=["C", "F", "S"],
                   conj_a=[False, True] if complex_ else [False],
                   conj_b=[False, True] if complex_ else [False],
                   batch=["none", "batched", "bcast_a", "bcast_b", "2d"],
                   c=["none", "c", "inplace"], order_c=["C", "F"])
    rng = np.random.default_rng(1)
    core = ("order_a", "order_b", "batch", "c")
    rest = [k for k in factors if k not in core]
    cases = []
    for i, values in enumerate(itertools.product(*(factors[k] for k in core))):
        case = dict(zip(core, values))
        for j, k in enumerate(rest):
            case[k] = factors[k][(i + j * (i // len(factors[k]) + 1)) % len(factors[k])]
        cases.append(case)
    for case in cases:
        batch = {"none": (), "batched": (3,), "bcast_a": (3,), "bcast_b": (3,),
                 "2d": (2, 2)}[case["batch"]]
        a = layout(rand((() if case["batch"] == "bcast_a" else batch) + (3, 4), dtype, rng),
                   case["order_a"])
        b = layout(rand((() if case["batch"] == "bcast_b" else batch) + (4, 5), dtype, rng),
                   case["order_b"])
        q = qualifiers(record("ge", conj=case["conj_a"]), record("ge", conj=case["conj_b"]))
        want = logical(a, "ge", conj=case["conj_a"]) @ logical(b, "ge", conj=case["conj_b"])
        c = beta = opts = None
        if case["c"] != "none":
            c = layout(rand(want.shape, dtype, rng), case["order_c"])
            beta = 0.5
            want = want + 0.5 * c
            q = qualifiers(*q, record("ge"))
            opts = {"inplace": case["c"] == "inplace"}
        got = matmul(a, b, c, beta=beta, qualifiers=q, options=opts, execution="cpu")
        assert rel_err(got, want) < TOL[dtype], case


@pytest.mark.parametrize("dtype", ["float64", "complex64"])
def test_vectors_and_empty_inner_dimension(dtype):
    rng = np.random.default_rng(2)
    a, b, m = rand((4,), dtype, rng), rand((4,), dtype, rng), rand((4, 3), dtype, rng)
    assert rel_err(matmul(a, b, execution="cpu"), a @ b) < TOL[dtype]
    assert matmul(a, m, execution="cpu").shape == (3,)
    assert rel_err(matmul(a, m, execution="cpu"), a @ m) < TOL[dtype]
    assert rel_err(matmul(m.T, a, execution="cpu"), m.T @ a) < TOL[dtype]
    c = rand((3,), dtype, rng)
    assert rel_err(matmul(a, m, c, beta=2, execution="cpu"), a @ m + 2 * c) < TOL[dtype]
    # a diagonal times a vector
    q = qualifiers(record("dg"), record("ge"))
    assert rel_err(matmul(a, b, qualifiers=q, execution="cpu"), a * b) < TOL[dtype]
    # K == 0: the product is zero, beta * c remains
    e1, e2 = np.empty((2, 0), dtype), np.empty((0, 3), dtype)
    assert np.array_equal(matmul(e1, e2, execution="cpu"), np.zeros((2, 3)))
    c2 = rand((2, 3), dtype, rng)
    assert rel_err(matmul(e1, e2, c2, beta=3, execution="cpu"), 3 * c2) < TOL[dtype]


def test_explicit_batches_and_scalars_per_batch():
    rng = np.random.default_rng(3)
    a = [rand((3, 4), "float64", rng), rand((2, 4), "float64", rng)]
    b = [rand((4, 5), "float64", rng), rand((4, 2), "float64", rng)]
    tri = qualifiers(record("ge"), record("ge"))
    got = matmul(a, b, alpha=[1.0, 2.0], qualifiers=[tri, tri], execution="cpu")
    assert isinstance(got, list) and len(got) == 2
    assert rel_err(got[0], a[0] @ b[0]) < 1e-12
    assert rel_err(got[1], 2 * a[1] @ b[1]) < 1e-12
    # a single b broadcast over the batch of a
    s = rand((4, 4), "float64", rng)
    q = qualifiers(record("ge"), record("tr", lower=False))
    got = matmul([a[0], 2 * a[0]], [s], qualifiers=[q], execution="cpu")
    assert rel_err(got[1], 2 * a[0] @ np.triu(s)) < 1e-12


def test_stateful_lifecycle_and_reset():
    rng = np.random.default_rng(4)
    a, b = rand((5, 5), "float64", rng), rand((5, 3), "float64", rng)
    q = qualifiers(record("sy", lower=False), record("ge"))
    mm = Matmul(a, b, qualifiers=q, execution="cpu")
    mm.plan()
    r1 = mm.execute()
    assert rel_err(r1, logical(a, "sy", lower=False) @ b) < 1e-12
    a2 = rand((5, 5), "float64", rng)
    mm.reset_operands(a=a2, alpha=2.0)
    assert rel_err(mm.execute(), 2 * logical(a2, "sy", lower=False) @ b) < 1e-12
    mm.release_operands()
    with pytest.raises(ValueError, match="every operand"):
        mm.reset_operands(a=a2)
    with pytest.raises(ValueError, match="released"):
        mm.execute()
    mm.reset_operands(a=a, b=b)
    assert rel_err(mm.execute(), 2 * logical(a, "sy", lower=False) @ b) < 1e-12
    with pytest.raises(ValueError, match="shape"):
        mm.reset_operands(b=rand((5, 4), "float64", rng))
    with pytest.raises(ValueError, match="dtype"):
        mm.reset_operands(b=b.astype(np.float32))
    mm.free()
    from cuweave.linalg import InvalidMatmulState

    with pytest.raises(InvalidMatmulState):
        mm.execute()
    mm.free()  # idempotent


def test_function_form_caches_plans():
    from cuweave.linalg.generic.matmul import plan_cache

    rng = np.random.default_rng(5)
    a, b = rand((6, 6), "float32", rng), rand((6, 2), "float32", rng)
    q = qualifiers(record("tr", unit=True), record("ge"))
    plan_cache.clear()
    r1 = matmul(a, b, qualifiers=q, execution="cpu")
    hits = plan_cache.hits
    r2 = matmul(2 * a, b, qualifiers=q, execution="cpu")
    assert plan_cache.hits == hits + 1
    assert rel_err(r2, 2 * r1 - np.eye(6) @ b) < 1e-5  # the unit diagonal is not scaled
    r3 = matmul(a, b, alpha=3.0, qualifiers=q, execution="cpu")
    r4 = matmul(a, b, qualifiers=q, execution="cpu")  # alpha back to its default, 1
    assert rel_err(r3, 3 * r1) < 1e-6 and rel_err(r4, r1) < 1e-6
