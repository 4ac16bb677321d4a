"""The cuTENSOR path of cuweave.tensor on a fake GPU (tests/fakes/cutensor.py): host memory
stands in for device memory and the fake contraction computes from the descriptors, so the
numbers of the staged path (host operands on the GPU) are checked against float64 einsum, and
the device path's calls (pointers, descriptors, preferences, plan cache) are checked by what it
passes."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave._bindings import cutensor as ct
from cuweave.tensor import (
    BinaryContraction,
    ContractionJitMode,
    Operator,
    TernaryContraction,
    binary_contraction,
    plan_cache,
    ternary_contraction,
)
from tests.tensor.cases import DTYPES, LAYOUTS, TERNARY, check, laid_out, random, reference

pytest.importorskip("ml_dtypes")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_host_operands_run_on_the_gpu(cutensor_gpu, dtype, layout):
    expr = "ijk,kjl->li"
    a = laid_out(random((4, 5, 6), dtype, 1), layout)
    b = laid_out(random((6, 5, 3), dtype, 2), layout)
    conj = dtype.startswith("complex")
    q = np.array([Operator.OP_CONJ if conj else 1, 1, 1], np.int32)
    c = random((3, 4), dtype, 3)
    r = binary_contraction(expr, a, b, c=c, alpha=1.5, beta=-0.5, qualifiers=q)
    assert isinstance(r, np.ndarray) and r.dtype == a.dtype
    check(r, reference(expr, [a, b], (conj,), 1.5, -0.5, c), dtype, layout)
    assert cutensor_gpu.calls and cutensor_gpu.calls[-1][0] == "cutensorContract"


def test_descriptors_leave_out_broadcast_and_unit_modes(cutensor_gpu):
    a = np.broadcast_to(random((1, 5), "float32", 0), (4, 5))  # stride 0 along i
    b = random((5, 1, 3), "float32", 1)
    r = binary_contraction("ij,jxk->ixk", a, b)
    check(r, reference("ij,jxk->ixk", [a, b]), "float32")
    modes = [m for _, m, _ in next(iter(cutensor_gpu.ops.values()))[0]]
    assert len(modes[0]) == 1 and len(modes[1]) == 2  # a: j only; b: j, k (x has extent 1)


@pytest.mark.parametrize("expr, shapes", TERNARY)
@pytest.mark.parametrize("dtype", ("float32", "complex128"))
def test_ternary_on_the_gpu(cutensor_gpu, expr, shapes, dtype):
    a, b, c = (random(s, dtype, i) for i, s in enumerate(shapes))
    d_shape = np.einsum(expr, *(np.zeros(s) for s in shapes)).shape
    d = laid_out(random(d_shape, dtype, 7), "transposed")
    r = ternary_contraction(expr, a, b, c, d=d, alpha=2.0, beta=0.25)
    check(r, reference(expr, [a, b, c], (), 2.0, 0.25, d), dtype, expr)
    assert cutensor_gpu.calls[-1][0] == "cutensorContractTrinary"


def test_in_place_out_on_the_gpu(cutensor_gpu):
    a, b, c = random((4, 5), "float64", 0), random((5, 3), "float64", 1), random((4, 3),
                                                                                "float64", 2)
    want = reference("ij,jk->ik", [a, b], (), 1.0, 2.0, c)
    out = np.asfortranarray(np.full((4, 3), np.nan))
    assert binary_contraction("ij,jk->ik", a, b, c=c, beta=2.0, out=out) is out
    check(out, want, "float64")
    strided = np.full((8, 6), np.nan)[::2, ::2]
    binary_contraction("ij,jk->ik", a, b, c=c, beta=2.0, out=strided)
    check(strided, want, "float64")


def test_stateful_reset_and_autotune(cutensor_gpu):
    a, b = random((6, 7), "float32", 0), random((7, 5), "float32", 1)
    with BinaryContraction("ij,jk->ik", a, b) as bc:
        bc.plan_preference.jit = ContractionJitMode.DEFAULT
        bc.plan()
        check(bc.execute(), reference("ij,jk->ik", [a, b]), "float32")
        prefs = list(cutensor_gpu.plans.values())[-1][1]
        assert prefs["jit"] == ContractionJitMode.DEFAULT
        n_plans = len(cutensor_gpu.plans)
        bc.autotune(iterations=3)
        tuned = list(cutensor_gpu.plans.values())[n_plans:]
        assert len(tuned) == 4  # three incremental plans, then the one the cache answers
        assert all(p["autotune_mode"] == ct.AutotuneMode.INCREMENTAL and
                   p["incremental_count"] == 3 for _, p in tuned)
        a2 = random((6, 7), "float32", 5)
        bc.reset_operands(a=a2)
        check(bc.execute(alpha=-1.0), reference("ij,jk->ik", [a2, b], (), -1.0), "float32")


def test_device_tensors_pass_their_pointers(cutensor_gpu):
    gpu = cutensor_gpu.gpu
    cutensor_gpu.compute = False  # fake tensors carry no memory
    a, b = gpu.tensor(4, 5), gpu.tensor(5, 3, order="F")
    r = binary_contraction("ij,jk->ik", a, b)
    name, args = cutensor_gpu.calls[-1]
    assert args[3:5] == [a.data_ptr(), b.data_ptr()]
    assert args[6] == args[7] == r.data_ptr()  # no addend: C is D
    ext, strides, dtype, _ = cutensor_gpu.tensors[next(iter(cutensor_gpu.ops.values()))[0][1][0]]
    assert (ext, strides, dtype) == ((5, 3), (1, 5), "float32")  # b's column-major strides
    hits = plan_cache.hits
    a2 = gpu.tensor(4, 5)
    binary_contraction("ij,jk->ik", a2, b)  # probed: a hit, pointers rebound
    assert plan_cache.hits == hits + 1
    assert cutensor_gpu.calls[-1][1][3] == a2.data_ptr()
    less = gpu.tensor(4, 5, offset=16)  # a less aligned pointer: a plan of its own
    binary_contraction("ij,jk->ik", less, b)
    assert plan_cache.hits == hits + 1
    aligns = [al for ext, _, _, al in cutensor_gpu.tensors.values() if ext == (4, 5)]
    assert aligns[-1] == 16 and aligns[0] == 256


def test_device_addend_direct_or_copied(cutensor_gpu):
    gpu = cutensor_gpu.gpu
    cutensor_gpu.compute = False
    a, b = gpu.tensor(4, 5), gpu.tensor(5, 3)
    c = gpu.tensor(4, 3)
    r = binary_contraction("ij,jk->ik", a, b, c=c, beta=1.0)
    args = cutensor_gpu.calls[-1][1]
    assert args[6] == c.data_ptr() and args[7] == r.data_ptr()  # c's layout is D's: direct
    ct_ = gpu.tensor(4, 3, order="F")
    out = gpu.tensor(4, 3)
    r = binary_contraction("ij,jk->ik", a, b, c=ct_, beta=1.0, out=out)
    args = cutensor_gpu.calls[-1][1]
    assert r is out and args[6] == args[7] == out.data_ptr()  # copied into out, C is D


def test_qualifiers_reach_the_descriptor(cutensor_gpu):
    a, b = random((3, 4), "complex64", 0), random((4, 2), "complex64", 1)
    q = np.array([Operator.OP_IDENTITY, Operator.OP_CONJ, Operator.OP_IDENTITY], np.int32)
    r = binary_contraction("ij,jk->ik", a, b, qualifiers=q)
    ops = [o for _, _, o in next(iter(cutensor_gpu.ops.values()))[0]]
    assert ops[:2] == [Operator.OP_IDENTITY, Operator.OP_CONJ]
    check(r, reference("ij,jk->ik", [a, b], (False, True)), "complex64")


def test_ternary_stateful_on_the_gpu(cutensor_gpu):
    expr, shapes = TERNARY[0]
    args = [random(s, "float64", i) for i, s in enumerate(shapes)]
    with TernaryContraction(expr, *args) as tc:
        tc.plan()
        check(tc.execute(alpha=0.5), reference(expr, args, (), 0.5), "float64")
        tc.release_operands()
        tc.reset_operands(a=args[0], b=args[1], c=args[2])
        check(tc.execute(), reference(expr, args), "float64")


def test_empty_extents_are_refused_on_the_gpu_and_computed_on_the_cpu(cutensor_gpu):
    from cuweave import InvalidOperandError

    a, b = np.ones((3, 0)), np.ones((0, 4))
    with pytest.raises(InvalidOperandError, match="non-zero extents"):
        binary_contraction("ij,jk->ik", a, b)
    r = binary_contraction("ij,jk->ik", a, b, c=np.ones((3, 4)), beta=2.0, execution="cpu")
    assert np.array_equal(r, np.full((3, 4), 2.0))


@pytest.mark.parametrize("expr, shapes", TERNARY)
def test_ternary_pairwise_route(cutensor_gpu, monkeypatch, expr, shapes):
    """Autotuning keeps two binary contractions where they time faster (forced here): they
    give the fused contraction's result, follow resets, and free with it."""
    from cuweave.tensor import _pairwise

    monkeypatch.setattr(_pairwise, "eligible", lambda p: True)  # host operands, for numbers
    times = iter([2.0, 1.0])  # fused, then pairwise
    monkeypatch.setattr(_pairwise, "time_ms", lambda fn, s, iters=5: (fn(), next(times))[1])
    xs = [random(s, "complex128", i) for i, s in enumerate(shapes)]
    d_shape = np.einsum(expr, *(np.zeros(s) for s in shapes)).shape
    d = random(d_shape, "complex128", 9)
    q = np.array([Operator.OP_CONJ, 1, 1, 1], np.int32)
    with TernaryContraction(expr, *xs, d=d, qualifiers=q) as tc:
        tc.autotune(iterations=2)
        assert tc._route is not None
        n = len(cutensor_gpu.calls)
        r = tc.execute(alpha=0.5, beta=2.0)
        assert [c[0] for c in cutensor_gpu.calls[n:]] == ["cutensorContract"] * 2
        check(r, reference(expr, xs, (True,), 0.5, 2.0, d), "complex128")
        x0 = random(shapes[0], "complex128", 11)
        tc.reset_operands(a=x0)
        check(tc.execute(alpha=1.0, beta=0.0), reference(expr, [x0] + xs[1:], (True,)),
              "complex128")
        route = tc._route
    assert route.inter is None  # freed with the ternary contraction


def test_ternary_keeps_the_fused_contraction_when_faster(cutensor_gpu, monkeypatch):
    from cuweave.tensor import _pairwise

    monkeypatch.setattr(_pairwise, "eligible", lambda p: True)
    times = iter([1.0, 2.0])
    monkeypatch.setattr(_pairwise, "time_ms", lambda fn, s, iters=5: (fn(), next(times))[1])
    expr, shapes = TERNARY[0]
    xs = [random(s, "float64", i) for i, s in enumerate(shapes)]
    with TernaryContraction(expr, *xs) as tc:
        tc.autotune(iterations=1)
        assert tc._route is None
        n = len(cutensor_gpu.calls)
        check(tc.execute(), reference(expr, xs), "float64")
        assert [c[0] for c in cutensor_gpu.calls[n:]] == ["cutensorContractTrinary"]
