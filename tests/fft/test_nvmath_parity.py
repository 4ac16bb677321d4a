"""Behaviours of the host FFT API checked against nvmath-python 1.0 (CPU execution).

Result strides per ``result_layout`` (nvmath's rule: the operand's order in memory unless batch
and transformed axes interleave, then the transformed axes innermost), ``fft``/``ifft`` of real
operands, ``irfft``'s own C2R type whatever ``options.fft_type`` says, ``ifft(direction=)``,
in-place options refused by the FFT rather than by ``FFTOptions``, NumPy float16 R2C, read-only
in-place targets, and the builtin types of the errors nvmath raises.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cuweave.fft as F
from cuweave._internal.errors import CuweaveError, InvalidOperandError, InvalidOptionError
from tests.fakes.cufft import fake_cuda
from tests.references import fft_reference as reference
from tests.references import rel_l2, rng_array


def _strides(y):
    if isinstance(y, np.ndarray):
        return tuple(s // y.itemsize for s in y.strides)
    return tuple(y.stride())


def _f(x):
    return np.asfortranarray(x)


# operand, fft type, axes, result_layout, the strides nvmath-python's result has
LAYOUTS = [
    ("F(4,16)", "C2C", (1,), "optimized", (16, 1)),   # interleaved: transformed axis innermost
    ("F(4,16)", "C2C", (1,), "natural", (1, 4)),      # the operand's order
    ("F(4,16)", "C2C", (0,), "optimized", (1, 4)),    # not interleaved: the operand's order
    ("F(4,16)", "C2C", (0, 1), "optimized", (1, 4)),
    ("F(16,4)", "R2C", (0,), "optimized", (1, 9)),
    ("F(9,4)", "C2R", (0,), "optimized", (1, 16)),
    ("F(4,16)", "R2C", (1,), "natural", (1, 4)),
    ("T(6,4,8)", "C2C", (0,), "optimized", (1, 48, 6)),
    ("S(4,16)", "C2C", (1,), "natural", (8, 1)),      # a sliced view: dense, same order
    ("C(4,16)", "C2C", (0,), "optimized", (1, 4)),    # interleaved: transformed axis innermost
    ("C(4,16)", "C2C", (0,), "natural", (16, 1)),
]


def _operand(kind, fft_type):
    dtype = "float64" if fft_type == "R2C" else "complex128"
    shape = tuple(int(n) for n in kind[2:-1].split(","))
    if kind[0] == "F":
        return _f(rng_array(shape, dtype))
    if kind[0] == "T":  # (6, 4, 8) with strides (1, 48, 6)
        return rng_array((4, 8, 6), dtype).transpose(2, 0, 1)
    if kind[0] == "S":
        return rng_array(shape, dtype)[:, ::2]
    return rng_array(shape, dtype)


@pytest.mark.parametrize("kind, fft_type, axes, layout, want", LAYOUTS)
def test_result_strides_follow_nvmaths_layout_rule(kind, fft_type, axes, layout, want):
    x = _operand(kind, fft_type)
    out_last = 2 * (x.shape[axes[-1]] - 1)
    fn = {"C2C": F.fft, "R2C": F.rfft, "C2R": F.irfft}[fft_type]
    y = fn(x, axes=axes, options={"result_layout": layout})
    assert _strides(y) == want
    direction = "inverse" if fft_type == "C2R" else "forward"
    assert rel_l2(y, reference(x, fft_type, direction, axes, out_last=out_last)) < 1e-12
    with F.FFT(x, axes=axes, options={"result_layout": layout, "fft_type": fft_type}) as f:
        assert f.get_output_layout() == (y.shape, want)
        f.plan()
        z = f.execute()
        assert _strides(z) == want
        np.testing.assert_array_equal(z, y)


def test_torch_results_keep_the_layout_too():
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng_array((16, 4), "complex128")).T  # (4, 16), strides (1, 4)
    y = F.fft(x, axes=(0,))
    assert isinstance(y, torch.Tensor) and tuple(y.stride()) == (1, 4)
    assert rel_l2(y.numpy(), np.fft.fft(x.numpy(), axis=0)) < 1e-12


def test_reset_operand_to_another_order_takes_its_layout():
    a = rng_array((2, 3, 64), "complex128")
    b = np.moveaxis(rng_array((3, 2, 64), "complex128", seed=3), 0, 1)  # strides (64, 128, 1)
    with F.FFT(a, axes=(2,), options={"result_layout": "natural"}) as f:
        f.plan()
        assert _strides(f.execute()) == (192, 64, 1)
        f.reset_operand(b)  # the same plan (batch axes rearranged)
        assert f.get_output_layout() == ((2, 3, 64), (64, 128, 1))
        y = f.execute()
        assert _strides(y) == (64, 128, 1)
        assert rel_l2(y, np.fft.fft(b, axis=2)) < 1e-12
        f.reset_operand(a)
        assert _strides(f.execute()) == (192, 64, 1)


# ---- fft / ifft / rfft / irfft: which operands and options -----------------------------------
@pytest.mark.parametrize("fn", [F.fft, F.ifft])
def test_fft_and_ifft_of_a_real_operand_raise_value_error(fn):
    x = rng_array((8,), "float32")
    for options in (None, {"fft_type": "C2C"}):
        with pytest.raises(InvalidOperandError, match="complex") as e:
            fn(x, options=options)
        assert isinstance(e.value, ValueError)
    with pytest.raises(InvalidOptionError, match="fft_type must be 'C2C' or 'C2R'"):
        fn(rng_array((8,), "complex64"), options={"fft_type": "R2C"})


def test_fft_with_c2r_options_and_inverse_direction_is_a_c2r():
    x = np.fft.rfft(rng_array((8,), "float64"))
    y = F.fft(x, options={"fft_type": "C2R"}, direction="inverse")
    assert rel_l2(y, 8 * np.fft.irfft(x, 8)) < 1e-12
    with pytest.raises(InvalidOptionError, match="direction must be INVERSE"):
        F.fft(x, options={"fft_type": "C2R"})


@pytest.mark.parametrize("fft_type", ["C2C", "R2C", None, "C2R"])
def test_irfft_is_c2r_whatever_options_fft_type_says(fft_type):
    x = np.fft.rfft(rng_array((4, 9), "float64"))  # (4, 5)
    opts = F.FFTOptions(fft_type=fft_type, last_axis_parity="odd")
    y = F.irfft(x, axes=(1,), options=opts)
    assert y.shape == (4, 9) and y.dtype == np.float64
    assert rel_l2(y, 9 * np.fft.irfft(x, 9, axis=1)) < 1e-12
    assert opts.fft_type == fft_type  # the caller's options are not modified
    y = F.irfft(x, axes=(1,), options=dataclasses.asdict(opts))
    assert y.shape == (4, 9)


def test_ifft_takes_a_direction():
    x = rng_array((4, 8), "complex128")
    assert rel_l2(F.ifft(x, axes=(1,)), 8 * np.fft.ifft(x, axis=1)) < 1e-12
    assert rel_l2(F.ifft(x, axes=(1,), direction="forward"), np.fft.fft(x, axis=1)) < 1e-12
    assert rel_l2(F.ifft(x, axes=(1,), direction=F.FFTDirection.INVERSE),
                  8 * np.fft.ifft(x, axis=1)) < 1e-12
    with pytest.raises(InvalidOptionError, match="direction must be"):
        F.ifft(x, direction="sideways")


def test_no_transform_scales_its_result():
    x = rng_array((3, 4, 5), "complex128")
    assert rel_l2(F.ifft(F.fft(x)), 60 * x) < 1e-12
    r = rng_array((6, 10), "float64")
    assert rel_l2(F.irfft(F.rfft(r)), 60 * r) < 1e-12


@pytest.mark.parametrize("fft_type", ["R2C", "C2R"])
def test_inplace_real_transforms_are_refused_by_the_fft_not_the_options(fft_type):
    opts = F.FFTOptions(fft_type=fft_type, inplace=True)  # built, as nvmath builds it
    x = rng_array((8,), "float32" if fft_type == "R2C" else "complex64")
    with pytest.raises(InvalidOptionError, match="inplace must be False") as e:
        F.FFT(x, options=opts)
    assert isinstance(e.value, ValueError)
    with pytest.raises(InvalidOptionError, match="inplace must be False"):
        F.irfft(rng_array((8,), "complex64"), options={"inplace": True})


def test_numpy_float16_r2c_is_a_type_error_at_construction():
    x = rng_array((8,), "float32").astype(np.float16)
    for call in (lambda: F.FFT(x), lambda: F.rfft(x)):
        with pytest.raises(CuweaveError, match="float16") as e:
            call()
        assert isinstance(e.value, TypeError) and isinstance(e.value, ValueError)


def test_read_only_inplace_target_is_refused_before_any_work():
    x = rng_array((4, 8), "complex64")
    F.fft(x.copy(), options={"inplace": True})  # a cached plan must not skip the check
    x.setflags(write=False)
    before = x.copy()
    with pytest.raises(InvalidOperandError, match="must be writable"):
        F.fft(x, options={"inplace": True})
    with F.FFT(x.copy(), options={"inplace": True}) as f:
        f.plan()
        with pytest.raises(InvalidOperandError, match="must be writable"):
            f.reset_operand(x)
    with pytest.raises(InvalidOperandError, match="must be writable"):
        F.FFT(x, options={"inplace": True})
    np.testing.assert_array_equal(x, before)
    assert F.fft(x).dtype == np.complex64  # out of place, a read-only operand is fine


def test_callback_dict_with_unknown_keys_is_a_type_error():
    with pytest.raises(InvalidOptionError, match="prolog keys must be among") as e:
        F.fft(rng_array((8,), "complex64"), prolog={"ltoir": b"x", "code": 1})
    assert isinstance(e.value, TypeError)


def test_device_operand_with_cpu_execution_keeps_the_result_layout(monkeypatch):
    """On the device too (fakes: torch CPU tensors posing as CUDA ones), a CPU execution's
    result has nvmath's strides: the upload lays it out in that order."""
    torch = pytest.importorskip("torch")
    import sys

    from tests.fft.test_compat import _HostMemoryStager

    monkeypatch.setattr(sys.modules["cuweave.fft._run"], "shared_stager",
                        lambda: _HostMemoryStager())
    with fake_cuda():
        h = rng_array((16, 4), "complex128")
        x = torch.from_numpy(h.copy()).T  # (4, 16), strides (1, 4)
        y = F.fft(x, axes=(0,), execution="cpu")
        assert isinstance(y, torch.Tensor) and tuple(y.stride()) == (1, 4)
        assert rel_l2(y.numpy(), np.fft.fft(h.T, axis=0)) < 1e-12
        r = torch.from_numpy(rng_array((16, 4), "float64")).T
        z = F.rfft(r, axes=(1,), execution="cpu", options={"result_layout": "natural"})
        assert tuple(z.stride()) == (1, 4) and z.shape == (4, 9)
        assert rel_l2(z.numpy(), np.fft.rfft(r.numpy(), axis=1)) < 1e-12
