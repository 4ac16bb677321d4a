"""cuweave.fft on the CPU (MKL with the cpu-fft extra, else pocketfft) against float64 NumPy
references; bad inputs (the backends themselves: test_cpu_backend.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuweave.fft as F
from cuweave._internal.errors import InvalidOperandError, InvalidOptionError, InvalidStateError
from tests.references import fft_reference as reference
from tests.references import fft_tol as tol
from tests.references import rel_l2, rng_array

SHAPES = {  # (shape, axes): even, odd, prime, batched, 1-D..3-D
    "1d-even": ((64,), None),
    "1d-prime": ((97,), None),
    "batched-1d-odd": ((5, 45), (1,)),
    "2d": ((12, 10), None),
    "2d-prime-batched": ((3, 13, 11), (1, 2)),
    "3d": ((6, 5, 8), None),
    "axis0": ((16, 3), (0,)),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("direction", ["forward", "inverse"])
def test_c2c(case, dtype, direction):
    shape, axes = SHAPES[case]
    x = rng_array(shape, dtype)
    keep = x.copy()
    fn = F.fft if direction == "forward" else F.ifft
    y = fn(x, axes=axes)
    assert y.dtype == x.dtype and y.shape == x.shape
    ax = axes or tuple(range(len(shape)))
    want = reference(x, "C2C", direction, ax)
    assert rel_l2(y, want) < tol(dtype, x.size)
    np.testing.assert_array_equal(x, keep)


@pytest.mark.parametrize("case", sorted(SHAPES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_r2c_c2r(case, dtype):
    shape, axes = SHAPES[case]
    x = rng_array(shape, dtype)
    ax = axes or tuple(range(len(shape)))
    y = F.rfft(x, axes=axes)
    assert rel_l2(y, reference(x, "R2C", "forward", ax)) < tol(dtype, x.size)
    parity = "odd" if shape[ax[-1]] % 2 else "even"
    keep = y.copy()
    z = F.irfft(y, axes=axes, options={"last_axis_parity": parity})
    assert z.shape == x.shape and z.dtype == x.dtype
    assert rel_l2(z, reference(y, "C2R", "inverse", ax, out_last=shape[ax[-1]])) < tol(
        dtype, x.size)
    np.testing.assert_array_equal(y, keep)  # C2R never clobbers its input


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_norm_matches_numpy(norm):
    x = rng_array((4, 30), "complex128")
    assert rel_l2(F.fft(x, axes=(1,), norm=norm), np.fft.fft(x, norm=norm)) < 1e-13
    assert rel_l2(F.ifft(x, axes=(1,), norm=norm), np.fft.ifft(x, norm=norm)) < 1e-13
    r = rng_array((4, 30), "float64")
    assert rel_l2(F.rfft(r, axes=(1,), norm=norm), np.fft.rfft(r, norm=norm)) < 1e-13
    c = np.fft.rfft(r)
    assert rel_l2(F.irfft(c, axes=(1,), norm=norm), np.fft.irfft(c, n=30, norm=norm)) < 1e-13


@pytest.mark.parametrize("layout", ["F", "transposed", "strided"])
def test_strided_and_transposed(layout):
    base = rng_array((12, 16, 5), "complex64")
    x = {"F": np.asfortranarray(base), "transposed": base.transpose(2, 0, 1),
         "strided": base[::2, 1::3]}[layout]
    y = F.fft(x, axes=(0, 1))
    assert rel_l2(y, reference(x, "C2C", "forward", (0, 1))) < tol("complex64", 200)


def test_inplace_c2c():
    x = rng_array((8, 20), "complex128")
    want = reference(x, "C2C", "forward", (1,))
    y = F.fft(x, axes=(1,), options={"inplace": True})
    assert y is x
    assert rel_l2(x, want) < 1e-13


def test_stateful_reuse_and_lifecycle():
    x = rng_array((4, 32), "complex64")
    f = F.FFT(x, axes=(1,), execution=F.ExecutionCPU(num_threads=1))
    with pytest.raises(InvalidStateError):
        f.execute()
    f.plan()
    assert rel_l2(f.execute(), reference(x, "C2C", "forward", (1,))) < 1e-5
    assert rel_l2(f.execute(direction="inverse"), reference(x, "C2C", "inverse", (1,))) < 1e-5
    x2 = rng_array((4, 32), "complex64", seed=1)
    f.reset_operand(x2)
    assert rel_l2(f.execute(), reference(x2, "C2C", "forward", (1,))) < 1e-5
    with pytest.raises(InvalidOperandError, match="shape"):
        f.reset_operand(rng_array((4, 33), "complex64"))
    f.reset_operand(None)
    with pytest.raises(InvalidStateError, match="reset_operand"):
        f.execute()
    assert f.get_input_layout() == ((4, 32), (32, 1))
    assert f.get_output_layout()[0] == (4, 32)
    f.free()
    with pytest.raises(InvalidStateError):
        f.execute()
    with F.FFT(x) as g:
        g.plan()
        g.execute()
    assert g.is_freed


def test_keys_and_plan_cache_reuse():
    x = rng_array((4, 32), "complex64")
    k1 = F.FFT.create_key(x, axes=(1,))
    k2 = F.FFT.create_key(rng_array((4, 32), "complex64", seed=3), axes=(1,))
    k3 = F.FFT.create_key(x, axes=(0,))
    assert k1 == k2 and k1 != k3 and hash(k1) == hash(k2)
    F.plan_cache.clear()
    F.fft(x, axes=(1,))
    hits = F.plan_cache.hits
    F.fft(rng_array((4, 32), "complex64", seed=4), axes=(1,))
    assert F.plan_cache.hits == hits + 1


def test_torch_cpu_results_stay_torch():
    torch = pytest.importorskip("torch")
    x = torch.randn(6, 20, dtype=torch.complex64)
    y = F.fft(x, axes=(1,))
    assert isinstance(y, torch.Tensor) and y.dtype == torch.complex64
    assert rel_l2(y.numpy(), reference(x.numpy(), "C2C", "forward", (1,))) < 1e-5
    r = torch.randn(6, 20, dtype=torch.float64)
    z = F.irfft(F.rfft(r), norm="backward")
    assert isinstance(z, torch.Tensor)
    assert rel_l2(z.numpy(), r.numpy()) < 1e-13
    c = torch.randn(5, 8, dtype=torch.complex128).conj()  # lazy conjugate
    assert rel_l2(F.fft(c).numpy(), np.fft.fftn(c.resolve_conj().numpy())) < 1e-13


@pytest.mark.parametrize("bad, err, match", [
    (lambda: F.fft(np.zeros(8, np.int32)), InvalidOperandError, "dtype"),
    (lambda: F.rfft(rng_array(8, "complex64")), InvalidOperandError, "real"),
    (lambda: F.irfft(rng_array(8, "float32")), InvalidOperandError, "complex"),
    (lambda: F.ifft(rng_array(8, "float32")), InvalidOperandError, "complex"),
    (lambda: F.rfft(rng_array(8, "float32"), options={"inplace": True}), InvalidOptionError,
     "inplace"),
    (lambda: F.fft(rng_array((4, 4), "complex64"), axes=(2,)), InvalidOperandError, "axes"),
    (lambda: F.fft(rng_array((4, 4), "complex64"), axes=(0, 0)), InvalidOperandError, "repeat"),
    (lambda: F.fft(rng_array(8, "complex64"), norm="unitary"), InvalidOptionError, "norm"),
    (lambda: F.fft(rng_array(8, "complex64"), options={"fft_type": "R2R"}), InvalidOptionError,
     "fft_type"),
    (lambda: F.fft([1.0, 2.0]), InvalidOperandError, "operand"),
    (lambda: F.fft(rng_array(8, "complex64"), prolog={"ltoir": b"x"}), InvalidOptionError,
     "CPU"),
    (lambda: F.fft(rng_array(8, "complex64"), execution="tpu"), InvalidOptionError,
     "execution"),
])
def test_bad_inputs_raise_typed_errors(bad, err, match):
    with pytest.raises(err, match=match):
        bad()


def test_options_validation():
    with pytest.raises(InvalidOptionError, match="last_axis_parity"):
        F.FFTOptions(last_axis_parity="odd-ish")
    with pytest.raises(InvalidOptionError, match="result_layout"):
        F.FFTOptions(result_layout="fast")
    # as nvmath-python: such options are built, and refused by the FFT they are given to
    opts = F.FFTOptions(fft_type="C2R", inplace=True)
    with pytest.raises(InvalidOptionError, match="inplace"):
        F.FFT(rng_array((8,), "complex64"), options=opts)
    with pytest.raises(InvalidOptionError, match="size"):
        F.DeviceCallable(ltoir=1234)
    assert F.DeviceCallable(ltoir=b"abc").size == 3
    assert F.FFTDirection.FORWARD == -1 and F.FFTDirection.INVERSE == 1


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=3),
       dtype=st.sampled_from(["complex64", "complex128"]), data=st.data())
def test_random_c2c_matches_numpy(shape, dtype, data):
    k = data.draw(st.integers(1, len(shape)))
    axes = tuple(data.draw(st.permutations(range(len(shape))))[:k])
    x = rng_array(shape, dtype, seed=len(shape))
    y = F.fft(x, axes=axes)
    assert rel_l2(y, reference(x, "C2C", "forward", axes)) < tol(dtype, x.size)
