"""Safety of matmul on the CPU: in-place targets (views, overlap, read-only), oversized dense
copies, validation independent of the plan cache, BLAS thread limits under concurrency."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from cuweave._internal.errors import InvalidOperandError, InvalidOptionError
from cuweave.linalg.advanced import Matmul, matmul
from cuweave.linalg.advanced._function import plan_cache
from tests.references import MATMUL_TOL as TOL
from tests.references import rel_l2

CPU = {"execution": "cpu"}
INPLACE = {"inplace": True}


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("cols", [slice(0, 5), slice(3, 8), slice(0, 10, 2)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_inplace_into_a_view_of_a_wider_buffer(cols, order):
    rng = np.random.default_rng(11)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    buf = np.asarray(rand(rng, (4, 10)), order=order)
    before = buf.copy()
    c = buf[:, cols]
    want = 2.0 * (a @ b) + 0.5 * c.astype(np.float64)
    got = matmul(a, b, c, alpha=2.0, beta=0.5, options=INPLACE, **CPU)
    assert got is c
    assert rel_l2(buf[:, cols], want) < TOL["float32"]
    outside = np.ones(buf.shape, bool)
    outside[:, cols] = False
    np.testing.assert_array_equal(buf[outside], before[outside])  # neighbours untouched


def test_inplace_stateful_reset_into_view():
    rng = np.random.default_rng(12)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    buf = np.zeros((4, 8), np.float32)
    with Matmul(a, b, buf[:, :5], beta=0.0, options=INPLACE, **CPU) as mm:
        mm.plan()
        mm.execute()
        np.testing.assert_allclose(buf[:, :5], a @ b, rtol=1e-5, atol=1e-5)
        assert not buf[:, 5:].any()


@pytest.mark.parametrize("make", [
    lambda: np.broadcast_to(np.ones((1, 5), np.float32), (4, 5)),           # read-only, 0 stride
    lambda: np.lib.stride_tricks.as_strided(np.zeros(8, np.float32), (4, 5), (4, 4)),  # window
    lambda: np.lib.stride_tricks.as_strided(np.zeros(5, np.float32), (4, 5), (0, 4)),  # 0 stride
])
def test_inplace_overlapping_c_refused_before_work(make):
    rng = np.random.default_rng(13)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    c = make()
    base = c.base if c.base is not None else c
    snapshot = np.array(base, copy=True)
    with pytest.raises(ValueError, match=r"\bc must not overlap itself"):
        matmul(a, b, c, beta=1.0, options=INPLACE, **CPU)
    np.testing.assert_array_equal(np.asarray(base), snapshot)


def test_inplace_read_only_c_refused():
    rng = np.random.default_rng(14)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    c = np.zeros((4, 5), np.float32)
    c.flags.writeable = False
    with pytest.raises(InvalidOperandError, match=r"c must be writable"):
        matmul(a, b, c, beta=1.0, options=INPLACE, **CPU)
    with Matmul(a, b, np.zeros((4, 5), np.float32), beta=1.0, options=INPLACE, **CPU) as mm:
        mm.plan()
        with pytest.raises(InvalidOperandError, match=r"c must be writable"):
            mm.reset_operands(c=c)


@pytest.mark.parametrize("which", ["a", "b"])
def test_inplace_with_promoted_operand_returns_c(which):
    rng = np.random.default_rng(15)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    if which == "a":
        a = a[0].copy()
        c = np.zeros((1, 5), np.float32)
    else:
        b = b[:, 0].copy()
        c = np.zeros((4, 1), np.float32)
    got = matmul(a, b, c, beta=0.0, options=INPLACE, **CPU)
    assert got is c
    want = (np.atleast_2d(a) if which == "a" else a) @ (b if which == "a" else b[:, None])
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_huge_zero_stride_operand_refused_with_its_size():
    a = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (4, 2**33), (0, 0))
    b = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (2**33, 3), (0, 0))
    with pytest.raises(MemoryError, match=r"a must fit in memory .* 128\.0 GiB") as e:
        matmul(a, b, **CPU)
    assert isinstance(e.value, InvalidOperandError)


@pytest.mark.parametrize("bad", [2.0, True, np.float32(2), "2", np.bool_(True)])
def test_epilog_validated_before_the_plan_cache(bad):
    rng = np.random.default_rng(16)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    plan_cache.clear()
    relu = matmul(a, b, epilog=2, **CPU)  # RELU: now cached
    np.testing.assert_allclose(relu, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-6)
    for _ in range(2):
        with pytest.raises(InvalidOptionError, match=r"epilog must be one of"):
            matmul(a, b, epilog=bad, **CPU)


def test_epilog_numpy_integer_is_its_value():
    rng = np.random.default_rng(17)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    got = matmul(a, b, epilog=np.int64(2), **CPU)
    np.testing.assert_allclose(got, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-6)


def _blas_threads():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_concurrent_num_threads_restore_blas_threads():
    before = _blas_threads()
    if not before:
        pytest.skip("NumPy's BLAS is not controllable by threadpoolctl here")
    rng = np.random.default_rng(18)
    a = rand(rng, (48, 48))
    want = a.astype(np.float64) @ a
    errors = []
    barrier = threading.Barrier(6)

    def work(n):
        barrier.wait()
        for _ in range(40):
            got = matmul(a, a, execution={"name": "cpu", "num_threads": n})
            if rel_l2(got, want) > TOL["float32"]:
                errors.append(n)

    threads = [threading.Thread(target=work, args=(1 + i % 3,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert _blas_threads() == before


# ---- NumPy-valid layouts outside cuBLASLt's frame (computed on copies on the CPU) -------------
def _layout_cases():
    rng = np.random.default_rng(19)
    f = np.asfortranarray
    return [
        ("F-ordered batch", f(rand(rng, (2, 4, 3))), rand(rng, (2, 3, 5))),
        ("F-ordered batch b", rand(rng, (2, 4, 3)), f(rand(rng, (2, 3, 5)))),
        ("partial broadcast", rand(rng, (2, 1, 4, 3)), rand(rng, (3, 3, 5))),
        ("5-D broadcast", rand(rng, (2, 1, 2, 1, 4, 3)), rand(rng, (1, 2, 1, 2, 3, 5))),
        ("transposed batch", rand(rng, (3, 4, 3)).transpose(1, 0, 2), rand(rng, (3, 5))),
    ]


@pytest.mark.parametrize("name, a, b", _layout_cases(), ids=[c[0] for c in _layout_cases()])
def test_numpy_valid_layouts_on_the_cpu(name, a, b):
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = matmul(a, b, **CPU)
    assert got.shape == want.shape
    assert rel_l2(got, want) < TOL["float32"]
    with Matmul(a, b, **CPU) as mm:  # the stateful form, reset with new data of that layout
        mm.plan()
        a2 = np.empty_like(a)  # same strides
        a2[...] = 2 * a
        assert a2.strides == a.strides
        mm.reset_operands(a=a2)
        assert rel_l2(mm.execute(), 2 * want) < TOL["float32"]


@pytest.mark.parametrize("inplace", [False, True])
def test_c_with_more_batch_axes_than_the_product_is_refused(inplace):
    """nvmath-python's rule (issue 33 item 14, fuzz finding F12): C's batch dimensions must be
    the product's; a (1, M, N) c with 2-D a and b was once returned as (M, N) (NumPy would
    give (1, M, N)), now it is refused before any work, c untouched."""
    rng = np.random.default_rng(20)
    a, b, c = rand(rng, (4, 3)), rand(rng, (3, 5)), rand(rng, (1, 4, 5))
    keep = c.copy()
    with pytest.raises(InvalidOperandError, match=r"^The batch dimension of operand C \(1,\) "
                                                  r"must match with that of the other operands"):
        matmul(a, b, c, beta=0.5, options={"inplace": inplace}, **CPU)
    np.testing.assert_array_equal(c, keep)


# ---- aux inputs --------------------------------------------------------------------------
@pytest.mark.parametrize("bias_shape", [(16,), (1, 16)])
def test_square_aux_frame_survives_many_forwards(bias_shape):
    """An M == N relu_aux keeps its forward frame however many forwards come in between (the
    frame table never evicts a live entry)."""
    rng = np.random.default_rng(40)
    x, w = rand(rng, (16, 8)), rand(rng, (16, 8))
    bias = rand(rng, bias_shape)
    _, aux = matmul(x, w.T, epilog="relu_aux_bias", epilog_inputs={"bias": bias}, **CPU)
    pre = x.astype(np.float64) @ w.T.astype(np.float64)
    pre += bias[:, None] if bias.ndim == 1 else bias
    kept = [matmul(rand(rng, (16, 8)), rand(rng, (8, 16)), epilog="relu_aux", **CPU)
            for _ in range(300)]
    g, h = rand(rng, (16, 4)), rand(rng, (4, 16))
    d, grads = matmul(g, h, epilog="drelu_bgrad", epilog_inputs={"relu_aux": aux["relu_aux"]},
                      **CPU)
    want = (g.astype(np.float64) @ h) * (pre > 0)
    assert rel_l2(d, want) < TOL["float32"]
    assert len(kept) == 300


def test_square_aux_of_unknown_frame_is_refused():
    rng = np.random.default_rng(41)
    x, w = rand(rng, (16, 8)), rand(rng, (8, 16))
    _, aux = matmul(x, w, epilog="relu_aux", **CPU)
    copy = np.asfortranarray(aux["relu_aux"].copy())  # same layout, unknown provenance
    with pytest.raises(InvalidOperandError, match=r"relu_aux'\] must be the relu_aux array its "
                                                  r"forward matmul returned"):
        matmul(rand(rng, (16, 4)), rand(rng, (4, 16)), epilog="drelu",
               epilog_inputs={"relu_aux": copy}, **CPU)
    # a non-square problem has one possible frame: copies are fine there
    _, aux = matmul(rand(rng, (16, 8)), rand(rng, (8, 24)), epilog="relu_aux", **CPU)
    copy = np.asfortranarray(aux["relu_aux"].copy())
    g, h = rand(rng, (16, 4)), rand(rng, (4, 24))
    np.testing.assert_array_equal(
        matmul(g, h, epilog="drelu", epilog_inputs={"relu_aux": copy}, **CPU),
        matmul(g, h, epilog="drelu", epilog_inputs={"relu_aux": aux["relu_aux"]}, **CPU))


@pytest.mark.parametrize("epilog, forward, name, cast", [
    ("drelu", "relu_aux", "relu_aux", np.float32),
    ("drelu", "relu_aux", "relu_aux", np.int8),
    ("dgelu", "gelu_aux", "gelu_aux", np.float64),
    ("dgelu", "gelu_aux", "gelu_aux", np.float16),
])
def test_aux_input_of_the_wrong_dtype(epilog, forward, name, cast):
    rng = np.random.default_rng(42)
    a, b = rand(rng, (12, 8)), rand(rng, (8, 20))
    _, aux = matmul(a, b, epilog=forward, **CPU)
    bad = np.asfortranarray(aux[name].astype(cast)) if aux[name].dtype.itemsize != \
        np.dtype(cast).itemsize else aux[name].view(cast)
    with pytest.raises(InvalidOperandError, match=rf"^epilog_inputs\['{name}'\] dtype must be"):
        matmul(a, b, epilog=epilog, epilog_inputs={name: bad}, **CPU)


def test_square_1d_bias_is_the_m_bias_and_1_by_n_the_row_bias():
    rng = np.random.default_rng(43)
    a, b, bias = rand(rng, (6, 3)), rand(rng, (3, 6)), rand(rng, (6,))
    ab = a.astype(np.float64) @ b
    got = matmul(a, b, epilog="bias", epilog_inputs={"bias": bias}, **CPU)
    assert rel_l2(got, ab + bias[:, None]) < TOL["float32"]  # nvmath: along M
    got = matmul(a, b, epilog="bias", epilog_inputs={"bias": bias[None, :]}, **CPU)
    assert rel_l2(got, ab + bias[None, :]) < TOL["float32"]  # EXT (1, N): along N
