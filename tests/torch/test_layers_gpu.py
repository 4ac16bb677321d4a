"""cuweave.torch on the GPU: agreement with nn.Linear + activation under autograd per dtype,
torch.compile(fullgraph=True) with the default backend, CUDA graph capture and replay, CPU
tensors staying on the CPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cuweave.torch import FusedLinear, FusedMLP, fused_linear  # noqa: E402

pytestmark = pytest.mark.gpu
F = torch.nn.functional
# relative L2 error bounds per dtype (results and gradients against a float64 reference)
# (TF32 rounds the float32 inputs inside the product, so near-zero pre-activations may take the
# other side of ReLU than in the float64 reference: measured 1.5e-2 on x.grad, ReLU, H200)
TOL = {torch.float32: 1e-5, "tf32": 3e-2, torch.float16: 5e-3, torch.bfloat16: 3e-2}


def rel(x, ref):
    x, ref = x.detach().double(), ref.detach().double()
    return float((x - ref).norm() / ref.norm())


from tests.references import torch_activation as ref_act  # noqa: E402


@pytest.fixture
def precision(request):
    old = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(old)


def _reference(block, x, act):
    """float64 nn.Linear + activation with the block's parameters, under autograd."""
    fc1 = torch.nn.Linear(block.fc1.in_features, block.fc1.out_features, device="cuda",
                          dtype=torch.float64)
    fc2 = torch.nn.Linear(block.fc2.in_features, block.fc2.out_features, device="cuda",
                          dtype=torch.float64)
    with torch.no_grad():
        for mine, ref in ((block.fc1, fc1), (block.fc2, fc2)):
            ref.weight.copy_(mine.weight)
            ref.bias.copy_(mine.bias)
    xr = x.detach().double().requires_grad_()
    return fc1, fc2, xr, fc2(ref_act(fc1(xr), act))


@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize("dtype", [torch.float32, "tf32", torch.float16, torch.bfloat16])
def test_mlp_agrees_with_torch_autograd(dtype, act, precision):
    torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
    tdtype = torch.float32 if dtype == "tf32" else dtype
    torch.manual_seed(0)
    block = FusedMLP(256, 1024, activation=act, device="cuda", dtype=tdtype)
    x = torch.randn(3, 100, 256, device="cuda", dtype=tdtype, requires_grad=True)
    y = block(x)
    fc1, fc2, xr, yr = _reference(block, x, act)
    dy = torch.randn_like(y)
    y.backward(dy.transpose(0, 1).contiguous().transpose(0, 1))  # a non-contiguous gradient
    yr.backward(dy.double())
    tol = TOL[dtype]
    assert y.dtype == tdtype and y.shape == (3, 100, 256)
    assert rel(y, yr) < tol
    assert rel(x.grad, xr.grad) < tol
    for mine, ref in ((block.fc1, fc1), (block.fc2, fc2)):
        assert rel(mine.weight.grad, ref.weight.grad) < tol
        assert rel(mine.bias.grad, ref.bias.grad) < tol


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_linear_agrees_with_torch_autograd(dtype, act, bias):
    torch.manual_seed(1)
    layer = FusedLinear(192, 320, bias=bias, activation=act, device="cuda", dtype=dtype)
    x = torch.randn(7, 64, 192, device="cuda", dtype=dtype, requires_grad=True)
    y = layer(x)
    w = layer.weight.detach().double().requires_grad_()
    b = layer.bias.detach().double().requires_grad_() if bias else None
    xr = x.detach().double().requires_grad_()
    yr = ref_act(F.linear(xr, w, b), act)
    dy = torch.randn_like(y)
    y.backward(dy)
    yr.backward(dy.double())
    tol = TOL[dtype]
    assert rel(y, yr) < tol and rel(x.grad, xr.grad) < tol
    assert rel(layer.weight.grad, w.grad) < tol
    if bias:
        assert rel(layer.bias.grad, b.grad) < tol


