"""GPU counterparts of test_matmul_safety.py / test_matmul_api.py: in-place targets that are
views, BGRADA/BGRADB layouts, square aux frames, algorithms and pruning, host layouts outside
cuBLASLt's frame. Run with ``-m gpu``."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave.linalg.advanced import Matmul, matmul
from tests.references import rel_l2

pytestmark = pytest.mark.gpu
TOL = 1e-4  # float32 (cuBLASLt's COMPUTE_32F) against float64 references


def torch():
    return pytest.importorskip("torch")


def dev(x):
    return torch().from_numpy(np.ascontiguousarray(x)).cuda()


def host64(x):
    return x.detach().cpu().double().numpy()


def rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("cols", [slice(0, 5), slice(3, 8)])
def test_device_inplace_into_a_column_slice(cols):
    t = torch()
    rng = np.random.default_rng(50)
    a, b = dev(rand(rng, (4, 3))), dev(rand(rng, (3, 5)))
    buf = dev(rand(rng, (4, 10)))
    before = host64(buf)
    c = buf[:, cols]
    want = host64(a) @ host64(b) + 0.5 * host64(c)
    got = matmul(a, b, c, beta=0.5, options={"inplace": True})
    t.cuda.synchronize()
    assert got.data_ptr() == c.data_ptr()
    after = host64(buf)
    assert rel_l2(after[:, cols], want) < TOL
    outside = np.ones(after.shape, bool)
    outside[:, cols] = False
    np.testing.assert_array_equal(after[outside], before[outside])


@pytest.mark.parametrize("order", ["C", "F"])
def test_host_inplace_into_a_column_slice_on_cuda(order):
    rng = np.random.default_rng(51)
    a, b = rand(rng, (6, 3)), rand(rng, (3, 5))
    buf = np.asarray(rand(rng, (6, 12)), order=order)
    before = buf.copy()
    c = buf[:, 2:7]
    want = a.astype(np.float64) @ b + 2.0 * c
    got = matmul(a, b, c, beta=2.0, options={"inplace": True}, execution="cuda")
    assert got is c
    assert rel_l2(buf[:, 2:7], want) < TOL
    outside = np.ones(buf.shape, bool)
    outside[:, 2:7] = False
    np.testing.assert_array_equal(buf[outside], before[outside])


def test_device_overlapping_inplace_c_refused():
    t = torch()
    a, b = t.randn(4, 3, device="cuda"), t.randn(3, 5, device="cuda")
    c = t.zeros(1, 5, device="cuda").expand(4, 5)
    with pytest.raises(ValueError, match=r"\bc must not overlap itself"):
        matmul(a, b, c, beta=1.0, options={"inplace": True})


def test_device_inplace_with_a_1d_operand_returns_c():
    t = torch()
    a, b = t.randn(3, device="cuda"), t.randn(3, 5, device="cuda")
    c = t.zeros(1, 5, device="cuda")
    got = matmul(a, b, c, beta=0.0, options={"inplace": True})
    assert got is c
    assert rel_l2(host64(c)[0], host64(a) @ host64(b)) < TOL


def test_bgradb_with_a_degenerate_b_on_cuda():
    """matmul(x.T, dz, epilog="bgradb") with x (128, 16) and dz (128, 1): was refused."""
    rng = np.random.default_rng(52)
    x, dz = dev(rand(rng, (128, 16))), dev(rand(rng, (128, 1)))
    r, aux = matmul(x.T, dz, epilog="bgradb")
    assert rel_l2(host64(r), host64(x).T @ host64(dz)) < TOL
    assert rel_l2(host64(aux["bgradb"]).ravel(), host64(dz).sum(0)) < TOL


@pytest.mark.parametrize("epilog, order_a, order_b", [("bgrada", "C", "C"), ("bgradb", "F", "F")])
def test_bgrad_host_operands_in_any_order_on_cuda(epilog, order_a, order_b):
    rng = np.random.default_rng(53)
    a = np.asarray(rand(rng, (32, 16)), order=order_a)
    b = np.asarray(rand(rng, (16, 24)), order=order_b)
    r, aux = matmul(a, b, epilog=epilog, execution="cuda")
    assert rel_l2(r, a.astype(np.float64) @ b) < TOL
    want = a.astype(np.float64).sum(-1) if epilog == "bgrada" else b.astype(np.float64).sum(0)
    assert rel_l2(np.asarray(aux[epilog]).ravel(), want) < TOL


def test_square_aux_frame_after_many_forwards_on_cuda():
    t = torch()
    rng = np.random.default_rng(54)
    x, w, bias = dev(rand(rng, (16, 8))), dev(rand(rng, (16, 8))), dev(rand(rng, (1, 16)))
    _, aux = matmul(x, w.T, epilog="relu_aux_bias", epilog_inputs={"bias": bias})
    pre = host64(x) @ host64(w).T + host64(bias)
    kept = [matmul(t.randn(16, 8, device="cuda"), t.randn(8, 16, device="cuda"),
                   epilog="relu_aux") for _ in range(300)]
    g, h = dev(rand(rng, (16, 4))), dev(rand(rng, (4, 16)))
    d, _ = matmul(g, h, epilog="drelu_bgrad", epilog_inputs={"relu_aux": aux["relu_aux"]})
    assert rel_l2(host64(d), (host64(g) @ host64(h)) * (pre > 0)) < TOL
    assert len(kept) == 300


def test_prune_and_unplanned_algorithms_on_cuda():
    t = torch()
    a, b = t.randn(512, 256, device="cuda"), t.randn(256, 384, device="cuda")
    with Matmul(a, b, options={"compute_type": "COMPUTE_32F"}) as mm:
        planned = mm.plan(preferences={"limit": 4})
        if len(planned) < 2:
            pytest.skip(f"the heuristics returned {len(planned)} algorithm for this problem")
        kept = mm.autotune(iterations=2, prune=1)
        assert len(kept) == 1 and kept[0] in planned
        assert mm.algorithms == kept
        dropped = next(x for x in planned if x not in kept)
        with pytest.raises(ValueError, match=r"^algorithm must be one of the planned"):
            mm.execute(algorithm=dropped)
        r = mm.execute(algorithm=kept[0])
        assert rel_l2(host64(r), host64(a) @ host64(b)) < TOL


@pytest.mark.parametrize("shapes", [((2, 1, 4, 3), (3, 3, 5)), ((2, 1, 2, 1, 4, 3),
                                                                (1, 2, 1, 2, 3, 5))])
def test_host_batch_broadcasting_on_cuda(shapes):
    rng = np.random.default_rng(55)
    a, b = rand(rng, shapes[0]), rand(rng, shapes[1])
    r = matmul(a, b, execution="cuda")
    want = a.astype(np.float64) @ b
    assert r.shape == want.shape and rel_l2(r, want) < TOL


def test_host_f_ordered_batch_on_cuda():
    rng = np.random.default_rng(56)
    a = np.asfortranarray(rand(rng, (3, 8, 6)))
    b = rand(rng, (3, 6, 5))
    r = matmul(a, b, execution="cuda")
    assert rel_l2(r, a.astype(np.float64) @ b) < TOL


@pytest.mark.parametrize("result_type", ["float32", "bfloat16"])
def test_fp8_bfloat16_bias_on_cuda(result_type):
    """cuBLASLt's fp8 table: a float32 or bfloat16 result takes a bfloat16 bias."""
    t = torch()
    rng = np.random.default_rng(57)
    a = dev(rand(rng, (64, 64))).to(t.float8_e4m3fn)
    b = dev(rand(rng, (64, 64))).to(t.float8_e4m3fn).T  # column-major: cuBLASLt's fp8 TN form
    bias = dev(rand(rng, (64,))).to(t.bfloat16)
    r = matmul(a, b, epilog="bias", epilog_inputs={"bias": bias},
               quantization_scales={"a": 1.0, "b": 1.0}, options={"result_type": result_type})
    assert r.dtype == getattr(t, result_type)
    want = host64(a.float()) @ host64(b.float()) + host64(bias.float())[:, None]
    # Hopper's fp8 MMA accumulates in reduced precision (7.6e-5 measured on the H200)
    assert rel_l2(host64(r.float()), want) < (1e-3 if result_type == "float32" else 1e-2)


