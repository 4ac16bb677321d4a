"""cuweave.torch on CPU tensors: gradients (gradcheck in float64), modules, custom operators,
torch.compile(fullgraph=True), errors and lazy import."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from cuweave import InvalidOperandError, InvalidOptionError  # noqa: E402
from cuweave.torch import (  # noqa: E402
    FusedLinear,
    FusedMLP,
    _ops,  # noqa: E402
    fused_linear,
    fused_mlp,
)

F = torch.nn.functional
ACTS = [None, "relu", "gelu"]


from tests.references import torch_activation as ref_act  # noqa: E402


def params(*shape, dtype=torch.float64, scale=1.0, grad=True):
    t = torch.randn(*shape, dtype=dtype) * scale
    return t.requires_grad_(grad)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", ACTS)
def test_fused_linear_gradcheck(act, bias):
    torch.manual_seed(1)
    # small: gradcheck runs the layer twice per input element (a batch dimension, K and N not
    # multiples of 8 exercise the same paths as larger shapes)
    x, w = params(2, 3, 10), params(6, 10, scale=0.5)
    b = params(6) if bias else None
    assert torch.autograd.gradcheck(lambda x, w, b: fused_linear(x, w, b, act), (x, w, b))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", ACTS)
def test_fused_mlp_gradcheck(act, bias):
    torch.manual_seed(2)
    x, w1, w2 = params(2, 3, 10), params(12, 10, scale=0.5), params(6, 12, scale=0.5)
    b1, b2 = (params(12), params(6)) if bias else (None, None)
    assert torch.autograd.gradcheck(
        lambda x, w1, b1, w2, b2: fused_mlp(x, w1, b1, w2, b2, act), (x, w1, b1, w2, b2))


@pytest.mark.parametrize("act", ACTS)
def test_fused_mlp_matches_torch_autograd(act):
    torch.manual_seed(3)
    x = params(4, 6, 32, dtype=torch.float32)
    block = FusedMLP(32, 128, activation=act)
    fc1 = torch.nn.Linear(32, 128)
    fc2 = torch.nn.Linear(128, 32)
    fc1.load_state_dict(block.fc1.state_dict())
    fc2.load_state_dict(block.fc2.state_dict())
    y = block(x)
    xr = x.detach().clone().requires_grad_()
    yr = fc2(ref_act(fc1(xr), act))
    torch.testing.assert_close(y, yr, rtol=1e-4, atol=1e-4)
    dy = torch.randn_like(y)
    y.backward(dy)
    yr.backward(dy)
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-4)
    for mine, ref in ((block.fc1, fc1), (block.fc2, fc2)):
        torch.testing.assert_close(mine.weight.grad, ref.weight.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(mine.bias.grad, ref.bias.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,tol", [(torch.bfloat16, 2e-2), (torch.float16, 2e-3)])
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_half_precisions_on_the_cpu(dtype, tol, act):
    torch.manual_seed(4)
    x = torch.randn(64, 48, dtype=dtype)
    w, b = torch.randn(40, 48, dtype=dtype) / 7, torch.randn(40, dtype=dtype)
    y = fused_linear(x, w, b, act)
    ref = ref_act(x.double() @ w.double().T + b.double(), act)
    assert y.dtype == dtype and y.device.type == "cpu"
    assert float((y.double() - ref).norm() / ref.norm()) < tol


@pytest.mark.parametrize("act", ACTS)
def test_square_products_add_the_bias_to_every_row(act):
    torch.manual_seed(9)
    x, w, b = params(12, 8), params(12, 8), params(12)  # tokens == out_features
    torch.testing.assert_close(fused_linear(x, w, b, act), ref_act(x @ w.T + b, act))
    w2 = params(12, 12)
    y = fused_mlp(x, w, b, w2, b, act)
    torch.testing.assert_close(y, ref_act(x @ w.T + b, act) @ w2.T + b)
    # the aux matrix of a square frame: (16, 16) for both ReLU and GELU at 16 tokens
    x, w1, b1, w2 = params(16, 8), params(16, 8), params(16), params(5, 16)
    assert torch.autograd.gradcheck(lambda x, w1, b1, w2: fused_mlp(x, w1, b1, w2, None, act),
                                    (x, w1, b1, w2))


def test_module_mirrors_nn_linear():
    layer = FusedLinear(8, 3, activation="relu")
    assert sorted(layer.state_dict()) == sorted(torch.nn.Linear(8, 3).state_dict())
    assert layer.weight.shape == (3, 8) and layer.bias.shape == (3,)
    bound = 1 / 8 ** 0.5
    assert float(layer.weight.detach().abs().max()) <= bound
    assert float(layer.bias.detach().abs().max()) <= bound
    assert "activation='relu'" in repr(layer)
    assert FusedLinear(8, 3, bias=False).bias is None
    block = FusedMLP(8, 16, 4, bias=False, activation=None)
    assert sorted(block.state_dict()) == ["fc1.weight", "fc2.weight"]
    assert block(torch.randn(2, 8)).shape == (2, 4)


def test_non_contiguous_gradients_and_inputs():
    torch.manual_seed(5)
    base = torch.randn(16, 10, dtype=torch.float64)
    x = base.t().requires_grad_()  # (10, 16), column-major
    w, b = params(6, 16), params(6)
    y = fused_linear(x, w, b, "gelu")
    y.t().sum().backward()  # an expanded (stride 0) gradient seen through a transpose
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    ref_act(xr @ wr.T + br, "gelu").t().sum().backward()
    for mine, ref in ((x, xr), (w, wr), (b, br)):
        torch.testing.assert_close(mine.grad, ref.grad)


def test_only_some_inputs_need_gradients():
    torch.manual_seed(6)
    x, w, b = params(5, 8, grad=False), params(4, 8), params(4, grad=False)
    fused_linear(x, w, b, "relu").sum().backward()
    assert w.grad is not None and b.grad is None and x.grad is None
    x, w1, w2 = params(5, 8), params(16, 8, grad=False), params(8, 16, grad=False)
    fused_mlp(x, w1, None, w2, None, "gelu").sum().backward()
    xr = x.detach().clone().requires_grad_()
    (F.gelu(xr @ w1.T, approximate="tanh") @ w2.T).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)


@pytest.mark.parametrize("shape", [(1, 8, 4), (5, 8, 1), (5, 1, 4)])
def test_degenerate_shapes_take_torch_s_path(shape):
    tokens, d_in, d_out = shape
    x, w, b = params(tokens, d_in), params(d_out, d_in), params(d_out)
    assert torch.autograd.gradcheck(lambda x, w, b: fused_linear(x, w, b, "gelu"), (x, w, b))
    w2 = params(d_in, d_out)
    assert torch.autograd.gradcheck(lambda x, w, b, w2: fused_mlp(x, w, b, w2, None, "relu"),
                                    (x, w, b, w2))


def test_empty_batch():
    x = torch.randn(0, 3, 8, dtype=torch.float64, requires_grad=True)
    w, b = params(4, 8), params(4)
    y = fused_linear(x, w, b, "gelu")
    assert y.shape == (0, 3, 4)
    y.sum().backward()
    assert x.grad.shape == x.shape and float(w.grad.abs().sum()) == 0.0


def test_bad_inputs_raise_typed_errors():
    x, w = torch.randn(3, 8), torch.randn(4, 8)
    with pytest.raises(InvalidOptionError, match="^activation must be one of"):
        fused_linear(x, w, activation="tanh")
    with pytest.raises(InvalidOperandError, match="^weight must have 8 columns"):
        fused_linear(x, torch.randn(4, 7))
    with pytest.raises(InvalidOperandError, match="^bias must be None or a torch.Tensor of"):
        fused_linear(x, w, torch.randn(5))
    with pytest.raises(InvalidOperandError, match="^weight must have the input's dtype"):
        fused_linear(x, w.double())
    with pytest.raises(InvalidOperandError, match="^x must have dtype"):
        fused_linear(x.int(), w.int())
    with pytest.raises(InvalidOperandError, match="^x must be a torch.Tensor"):
        fused_linear([1.0], w)
    with pytest.raises(InvalidOperandError, match="^w2 must have 4 columns"):
        fused_mlp(x, w, None, torch.randn(8, 5), None)
    with pytest.raises(ValueError):  # typed errors are also the builtin
        FusedMLP(8, 16, activation="swish")


@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
def test_custom_operators_pass_opcheck(act):
    torch.manual_seed(7)
    x, w, b = params(9, 16), params(12, 16), params(12)
    w2 = params(6, 12)
    for bias in (b, None):
        torch.library.opcheck(_ops.linear, (x, w, bias, act))
        torch.library.opcheck(_ops.mlp, (x, w, bias, w2, None, act))
    x, w2 = x.detach(), w2.detach()  # the backward operators are not differentiable
    dz = torch.randn(9, 12, dtype=torch.float64)
    for bias in (True, False):
        torch.library.opcheck(_ops.linear_wgrad, (x, dz, bias))
        if act != "none":
            _, aux = _ops.linear(x, w.detach(), b.detach(), act)
            dy = torch.randn(9, 6, dtype=torch.float64)
            torch.library.opcheck(_ops.linear_dgrad_act, (dy, w2, aux, act, bias))


def test_aux_layouts_are_cublaslt_s():
    x, w, b = torch.randn(21, 16), torch.randn(130, 16), torch.randn(130)
    _, mask = _ops.linear(x, w, b, "relu")
    assert mask.dtype == torch.uint8 and mask.shape == (32, 21) and mask.stride() == (1, 32)
    z = x @ w.T + b
    bits = (mask.t()[:, :, None] >> torch.arange(8, dtype=torch.uint8)) & 1
    assert torch.equal(bits.reshape(21, -1)[:, :130].bool(), z > 0)
    _, pre = _ops.linear(x, w, None, "gelu")
    assert pre.shape == (136, 21) and pre.stride() == (1, 136)
    torch.testing.assert_close(pre[:130].t(), x @ w.T)


def test_compile_fullgraph_traces_through():
    torch.manual_seed(8)
    block = FusedMLP(16, 48, activation="gelu")
    head = FusedLinear(16, 8, activation="relu")

    def loss_fn(x):
        return head(block(x)).square().mean()

    x = torch.randn(3, 5, 16, requires_grad=True)
    compiled = torch.compile(loss_fn, fullgraph=True, backend="aot_eager")
    loss = compiled(x)
    loss.backward()
    grads = [x.grad] + [p.grad for p in (*block.parameters(), *head.parameters())]
    x2 = x.detach().clone().requires_grad_()
    for p in (*block.parameters(), *head.parameters()):
        p.grad = None
    ref = loss_fn(x2)
    ref.backward()
    torch.testing.assert_close(loss, ref)
    refs = [x2.grad] + [p.grad for p in (*block.parameters(), *head.parameters())]
    for g, r in zip(grads, refs):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("name", ["cuweave.torch", "cuweave.torch._layers"])
def test_docstring_examples(name):
    module = importlib.import_module(name)
    res = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def test_imported_only_when_used():
    code = ("import sys, cuweave, cuweave.linalg.advanced\n"
            "print('torch' in sys.modules, 'cuweave.torch' in sys.modules)\n"
            "layer = cuweave.torch.FusedLinear(4, 2)  # loaded on first use\n"
            "print('torch' in sys.modules, type(layer).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "True", "FusedLinear"]
