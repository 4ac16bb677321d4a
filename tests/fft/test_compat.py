"""nvmath-python 1.0 behaviours of cuweave.fft (CPU; the cuFFT path under the recording fakes).

Keys from plan arguments (batch axes rearranged share one), ``create_key_from_metadata``,
``estimate_workspace_size``, ``reset_operand`` of rearranged operands, execution dicts without
a name, in-place on self-overlapping views, exception types (typed, and the builtin nvmath
raises), masked arrays, and CPU execution that ignores any active ``scipy.fft`` backend.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft

import cuweave.fft as F
from cuweave._internal.errors import (
    CuweaveError,
    InvalidOperandError,
    InvalidOptionError,
    UnsupportedLayoutError,
)
from tests.fakes.cufft import fake_cuda
from tests.references import fft_reference as reference
from tests.references import fft_tol as tol
from tests.references import rel_l2, rng_array


@pytest.fixture
def fake():
    pytest.importorskip("torch")
    with fake_cuda() as f:
        yield f


# ---- keys -------------------------------------------------------------------------------
def test_rearranged_batch_axes_share_a_key():
    a, b = rng_array((2, 3, 64), "complex64"), rng_array((3, 2, 64), "complex64")
    assert F.FFT.create_key(a, axes=(2,)) == F.FFT.create_key(b, axes=(2,))
    assert F.FFT.create_key(a, axes=(2,)) != F.FFT.create_key(a, axes=(1,))
    c = np.moveaxis(rng_array((3, 2, 64), "complex64"), 0, 1)  # (2, 3, 64), strides (64, 128, 1)
    assert F.FFT.create_key(c, axes=(2,)) == F.FFT.create_key(a, axes=(2,))


def test_key_from_metadata_equals_key_from_operand():
    x = np.asfortranarray(rng_array((6, 40, 3), "float32"))
    strides = tuple(s // x.itemsize for s in x.strides)
    for axes in [(0,), (0, 1), None]:
        k = F.FFT.create_key_from_metadata(x.shape, "float32", "cpu", strides=strides,
                                           axes=axes, execution={"num_threads": 2})
        assert k == F.FFT.create_key(x, axes=axes, execution={"name": "cpu", "num_threads": 2})
    assert F.FFT.create_key_from_metadata((4, 16), "complex128", "cpu") == \
        F.FFT.create_key(np.zeros((4, 16), np.complex128))


@pytest.mark.parametrize("kwargs, match", [
    ({"memory_space": "gpu"}, "memory_space must be 'cpu' or 'cuda'"),
    ({"dtype": "int32"}, "dtype must be one of"),
    ({"dtype": np.complex64}, "dtype must be one of"),
    ({"shape": (4, -1)}, "shape must be a sequence of non-negative ints"),
    ({"shape": (4, 1.5)}, "shape must be a sequence of non-negative ints"),
    ({"strides": (1,)}, "strides must have one entry per dimension"),
    ({"strides": ("a", 1)}, "strides must be a sequence of ints"),
])
def test_key_from_metadata_bad_inputs(kwargs, match):
    args = {"shape": (4, 16), "dtype": "complex64", "memory_space": "cpu"} | kwargs
    shape, dtype, space = args.pop("shape"), args.pop("dtype"), args.pop("memory_space")
    with pytest.raises(CuweaveError, match=match) as e:
        F.FFT.create_key_from_metadata(shape, dtype, space, **args)
    assert isinstance(e.value, ValueError)


def test_estimate_workspace_size(fake):
    fake.workspace = 4096
    key = F.FFT.create_key_from_metadata((16, 1024), "complex64", "cuda", axes=(1,))
    creates, destroys = fake.calls["cufftCreate"], fake.calls["cufftDestroy"]
    assert F.estimate_workspace_size(key) == 4096
    assert F.estimate_workspace_size(key, technique="refined", handle=7) == 4096
    assert fake.calls["cufftCreate"] - creates == 2 == fake.calls["cufftDestroy"] - destroys
    assert fake.calls["cufftSetWorkArea"] == 0  # nothing allocated
    cpu = F.FFT.create_key_from_metadata((16, 1024), "complex64", "cpu", axes=(1,))
    assert F.estimate_workspace_size(cpu) == 0
    with pytest.raises(InvalidOptionError, match="technique must be"):
        F.estimate_workspace_size(key, technique="exact")
    with pytest.raises(InvalidOptionError, match="handle must be"):
        F.estimate_workspace_size(key, technique="refined")
    for bad in [None, (1, 2), ("a", None, ("cuda", 0)), (("C2C",), None, ("tpu", 0))]:
        with pytest.raises(InvalidOptionError, match="key must be"):
            F.estimate_workspace_size(bad)


def test_get_key_matches_create_key_after_release():
    x = rng_array((4, 16), "complex64")
    with F.FFT(x, axes=(1,)) as f:
        f.release_operand()
        assert f.get_key() == F.FFT.create_key(x, axes=(1,))


# ---- reset_operand ----------------------------------------------------------------------
@pytest.mark.parametrize("fft_type", ["C2C", "R2C"])
def test_reset_operand_with_rearranged_batch_axes(fft_type):
    dtype = "complex128" if fft_type == "C2C" else "float64"
    a, b = rng_array((2, 3, 64), dtype), rng_array((3, 2, 64), dtype, seed=4)
    with F.FFT(a, axes=(2,)) as f:
        f.plan()
        f.execute()
        f.reset_operand(b)
        y = f.execute()
        assert y.shape == (3, 2, 33 if fft_type == "R2C" else 64)
        assert rel_l2(y, reference(b, fft_type, "forward", (2,))) < tol(dtype, 64)
        with pytest.raises(InvalidOperandError, match="operand must have a layout"):
            f.reset_operand(rng_array((2, 3, 32), dtype))
        f.reset_operand_unchecked(a)
        assert f.execute().shape == (2, 3, 33 if fft_type == "R2C" else 64)
        with pytest.raises(InvalidOperandError, match="dtype"):
            f.reset_operand(rng_array((2, 3, 64), "complex64"))


def test_reset_operand_from_another_package_is_a_type_error():
    torch = pytest.importorskip("torch")
    x = rng_array((4, 16), "complex64")
    with F.FFT(x) as f:
        with pytest.raises(TypeError, match="operand must come from the planned operand's") as e:
            f.reset_operand(torch.from_numpy(x))
        assert isinstance(e.value, InvalidOperandError)


def test_reset_operand_rearranged_on_the_cuda_path(fake):
    torch = pytest.importorskip("torch")
    a = torch.from_numpy(rng_array((2, 3, 64), "complex64"))
    b = torch.from_numpy(rng_array((3, 2, 64), "complex64"))
    with F.FFT(a, axes=(2,)) as f:
        f.plan()
        plans = fake.calls["cufftXtMakePlanMany"]
        f.reset_operand(b)
        y = f.execute()
        assert tuple(y.shape) == (3, 2, 64)
        assert fake.execs[-1][2] == b.data_ptr() and fake.execs[-1][3] == y.data_ptr()
        assert fake.calls["cufftXtMakePlanMany"] == plans  # the same plan ran it


# ---- execution --------------------------------------------------------------------------
def test_execution_dict_without_name_takes_the_operands_space():
    x = rng_array((4, 32), "complex64")
    y = F.fft(x, axes=(1,), execution={"num_threads": 2})
    assert rel_l2(y, reference(x, "C2C", "forward", (1,))) < tol("complex64", 32)
    with F.FFT(x, execution={"num_threads": 2}) as f:
        assert f._spec.space == F.ExecutionCPU(num_threads=2)
    with pytest.raises(InvalidOptionError, match="execution keys must be among") as e:
        F.fft(x, execution={"threads": 2})
    assert isinstance(e.value, TypeError)


def test_device_operand_with_cpu_execution_is_planned_on_the_cpu(fake):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng_array((4, 32), "complex64"))  # poses as a CUDA tensor
    with F.FFT(x, axes=(1,), execution="cpu") as f:
        assert f._spec.to_host and not f._spec.cuda
        f.plan()
        assert f._plan.cpu_plan is not None and fake.calls["cufftCreate"] == 0


class _RecordingBackend:
    """A scipy.fft backend that records each dispatched call and declines it."""

    __ua_domain__ = "numpy.scipy.fft"
    calls: list = []

    @staticmethod
    def __ua_function__(method, args, kwargs):
        _RecordingBackend.calls.append(method.__name__)
        return NotImplemented


def test_cpu_execution_ignores_an_active_scipy_backend():
    x = rng_array((4, 32), "complex64")
    r = rng_array((4, 32), "float64")
    _RecordingBackend.calls.clear()
    with scipy.fft.set_backend(_RecordingBackend, only=True):
        y = F.fft(x, axes=(1,))
        z = F.irfft(F.rfft(r, axes=(1,)), axes=(1,), norm="backward")
        with pytest.raises(NotImplementedError, match="No selected backends"):
            scipy.fft.fft(x)  # the backend is active: scipy's front end dispatches to it
    assert _RecordingBackend.calls == ["fft"]
    assert rel_l2(y, reference(x, "C2C", "forward", (1,))) < tol("complex64", 32)
    assert rel_l2(z, r) < 1e-12


# ---- in place, masked arrays, exception types -------------------------------------------
@pytest.mark.parametrize("strides", [(0, 8), (8, 8), (16, 8)])
def test_inplace_on_a_self_overlapping_view_is_refused(strides):
    base = rng_array((64,), "complex64")
    keep = base.copy()
    view = np.lib.stride_tricks.as_strided(base, shape=(4, 8), strides=strides)
    with pytest.raises(InvalidOperandError, match="operand must not overlap itself"):
        F.fft(view, axes=(1,), options={"inplace": True})
    with pytest.raises(ValueError, match="operand must not overlap itself"):
        F.FFT(view, options={"inplace": True})
    with pytest.raises(ValueError, match="operand must not overlap itself"):
        F.FFT.create_key(view, options={"inplace": True})
    np.testing.assert_array_equal(base, keep)
    y = F.fft(view, axes=(1,))  # out of place it is only read: fine
    assert rel_l2(y, reference(np.array(view), "C2C", "forward", (1,))) < tol("complex64", 8)


def test_inplace_overlap_refused_on_the_cuda_path(fake):
    torch = pytest.importorskip("torch")
    base = torch.from_numpy(rng_array((64,), "complex64"))
    view = base.as_strided((4, 8), (1, 1))
    with pytest.raises(InvalidOperandError, match="operand must not overlap itself"):
        F.fft(view, axes=(1,), options={"inplace": True})
    assert fake.calls["cufftCreate"] == 0


def test_masked_arrays_are_refused():
    x = np.ma.masked_array(rng_array((4, 8), "complex64"), mask=np.zeros((4, 8), bool))
    for call in (lambda: F.fft(x), lambda: F.FFT(x), lambda: F.FFT.create_key(x),
                 lambda: F.fftn(x), lambda: F.numpy.fft(x)):
        with pytest.raises(InvalidOperandError, match="must be a plain array") as e:
            call()
        assert isinstance(e.value, TypeError)


@pytest.mark.parametrize("call, match, builtin", [
    (lambda x: F.fft(x, options=5), "options must be", TypeError),
    (lambda x: F.fft(x, options={"in_place": True}), "options keys must be among", TypeError),
    (lambda x: F.fft(x, prolog=5), "prolog must be", TypeError),
    (lambda x: F.fft(x, epilog="code"), "epilog must be", TypeError),
    (lambda x: F.FFT.create_key(x, prolog=5), "prolog must be", TypeError),
    (lambda x: F.FFT.create_key(x, epilog=[1]), "epilog must be", TypeError),
    (lambda x: F.fft(x, norm=["ortho"]), "norm must be one of", ValueError),
    (lambda x: F.fft(x, norm=np.array("ortho")), "norm must be one of", ValueError),
    (lambda x: F.fft(x, norm="Ortho"), "norm must be one of", ValueError),
    (lambda x: F.fft(x, execution="tpu"), "execution must be", ValueError),
    (lambda x: F.fft(x, execution={"name": 3}), "execution must be", ValueError),
])
def test_exception_types(call, match, builtin):
    x = rng_array((4, 8), "complex64")
    F.fft(x)  # a cached plan must not hide the check
    with pytest.raises(CuweaveError, match=match) as e:
        call(x)
    assert isinstance(e.value, builtin)


def test_unsupported_layout_error_is_public_with_nvmath_attributes(fake):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng_array((4, 6, 5), "complex64"))
    assert F.UnsupportedLayoutError is UnsupportedLayoutError
    with pytest.raises(F.UnsupportedLayoutError) as e:
        F.fft(x, axes=(1,))
    err = e.value
    assert err.permutation == (0, 2, 1) and err.axes == (2,) and err.message == str(err)
    assert isinstance(err, ValueError)


def test_staged_host_operand_in_an_unexpressible_order_is_copied_into_one(fake, monkeypatch):
    """A host operand is copied to the device anyway: into a layout cuFFT expresses."""
    import sys

    run_mod = sys.modules["cuweave.fft._run"]
    uploads = []

    class Stager:
        def upload(self, host, ptr, stream, direct=False):
            uploads.append((host.shape, host.flags.c_contiguous))

        def download(self, ptr, dst, stream):
            pass

    monkeypatch.setattr(run_mod, "shared_stager", lambda: Stager())
    x = rng_array((4, 6, 5), "complex64")  # axes=(1,): C order does not collapse the batch
    with F.FFT(x, axes=(1,), execution="cuda") as f:
        assert f._spec.stage_perm == (0, 2, 1)
        f.plan()
        y = f.execute()
    assert y.shape == (4, 6, 5) and uploads == [((4, 5, 6), True)]


class _HostMemoryStager:
    """Under the fakes, "device" pointers are torch CPU memory: copies are plain memmoves."""

    def download(self, src_ptr, dst, stream):
        import ctypes

        assert dst.flags.c_contiguous
        ctypes.memmove(dst.ctypes.data, src_ptr, dst.nbytes)

    def upload(self, src, dst_ptr, stream, direct=False):
        import ctypes

        src = np.ascontiguousarray(src)
        ctypes.memmove(dst_ptr, src.ctypes.data, src.nbytes)


@pytest.mark.parametrize("kind", ["C2C", "R2C", "C2R", "C2C-inplace", "C2C-inplace-strided",
                                  "C2C-sliced"])
def test_device_operand_with_cpu_execution_round_trip(fake, monkeypatch, kind):
    """The download, CPU transform and upload of a device operand, numerically (the fakes'
    device memory is host memory)."""
    import sys

    torch = pytest.importorskip("torch")
    from cuweave._internal import packages

    monkeypatch.setattr(sys.modules["cuweave.fft._run"], "shared_stager",
                        lambda: _HostMemoryStager())
    monkeypatch.setattr(packages.TORCH, "broadcast_into",
                        lambda dst, src, shape, stream, device_id: dst.copy_(src))
    fft_type = kind.split("-")[0]
    dtype = "float64" if fft_type == "R2C" else "complex128"
    h = rng_array((6, 10), dtype)
    base = torch.from_numpy(h.copy())
    x = base[:, ::2] if kind.endswith(("strided", "sliced")) else base
    src = x.numpy().copy()
    guard = base.numpy().copy()
    opts = {"inplace": True} if "inplace" in kind else {}
    fn = {"C2C": F.fft, "R2C": F.rfft, "C2R": F.irfft}[fft_type]
    y = fn(x, axes=(1,), execution="cpu", options=opts)
    assert isinstance(y, torch.Tensor)
    direction = "inverse" if fft_type == "C2R" else "forward"
    want = reference(src, fft_type, direction, (1,), out_last=2 * (src.shape[1] - 1))
    assert rel_l2(y.numpy(), want) < 1e-12
    if "inplace" in kind:
        assert y is x
        if kind.endswith("strided"):  # the gaps between the elements stay as they were
            np.testing.assert_array_equal(base.numpy()[:, 1::2], guard[:, 1::2])
    else:
        np.testing.assert_array_equal(base.numpy(), guard)
    assert fake.calls["cufftCreate"] == 0


def test_rfft_of_complex_input_is_also_a_runtime_error():
    with pytest.raises(InvalidOperandError, match="use fft for complex input") as e:
        F.rfft(rng_array((4, 8), "complex64"))
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, ValueError)
    with pytest.raises(InvalidOperandError, match="must be a complex type") as e:
        F.irfft(rng_array((4, 8), "float32"))
    assert not isinstance(e.value, RuntimeError)  # nvmath: a ValueError


def test_cpu_execution_under_cuweaves_own_scipy_backend():
    x = rng_array((4, 32), "complex128")
    with scipy.fft.set_backend(F.scipy_backend, only=True):  # SciPy's own is not tried
        y = F.fft(x, axes=(1,))
    assert rel_l2(y, reference(x, "C2C", "forward", (1,))) < 1e-12