@pytest.mark.parametrize("scale", [0.25, "tensor"])
def test_fp8_gelu_aux_with_an_aux_scale_and_amax_on_cuda(scale):
    """nvmath's example24: an e4m3 ``gelu_aux`` scaled by ``epilog_inputs[
    "aux_quantization_scale"]`` (a float or a float32 device tensor), its amax, an e4m3 result
    (cuBLASLt's rule for fp8 aux outputs; other combinations are refused at plan time)."""
    t = torch()
    rng = np.random.default_rng(58)
    a = dev(rand(rng, (64, 64))).to(t.float8_e4m3fn)
    b = dev(rand(rng, (64, 64))).to(t.float8_e4m3fn).T
    s = t.tensor([0.25], device="cuda") if scale == "tensor" else scale
    r, aux = matmul(a, b, epilog="gelu_aux", quantization_scales={"a": 1.0, "b": 1.0, "d": 1.0},
                    preferences={"epilog": {"aux_type": "float8_e4m3fn", "aux_amax": True}},
                    epilog_inputs={"aux_quantization_scale": s})
    assert r.dtype == t.float8_e4m3fn and set(aux) == {"gelu_aux", "gelu_aux_amax"}
    pre = host64(a.float()) @ host64(b.float())
    got = host64(aux["gelu_aux"].float())[:64, :64]
    assert aux["gelu_aux"].dtype == t.float8_e4m3fn
    assert np.max(np.abs(got - 0.25 * pre)) <= np.max(np.abs(0.25 * pre)) / 16 + 1e-6
    amax = float(aux["gelu_aux_amax"].reshape(-1)[0].cpu())
    assert abs(amax - np.abs(pre).max()) <= 1e-3 * np.abs(pre).max()
    with pytest.raises(ValueError, match="aux_type must be 'float8_e4m3fn' only"):
        matmul(a, b, epilog="gelu_aux", quantization_scales={"a": 1.0, "b": 1.0},
               options={"result_type": "bfloat16"},
               preferences={"epilog": {"aux_type": "float8_e4m3fn"}},
               epilog_inputs={"aux_quantization_scale": s})


