"""Operand wrapping, outputs in the operands' package, and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave._internal.arrays import check_same_place
from cuweave._internal.dtypes import from_float32, to_float32
from cuweave._internal.errors import InvalidOperandError
from cuweave._internal.packages import empty, wrap_operand

torch = pytest.importorskip("torch")

DTYPES = ["float16", "float32", "float64", "complex64", "complex128", "int8", "int32"]


class DLPackOnly:
    """A producer exposing only the DLPack protocol (like JAX or cuda.core buffers)."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kw):
        return self._arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F", "T", "sliced"])
def test_numpy_round_trip(dtype, layout):
    base = (np.random.default_rng(0).standard_normal((6, 10)) * 10).astype(dtype)
    x = {"C": base, "F": np.asfortranarray(base), "T": base.T, "sliced": base[1::2, ::3]}[layout]
    op = wrap_operand(x, "a")
    assert (op.package, op.device, op.dtype) == ("numpy", "cpu", dtype)
    assert op.shape == x.shape
    assert op.strides == tuple(s // x.itemsize for s in x.strides)
    assert op.ptr == x.ctypes.data
    view = op.host_array()
    assert np.shares_memory(view, x) and np.array_equal(view, x)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64",
                                   "float8_e4m3fn", "float8_e5m2"])
def test_torch_cpu_round_trip(dtype):
    t = (torch.randn(5, 7) * 4).to(getattr(torch, dtype)).T
    op = wrap_operand(t, "b")
    assert (op.package, op.device, op.dtype) == ("torch", "cpu", dtype)
    assert op.shape == (7, 5) and op.strides == (1, 7)
    assert op.ptr == t.data_ptr()
    host = op.host_array()
    ref = t.to(torch.complex128 if dtype.startswith("complex") else torch.float64).numpy()
    assert np.array_equal(to_float32(host, dtype).astype(ref.dtype), ref)


def test_torch_lazy_conjugation_bit():
    t = torch.randn(3, 4, dtype=torch.complex64)
    op = wrap_operand(t.conj(), "a")
    assert op.conj
    assert np.array_equal(op.host_array(), t.numpy())  # memory, not the logical values
    assert not wrap_operand(t, "a").conj


def test_torch_lazy_negation_is_resolved():
    t = torch.randn(3, 4, dtype=torch.complex64)
    u = t.conj().imag  # a view whose memory holds -values (torch's negative bit)
    assert u.is_neg()
    op = wrap_operand(u, "a")
    assert np.array_equal(op.host_array(), -t.numpy().imag)


def test_dlpack_only_host_producer():
    x = np.arange(12.0).reshape(3, 4)[:, ::2]
    op = wrap_operand(DLPackOnly(x), "c")
    assert op.package == "dlpack" and op.shape == (3, 2) and op.strides == (4, 2)
    assert np.array_equal(op.host_array(), x)


@pytest.mark.parametrize("package", ["numpy", "torch"])
@pytest.mark.parametrize("perm", [(0, 1, 2), (0, 2, 1), (2, 1, 0)])
def test_empty_in_operand_package(package, perm):
    ref = wrap_operand(np.zeros(2) if package == "numpy" else torch.zeros(2), "a")
    out = empty(ref, (2, 3, 4), "float32", perm=perm)
    assert out.package == package and out.shape == (2, 3, 4)
    # dense, and the innermost axis is perm[-1]
    assert out.strides[perm[-1]] == 1 and out.is_dense()
    assert sorted(out.strides) == sorted([1, (2, 3, 4)[perm[-1]],
                                          (2, 3, 4)[perm[-1]] * (2, 3, 4)[perm[-2]]])


def test_empty_bfloat16_numpy_and_torch():
    for ref in (np.zeros(1), torch.zeros(1)):
        out = empty(wrap_operand(ref, "a"), (3, 2), "bfloat16")
        assert out.dtype == "bfloat16"
        vals = np.array([[1.5, -2.0], [3.0, 0.25], [8.0, -0.5]], np.float32)
        from_float32(vals, "bfloat16", out=out.host_array())
        assert np.array_equal(to_float32(out.host_array(), "bfloat16"), vals)


@pytest.mark.parametrize("bad", [1, 2.5, [1, 2], "abc", object(), None])
def test_unsupported_types_name_the_parameter(bad):
    with pytest.raises(InvalidOperandError, match=r"^a must be a NumPy or CuPy array"):
        wrap_operand(bad, "a")


def test_unknown_dtype():
    with pytest.raises(InvalidOperandError, match="dtype must be one of"):
        wrap_operand(np.zeros(3, dtype="U3"), "a")
    with pytest.raises(InvalidOperandError, match="dtype must be one of"):
        wrap_operand(np.zeros(3, dtype=[("x", "f4")]), "b")


