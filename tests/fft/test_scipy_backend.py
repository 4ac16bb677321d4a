"""cuweave.fft.scipy_backend: the uarray protocol, what it serves, and results against scipy.fft
and numpy.fft on SciPy's kinds of inputs (anchor: cupyx.scipy.fft used as a backend)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.fft as sfft

import cuweave.fft as F
from cuweave.fft import scipy_backend as B
from cuweave.fft._numpy_api import Recipe
from tests.references import fft_tol as tol
from tests.references import rel_l2, rng_array, to_numpy

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

SERVED = [f"{k}{v}" for k in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
          for v in ("", "2", "n")]
REAL_IN = ("rfft", "ihfft")


def _input(name, shape, dtype, seed=0):
    if name.startswith(REAL_IN) and np.dtype(dtype).kind == "c":
        dtype = np.float32 if dtype == np.complex64 else np.float64
    return rng_array(shape, dtype, seed)


def _check(got, name, x, **kw):
    """``got`` against scipy.fft's own result (same dtype) and its double-precision one."""
    with sfft.set_backend("scipy", only=True):
        want_dtype = getattr(sfft, name)(x, **kw).dtype
        xd = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
        want = getattr(sfft, name)(xd, **kw)
    got = to_numpy(got)
    assert got.dtype == want_dtype
    assert got.shape == want.shape
    prec = "float32" if got.dtype in (np.float32, np.complex64) else "float64"
    assert rel_l2(got, want) < 4 * tol(prec, max(want.size, 2))


def _serve_on_cpu(monkeypatch):
    """Make the backend serve NumPy arrays of any size, computed by cuweave's CPU engine (no GPU
    here): the whole path from scipy.fft through the backend's argument handling runs. The
    engine's own scipy.fft calls are pinned to SciPy's backend (else they would dispatch back
    here). Yields the list of problems served."""
    served = []
    run = Recipe.run

    def cpu_run(self, x, *, execution=None):
        served.append((self.kind, tuple(self.s), tuple(self.axes), execution))
        with sfft.set_backend("scipy", only=True):
            return run(self, x, execution="cpu")

    monkeypatch.setattr(Recipe, "run", cpu_run)
    monkeypatch.setattr(B, "_gpu_usable", lambda: True)
    monkeypatch.setattr(B, "numpy_gpu_min_elements", 0)
    return served


@pytest.fixture
def served_on_cpu(monkeypatch):
    """:func:`_serve_on_cpu` for one test."""
    return _serve_on_cpu(monkeypatch)


# ---- the protocol ------------------------------------------------------------------------------
def test_protocol_attributes():
    assert F.scipy_backend is B
    assert B.__ua_domain__ == "numpy.scipy.fft"
    assert callable(B.__ua_function__)


@pytest.mark.parametrize("name", ["dct", "idctn", "dst", "idst"])
def test_other_functions_not_implemented(name):
    x = np.ones(8)
    assert B.__ua_function__(getattr(sfft, name), (x,), {}) is NotImplemented
    with sfft.set_backend(B):  # SciPy falls back to its own implementation
        np.testing.assert_allclose(getattr(sfft, name)(x), getattr(sfft, name)(x))


def test_not_implemented_cases(served_on_cpu):
    x = np.ones((4, 8))
    ua = B.__ua_function__
    assert ua(sfft.fft, (x.tolist(),), {}) is NotImplemented  # not an array we serve
    assert ua(sfft.fft, (np.ma.masked_array(x),), {}) is NotImplemented  # subclass
    assert ua(sfft.fft, (x,), {"plan": object()}) is NotImplemented
    assert ua(sfft.fft, (x.astype(np.longdouble),), {}) is NotImplemented
    assert ua(sfft.rfft, (x + 1j,), {}) is NotImplemented  # SciPy raises its own TypeError
    assert ua(sfft.fft, (x,), {"n": 0}) is NotImplemented
    assert ua(sfft.fft, (x,), {"workers": 0}) is NotImplemented
    for workers in (1, 3, -1):  # an explicit CPU request: SciPy's threads
        assert ua(sfft.fft, (x,), {"workers": workers}) is NotImplemented
    with sfft.set_workers(2):  # SciPy's threads beat the copies over PCIe
        assert ua(sfft.fft, (x,), {}) is NotImplemented
    assert not served_on_cpu
    assert ua(sfft.fft, (x,), {}) is not NotImplemented
    with sfft.set_workers(1):
        assert ua(sfft.fft, (x,), {}) is not NotImplemented
    assert len(served_on_cpu) == 2


