"""cuweave.torch on CPU tensors: torch.autocast (the layers cast as F.linear does), the first
bias gradient in either backward product, and the FP8 forward Linear (emulated by the CPU
backend): results, operators, errors."""

from __future__ import annotations

import doctest

import pytest

torch = pytest.importorskip("torch")

from cuweave import InvalidOperandError, InvalidOptionError  # noqa: E402
from cuweave.torch import (  # noqa: E402
    FusedLinear,
    FusedMLP,
    _fp8,
    _ops,
    fused_linear,
    fused_linear_fp8,
    fused_mlp,
    quantize_fp8,
)

F = torch.nn.functional
BF16 = torch.bfloat16


from tests.references import torch_activation as ref_act  # noqa: E402


def _plain(block, act):
    gelu = torch.nn.GELU(approximate="tanh") if act == "gelu" else torch.nn.ReLU()
    plain = torch.nn.Sequential(torch.nn.Linear(32, 64), gelu, torch.nn.Linear(64, 32))
    plain.load_state_dict({"0.weight": block.fc1.weight, "0.bias": block.fc1.bias,
                           "2.weight": block.fc2.weight, "2.bias": block.fc2.bias})
    return plain


# ------------------------------------------------------------------ autocast
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_autocast_casts_like_f_linear(act):
    torch.manual_seed(0)
    block = FusedMLP(32, 64, activation=act)
    plain = _plain(block, act)
    x = torch.randn(2, 24, 32)
    with torch.autocast("cpu", dtype=BF16):
        y, yr = block(x), plain(x)
    assert y.dtype == yr.dtype == BF16
    torch.testing.assert_close(y, yr, rtol=2e-2, atol=2e-2)
    y.float().square().sum().backward()
    yr.float().square().sum().backward()
    for mine, ref in zip(block.parameters(), plain.parameters()):
        assert mine.grad.dtype == torch.float32  # float32 parameters, float32 gradients
        assert float((mine.grad - ref.grad).norm() / ref.grad.norm()) < 3e-2


def test_autocast_mixes_a_half_input_with_float32_parameters():
    torch.manual_seed(1)
    layer = FusedLinear(16, 8, activation="gelu")
    x = torch.randn(5, 16, dtype=BF16, requires_grad=True)
    with pytest.raises(InvalidOperandError, match="^weight must have the input's dtype"):
        layer(x)  # outside autocast: no implicit casts
    with torch.autocast("cpu", dtype=BF16):
        y = layer(x)
        ref = F.gelu(F.linear(x, layer.weight, layer.bias), approximate="tanh")
    assert y.dtype == BF16
    torch.testing.assert_close(y, ref, rtol=2e-2, atol=2e-2)


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_autocast_leaves_float64_and_other_devices_alone():
    x, w = torch.randn(4, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)
    with torch.autocast("cpu", dtype=BF16):
        assert fused_linear(x, w).dtype == torch.float64  # as F.linear: float64 not cast
    with torch.autocast("cuda", dtype=torch.float16, enabled=True):
        assert fused_linear(x.float(), w.float()).dtype == torch.float32  # CPU tensors


def test_autocast_disabled_region_and_compile():
    torch.manual_seed(2)
    block = FusedMLP(32, 64, activation="gelu")
    x = torch.randn(6, 32)
    with torch.autocast("cpu", dtype=BF16):
        with torch.autocast("cpu", enabled=False):
            assert block(x).dtype == torch.float32
        eager = block(x)
        compiled = torch.compile(block, fullgraph=True, backend="aot_eager")(x)
    assert compiled.dtype == BF16
    torch.testing.assert_close(compiled, eager)


# ------------------------------------------------------------------ first bias gradient
@pytest.mark.parametrize("where", ["wgrad", "dgrad"])
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_first_bias_gradient_from_either_product(monkeypatch, where, act):
    monkeypatch.setattr(_ops, "FIRST_BIAS_GRAD", where)
    torch.manual_seed(3)
    # small: gradcheck runs the block twice per input element
    x = torch.randn(2, 3, 10, dtype=torch.float64, requires_grad=True)
    w1, w2 = (torch.randn(12, 10, dtype=torch.float64) / 4).requires_grad_(), \
        (torch.randn(6, 12, dtype=torch.float64) / 4).requires_grad_()
    b1, b2 = (torch.randn(n, dtype=torch.float64, requires_grad=True) for n in (12, 6))
    assert torch.autograd.gradcheck(
        lambda x, w1, b1, w2, b2: fused_mlp(x, w1, b1, w2, b2, act), (x, w1, b1, w2, b2))
    w1.requires_grad_(False)  # the bias gradient without the weight gradient's product
    assert torch.autograd.gradcheck(lambda x, b1: fused_mlp(x, w1, b1, w2, b2, act), (x, b1))