def test_one_output_feature_head():
    torch.manual_seed(5)
    head = FusedLinear(16, 1, device="cuda")
    x = torch.randn(128, 16, device="cuda", requires_grad=True)
    head(x).square().mean().backward()
    xr = x.detach().clone().requires_grad_()
    w = head.weight.detach().clone().requires_grad_()
    F.linear(xr, w, head.bias.detach()).square().mean().backward()
    assert rel(x.grad, xr.grad) < 1e-5 and rel(head.weight.grad, w.grad) < 1e-5


def test_float64_on_the_gpu():
    torch.manual_seed(2)
    x = torch.randn(33, 40, device="cuda", dtype=torch.float64, requires_grad=True)
    w = torch.randn(24, 40, device="cuda", dtype=torch.float64, requires_grad=True)
    b = torch.randn(24, device="cuda", dtype=torch.float64, requires_grad=True)
    # cuBLASLt's double-precision GELU uses a fast tanh (relative error ~1e-10): a larger
    # finite-difference step keeps the numerical Jacobian's error below the tolerance
    assert torch.autograd.gradcheck(lambda x, w, b: fused_linear(x, w, b, "gelu"), (x, w, b),
                                    eps=1e-4, atol=1e-5, rtol=1e-4)


def test_cpu_tensors_run_on_the_cpu():
    layer = FusedLinear(16, 8, activation="gelu")
    x = torch.randn(4, 16, requires_grad=True)
    y = layer(x)
    y.sum().backward()
    assert y.device.type == "cpu" and x.grad.device.type == "cpu"
    ref = F.gelu(x @ layer.weight.T + layer.bias, approximate="tanh")
    torch.testing.assert_close(y, ref)


def _step_fn(block, head):
    def step(x):
        loss = head(block(x)).float().square().mean()
        loss.backward()
        return loss
    return step


def _grads(mods):
    return [p.grad.clone() for m in mods for p in m.parameters()]


def _zero(mods):
    for m in mods:
        for p in m.parameters():
            p.grad = None


def test_compile_fullgraph_default_backend():
    torch.manual_seed(3)
    block = FusedMLP(128, 512, activation="gelu", device="cuda", dtype=torch.bfloat16)
    head = FusedLinear(128, 64, activation="relu", device="cuda", dtype=torch.bfloat16)

    def loss_fn(x):
        return head(block(x)).float().square().mean()

    x = torch.randn(4, 64, 128, device="cuda", dtype=torch.bfloat16)
    compiled = torch.compile(loss_fn, fullgraph=True)
    loss = compiled(x)
    loss.backward()
    got = _grads((block, head))
    _zero((block, head))
    ref = loss_fn(x)
    ref.backward()
    assert rel(loss, ref) < 1e-2
    for g, r in zip(got, _grads((block, head))):
        assert rel(g, r) < 2e-2