def test_engine_cpu_execution_is_not_rerouted(served_on_cpu):
    """cuweave's CPU engine calls scipy.fft with ``workers``: the backend leaves it to SciPy."""
    x = rng_array((512, 1024), "complex64")
    with sfft.set_backend(B):
        y = F.fft(x, axes=(1,), execution=F.ExecutionCPU(num_threads=1))
    assert not served_on_cpu
    np.testing.assert_allclose(y, np.fft.fft(x, axis=1), rtol=1e-4, atol=1e-3)


def test_numpy_size_rule(monkeypatch, served_on_cpu):
    monkeypatch.setattr(B, "numpy_gpu_min_elements", 1000)
    ua = B.__ua_function__
    assert ua(sfft.fft, (np.ones((10, 50)),), {}) is NotImplemented  # 500 elements
    assert ua(sfft.fft, (np.ones((10, 50)),), {"n": 100}) is not NotImplemented  # 1000
    assert ua(sfft.irfft, (np.ones((10, 40)) + 0j,), {}) is NotImplemented  # 10 x 78 out
    assert ua(sfft.irfft, (np.ones((10, 60)) + 0j,), {}) is not NotImplemented  # 10 x 118
    monkeypatch.setattr(B, "numpy_gpu_min_elements", None)
    assert ua(sfft.fft, (np.ones((100, 100)),), {}) is NotImplemented
    assert [p[3] for p in served_on_cpu] == ["cuda", "cuda"]


def test_without_gpu_numpy_goes_to_scipy(monkeypatch):
    monkeypatch.setattr(B, "_gpu_usable", lambda: False)
    x = rng_array((64, 1024), "complex128")
    assert B.__ua_function__(sfft.fft, (x,), {}) is NotImplemented
    with sfft.set_backend(B):
        y = sfft.fft(x, workers=2)
    np.testing.assert_array_equal(y, sfft.fft(x, workers=2))


def test_global_backend_with_scipy_registered(served_on_cpu):
    x = rng_array((3, 10), "complex64")
    sfft.set_global_backend(B)
    try:
        sfft.register_backend("scipy")
        y = sfft.ifft2(x, s=(4, 12))
        z = sfft.dct(x.real)  # not served: SciPy's registered backend runs it
    finally:
        sfft.set_global_backend("scipy")
    _check(y, "ifft2", x, s=(4, 12))
    np.testing.assert_allclose(z, sfft.dct(x.real), rtol=1e-6)
    assert served_on_cpu and served_on_cpu[0][0] == "ifft"


# ---- semantics through scipy.fft (CPU engine standing in for the GPU) ----------------------------
ONE_D_CASES = [  # SciPy's kinds of inputs: odd sizes, n padding and cropping, negative axes
    ((15,), {}), ((15,), {"n": 8}), ((15,), {"n": 32}), ((7, 9), {"axis": 0}),
    ((7, 9), {"axis": -2, "n": 11}), ((4, 5, 6), {"axis": 1, "n": 3, "norm": "ortho"}),
    ((4, 5, 6), {"norm": "forward"}), ((2, 17), {"n": 1}),
]


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
@pytest.mark.parametrize("case", range(len(ONE_D_CASES)))
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_one_d_through_scipy(served_on_cpu, name, case, dtype):
    shape, kw = ONE_D_CASES[case]
    x = _input(name, shape, dtype)
    keep = x.copy()
    with sfft.set_backend(B):
        y = getattr(sfft, name)(x, overwrite_x=True, **kw)
    assert served_on_cpu
    _check(y, name, x, **kw)
    np.testing.assert_array_equal(x, keep)  # overwrite_x allows, never needs, overwriting


N_D_CASES = [
    ("fftn", {}), ("fftn", {"s": (3, 8)}), ("ifftn", {"axes": (-1, 0)}),
    ("fftn", {"s": (5, -1), "axes": (2, 0)}), ("rfftn", {"s": (4, 9)}),
    ("irfftn", {"axes": (0, 1, 2)}), ("irfftn", {"s": (6, 7), "axes": (-3, -1)}),
    ("hfftn", {"s": (3, 5)}), ("ihfftn", {"axes": (1,)}), ("fft2", {"norm": "ortho"}),
    ("ifft2", {"s": (2, 13)}), ("rfft2", {"axes": (0, 2)}), ("irfft2", {"s": (7, 7)}),
    ("hfft2", {}), ("ihfft2", {"norm": "forward"}),
]