# ------------------------------------------------------------------ FP8 forward
def _fp8_operands(tokens=12, d_in=32, d_out=16, seed=4):
    torch.manual_seed(seed)
    x, w = torch.randn(tokens, d_in), torch.randn(d_out, d_in) / 4
    (xq, sx), (wq, sw) = quantize_fp8(x), quantize_fp8(w)
    return xq, sx, wq, sw


def test_quantize_fp8_round_trips_within_e4m3_precision():
    t = torch.randn(64, 48) * 30
    q, scale = quantize_fp8(t)
    assert q.dtype == torch.float8_e4m3fn and scale.dtype == torch.float32 and scale.ndim == 0
    assert float(scale) == pytest.approx(float(t.abs().max()) / 448)
    assert float(((q.float() * scale - t).abs() / t.abs().clamp(min=1)).max()) < 0.07
    q0, s0 = quantize_fp8(torch.zeros(3))
    assert float(s0) == 1.0 and not q0.float().any()


@pytest.mark.parametrize("out_dtype", [BF16, torch.float16])
@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize("bias", [True, False])
def test_fp8_forward_matches_the_dequantized_product(act, bias, out_dtype):
    xq, sx, wq, sw = _fp8_operands()
    b = torch.randn(16, dtype=out_dtype) if bias else None
    y = fused_linear_fp8(xq.reshape(3, 4, 32), wq, sx, sw, b, act, out_dtype=out_dtype)
    ref = (xq.float() * sx) @ (wq.float() * sw).T
    ref = ref_act(ref + (b.float() if bias else 0), act)
    assert y.dtype == out_dtype and y.shape == (3, 4, 16)
    torch.testing.assert_close(y.reshape(12, 16).float(), ref, rtol=1e-2, atol=1e-2)


def test_fp8_degenerate_shapes_and_scales_as_one_element_tensors():
    xq, sx, wq, sw = _fp8_operands(tokens=1)
    y = fused_linear_fp8(xq, wq, sx.reshape(1), sw.reshape(1, 1), None, "gelu")
    ref = F.gelu((xq.float() * sx) @ (wq.float() * sw).T, approximate="tanh")
    torch.testing.assert_close(y.float(), ref, rtol=1e-2, atol=1e-2)


def test_fp8_operator_traces_and_passes_opcheck():
    xq, sx, wq, sw = _fp8_operands()
    b = torch.randn(16, dtype=BF16)
    # (opcheck's schema test compares fp8 tensors with allclose, which torch lacks for fp8)
    torch.library.opcheck(_fp8.linear_fp8, (xq, wq, sx, sw, b, "gelu", BF16),
                          test_utils=("test_autograd_registration", "test_faketensor",
                                      "test_aot_dispatch_dynamic"))
    fn = torch.compile(fused_linear_fp8, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(fn(xq, wq, sx, sw, b, "relu"),
                               fused_linear_fp8(xq, wq, sx, sw, b, "relu"))


def test_fp8_forward_has_no_gradient():
    xq, sx, wq, sw = _fp8_operands()
    b = torch.randn(16, dtype=BF16, requires_grad=True)
    y = fused_linear_fp8(xq, wq, sx, sw, b)
    with pytest.raises(RuntimeError, match="autograd"):
        y.float().sum().backward()


def test_fp8_bad_inputs_raise_typed_errors():
    xq, sx, wq, sw = _fp8_operands()
    with pytest.raises(InvalidOperandError, match="^x must be a torch.float8_e4m3fn tensor"):
        fused_linear_fp8(xq.float(), wq, sx, sw)
    with pytest.raises(InvalidOperandError, match="^weight must be a 2-D torch.float8_e4m3fn"):
        fused_linear_fp8(xq, wq.to(torch.float8_e5m2), sx, sw)
    with pytest.raises(InvalidOperandError, match="^weight must have 32 columns"):
        fused_linear_fp8(xq, wq[:, :16], sx, sw)
    with pytest.raises(InvalidOperandError, match="^x_scale must be a float32 torch.Tensor"):
        fused_linear_fp8(xq, wq, 0.5, sw)
    with pytest.raises(InvalidOperandError, match="^weight_scale must be a float32 torch"):
        fused_linear_fp8(xq, wq, sx, sw.double())
    with pytest.raises(InvalidOptionError, match="^out_dtype must be torch.bfloat16 or"):
        fused_linear_fp8(xq, wq, sx, sw, out_dtype=torch.float32)
    with pytest.raises(InvalidOperandError, match="^bias must be None or a torch.bfloat16"):
        fused_linear_fp8(xq, wq, sx, sw, torch.randn(16))
    with pytest.raises(InvalidOptionError, match="^activation must be one of"):
        fused_linear_fp8(xq, wq, sx, sw, activation="silu")
    with pytest.raises(InvalidOptionError, match="^dtype must be torch.float8_e4m3fn"):
        quantize_fp8(torch.ones(2), torch.float8_e5m2)
    with pytest.raises(InvalidOperandError, match="^t must be a floating-point"):
        quantize_fp8(torch.ones(2, dtype=torch.int32))


def test_fp8_docstring_examples():
    res = doctest.testmod(_fp8, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0