@pytest.mark.parametrize("same_stream", [False, True])
def test_cuda_graph_capture_and_replay(same_stream):
    torch.manual_seed(4)
    block = FusedMLP(128, 512, activation="gelu", device="cuda", dtype=torch.float16)
    head = FusedLinear(128, 32, activation="relu", device="cuda", dtype=torch.float16)
    mods = (block, head)
    step = _step_fn(block, head)
    static_x = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    side = torch.cuda.Stream()  # the recipe of torch.cuda.graph's documentation
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            _zero(mods)
            step(static_x)
    torch.cuda.current_stream().wait_stream(side)
    params = [p for m in mods for p in m.parameters()]
    for p in params:  # graph-owned gradient buffers (accumulated into by every replay)
        p.grad = torch.zeros_like(p)
    bufs = [p.grad for p in params]
    graph = torch.cuda.CUDAGraph()
    # warmed up on ``side``: captured on torch's own capture stream (the cuweave products
    # fork onto ``side`` inside the graph) or on ``side`` itself
    with torch.cuda.graph(graph, stream=side if same_stream else None):
        static_loss = step(static_x)
    for trial in range(3):
        new_x = torch.randn_like(static_x)
        for p, buf in zip(params, bufs):
            p.grad = buf
            buf.zero_()
        static_x.copy_(new_x)
        graph.replay()
        torch.cuda.synchronize()
        got, got_loss = [b.clone() for b in bufs], static_loss.clone()
        _zero(mods)
        ref_loss = step(new_x)
        assert rel(got_loss, ref_loss) < 1e-3, trial
        for g, p in zip(got, params):
            assert rel(g, p.grad) < 1e-3, trial


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_on_the_gpu(dtype):
    torch.manual_seed(6)
    block = FusedMLP(256, 1024, activation="gelu", device="cuda")  # float32 parameters
    plain = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(approximate="tanh"),
                                torch.nn.Linear(1024, 256)).cuda()
    plain.load_state_dict({"0.weight": block.fc1.weight, "0.bias": block.fc1.bias,
                           "2.weight": block.fc2.weight, "2.bias": block.fc2.bias})
    x = torch.randn(2, 96, 256, device="cuda")
    with torch.autocast("cuda", dtype=dtype):
        y, yr = block(x), plain(x)
    assert y.dtype == yr.dtype == dtype
    assert rel(y, yr) < TOL[dtype]
    y.float().square().sum().backward()
    yr.float().square().sum().backward()
    for mine, ref in zip(block.parameters(), plain.parameters()):
        assert mine.grad.dtype == torch.float32 and rel(mine.grad, ref.grad) < TOL[dtype]


def _gpu_without_fp8() -> bool:
    """A GPU older than compute capability 8.9 (without a GPU, the ``gpu`` marker skips)."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 9)


@pytest.mark.skipif(_gpu_without_fp8(), reason="cuBLASLt fp8 needs compute capability >= 8.9")
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize("bias", [True, False])
def test_fp8_forward_on_the_gpu(act, bias, out_dtype):
    from cuweave.torch import fused_linear_fp8, quantize_fp8

    torch.manual_seed(7)
    x = torch.randn(3, 64, 256, device="cuda")
    w = torch.randn(384, 256, device="cuda") / 16
    (xq, sx), (wq, sw) = quantize_fp8(x), quantize_fp8(w)
    b = torch.randn(384, device="cuda", dtype=out_dtype) if bias else None
    y = fused_linear_fp8(xq, wq, sx, sw, b, act, out_dtype=out_dtype)
    ref = (xq.double() * sx.double()) @ (wq.double() * sw.double()).T
    ref = ref_act(ref + (b.double() if bias else 0), act)
    assert y.dtype == out_dtype and y.shape == (3, 64, 384) and y.device.type == "cuda"
    assert rel(y, ref) < 1e-2
    cpu = fused_linear_fp8(xq.cpu(), wq.cpu(), sx.cpu(), sw.cpu(),
                           None if b is None else b.cpu(), act, out_dtype=out_dtype)
    assert rel(y.cpu(), cpu) < 1e-2  # the CPU backend's emulation agrees


@pytest.mark.skipif(_gpu_without_fp8(), reason="cuBLASLt fp8 needs compute capability >= 8.9")
def test_fp8_forward_in_a_cuda_graph():
    from cuweave.torch import fused_linear_fp8, quantize_fp8

    torch.manual_seed(8)
    (xq, sx), (wq, sw) = (quantize_fp8(torch.randn(128, 256, device="cuda")),
                          quantize_fp8(torch.randn(512, 256, device="cuda")))
    b = torch.randn(512, device="cuda", dtype=torch.bfloat16)
    fused_linear_fp8(xq, wq, sx, sw, b, "gelu")  # warm-up: plans the product
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = fused_linear_fp8(xq, wq, sx, sw, b, "gelu")
    new_x, new_sx = quantize_fp8(torch.randn(128, 256, device="cuda") * 3)
    xq.copy_(new_x)
    sx.copy_(new_sx)  # the scale is read when the product runs
    graph.replay()
    torch.cuda.synchronize()
    assert rel(y, fused_linear_fp8(xq, wq, sx, sw, b, "gelu")) < 1e-6