@pytest.mark.parametrize("name,kw", N_D_CASES)
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_n_d_through_scipy(served_on_cpu, name, kw, dtype):
    x = _input(name, (5, 6, 7), dtype)
    with sfft.set_backend(B):
        y = getattr(sfft, name)(x, **kw)
    assert served_on_cpu
    _check(y, name, x, **kw)
    if hasattr(np.fft, name):  # numpy.fft agrees on the dtype
        with warnings.catch_warnings():  # NumPy 2 deprecates s without axes
            warnings.simplefilter("ignore", DeprecationWarning)
            assert y.dtype == getattr(np.fft, name)(x, **kw).dtype


def test_repeated_calls(served_on_cpu):
    x = rng_array((6, 10), "float32")
    with sfft.set_backend(B):
        ys = [sfft.rfft(x, n=12, axis=0) for _ in range(3)]
    assert len(served_on_cpu) == 3
    for y in ys[1:]:
        np.testing.assert_array_equal(y, ys[0])
    _check(ys[0], "rfft", x, n=12, axis=0)


@pytest.mark.parametrize("call,exc", [
    (lambda x: sfft.fftn(x, axes=(0, 0)), ValueError),
    (lambda x: sfft.fft(x, axis=3), IndexError),
    (lambda x: sfft.fft(x, n=0), ValueError),
    (lambda x: sfft.fftn(x, s=(2, 3), axes=(0,)), ValueError),
    (lambda x: sfft.fft(x, norm="bad"), ValueError),
    (lambda x: sfft.fft(x, workers=0), ValueError),
    (lambda x: sfft.rfft(x + 1j), TypeError),
    (lambda x: sfft.fft(x, plan="p"), NotImplementedError),
])
def test_numpy_errors_are_scipys(served_on_cpu, call, exc):
    x = np.ones((3, 4))
    with sfft.set_backend(B):
        with pytest.raises(exc) as got:
            call(x)
    with pytest.raises(exc) as want:
        call(x)
    assert str(got.value) == str(want.value)


@st.composite
def _problems(draw):
    name = draw(st.sampled_from(SERVED))
    ndim = draw(st.integers(2 if name.endswith("2") else 1, 4))
    shape = tuple(draw(st.lists(st.integers(2, 7), min_size=ndim, max_size=ndim)))
    dtype = draw(st.sampled_from(["float32", "float64", "complex64", "complex128", "int16"]))
    kw = {"norm": draw(st.sampled_from([None, "backward", "ortho", "forward"]))}
    if name[-1] not in "2n":
        kw["axis"] = draw(st.integers(-ndim, ndim - 1))
        kw["n"] = draw(st.one_of(st.none(), st.integers(1, 9)))
        return name, shape, dtype, kw
    k = 2 if name.endswith("2") else draw(st.integers(1, ndim))
    if draw(st.booleans()) or name.endswith("2"):
        kw["axes"] = tuple(draw(st.permutations(range(-ndim, ndim)).map(
            lambda p: [a for a in p if a < 0] if draw(st.booleans()) else p))[:k])
        k = len(kw["axes"])
        if len(set(a % ndim for a in kw["axes"])) != k:
            kw["axes"] = tuple(range(-k, 0))
    if draw(st.booleans()):
        kw["s"] = tuple(draw(st.lists(st.one_of(st.integers(1, 9), st.just(-1)),
                                      min_size=k, max_size=k)))
    return name, shape, dtype, kw


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(_problems())
def test_hypothesis_against_scipy(problem):
    name, shape, dtype, kw = problem
    x = _input(name, shape, dtype, seed=len(shape))
    with pytest.MonkeyPatch.context() as mp:
        served = _serve_on_cpu(mp)
        with sfft.set_backend(B):
            y = getattr(sfft, name)(x, **kw)
    assert served
    _check(y, name, x, **kw)


