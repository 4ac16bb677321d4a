"""cuweave.fft.numpy (and fftn/rfft2/hfft/... in cuweave.fft) against numpy.fft and scipy.fft."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft as sfft

import cuweave.fft as F
from cuweave.fft import numpy as cfft
from tests.references import fft_tol as tol
from tests.references import rel_l2, rng_array, to_numpy

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
N_D = ("fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2")
REAL_IN = ("rfft", "ihfft", "rfftn", "rfft2", "ihfftn", "ihfft2")


def _expected_dtype(name, dtype):
    single = np.dtype(dtype) in (np.float32, np.complex64, np.float16)
    real_out = name.startswith(("irfft", "hfft"))
    if real_out:
        return np.dtype(np.float32 if single else np.float64)
    return np.dtype(np.complex64 if single else np.complex128)


def _reference(name, x, *args, **kwargs):
    """scipy.fft in double precision (numpy.fft has no hfftn)."""
    xd = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    return getattr(sfft, name)(xd, *args, **kwargs)


def _check(got, name, x, *args, **kwargs):
    want = _reference(name, x, *args, **kwargs)
    got = to_numpy(got)
    assert got.shape == want.shape
    assert got.dtype == _expected_dtype(name, x.dtype)
    prec = "float32" if got.dtype in (np.float32, np.complex64) else "float64"
    assert rel_l2(got, want) < 4 * tol(prec, max(want.size, 2))


def _input(name, shape, dtype, seed=0):
    if name in REAL_IN and np.dtype(dtype).kind == "c":
        dtype = np.float32 if dtype == np.complex64 else np.float64
    return rng_array(shape, dtype, seed)


@pytest.mark.parametrize("name", ONE_D)
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("n", [None, 4, 9, 16])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_d_matches_numpy(name, dtype, n, axis):
    x = _input(name, (5, 7, 6), dtype)
    y = getattr(cfft, name)(x, n=n, axis=axis)
    _check(y, name, x, n=n, axis=axis)
    want = getattr(np.fft, name)(x, n=n, axis=axis)  # NumPy 2 keeps single precision too
    assert y.dtype == want.dtype
    assert rel_l2(y, want) < 4 * tol("float32", want.size)


@pytest.mark.parametrize("name", ONE_D)
@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_norms(name, norm):
    x = _input(name, (3, 10), "complex128")
    _check(getattr(cfft, name)(x, norm=norm), name, x, norm=norm)


_S_AXES = [(None, None), ((4, 5), None), (None, (0, -1)), ((8, 3), (0, -1)), ((3, -1), (-1, 1)),
           ((6,), (1,)), ((2, 9, 5), (2, 0, 1))]
_N_D_CASES = [(name, s, axes) for name in N_D + ("hfftn", "ihfftn", "hfft2", "ihfft2")
              for s, axes in _S_AXES
              if not name.endswith("2") or len(s or axes or (0, 0)) == 2]


@pytest.mark.parametrize("name,s,axes", _N_D_CASES)
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_n_d_matches_scipy(name, s, axes, dtype):
    x = _input(name, (6, 7, 5), dtype)
    kw = {} if axes is None else {"axes": axes}
    y = getattr(cfft, name)(x, s=s, **kw)
    _check(y, name, x, s=s, **kw)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"])
def test_more_than_three_axes(name):
    x = _input(name, (3, 4, 5, 6, 2), "complex128")
    axes = (0, 1, 2, 3, 4)
    _check(getattr(cfft, name)(x, axes=axes), name, x, axes=axes)
    s = (2, 6, 5, 7, 3)
    _check(getattr(cfft, name)(x, s=s, axes=(4, 0, 1, 2, 3)), name, x, s=s, axes=(4, 0, 1, 2, 3))


def test_top_level_names_are_the_numpy_ones():
    for name in ("fft2", "ifft2", "fftn", "ifftn", "rfft2", "irfft2", "rfftn", "irfftn",
                 "hfft", "ihfft"):
        assert getattr(F, name) is getattr(cfft, name)
        assert name in F.__all__
    # nvmath-python's forms keep their meaning: C2C of complex input only, no scaling
    x = rng_array((8,), "float64")
    with pytest.raises(ValueError, match="complex"):
        F.fft(x)
    assert F.rfft(x).shape == (5,)
    assert cfft.fft(x).shape == (8,)
    np.testing.assert_allclose(F.ifft(F.fft(x + 0j)), 8 * x, atol=1e-12)


def test_import_forms():
    import importlib

    assert importlib.import_module("cuweave.fft.numpy") is cfft
    assert F.numpy is cfft


@pytest.mark.parametrize("dtype,want", [("int32", "complex128"), ("bool", "complex128"),
                                        ("float16", "complex64"), ("uint8", "complex128")])
def test_dtype_promotion(dtype, want):
    x = (np.arange(12).reshape(3, 4) % 2).astype(dtype)
    y = cfft.fft(x)
    assert y.dtype == np.dtype(want) == sfft.fft(x).dtype
    np.testing.assert_allclose(y, np.fft.fft(x.astype(np.float64)), rtol=1e-6, atol=1e-6)


def test_empty_batch():
    x = np.zeros((0, 6), np.float32)
    for name, shape, dtype in (("fft", (0, 6), np.complex64), ("rfft", (0, 4), np.complex64),
                               ("irfft", (0, 10), np.float32)):
        y = getattr(cfft, name)(x)
        assert y.shape == shape and y.dtype == dtype
        assert getattr(sfft, name)(x).shape == shape


def test_input_untouched_and_repeated_calls():
    x = rng_array((4, 9), "complex64")
    keep = x.copy()
    ys = [cfft.ifft(x, n=12, axis=0, norm="ortho") for _ in range(3)]
    np.testing.assert_array_equal(x, keep)
    for y in ys[1:]:
        np.testing.assert_array_equal(y, ys[0])
    _check(ys[0], "ifft", x, n=12, axis=0, norm="ortho")


def test_out():
    x = rng_array((3, 8), "complex128")
    out = np.empty((3, 8), np.complex128)
    assert cfft.fft(x, out=out) is out
    np.testing.assert_allclose(out, np.fft.fft(x))
    with pytest.raises(ValueError, match="out must have"):
        cfft.fft(x, n=4, out=out)


def test_strided_and_fortran_inputs():
    x = rng_array((8, 10, 6), "complex128")
    for v in (x[::2, 1:, ::-1], np.asfortranarray(x), x.transpose(2, 0, 1)):
        _check(cfft.fftn(v, axes=(0, 2)), "fftn", v, axes=(0, 2))
        _check(cfft.rfft(v.real, axis=1), "rfft", v.real, axis=1)


@pytest.mark.parametrize("call,exc,match", [
    (lambda x: cfft.fft(x, n=0), ValueError, "n must be >= 1"),
    (lambda x: cfft.fft(x, n=-1), ValueError, "n must be >= 1"),
    (lambda x: cfft.fft(x, n=2.0), TypeError, "n must be an int"),
    (lambda x: cfft.fft(x, axis=2), IndexError, "axis must be in"),
    (lambda x: cfft.fft(x, axis=(0,)), TypeError, "axis must be an int"),
    (lambda x: cfft.fftn(x, axes=(0, 0)), ValueError, "axes must be unique"),
    (lambda x: cfft.fftn(x, axes=(0, -2)), ValueError, "axes must be unique"),
    (lambda x: cfft.fftn(x, s=(2, 3), axes=(0,)), ValueError, "same length"),
    (lambda x: cfft.fftn(x, s=(2, 3, 4)), ValueError, "at most"),
    (lambda x: cfft.fftn(x, s=(0, 3)), ValueError, "s must be >= 1"),
    (lambda x: cfft.fft(x, norm="bad"), ValueError, "norm must be"),
    (lambda x: cfft.rfft(x + 1j), TypeError, "real sequence"),
    (lambda x: cfft.ihfft(x + 1j), TypeError, "real sequence"),
    (lambda x: cfft.irfft(x[:, :1]), ValueError, "data points"),
    (lambda x: cfft.fft(x.astype(np.longdouble)), TypeError, "dtype must be"),
    (lambda x: cfft.fft({"x": x}), TypeError, "NumPy or CuPy array"),
    (lambda x: cfft.fft(x, out=np.zeros(x.shape, np.float32)), TypeError,
     "Cannot cast ufunc 'fft' output from dtype"),
    (lambda x: cfft.fftn(np.ones((0, 3))), ValueError, "Invalid number of FFT data points"),
    (lambda x: cfft.fft(x[0, 0]), ValueError, "at least one dimension"),
])
def test_errors(call, exc, match):
    x = rng_array((2, 3), "float64")
    with pytest.raises(exc, match=match):
        call(x)


def test_errors_are_typed():
    from cuweave._internal.errors import CuweaveError

    with pytest.raises(CuweaveError):
        cfft.fft(np.ones(3), axis=5)


def test_shift_and_freq():
    x = np.arange(10).reshape(2, 5)
    np.testing.assert_array_equal(cfft.fftshift(x), np.fft.fftshift(x))
    np.testing.assert_array_equal(cfft.ifftshift(x, axes=1), np.fft.ifftshift(x, axes=1))
    np.testing.assert_array_equal(cfft.fftfreq(7, 0.5), np.fft.fftfreq(7, 0.5))
    np.testing.assert_array_equal(cfft.rfftfreq(8), np.fft.rfftfreq(8))


@pytest.mark.parametrize("name", ["fftn", "rfftn", "irfftn", "ihfft"])
def test_execution_cpu_threads(name):
    x = _input(name, (4, 6, 5), "complex128")
    y = getattr(cfft, name)(x, execution=F.ExecutionCPU(num_threads=2))
    _check(y, name, x)


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 6, 5, dtype=torch.float32)
    y = cfft.rfftn(x, s=(8, 3), axes=(0, 2))
    assert isinstance(y, torch.Tensor) and y.dtype == torch.complex64
    want = torch.fft.rfftn(x, s=(8, 3), dim=(0, 2))
    assert rel_l2(y.numpy(), want.numpy()) < 1e-5
    z = cfft.hfft(torch.randn(3, 5, dtype=torch.complex128), n=7, norm="ortho")
    assert z.dtype == torch.float64 and z.shape == (3, 7)
    np.testing.assert_array_equal(cfft.fftshift(torch.arange(5)).numpy(), [3, 4, 0, 1, 2])


_NAMES = ONE_D + N_D + ("hfftn", "ihfftn")


@st.composite
def _problems(draw):
    name = draw(st.sampled_from(_NAMES))
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=ndim, max_size=ndim)))
    if name in ("irfft", "hfft") or name.startswith(("irfft", "hfft")):
        shape = tuple(max(n, 2) for n in shape)  # a default output length 2*(m-1) >= 1
    dtype = draw(st.sampled_from(["float32", "float64", "complex64", "complex128"]))
    norm = draw(st.sampled_from([None, "backward", "ortho", "forward"]))
    if name in ONE_D:
        axis = draw(st.integers(-ndim, ndim - 1))
        n = draw(st.one_of(st.none(), st.integers(1, 9)))
        return name, shape, dtype, {"n": n, "axis": axis, "norm": norm}
    if name.endswith("2"):
        if ndim < 2:
            shape = shape + (3,)
            ndim = 2
        k = 2
    else:
        k = draw(st.integers(1, ndim))
    axes = draw(st.permutations(range(-ndim, 0)))[:k]
    kw = {"norm": norm}
    if draw(st.booleans()) or name.endswith("2"):
        kw["axes"] = tuple(axes)
    if draw(st.booleans()):
        kw["s"] = tuple(draw(st.lists(st.integers(1, 9), min_size=k, max_size=k)))
    return name, shape, dtype, kw


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(_problems())
def test_hypothesis_against_scipy(problem):
    name, shape, dtype, kw = problem
    x = _input(name, shape, dtype, seed=len(shape))
    _check(getattr(cfft, name)(x, **kw), name, x, **kw)


# ---- GPU ----------------------------------------------------------------------------------------
def _device(x, package):
    if package == "cupy":
        cupy = pytest.importorskip("cupy")
        return cupy.asarray(x)
    torch = pytest.importorskip("torch")
    return torch.from_numpy(np.ascontiguousarray(x)).cuda()


GPU_CASES = [  # (name, shape, dtype, kwargs)
    ("fft", (6, 33), "complex64", {"n": 40}),
    ("fft", (6, 33), "float64", {"n": 17, "axis": 0, "norm": "ortho"}),
    ("ifft", (5, 7, 9), "complex128", {"axis": 1}),
    ("rfft", (4, 31), "float32", {"n": 30}),
    ("irfft", (4, 16), "complex64", {"n": 31, "norm": "forward"}),
    ("irfft", (3, 1), "complex128", {"n": 1}),
    ("hfft", (3, 9), "complex128", {"n": 15}),
    ("ihfft", (3, 9), "float32", {}),
    ("fftn", (4, 5, 6, 7), "complex64", {"axes": (0, 1, 2, 3)}),
    ("ifftn", (8, 6, 10), "complex128", {"s": (5, 12), "axes": (-1, 0)}),
    ("rfftn", (6, 7, 8), "float64", {"s": (9, -1), "axes": (0, -2)}),
    ("irfftn", (6, 7, 5), "complex64", {"s": (6, 7, 9)}),
    ("fft2", (3, 16, 12), "complex128", {"norm": "forward"}),
    ("rfft2", (3, 16, 13), "float32", {"axes": (0, 2)}),
    ("irfft2", (3, 16, 13), "complex64", {"s": (16, 25)}),
    ("ihfftn", (5, 6, 7), "float64", {"axes": (1, 2)}),
]


@pytest.mark.gpu
@pytest.mark.parametrize("package", ["cupy", "torch"])
@pytest.mark.parametrize("case", range(len(GPU_CASES)))
def test_gpu_arrays(package, case):
    name, shape, dtype, kw = GPU_CASES[case]
    h = _input(name, shape, dtype)
    x = _device(h, package)
    for _ in range(2):  # the second call runs on the cached plan
        y = getattr(cfft, name)(x, **kw)
        assert type(y).__module__.split(".")[0] == package
        _check(y, name, h, **kw)
    np.testing.assert_array_equal(to_numpy(x), h)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [0, 4, 9, 11, 15])
def test_gpu_execution_of_host_arrays(case):
    name, shape, dtype, kw = GPU_CASES[case]
    h = _input(name, shape, dtype)
    y = getattr(cfft, name)(h, execution="cuda", **kw)
    assert isinstance(y, np.ndarray)
    _check(y, name, h, **kw)


@pytest.mark.parametrize("name", ["cuweave.fft._numpy_api", "cuweave.fft.scipy_backend"])
def test_docstring_examples(name):
    import doctest
    import importlib

    res = doctest.testmod(importlib.import_module(name),
                          optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


# ---- the device path on a stand-in cuFFT (no GPU: shapes, dtypes and calls only) ---------------
def test_device_path_on_stand_in_cufft():
    torch = pytest.importorskip("torch")
    from cuweave.fft import _numpy_api
    from tests.fakes.cufft import fake_cuda

    with fake_cuda() as fake:
        x = torch.randn(3, 10, 15, dtype=torch.complex64)  # poses as a CUDA tensor

        def execs():
            return fake.calls["cufftXtExec"]

        for call, shape, dtype, n_exec in [
            (lambda: cfft.fft(x, n=20), (3, 10, 20), torch.complex64, 1),
            (lambda: cfft.irfft(x, n=9), (3, 10, 9), torch.float32, 1),
            (lambda: cfft.hfft(x, axis=0), (4, 10, 15), torch.float32, 1),
            (lambda: cfft.ihfft(x.real), (3, 10, 8), torch.complex64, 1),
            (lambda: cfft.rfftn(x.real, s=(4, 5), axes=(0, 1)), (4, 3, 15), torch.complex64, 1),
            (lambda: cfft.fft(x.real.to(torch.float64)), (3, 10, 15), torch.complex128, 1),
            (lambda: cfft.fftn(torch.randn(2, 3, 4, 5, dtype=torch.complex64)), (2, 3, 4, 5),
             torch.complex64, 2),  # four axes: two cuFFT plans (3 + 1 axes)
            (lambda: cfft.irfftn(torch.randn(2, 3, 4, 5, dtype=torch.complex64)), (2, 3, 4, 8),
             torch.float32, 2),
        ]:
            before = execs()
            y = call()
            assert (tuple(y.shape), y.dtype) == (shape, dtype)
            assert execs() - before == n_exec
        # batch axes (0, 2) around the transformed axis 1 do not collapse into one cuFFT batch:
        # the transform runs on a copy with the axis moved last, and the decision is cached
        creates = fake.calls["cufftCreate"]
        for _ in range(3):
            y = cfft.fft(x, axis=1)
            assert tuple(y.shape) == (3, 10, 15)
        assert fake.calls["cufftCreate"] == creates + 1
        assert ("torch", (3, 10, 15), (150, 15, 1), (1,)) in _numpy_api._MOVED


def test_recipes_are_cached_by_metadata_only():
    from cuweave.fft import _numpy_api

    a, b = rng_array((4, 9), "float32", seed=1), rng_array((4, 9), "float32", seed=2)
    ya = cfft.rfft(a, n=12, axis=0)
    key = ("rfft", np.ndarray, a.dtype, (4, 9), (12,), (0,), None, True)
    assert key in _numpy_api._RECIPES
    yb = cfft.rfft(b, n=12, axis=0)  # same recipe, other data
    np.testing.assert_allclose(yb, np.fft.rfft(b, n=12, axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ya, np.fft.rfft(a, n=12, axis=0), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="axes must be unique"):  # errors are never cached
        cfft.fftn(a, axes=[0, 0])
    with pytest.raises(ValueError, match="axes must be unique"):
        cfft.fftn(a, axes=[0, 0])


def test_byte_swapped_input():
    x = rng_array((3, 8), "float64").astype(">f8")
    y = cfft.fft(x)
    assert y.dtype == np.complex128
    np.testing.assert_allclose(y, np.fft.fft(x.astype(np.float64)), rtol=1e-12, atol=1e-12)
    z = cfft.hfft(rng_array((3, 5), "complex64").astype(">c8"), n=8)
    assert z.dtype == np.float32 and z.shape == (3, 8)


def test_norm_given_as_numpy_string_is_accepted():
    """``norm=np.str_('ortho')`` is NumPy's own string type: accepted as NumPy accepts it
    (fuzz finding F11), by the NumPy-style functions and the nvmath-style ones."""
    import cuweave.fft as F
    from cuweave.fft import numpy as cfft

    x = np.random.default_rng(3).standard_normal(16) + 0j
    want = np.fft.fft(x, norm="ortho")
    np.testing.assert_allclose(cfft.fft(x, norm=np.str_("ortho")), want, atol=1e-12)
    for _ in range(2):  # the cached plan too
        np.testing.assert_allclose(F.fft(x, norm=np.str_("ortho"), execution="cpu"), want,
                                   atol=1e-12)


def test_sequences_and_scalars_are_taken_as_numpy_takes_them():
    """numpy.fft converts lists and scalars with ``np.asarray`` (fuzz finding F14)."""
    np.testing.assert_allclose(cfft.fft([1.0, 2.0, 3.0]), np.fft.fft([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(cfft.rfft((1, 2, 3, 4)), np.fft.rfft((1, 2, 3, 4)))
    np.testing.assert_allclose(cfft.fft2([[1, 2], [3, 4j]]), np.fft.fft2([[1, 2], [3, 4j]]))
