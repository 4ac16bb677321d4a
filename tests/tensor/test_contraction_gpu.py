"""cuweave.tensor on cuTENSOR (GPU machine: needs libcutensor, e.g. CUWEAVE_CUTENSOR_PATH):
every dtype x operator x alpha/beta x layout against float64 einsum, for torch and CuPy device
operands and NumPy host operands; ternary contractions; broadcasting; in-place results;
streams; compute types; autotuning and JIT; the function forms' cache."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave.tensor import (
    BinaryContraction,
    ComputeDesc,
    ContractionJitMode,
    Operator,
    TernaryContraction,
    binary_contraction,
    plan_cache,
    ternary_contraction,
)
from tests.tensor.cases import BINARY, DTYPES, LAYOUTS, TERNARY, check, random, reference

pytestmark = pytest.mark.gpu

DTYPE_OPS = [(d, op) for d in DTYPES for op in ("identity", "conj")
             if op == "identity" or "complex" in d]
SCALARS = ((1.0, None), (-0.75, 0.5))


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def _cupy():
    return pytest.importorskip("cupy")


def _device(x: np.ndarray, pkg: str, dtype: str):
    """``x`` (float64/complex128 values) as a C-contiguous device array of ``dtype``."""
    if pkg == "torch":
        torch = _torch()
        return torch.from_numpy(np.ascontiguousarray(x)).to("cuda").to(getattr(torch, dtype))
    cp = _cupy()
    return cp.asarray(np.ascontiguousarray(x)).astype(dtype)


def _layout(x, layout: str, pkg: str):
    """The device array ``x``'s values in ``layout`` (cases.laid_out, in the package)."""
    n = x.ndim
    if layout == "dense":
        return x
    if layout == "transposed":
        if pkg == "torch":
            rev = tuple(reversed(range(n)))
            return x.permute(rev).contiguous().permute(rev)
        return _cupy().ascontiguousarray(x.T).T
    if layout == "strided":
        big_shape = tuple(2 * s for s in x.shape)
        if pkg == "torch":
            big = _torch().zeros(big_shape, dtype=x.dtype, device=x.device)
        else:
            big = _cupy().zeros(big_shape, dtype=x.dtype)
        view = big[tuple(slice(None, None, 2) for _ in range(n))]
        view[...] = x
        return view
    axis = next(i for i, s in enumerate(x.shape) if s > 1)
    row = x[tuple(slice(0, 1) if i == axis else slice(None) for i in range(n))]
    return row.expand(x.shape) if pkg == "torch" else _cupy().broadcast_to(row, x.shape)


def _host(y) -> np.ndarray:
    mod = type(y).__module__.split(".")[0]
    if mod == "torch":
        y = y.detach().cpu()
        return (y.to(y.dtype.to_complex() if y.is_complex() else _torch().float64)).numpy()
    if mod == "cupy":
        return y.get()
    return np.asarray(y)


def _values(shape, dtype, seed):
    """float64/complex128 data; :func:`_device` rounds it to ``dtype`` and the references read
    the device arrays back, so they see exactly the operands' values."""
    return random(shape, "complex128" if "complex" in dtype else "float64", seed)