# ---- GPU ----------------------------------------------------------------------------------------
GPU_CASES = [
    ("fft", (6, 33), "complex64", {"n": 40}),
    ("fft", (6, 33), "float32", {"n": 17, "axis": 0}),
    ("ifft", (5, 7, 9), "complex128", {"axis": -2, "norm": "ortho"}),
    ("rfft", (4, 31), "float32", {"n": 30}),
    ("rfft", (4, 31), "int32", {}),
    ("irfft", (4, 16), "complex64", {"n": 31, "norm": "forward"}),
    ("irfft", (4, 16), "complex128", {}),
    ("hfft", (3, 9), "complex64", {"n": 15}),
    ("ihfft", (3, 9), "float64", {"n": 6}),
    ("fft2", (3, 16, 12), "complex128", {"s": (9, 12)}),
    ("ifft2", (3, 16, 12), "complex64", {"axes": (0, -1)}),
    ("rfft2", (3, 16, 13), "float64", {}),
    ("irfft2", (3, 16, 13), "complex64", {"s": (16, 25)}),
    ("fftn", (4, 5, 6, 7), "complex64", {}),
    ("ifftn", (8, 6, 10), "complex128", {"s": (5, -1), "axes": (-1, 0)}),
    ("rfftn", (6, 7, 8), "float32", {"s": (9, 4)}),
    ("irfftn", (6, 7, 5), "complex128", {"axes": (2, 0)}),
    ("hfftn", (5, 6, 7), "complex64", {"s": (5, 8)}),
    ("ihfft2", (5, 6, 7), "float32", {}),
]


def _cupy():
    return pytest.importorskip("cupy")


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(GPU_CASES)))
def test_cupy_arrays(case):
    cupy = _cupy()
    name, shape, dtype, kw = GPU_CASES[case]
    h = _input(name, shape, dtype)
    x = cupy.asarray(h)
    with sfft.set_backend(B):
        ys = [getattr(sfft, name)(x, workers=4, **kw) for _ in range(2)]
    for y in ys:
        assert isinstance(y, cupy.ndarray)
        _check(y, name, h, **kw)
    np.testing.assert_array_equal(x.get(), h)
    cufft = pytest.importorskip("cupyx.scipy.fft")
    # the anchor: CuPy's backend gives the same dtype and shape (except with -1 in s, where
    # CuPy 14's result differs from SciPy's: ifftn(x, s=(5, -1), axes=(-1, 0)) of an
    # (8, 6, 10) array is (7, 6, 5) there, (8, 6, 5) in SciPy and here)
    if hasattr(cufft, name) and -1 not in kw.get("s", ()):
        with sfft.set_backend(cufft, only=True):
            anchor = getattr(sfft, name)(x, **kw)
        assert anchor.dtype == ys[0].dtype and anchor.shape == ys[0].shape


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(GPU_CASES)))
def test_numpy_arrays_on_the_gpu(monkeypatch, case):
    monkeypatch.setattr(B, "numpy_gpu_min_elements", 0)
    name, shape, dtype, kw = GPU_CASES[case]
    x = _input(name, shape, dtype)
    with sfft.set_backend(B):
        y = getattr(sfft, name)(x, **kw)
    assert isinstance(y, np.ndarray)
    _check(y, name, x, **kw)


@pytest.mark.gpu
def test_cupy_errors():
    cupy = _cupy()
    x = cupy.ones((3, 4))
    with sfft.set_backend(B):
        for call, exc in [(lambda: sfft.fftn(x, axes=(0, 0)), ValueError),
                          (lambda: sfft.fft(x, axis=3), IndexError),
                          (lambda: sfft.fft(x, n=0), ValueError),
                          (lambda: sfft.fft(x, norm="bad"), ValueError),
                          (lambda: sfft.fft(x, workers=0), ValueError),
                          (lambda: sfft.rfft(x + 1j), TypeError)]:
            with pytest.raises(exc):
                call()


@pytest.mark.gpu
def test_global_backend_cupy():
    cupy = _cupy()
    h = rng_array((64, 100), "complex64")
    sfft.set_global_backend(B)
    try:
        sfft.register_backend("scipy")
        y = sfft.fftn(cupy.asarray(h), s=(64, 128))
        small = sfft.fft(h[:2, :8])  # NumPy, below the size rule: SciPy
    finally:
        sfft.set_global_backend("scipy")
    _check(y, "fftn", h, s=(64, 128))
    np.testing.assert_allclose(small, sfft.fft(h[:2, :8]))
