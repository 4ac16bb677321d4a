"""CPU tests of cuweave.linalg.advanced: validation, layouts, planning logic, CPU execution."""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuweave._bindings.cublaslt import Operation
from cuweave._internal.errors import (
    CudaUnavailableError,
    InvalidOperandError,
    InvalidOptionError,
    InvalidStateError,
    UnsupportedLayoutError,
)
from cuweave.linalg.advanced import (
    Algorithm,
    Matmul,
    MatmulComputeType,
    MatmulOptions,
    matmul,
    matrix_qualifiers_dtype,
)
from cuweave.linalg.advanced import matmul as matmul_module  # noqa: F401
from cuweave.linalg.advanced._function import plan_cache
from cuweave.linalg.advanced._layout import analyze
from tests.references import MATMUL_TOL as TOL
from tests.references import dgelu, forward
from tests.references import rel_l2 as rel_err

CPU = {"execution": "cpu"}


def rand(rng, shape, dtype=np.float32):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


# ------------------------------------------------------------------ layout analysis
def el(x):
    return tuple(s // x.itemsize for s in x.strides)


@pytest.mark.parametrize("order_a, order_b", [("C", "C"), ("F", "F"), ("C", "F"), ("F", "C")])
def test_analyze_orders(order_a, order_b):
    a = np.empty((6, 4), order=order_a)
    b = np.empty((4, 5), order=order_b)
    p = analyze(a.shape, el(a), b.shape, el(b))
    assert p.swap == (order_a == "C")
    assert (p.m, p.n, p.k) == ((5, 6, 4) if p.swap else (6, 5, 4))
    assert p.d.ld == p.m and p.d.op == Operation.N


def test_analyze_batched_and_broadcast():
    a = np.empty((3, 6, 4))
    b = np.empty((4, 5))
    p = analyze(a.shape, el(a), b.shape, el(b))
    assert p.batch_count == 3 and p.batch_shape == (3,)
    lt_b_user = p.a if p.swap else p.b
    assert lt_b_user.batch_stride == 0  # b broadcast over the batch
    with pytest.raises(UnsupportedLayoutError):
        x = np.empty((3, 2, 6, 4))[:, :1]  # batch not addressable with one stride? (ok) ...
        y = np.empty((4, 3, 6, 4)).transpose(1, 0, 2, 3)[:, ::2]
        analyze(y.shape, el(y), b.shape, el(b))
    del x


def test_analyze_1d_and_errors():
    p = analyze((4,), (1,), (4, 5), (5, 1))
    assert p.squeeze == (-2,) and p.result_shape == (1, 5)
    p = analyze((6, 4), (4, 1), (4,), (1,))
    assert p.squeeze == (-1,)
    with pytest.raises(InvalidOperandError, match="b must have 4 rows"):
        analyze((6, 4), (4, 1), (3, 5), (5, 1))
    with pytest.raises(UnsupportedLayoutError):
        analyze((6, 4), (8, 2), (4, 5), (5, 1))  # no unit stride


def test_analyze_conjugation_needs_transposition():
    # column-major a in the unswapped frame: op N, so conj is not expressible ...
    p = analyze((6, 4), (1, 6), (4, 5), (1, 4), conj_a=True, forced={"x": True})
    assert p.b.op == Operation.C  # ... but in the swapped frame a^T is conj-transposed
    with pytest.raises(UnsupportedLayoutError):
        analyze((6, 4), (1, 6), (4, 5), (1, 4), conj_a=True, forced={"x": False})


def test_analyze_c_and_inplace():
    p = analyze((6, 4), (4, 1), (4, 5), (5, 1), c_shape=(6, 1), c_strides=(1, 1))
    assert p.c_broadcast
    p = analyze((6, 4), (4, 1), (4, 5), (5, 1), c_shape=(6, 5), c_strides=(1, 6), inplace=True)
    assert not p.swap and p.d.ld == 6
    with pytest.raises(InvalidOperandError, match="c must have the result's shape"):
        analyze((6, 4), (4, 1), (4, 5), (5, 1), c_shape=(6, 1), c_strides=(1, 1), inplace=True)
    with pytest.raises(UnsupportedLayoutError, match="conflict"):
        analyze((6, 4), (4, 1), (4, 5), (5, 1), c_shape=(6, 5), c_strides=(1, 6), inplace=True,
                forced={"a bias along N": True})


def test_frame_follows_bias_direction():
    rng = np.random.default_rng(0)
    a, b = rand(rng, (6, 4)), rand(rng, (4, 5))
    for bias, swap in ((rand(rng, (6,)), False), (rand(rng, (1, 5)), True),
                       (rand(rng, (6, 1)), False)):
        with Matmul(a, b, **CPU) as mm:
            mm.plan(epilog="bias", epilog_inputs={"bias": bias})
            assert mm._plan.problem.swap == swap
            r = mm.execute()
        assert rel_err(r, forward(a, b, bias=bias)[1]) < 1e-5


@pytest.mark.parametrize("m,n", [(6, 5), (5, 5)])
def test_one_dimensional_bias_is_along_m_whatever_the_shape(m, n):
    """A 1-D bias is nvmath's length-M bias (one value per row), also for a square result; a
    length-N one (torch Linear's) must be spelled (1, N): the error says so."""
    rng = np.random.default_rng(3)
    a, b = rand(rng, (m, 4)), rand(rng, (4, n))
    bias = rand(rng, (m,))
    r = matmul(a, b, epilog="bias", epilog_inputs={"bias": bias}, **CPU)
    assert rel_err(r, a.astype(np.float64) @ b + bias[:, None]) < 1e-5
    if m != n:
        with pytest.raises(InvalidOperandError, match=r"^The M dimension of the bias vector "
                                                      rf"\({n}\).*spelled \(1, N\)=\(1, {n}\)"):
            matmul(a, b, epilog="bias", epilog_inputs={"bias": rand(rng, (n,))}, **CPU)
    row = rand(rng, (1, n))
    r = matmul(a, b, epilog="bias", epilog_inputs={"bias": row}, **CPU)
    assert rel_err(r, a.astype(np.float64) @ b + row) < 1e-5


# ------------------------------------------------------------------ validation errors
def test_bad_inputs_raise_typed_errors():
    rng = np.random.default_rng(1)
    a, b = rand(rng, (6, 4)), rand(rng, (4, 5))
    with pytest.raises(InvalidOperandError, match="b must have 4 rows"):
        Matmul(a, rand(rng, (3, 5)), **CPU)
    with pytest.raises(InvalidOperandError, match="b dtype"):
        Matmul(a, b.astype(np.float64), **CPU)
    with pytest.raises(InvalidOptionError, match="compute_type"):
        Matmul(a.astype(np.float64), b.astype(np.float64),
               options={"compute_type": MatmulComputeType.COMPUTE_32F_FAST_16F}, **CPU)
    with pytest.raises(InvalidOptionError, match="compute_type"):
        Matmul(a, b, options={"compute_type": "COMPUTE_32I"}, **CPU)
    with pytest.raises(InvalidOptionError, match="scale_type"):
        Matmul(a, b, options={"scale_type": "CUDA_R_64F"}, **CPU)
    with pytest.raises(InvalidOperandError, match="beta"):
        Matmul(a, b, rand(rng, (6, 5)), **CPU)
    with pytest.raises(InvalidOperandError, match="c shape"):
        Matmul(a, b, rand(rng, (5, 6)), beta=1.0, **CPU)
    torch = pytest.importorskip("torch")
    with pytest.raises(InvalidOperandError, match="same package"):
        Matmul(a, torch.from_numpy(b), **CPU)
    with pytest.raises(InvalidOptionError, match="execution"):
        Matmul(a, b, execution="tpu")
    with pytest.raises(InvalidOptionError, match="options keys"):
        Matmul(a, b, options={"bogus": 1}, **CPU)


def test_epilog_input_errors():
    rng = np.random.default_rng(2)
    a, b = rand(rng, (6, 4)), rand(rng, (4, 5))
    mm = Matmul(a, b, **CPU)
    with pytest.raises(InvalidOperandError, match="bias"):
        mm.plan(epilog="relu_bias")  # missing bias
    with pytest.raises(InvalidOperandError, match="bias"):
        mm.plan(epilog="relu_bias", epilog_inputs={"bias": rand(rng, (7,))})
    with pytest.raises(InvalidOperandError, match="relu_aux"):
        mm.plan(epilog="drelu")
    with pytest.raises(InvalidOperandError, match="relu_aux"):
        mm.plan(epilog="drelu", epilog_inputs={"relu_aux": np.zeros((3, 3), np.uint8)})
    with pytest.raises(InvalidOptionError, match="epilog"):
        mm.plan(epilog="swish")
    with pytest.raises(InvalidOperandError, match="real"):
        Matmul(a.astype(np.complex64), b.astype(np.complex64), **CPU).plan(epilog="relu")
    mm.free()


def test_lifecycle_errors():
    rng = np.random.default_rng(3)
    a, b = rand(rng, (6, 4)), rand(rng, (4, 5))
    mm = Matmul(a, b, **CPU)
    with pytest.raises(InvalidStateError, match="plan"):
        mm.execute()
    mm.plan()
    with pytest.raises(InvalidOperandError, match="a must match"):
        mm.reset_operands(rand(rng, (6, 4)).astype(np.float64))
    with pytest.raises(InvalidOperandError, match="b must match"):
        mm.reset_operands(b=np.asfortranarray(b))
    mm.release_operands()
    with pytest.raises(InvalidStateError, match="reset_operands"):
        mm.execute()
    mm.free()
    with pytest.raises(InvalidStateError, match="after free"):
        mm.execute()
    with pytest.raises(InvalidStateError, match="after free"):
        mm.plan()


def test_cuda_requested_without_gpu():
    from cuweave._internal import cuda

    if cuda.is_available():
        pytest.skip("a GPU is present: this checks the CPU-only machine")  # decided by hw
    a = np.ones((2, 2), np.float32)
    with pytest.raises(CudaUnavailableError, match="execution='cpu'"):
        Matmul(a, a, execution="cuda")


def test_host_default_runs_on_cpu_with_one_info_line(caplog):
    from cuweave._internal import cuda

    a = np.ones((2, 2), np.float32)
    with caplog.at_level(logging.INFO, logger="cuweave"):
        with Matmul(a, a) as mm:
            expected = "cuda:0" if cuda.is_available() else "cpu"
            assert mm.execution_space == expected
    if expected == "cpu":
        assert sum("running on the CPU" in r.message for r in caplog.records) == 1


# ------------------------------------------------------------------ CPU execution
LAYOUTS = ["row", "col", "transposed", "batched", "broadcast"]


def make_operands(rng, layout, m, n, k, dtype):
    if layout == "row":
        return rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    if layout == "col":
        return np.asfortranarray(rand(rng, (m, k), dtype)), np.asfortranarray(
            rand(rng, (k, n), dtype))
    if layout == "transposed":
        return rand(rng, (k, m), dtype).T, rand(rng, (n, k), dtype).T
    if layout == "batched":
        return rand(rng, (3, m, k), dtype), rand(rng, (3, k, n), dtype)
    return rand(rng, (2, 3, m, k), dtype), rand(rng, (k, n), dtype)


FORWARD = {"DEFAULT": None, "RELU": "relu", "GELU": "gelu", "BIAS": None, "RELU_BIAS": "relu",
           "GELU_BIAS": "gelu", "RELU_AUX": "relu", "GELU_AUX": "gelu", "RELU_AUX_BIAS": "relu",
           "GELU_AUX_BIAS": "gelu"}


@settings(max_examples=25, deadline=None)
@given(layout=st.sampled_from(LAYOUTS), epilog=st.sampled_from(sorted(FORWARD)),
       dtype=st.sampled_from(["float32", "float64"]), m=st.integers(1, 9), n=st.integers(1, 9),
       k=st.integers(1, 9), along_n=st.booleans(), seed=st.integers(0, 2**16))
def test_cpu_forward_epilogs(layout, epilog, dtype, m, n, k, along_n, seed):
    rng = np.random.default_rng(seed)
    a, b = make_operands(rng, layout, m, n, k, dtype)
    inputs = None
    bias = None
    if "BIAS" in epilog:
        bias = rand(rng, (1, n) if along_n else (m,), dtype)
        inputs = {"bias": bias}
    out = matmul(a, b, epilog=epilog, epilog_inputs=inputs, alpha=0.5, **CPU)
    res = out[0] if isinstance(out, tuple) else out
    _, ref = forward(a, b, alpha=0.5, bias=bias, act=FORWARD[epilog])
    assert res.shape == ref.shape
    assert rel_err(res, ref) < TOL[dtype] * 10


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cpu_dtypes_and_c(dtype, layout):
    rng = np.random.default_rng(4)
    a, b = make_operands(rng, layout, 7, 5, 6, dtype)
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (7, 5)
    c = rand(rng, shape, dtype)
    r = matmul(a, b, c, alpha=1.5, beta=-0.5, **CPU)
    ref = forward(a, b, alpha=1.5, c=c, beta=-0.5)[1]
    assert rel_err(r, ref) < TOL[dtype] * 4
    c1 = rand(rng, (7, 1), dtype)
    r = matmul(a, b, c1, beta=2.0, **CPU)
    assert rel_err(r, forward(a, b, c=c1, beta=2.0)[1]) < TOL[dtype] * 4


def test_cpu_inplace_and_1d():
    rng = np.random.default_rng(5)
    a, b = rand(rng, (6, 4)), rand(rng, (4, 5))
    c = rand(rng, (6, 5))
    ref = forward(a, b, c=c, beta=1.0)[1]
    r = matmul(a, b, c, beta=1.0, options=MatmulOptions(inplace=True), **CPU)
    assert r is c and rel_err(c, ref) < 1e-6
    v = rand(rng, (4,))
    assert rel_err(matmul(v, b, **CPU), v.astype(np.float64) @ b) < 1e-6
    assert matmul(a, v, **CPU).shape == (6,)
    assert np.ndim(matmul(v, v, **CPU)) == 0


def test_cpu_conjugation_qualifiers_and_torch_conj():
    rng = np.random.default_rng(6)
    a, b = rand(rng, (6, 4), np.complex128), rand(rng, (4, 5), np.complex128)
    q = np.zeros(3, dtype=matrix_qualifiers_dtype)
    q["is_conjugate"][0] = True
    r = matmul(a, b, qualifiers=q, **CPU)
    assert rel_err(r, np.conj(a) @ b) < 1e-12
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    r = matmul(ta.conj(), tb, **CPU)
    assert type(r).__module__.startswith("torch")
    assert rel_err(r.numpy(), np.conj(a) @ b) < 1e-12


def test_cpu_torch_bfloat16():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    a, b = rand(rng, (16, 8)), rand(rng, (8, 12))
    ta, tb = torch.from_numpy(a).bfloat16(), torch.from_numpy(b).bfloat16()
    r = matmul(ta, tb, **CPU)
    assert r.dtype == torch.bfloat16
    ref = ta.double().numpy() @ tb.double().numpy()
    assert rel_err(r.double().numpy(), ref) < TOL["bfloat16"]


@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("along_n", [False, True])
def test_cpu_backward_reproduces_gradients(act, along_n):
    rng = np.random.default_rng(8)
    m, n, k = 12, 7, 5
    a, b = rand(rng, (m, k), np.float64), rand(rng, (k, n), np.float64)
    bias = rand(rng, (1, n) if along_n else (m,), np.float64)
    fwd = f"{act.upper()}_AUX_BIAS"
    _, aux = matmul(a, b, epilog=fwd, epilog_inputs={"bias": bias}, **CPU)
    z, _ = forward(a, b, bias=bias)
    g, h = rand(rng, (m, 3), np.float64), rand(rng, (3, n), np.float64)
    dy = g @ h
    grad = dy * (z > 0) if act == "relu" else dy * dgelu(z)
    r, aux2 = matmul(g, h, epilog=f"D{act.upper()}_BGRAD",
                     epilog_inputs={f"{act}_aux": aux[f"{act}_aux"]}, **CPU)
    assert rel_err(r, grad) < 1e-10
    bgrad = aux2[f"d{act}_bgrad"]
    expect = grad.sum(axis=0) if along_n else grad.sum(axis=1)
    assert rel_err(np.ravel(bgrad), expect) < 1e-10


def test_function_form_plan_cache_hits():
    rng = np.random.default_rng(9)
    a, b = rand(rng, (6, 4)), rand(rng, (4, 5))
    matmul(a, b, **CPU)
    hits = plan_cache.hits
    a2 = rand(rng, (6, 4))
    r = matmul(a2, b, **CPU)
    assert plan_cache.hits == hits + 1
    assert rel_err(r, a2.astype(np.float64) @ b) < 1e-6


def test_autotune_is_a_logged_noop_on_cpu(caplog):
    a = np.ones((4, 4), np.float32)
    with Matmul(a, a, **CPU) as mm:
        algos = mm.plan()
        with caplog.at_level(logging.INFO, logger="cuweave"):
            assert mm.autotune() == algos
        assert any("autotune" in r.message for r in caplog.records)
        assert mm.applicable_algorithm_ids() == [-1]


def test_algorithm_pickles():
    alg = Algorithm(bytes(range(64)), 1024, 1.5)
    back = pickle.loads(pickle.dumps(alg))
    assert back == alg and back.algorithm_id == alg.algorithm_id and back.workspace_size == 1024
    cpu = pickle.loads(pickle.dumps(Algorithm.cpu()))
    assert cpu.is_cpu and cpu.algorithm_id == -1


def test_demo_runs_on_this_machine(capsys):
    from cuweave import _demo

    assert _demo.main(["--size", "64"]) == 0
    out = capsys.readouterr().out
    assert "[8/8]" in out and "demo OK" in out