@pytest.mark.parametrize("dtype, op", DTYPE_OPS)
@pytest.mark.parametrize("alpha, beta", SCALARS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_grid(dtype, op, alpha, beta, layout):
    expr, shapes = BINARY[1]
    a = _layout(_device(_values(shapes[0], dtype, 1), "torch", dtype), layout, "torch")
    b = _layout(_device(_values(shapes[1], dtype, 2), "torch", dtype), layout, "torch")
    c = None if beta is None else _device(_values((3, 4), dtype, 3), "torch", dtype)
    conj = op == "conj"
    q = (np.array([Operator.OP_CONJ, Operator.OP_CONJ, 1], np.int32) if conj else None)
    r = binary_contraction(expr, a, b, c=c, alpha=alpha, beta=beta, qualifiers=q)
    assert r.is_cuda and r.dtype == a.dtype
    want = reference(expr, [_host(a), _host(b)], (conj, conj), alpha, beta,
                     None if c is None else _host(c))
    check(_host(r), want, dtype, f"torch {layout}")


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "bfloat16"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cupy(dtype, layout):
    expr, shapes = BINARY[3]
    a = _layout(_device(_values(shapes[0], dtype, 1), "cupy", dtype), layout, "cupy")
    b = _layout(_device(_values(shapes[1], dtype, 2), "cupy", dtype), "dense", "cupy")
    r = binary_contraction(expr, a, b, alpha=0.5)
    assert type(r).__module__.startswith("cupy")
    check(_host(r), reference(expr, [_host(a), _host(b)], (), 0.5), dtype, f"cupy {layout}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_host_operands_on_the_gpu(dtype):
    pytest.importorskip("ml_dtypes")
    expr, shapes = BINARY[2]
    a, b = random(shapes[0], dtype, 1), random(shapes[1], dtype, 2)
    c = random((3, 4, 2), dtype, 3)
    r = binary_contraction(expr, a, b.transpose(0, 2, 1).copy().transpose(0, 2, 1), c=c,
                           alpha=2.0, beta=-1.0)
    assert isinstance(r, np.ndarray) and r.dtype == a.dtype
    check(r, reference(expr, [a, b], (), 2.0, -1.0, c), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("expr, shapes", TERNARY)
def test_ternary(dtype, expr, shapes):
    xs = [_device(_values(s, dtype, i), "torch", dtype) for i, s in enumerate(shapes)]
    out_shape = np.einsum(expr, *(np.zeros(s) for s in shapes)).shape
    d = _device(_values(out_shape, dtype, 7), "torch", dtype)
    r = ternary_contraction(expr, *xs, d=d, alpha=0.5, beta=2.0)
    check(_host(r), reference(expr, [_host(x) for x in xs], (), 0.5, 2.0, _host(d)), dtype)


@pytest.mark.parametrize("expr, shapes", [
    ("bij,bjk->bik", [(1, 4, 5), (3, 5, 2)]),    # extent-1 batch broadcast
    ("ijk,jl->il", [(3, 4, 5), (4, 2)]),          # k only in a: summed
    ("ii,ij->j", [(4, 4), (4, 3)]),               # a diagonal
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 2)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
])
def test_special_modes(expr, shapes):
    xs = [_device(_values(s, "float64", i), "torch", "float64") for i, s in enumerate(shapes)]
    r = binary_contraction(expr, *xs)
    check(_host(r), reference(expr, [_host(x) for x in xs]), "float64", expr)


def test_contracted_stride_zero_mode():
    torch = _torch()
    a = torch.randn(4, 1, device="cuda", dtype=torch.float64).expand(4, 6)  # j: stride 0
    b = torch.randn(6, 3, device="cuda", dtype=torch.float64)
    r = binary_contraction("ij,jk->ik", a, b)
    check(_host(r), reference("ij,jk->ik", [_host(a), _host(b)]), "float64")


def test_in_place_and_addend_layouts():
    torch = _torch()
    a = torch.randn(8, 6, device="cuda", dtype=torch.float32)
    b = torch.randn(6, 5, device="cuda", dtype=torch.float32)
    c = torch.randn(5, 8, device="cuda", dtype=torch.float32).T  # another layout than D's
    want = reference("ij,jk->ik", [_host(a), _host(b)], (), 1.0, 0.5, _host(c))
    out = torch.full((5, 8), float("nan"), device="cuda").T
    assert binary_contraction("ij,jk->ik", a, b, c=c, beta=0.5, out=out) is out
    check(_host(out), want, "float32")
    row = torch.randn(5, device="cuda")
    r = binary_contraction("ij,jk->ik", a, b, c=row, beta=1.0)
    check(_host(r), reference("ij,jk->ik", [_host(a), _host(b)], (), 1.0, 1.0,
                              np.broadcast_to(_host(row), (8, 5))), "float32")
    c2 = c.clone()
    r = binary_contraction("ij,jk->ik", a, b, c=c2, beta=0.5, out=c2)  # in place on c
    check(_host(r), want, "float32")


def test_lazy_conjugate_tensor():
    torch = _torch()
    a = torch.randn(4, 5, dtype=torch.complex64, device="cuda")
    b = torch.randn(5, 3, dtype=torch.complex64, device="cuda")
    r = binary_contraction("ij,jk->ik", a.conj(), b)
    check(_host(r), reference("ij,jk->ik", [_host(a), _host(b)], (True,)), "complex64")


def test_stream_and_blocking():
    torch = _torch()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a = torch.randn(64, 32, device="cuda")
        b = torch.randn(32, 16, device="cuda")
    r = binary_contraction("ij,jk->ik", a, b, stream=s, options={"blocking": True})
    check(_host(r), reference("ij,jk->ik", [_host(a), _host(b)]), "float32")


@pytest.mark.parametrize("compute, tol", [("TF32", 5e-3), ("3XTF32", 1e-5), ("16BF", 3e-2)])
def test_compute_types(compute, tol):
    torch = _torch()
    a = torch.randn(64, 96, device="cuda")
    b = torch.randn(96, 32, device="cuda")
    r = binary_contraction("ij,jk->ik", a, b,
                           options={"compute_type": getattr(ComputeDesc, "COMPUTE_" + compute)()})
    want = reference("ij,jk->ik", [_host(a), _host(b)])
    assert np.linalg.norm(_host(r) - want) / np.linalg.norm(want) < tol


def test_stateful_autotune_jit_and_reset():
    torch = _torch()
    a = torch.randn(32, 48, 16, device="cuda")
    b = torch.randn(16, 48, 24, device="cuda")
    expr = "ijk,kjl->il"
    with BinaryContraction(expr, a, b) as bc:
        bc.plan_preference.jit = ContractionJitMode.DEFAULT
        bc.plan()
        check(_host(bc.execute()), reference(expr, [_host(a), _host(b)]), "float32")
        bc.autotune(iterations=3)
        check(_host(bc.execute(alpha=2.0)), reference(expr, [_host(a), _host(b)], (), 2.0),
              "float32")
        a2 = torch.randn_like(a)
        bc.reset_operands(a=a2)
        check(_host(bc.execute()), reference(expr, [_host(a2), _host(b)]), "float32")
        bc.execute(release_workspace=True)
    xs = [torch.randn(s, device="cuda", dtype=torch.float64) for s in TERNARY[1][1]]
    expr = TERNARY[1][0]
    with TernaryContraction(expr, *xs) as tc:
        tc.plan()
        check(_host(tc.execute()), reference(expr, [_host(x) for x in xs]), "float64")
        tc.autotune(iterations=2)  # fused, or two binary contractions where they time faster
        check(_host(tc.execute(alpha=3.0)), reference(expr, [_host(x) for x in xs], (), 3.0),
              "float64")
        x0 = torch.randn_like(xs[0])
        tc.reset_operands(a=x0)
        check(_host(tc.execute()), reference(expr, [_host(x0)] + [_host(x) for x in xs[1:]]),
              "float64")


def test_function_form_cache_hits_with_new_tensors():
    torch = _torch()
    plan_cache.clear()
    b = torch.randn(16, 8, device="cuda")
    for seed in range(3):
        a = torch.randn(32, 16, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        r = binary_contraction("ij,jk->ik", a, b)
        check(_host(r), reference("ij,jk->ik", [_host(a), _host(b)]), "float32")
    assert plan_cache.hits >= 2