def test_mixed_packages_and_places():
    with pytest.raises(InvalidOperandError, match="b must come from the same package as a"):
        check_same_place({"a": wrap_operand(np.zeros(2), "a"),
                          "b": wrap_operand(torch.zeros(2), "b")})
    assert check_same_place({"a": wrap_operand(np.zeros(2), "a"), "c": None,
                             "b": wrap_operand(np.ones(2), "b")}) == ("cpu", None, "numpy")


# ---------------------------------------------------------------- GPU ----------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "complex64",
                                   "float8_e4m3fn"])
def test_torch_cuda_round_trip(dtype):
    t = (torch.randn(6, 5, device="cuda") * 3).to(getattr(torch, dtype))[:, 1:]
    op = wrap_operand(t, "a")
    assert (op.package, op.device, op.device_id, op.dtype) == ("torch", "cuda", 0, dtype)
    assert op.ptr == t.data_ptr() and op.strides == t.stride()
    out = empty(op, (4, 3), dtype, perm=(1, 0), stream=torch.cuda.current_stream().cuda_stream)
    assert out.package == "torch" and out.obj.device.type == "cuda"
    assert out.strides == (1, 4)


@pytest.mark.gpu
def test_cupy_round_trip_and_output():
    cp = pytest.importorskip("cupy")
    x = cp.arange(24, dtype=cp.float32).reshape(4, 6)[:, ::2]
    op = wrap_operand(x, "a")
    assert (op.package, op.device, op.dtype) == ("cupy", "cuda", "float32")
    assert op.strides == (6, 2) and op.ptr == x.data.ptr
    out = empty(op, (3, 4), "complex64", perm=(1, 0))
    assert isinstance(out.obj, cp.ndarray) and out.obj.flags.f_contiguous


@pytest.mark.gpu
def test_dlpack_only_device_producer_and_device_array_export():
    cp = pytest.importorskip("cupy")
    x = cp.random.rand(5, 3).astype(cp.float64)
    op = wrap_operand(DLPackOnly(x), "a")
    assert (op.package, op.device, op.ptr, op.shape) == ("dlpack", "cuda", x.data.ptr, (5, 3))
    out = empty(op, (5, 3), "float64")
    assert out.package == "cuweave"
    arr = out.obj
    cp.asarray(arr)[...] = x  # through __cuda_array_interface__
    assert cp.array_equal(cp.from_dlpack(arr), x)
    t = torch.from_dlpack(arr)
    assert t.device.type == "cuda" and np.array_equal(t.cpu().numpy(), cp.asnumpy(x))
    assert np.array_equal(arr.copy_to_host(), cp.asnumpy(x))


@pytest.mark.gpu
def test_outputs_ordered_on_a_foreign_stream():
    s = torch.cuda.Stream()
    ref = wrap_operand(torch.zeros(1, device="cuda"), "a")
    out = empty(ref, (256, 256), "float32", stream=s.cuda_stream)
    with torch.cuda.stream(s):  # the block belongs to s's pool: usable there without races
        out.obj.fill_(2.0)
    s.synchronize()
    assert float(out.obj.sum()) == 2.0 * 256 * 256
    cp = pytest.importorskip("cupy")
    cs = cp.cuda.Stream()
    cref = wrap_operand(cp.zeros(1), "a")
    cout = empty(cref, (64,), "float64", stream=cs.ptr)
    assert isinstance(cout.obj, cp.ndarray)


@pytest.mark.gpu
def test_device_array_reports_and_orders_its_stream():
    cp = pytest.importorskip("cupy")
    s = torch.cuda.Stream()
    x = cp.arange(1 << 20, dtype=cp.float32)
    op = wrap_operand(DLPackOnly(x), "a")
    out = empty(op, (1 << 20,), "float32", stream=s.cuda_stream)
    arr = out.obj
    assert arr.__cuda_array_interface__["stream"] == s.cuda_stream
    with torch.cuda.stream(s):
        torch.from_dlpack(DLPackOnly(x)).mul_(1.0)  # some work on s
        dst = torch.as_tensor(arr, device="cuda")
        dst.copy_(torch.from_dlpack(DLPackOnly(x)))
    y = torch.from_dlpack(arr)  # consumer on the current stream: waits for s
    assert float(y[-1]) == float((1 << 20) - 1)
    assert np.array_equal(arr.copy_to_host()[:4], np.arange(4, dtype=np.float32))


@pytest.mark.gpu
def test_cai_only_producer():
    cp = pytest.importorskip("cupy")
    x = cp.ones((4, 4), dtype=cp.float32).T

    class CAIOnly:
        __cuda_array_interface__ = x.__cuda_array_interface__

    op = wrap_operand(CAIOnly(), "a")
    assert (op.package, op.device_id, op.strides) == ("cai", 0, (1, 4))


@pytest.mark.gpu
def test_mixed_devices_rejected():
    cp = pytest.importorskip("cupy")
    with pytest.raises(InvalidOperandError, match="b must be in the same memory space as a"):
        check_same_place({"a": wrap_operand(cp.zeros(2), "a"),
                          "b": wrap_operand(np.zeros(2), "b")})