@pytest.mark.parametrize("epilog, order_a, order_b", [("bgrada", "C", "C"), ("bgradb", "F", "F")])
def test_bgrad_device_operands_in_any_order(epilog, order_a, order_b):
    """Device operands in the order cuBLASLt's BGRADA/BGRADB refuse: copied per run."""
    rng = np.random.default_rng(59)
    a, b = rand(rng, (32, 16)), rand(rng, (16, 24))
    a_dev = dev(a) if order_a == "C" else dev(a.T).T
    b_dev = dev(b) if order_b == "C" else dev(b.T).T
    for _ in range(2):
        r, aux = matmul(a_dev, b_dev, epilog=epilog)
        assert rel_l2(host64(r), a.astype(np.float64) @ b) < TOL
        want = a.astype(np.float64).sum(-1) if epilog == "bgrada" else b.astype(
            np.float64).sum(0)
        assert rel_l2(host64(aux[epilog]).ravel(), want) < TOL


def test_device_partial_batch_broadcasting_is_copied():
    rng = np.random.default_rng(60)
    a, b = rand(rng, (2, 1, 8, 6)), rand(rng, (3, 6, 5))
    r = matmul(dev(a), dev(b))
    want = a.astype(np.float64) @ b
    assert tuple(r.shape) == want.shape and rel_l2(host64(r), want) < TOL
    f = np.asfortranarray(rand(rng, (3, 8, 6)))  # batched F order: no single batch stride
    a_f = torch().from_numpy(f).cuda()  # .cuda() keeps the F strides (1, 3, 24)
    r = matmul(a_f, dev(b))
    assert rel_l2(host64(r), f.astype(np.float64) @ b) < TOL
