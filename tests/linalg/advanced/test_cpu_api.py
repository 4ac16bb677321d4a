"""Public ``cuweave.linalg.advanced`` API executed on the CPU (NumPy arrays, CPU torch tensors).

References are float64 NumPy computations on the same inputs; errors are relative L2.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuweave._internal.errors import InvalidOperandError, InvalidOptionError, InvalidStateError
from cuweave.linalg.advanced import (
    ExecutionCPU,
    Matmul,
    MatmulComputeType,
    MatmulEpilog,
    MatmulOptions,
    matmul,
)
from cuweave.linalg.advanced._cpu import unpack_relu_mask
from tests.references import dgelu as ref_gelu_grad
from tests.references import gelu as ref_gelu
from tests.references import rel_l2

BOUND = {"float32": 2e-6, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.5e-2,
         "complex64": 2e-6, "complex128": 1e-12}








def act_close(r, x, epilog, bound=2e-6, x_abs=None):
    """``r`` ≈ epilog(x) relative to ``|epilog(x)| + 1.13 |x|`` (the activations are
    1.13-Lipschitz, so the error of ``x`` is an absolute error of the result). ``x_abs``
    (``|a| @ |b|``, the scale of a product's rounding error) replaces ``|x|`` where a product
    may cancel (a 1x1 result of a 23-long dot product came out at 1e-2 of its terms)."""
    ref = forward_ref(MatmulEpilog[epilog], x)
    err = np.linalg.norm(np.asarray(r, np.float64) - ref)
    scale = np.linalg.norm(x if x_abs is None else x_abs)
    return err <= bound * (np.linalg.norm(ref) + 1.13 * scale)


def rand(rng, shape, dtype="float32"):
    x = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def f64(x):
    return np.asarray(x).astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def forward_ref(epilog, x):
    name = MatmulEpilog(epilog).name
    if "RELU" in name:
        return np.maximum(x, 0)
    if "GELU" in name:
        return ref_gelu(x)
    return x


# --------------------------------------------------------------------------- numpy
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "float16"])
@pytest.mark.parametrize("layout", ["row", "col", "mixed"])
def test_plain_matmul_layouts(dtype, layout):
    rng = np.random.default_rng(0)
    a, b = rand(rng, (7, 5), dtype), rand(rng, (5, 6), dtype)
    if layout in ("col", "mixed"):
        a = np.asfortranarray(a)
    if layout == "col":
        b = np.asfortranarray(b)
    c = rand(rng, (7, 6), dtype)
    r = matmul(a, b, c, alpha=0.5, beta=2.0, execution="cpu")
    assert isinstance(r, np.ndarray) and r.shape == (7, 6) and r.dtype == np.dtype(dtype)
    assert rel_l2(r, 0.5 * f64(a) @ f64(b) + 2.0 * f64(c)) < BOUND[dtype]


def test_batched_broadcast_and_c_column():
    rng = np.random.default_rng(1)
    a = rand(rng, (3, 8, 4))
    b = rand(rng, (4, 5))            # broadcast over the batch
    c = rand(rng, (8, 1))            # broadcast over columns and batch
    r = matmul(a, b, c, beta=1.0, execution="cpu")
    assert r.shape == (3, 8, 5)
    assert rel_l2(r, f64(a) @ f64(b) + f64(c)) < 2e-6


def test_vectors_promoted_and_squeezed():
    rng = np.random.default_rng(2)
    a, b = rand(rng, (6,)), rand(rng, (6, 3))
    r = matmul(a, b, execution="cpu")
    assert r.shape == (3,)
    assert rel_l2(r, f64(a) @ f64(b)) < 2e-6


@pytest.mark.parametrize("epilog", ["RELU", "GELU", "BIAS", "RELU_BIAS", "GELU_BIAS"])
@pytest.mark.parametrize("bias_shape", ["M", "M1"])
def test_forward_epilogs(epilog, bias_shape):
    rng = np.random.default_rng(3)
    m, n, k = 20, 12, 9
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    inputs, x = {}, f64(a) @ f64(b)
    if "BIAS" in epilog:
        bias = rand(rng, (m,) if bias_shape == "M" else (m, 1))
        inputs["bias"] = bias
        x = x + f64(bias).reshape(m, 1)
    r = matmul(a, b, epilog=epilog, epilog_inputs=inputs or None, execution="cpu")
    assert isinstance(r, np.ndarray)
    assert act_close(r, x, epilog)


@pytest.mark.parametrize("epilog", ["RELU_AUX", "RELU_AUX_BIAS", "GELU_AUX", "GELU_AUX_BIAS"])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_aux_outputs_user_frame(epilog, batch):
    """Aux arrays are in nvmath-python's format: rows of the user's M padded, N columns."""
    rng = np.random.default_rng(4)
    m, n, k = 21, 10, 7
    a, b = rand(rng, (*batch, m, k)), rand(rng, (*batch, k, n))
    x = f64(a) @ f64(b)
    inputs = None
    if "BIAS" in epilog:
        bias = rand(rng, (m, 1))
        inputs = {"bias": bias}
        x = x + f64(bias)
    r, aux = matmul(a, b, epilog=epilog, epilog_inputs=inputs, execution="cpu")
    assert act_close(r, x, epilog)
    if "RELU" in epilog:
        assert set(aux) == {"relu_aux"}
        mask = aux["relu_aux"]
        assert mask.dtype == np.uint8 and mask.shape == (*batch, 16, n)
        assert np.array_equal(unpack_relu_mask(mask, m), x > 0)
    else:
        assert set(aux) == {"gelu_aux"}
        g = aux["gelu_aux"]
        assert g.shape == (*batch, 24, n) and g.dtype == np.float32
        assert rel_l2(g[..., :m, :], x) < 2e-6


@pytest.mark.parametrize("fwd,bwd", [("RELU_AUX_BIAS", "DRELU_BGRAD"), ("RELU_AUX", "DRELU"),
                                     ("GELU_AUX_BIAS", "DGELU_BGRAD"), ("GELU_AUX", "DGELU")])
def test_forward_backward_round_trip(fwd, bwd):
    """An MLP layer: Z = W1 X + b, Y = act(Z); backward dZ = (W2^T dY) * act'(Z), db = Σ dZ."""
    rng = np.random.default_rng(5)
    hidden, batch_size, din, dout = 24, 16, 8, 5
    w1, xin, bias = rand(rng, (hidden, din)), rand(rng, (din, batch_size)), rand(rng, (hidden, 1))
    inputs = {"bias": bias} if "BIAS" in fwd else None
    _, aux = matmul(w1, xin, epilog=fwd, epilog_inputs=inputs, execution="cpu")
    z = f64(w1) @ f64(xin) + (f64(bias) if inputs else 0)
    w2t, dy = rand(rng, (hidden, dout)), rand(rng, (dout, batch_size))
    out = matmul(w2t, dy, epilog=bwd, epilog_inputs=aux, execution="cpu")
    dz, grads = (out if isinstance(out, tuple) else (out, {}))
    deriv = (z > 0) if "RELU" in fwd else ref_gelu_grad(z)
    ref = (f64(w2t) @ f64(dy)) * deriv
    assert rel_l2(dz, ref) < 1e-5
    if "BGRAD" in bwd:
        key = "drelu_bgrad" if "RELU" in bwd else "dgelu_bgrad"
        assert rel_l2(np.reshape(grads[key], -1), ref.sum(axis=1)) < 1e-5


@pytest.mark.parametrize("epilog,axis", [("BGRADA", "a"), ("BGRADB", "b")])
def test_bgrad_epilogs(epilog, axis):
    rng = np.random.default_rng(6)
    a, b = np.asfortranarray(rand(rng, (11, 6))), np.asfortranarray(rand(rng, (6, 9)))
    r, aux = matmul(a, b, epilog=epilog, execution="cpu")
    assert rel_l2(r, f64(a) @ f64(b)) < 2e-6
    key = epilog.lower()
    ref = f64(a).sum(axis=1) if axis == "a" else f64(b).sum(axis=0)
    assert rel_l2(np.reshape(aux[key], -1), ref) < 2e-6


def test_compute_type_fast_16f_is_honest():
    rng = np.random.default_rng(7)
    a, b = rand(rng, (32, 256)), rand(rng, (256, 16))
    opts = MatmulOptions(compute_type=MatmulComputeType.COMPUTE_32F_FAST_16F)
    r = matmul(a, b, options=opts, execution="cpu")
    rounded = f64(a.astype(np.float16)) @ f64(b.astype(np.float16))
    assert rel_l2(r, rounded) < 1e-6
    assert rel_l2(r, f64(a) @ f64(b)) > 1e-5


def test_complex_epilog_rejected():
    a = np.ones((3, 3), np.complex64)
    with pytest.raises(InvalidOperandError, match="dtype must be real"):
        matmul(a, a, epilog="relu", execution="cpu")


def test_bad_epilog_name():
    a = np.ones((3, 3), np.float32)
    with pytest.raises(InvalidOptionError, match="epilog must be one of"):
        matmul(a, a, epilog="swish", execution="cpu")


def test_missing_epilog_input():
    a = np.ones((3, 3), np.float32)
    with pytest.raises(ValueError, match="bias"):
        matmul(a, a, epilog="relu_bias", execution="cpu")


def test_stateful_lifecycle_on_cpu():
    rng = np.random.default_rng(8)
    a, b, bias = rand(rng, (16, 8)), rand(rng, (8, 12)), rand(rng, (16, 1))
    with Matmul(a, b, execution=ExecutionCPU(num_threads=1)) as mm:
        mm.plan(epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": bias})
        mm.autotune(iterations=2)
        r1 = mm.execute()
        assert rel_l2(r1, np.maximum(f64(a) @ f64(b) + f64(bias), 0)) < 2e-6
        a2 = rand(rng, (16, 8))
        mm.reset_operands(a=a2)
        r2 = mm.execute()
        assert rel_l2(r2, np.maximum(f64(a2) @ f64(b) + f64(bias), 0)) < 2e-6


def test_bad_inputs_raise_typed_errors_on_cpu():
    rng = np.random.default_rng(9)
    a, b, bias = rand(rng, (6, 4)), rand(rng, (4, 5)), rand(rng, (6,))
    with pytest.raises(InvalidOptionError, match="^epilog_inputs must be a dict"):
        matmul(a, b, epilog="bias", epilog_inputs=[bias], execution="cpu")
    with pytest.raises(InvalidOptionError, match="^algorithm must be"):
        matmul(a, b, algorithm=3, execution="cpu")
    with pytest.raises(InvalidOptionError, match="^stream must be"):
        matmul(a, b, stream="s", execution="cpu")
    with pytest.raises(InvalidOptionError, match="^stream must be"):
        Matmul(a, b, execution="cpu", stream="s")
    with Matmul(a, b, execution="cpu") as mm:
        with pytest.raises(InvalidOptionError, match="^epilog_inputs must be a dict"):
            mm.plan(epilog="bias", epilog_inputs=[bias])
        mm.plan()
        with pytest.raises(InvalidOptionError, match="^algorithm must be"):
            mm.execute(algorithm="garbage")
        with pytest.raises(InvalidOptionError, match="^stream must be"):
            mm.execute(stream="s")
        with pytest.raises(InvalidOperandError, match="^alpha must be real"):
            mm.reset_operands(alpha=1j)
        with pytest.raises(InvalidOperandError, match="^alpha must be a real or complex"):
            mm.alpha = "x"
        with pytest.raises(InvalidOperandError, match="^beta must be real"):
            mm.beta = 2j
        mm.alpha = 2.0
        out = mm.execute()
        assert rel_l2(out, 2.0 * f64(a) @ f64(b)) < 2e-6


@pytest.mark.parametrize(("a_shape", "b_shape"), [
    ((0, 4), (4, 5)), ((3, 0), (0, 5)), ((3, 4), (4, 0)), ((0, 3, 4), (4, 5))])
def test_empty_dimensions_are_rejected_clearly(a_shape, b_shape):
    a, b = np.ones(a_shape, np.float32), np.ones(b_shape, np.float32)
    with pytest.raises(InvalidOperandError, match="empty dimensions"):
        matmul(a, b, execution="cpu")


def test_release_operands_drops_epilog_inputs_on_cpu():
    rng = np.random.default_rng(10)
    a, b, bias = rand(rng, (8, 4)), rand(rng, (4, 6)), rand(rng, (8, 1))
    with Matmul(a, b, execution="cpu") as mm:
        mm.plan(epilog="bias", epilog_inputs={"bias": bias})
        mm.release_operands()
        with pytest.raises(InvalidStateError, match="epilog_inputs"):
            mm.reset_operands(a, b)
        bias2 = rand(rng, (8, 1))
        mm.reset_operands(a, b, epilog_inputs={"bias": bias2})
        assert rel_l2(mm.execute(), f64(a) @ f64(b) + f64(bias2)) < 2e-6


# --------------------------------------------------------------------------- torch (CPU)
def test_torch_cpu_tensors_bf16_and_float32():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    for dtype, bound in ((torch.float32, 2e-6), (torch.bfloat16, 1.5e-2)):
        a = torch.randn(3, 10, 6, generator=g).to(dtype)
        b = torch.randn(3, 6, 7, generator=g).to(dtype)
        bias = torch.randn(10, 1, generator=g).to(dtype)
        r = matmul(a, b, epilog="gelu_bias", epilog_inputs={"bias": bias}, execution="cpu")
        assert isinstance(r, torch.Tensor) and r.dtype == dtype and r.device.type == "cpu"
        x = a.double() @ b.double() + bias.double()
        assert rel_l2(r.double().numpy(), ref_gelu(x.numpy())) < bound


def test_torch_transposed_view_and_conj_bit():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(1)
    a = torch.randn(7, 5, dtype=torch.complex64, generator=g)
    b = torch.randn(6, 5, dtype=torch.complex64, generator=g).T  # transposed view
    r = matmul(a, b.conj(), execution="cpu")  # lazy conjugation bit honoured
    ref = a.numpy().astype(np.complex128) @ np.conj(b.numpy().astype(np.complex128))
    assert isinstance(r, torch.Tensor)
    assert rel_l2(r.numpy(), ref) < 2e-6


# --------------------------------------------------------------------------- hypothesis
@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 30),
       batch=st.sampled_from([(), (1,), (3,)]),
       epilog=st.sampled_from(["DEFAULT", "RELU", "GELU", "BIAS", "RELU_BIAS", "GELU_BIAS"]),
       a_t=st.booleans(), b_t=st.booleans(), seed=st.integers(0, 2**31))
def test_hypothesis_public_api(m, n, k, batch, epilog, a_t, b_t, seed):
    rng = np.random.default_rng(seed)
    a = rand(rng, (*batch, k, m)).swapaxes(-1, -2) if a_t else rand(rng, (*batch, m, k))
    b = rand(rng, (*batch, n, k)).swapaxes(-1, -2) if b_t else rand(rng, (*batch, k, n))
    x, x_abs = f64(a) @ f64(b), np.abs(f64(a)) @ np.abs(f64(b))
    inputs = None
    if "BIAS" in epilog:
        bias = rand(rng, (m, 1))
        inputs = {"bias": bias}
        x, x_abs = x + f64(bias), x_abs + np.abs(f64(bias))
    r = matmul(a, b, epilog=epilog, epilog_inputs=inputs, execution="cpu")
    assert r.shape == x.shape
    assert act_close(r, x, epilog, x_abs=x_abs)
