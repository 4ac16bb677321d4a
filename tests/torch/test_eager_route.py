"""cuweave.torch's two routes on CPU tensors: eager calls bypass the ``torch.library``
operators (an ``autograd.Function`` over the same implementation and backward functions, or
the implementation itself when no gradient is recorded); ``torch.compile``, ``make_fx``, torch
function/dispatch modes and double backward keep the registered operators. The operators the
dispatcher ran are read from torch's profiler (record functions: no mode that would change the
route)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.profiler import ProfilerActivity, profile  # noqa: E402

from cuweave.torch import (  # noqa: E402
    FusedLinear,
    FusedMLP,
    _fp8,
    _ops,
    fused_linear_fp8,
    fused_mlp,
    quantize_fp8,
)

F64 = torch.float64


def dispatched(fn) -> tuple[object, list[str]]:
    """``fn()`` and the ``cuweave::`` operators the dispatcher ran meanwhile (sorted names)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = fn()
    return out, sorted({e.name for e in prof.events() if e.name.startswith("cuweave::")})


def _layers(act="gelu"):
    torch.manual_seed(0)
    return (FusedMLP(16, 48, activation=act, dtype=F64),
            FusedLinear(16, 8, activation="relu", dtype=F64))


def _node(y) -> str:
    """The name of the autograd node that made ``y`` (under the layers' final reshape)."""
    node = y.grad_fn
    while type(node).__name__.startswith(("View", "Reshape", "UnsafeView")):
        node = node.next_functions[0][0]
    return type(node).__name__


def _grads(module, x, y):
    return torch.autograd.grad(y.square().sum(), [x, *module.parameters()])


@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
def test_eager_forward_and_backward_skip_the_operators(act):
    block, _ = _layers(act)
    x = torch.randn(3, 5, 16, dtype=F64, requires_grad=True)
    (y, grads), ops = dispatched(lambda: (lambda y: (y, _grads(block, x, y)))(block(x)))
    assert ops == []
    assert _node(y) == "_MlpBackward"
    # the registered operator (its backward also eager) gives the same values
    p = [block.fc1.weight, block.fc1.bias, block.fc2.weight, block.fc2.bias]
    (ref, _, _), ops = dispatched(lambda: _ops.mlp(x.reshape(15, 16), *p[:2], *p[2:], act))
    assert ops == ["cuweave::mlp"]
    assert _node(ref).startswith("GeneratedBackwardFor_cuweave_mlp")
    torch.testing.assert_close(y.reshape(15, 16), ref, rtol=0, atol=0)
    for g, r in zip(grads, _grads(block, x, ref.reshape(3, 5, 16))):
        torch.testing.assert_close(g, r, rtol=0, atol=0)


def test_eager_linear_skips_the_operators():
    _, head = _layers()
    x = torch.randn(7, 16, dtype=F64, requires_grad=True)
    (y, _), ops = dispatched(lambda: (lambda y: (y, _grads(head, x, y)))(head(x)))
    assert ops == [] and _node(y) == "_LinearBackward"


def test_no_grad_calls_run_the_implementation():
    block, head = _layers()
    x = torch.randn(7, 16, dtype=F64)
    with torch.no_grad():
        (y, z), ops = dispatched(lambda: (block(x), head(x)))
    assert ops == [] and y.grad_fn is None and z.grad_fn is None
    p = [t.detach() for t in block.parameters()]
    y, ops = dispatched(lambda: fused_mlp(x, *p))  # no input needs a gradient
    assert ops == [] and y.grad_fn is None and not y.requires_grad
    torch.testing.assert_close(y, _ops.mlp(x, *p, "gelu")[0], rtol=0, atol=0)
    with torch.inference_mode():
        _, ops = dispatched(lambda: block(x))
    assert ops == []


def test_compile_keeps_the_operators():
    block, head = _layers()
    x = torch.randn(3, 5, 16, dtype=F64, requires_grad=True)

    def loss_fn(x):
        return head(block(x)).square().mean()

    compiled = torch.compile(loss_fn, fullgraph=True, backend="aot_eager")
    compiled(x).backward()  # compiles
    x.grad = None
    loss, ops = dispatched(lambda: compiled(x))
    assert ops == ["cuweave::linear", "cuweave::mlp"]
    _, ops = dispatched(loss.backward)
    assert "cuweave::linear_wgrad" in ops and "cuweave::linear_dgrad_act" in ops
    torch.testing.assert_close(loss, loss_fn(x))


def test_make_fx_and_fake_tensors_see_the_operators():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    block, head = _layers()
    x = torch.randn(4, 16, dtype=F64)
    graph = make_fx(lambda x: head(block(x)))(x)
    assert "cuweave.mlp" in graph.code and "cuweave.linear" in graph.code
    fake = FakeTensorMode()
    xf, w = fake.from_tensor(x), fake.from_tensor(head.weight.detach())
    with fake:  # the operators' fake implementations
        assert tuple(_ops.linear_call(xf, w, None, "relu")[0].shape) == (4, 8)
    assert not _ops.eager(xf)


def test_torch_function_modes_and_subclasses_take_the_operators():
    block, _ = _layers()
    x = torch.randn(4, 16, dtype=F64, requires_grad=True)
    with torch.device("cpu"):  # a torch function mode
        _, ops = dispatched(lambda: block(x))
    assert ops == ["cuweave::mlp"]

    class Sub(torch.Tensor):
        pass

    assert _ops.eager(x, None, block.fc1.weight)
    assert not _ops.eager(x, x.detach().as_subclass(Sub))


def test_double_backward_keeps_the_backward_operators():
    """With ``create_graph`` the backward functions call the registered backward operators,
    which have no autograd formula: differentiating them again raises, as before."""
    _, head = _layers()
    x = torch.randn(6, 16, dtype=F64, requires_grad=True)
    y = head(x)
    (gx, gw, gb), ops = dispatched(lambda: torch.autograd.grad(
        y.square().sum(), [x, head.weight, head.bias], create_graph=True))
    assert ops == ["cuweave::linear_wgrad"]
    assert gx.requires_grad
    with pytest.raises(RuntimeError):
        torch.autograd.grad(gw.sum(), [x])


def test_autocast_is_the_same_on_both_routes():
    block, _ = _layers()
    block = block.float()
    x = torch.randn(2, 12, 16, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, ops = dispatched(lambda: block(x))
        p = [t.to(torch.bfloat16) for t in (block.fc1.weight, block.fc1.bias,
                                            block.fc2.weight, block.fc2.bias)]
        ref = _ops.mlp(x.to(torch.bfloat16).reshape(24, 16), *p, "gelu")[0]
    assert ops == [] and y.dtype == ref.dtype == torch.bfloat16
    torch.testing.assert_close(y.reshape(24, 16), ref, rtol=0, atol=0)
    for g, r in zip(_grads(block, x, y.float()), _grads(block, x, ref.float().reshape(2, 12, 16))):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g, r, rtol=0, atol=0)


def test_fp8_forward_routes():
    x, w = torch.randn(4, 32), torch.randn(16, 32)
    (xq, sx), (wq, sw) = quantize_fp8(x), quantize_fp8(w)
    y, ops = dispatched(lambda: fused_linear_fp8(xq, wq, sx, sw, None, "relu"))
    assert ops == []
    ref, ops = dispatched(lambda: _fp8.linear_fp8(xq, wq, sx, sw, None, "relu", torch.bfloat16))
    assert ops == ["cuweave::linear_fp8"]
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
