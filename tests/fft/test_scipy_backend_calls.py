"""The native calls behind ``scipy.fft`` with cuweave's backend on device arrays, with CUDA
stubbed (``tests.fakes.cufft``): torch CPU tensors pose as CUDA tensors and are served on the
backend's CuPy branch (the one the benchmark's GPU cases take), so the whole path from
``scipy.fft`` through the argument handling, the recipe and the function forms' plan cache to
``cufftXtExec`` runs. These tests check calls, never numbers (the GPU tests check results).

The lean sequence for a batched 1-D transform of a contiguous array, the same calls torch.fft
makes: ``cufftCreate``, ``cufftSetAutoAllocation(0)`` and one ``cufftXtMakePlanMany`` with NULL
embeds (cuFFT's basic layout) on the first call, ``cufftSetStream`` once, then one
``cufftXtExec`` per call on the caller's own input pointer and a fresh output: no device
copy, no callback (SciPy's default ``norm`` never scales a forward transform), no allocation
but the work area (at plan time) and the result.
"""

from __future__ import annotations

import pytest
import scipy.fft as sfft

import cuweave.fft as F
from cuweave._bindings.library_types import DATA_TYPE
from cuweave.fft import _numpy_api
from cuweave.fft import scipy_backend as B
from tests.fakes.cufft import fake_cuda

torch = pytest.importorskip("torch")

_PLAN_ONCE = {"cufftCreate", "cufftSetAutoAllocation", "cufftXtMakePlanMany", "cufftSetStream"}


@pytest.fixture
def fake(monkeypatch):
    classify = B._classify
    monkeypatch.setattr(B, "_classify",
                        lambda x: "device" if type(x) is torch.Tensor else classify(x))
    monkeypatch.setattr(B, "_WHERE", {})
    with fake_cuda() as f:
        F.plan_cache.clear()
        plans, auto = [], []
        dispatch = f._dispatch

        def recording(name, args):
            if name == "cufftXtMakePlanMany":
                plans.append(_plan_args(args))
            elif name == "cufftSetAutoAllocation":
                auto.append(int(args[1]))
            return dispatch(name, args)

        f._dispatch = recording
        f.plans, f.auto = plans, auto
        yield f


def _plan_args(args) -> dict:
    def arr(p):
        return None if p is None else [int(v) for v in p]

    return {"rank": int(args[1]), "n": arr(args[2]), "inembed": arr(args[3]),
            "istride": int(args[4]), "idist": int(args[5]), "itype": int(args[6]),
            "onembed": arr(args[7]), "ostride": int(args[8]), "odist": int(args[9]),
            "otype": int(args[10]), "batch": int(args[11]), "exectype": int(args[13])}


def _scipy(name, x, **kw):
    with sfft.set_backend(B):
        return getattr(sfft, name)(x, **kw)


@pytest.mark.parametrize("workspace", [0, 1 << 20])
def test_batched_r2c_is_the_lean_sequence(fake, workspace):
    fake.workspace = workspace
    x = torch.randn(64, 1024, dtype=torch.float32)
    ys = [_scipy("rfft", x) for _ in range(3)]
    assert set(fake.calls) == _PLAN_ONCE | {"cufftXtExec"} | (
        {"cufftSetWorkArea"} if workspace else set())
    assert all(fake.calls[n] == 1 for n in _PLAN_ONCE)
    assert fake.auto == [0]
    assert fake.plans == [{
        "rank": 1, "n": [1024], "inembed": None, "istride": 1, "idist": 1024,
        "itype": DATA_TYPE["float32"], "onembed": None, "ostride": 1, "odist": 513,
        "otype": DATA_TYPE["complex64"], "batch": 64, "exectype": DATA_TYPE["complex64"]}]
    assert [e[2] for e in fake.execs] == [x.data_ptr()] * 3  # the input itself, no copy
    assert [e[3] for e in fake.execs] == [y.data_ptr() for y in ys]
    assert [(tuple(y.shape), y.dtype) for y in ys] == [((64, 513), torch.complex64)] * 3
    # the work area is the one allocation (at plan time); no copy, event or sync per call
    assert fake.ops("memcpy", "sync", "wait") == []
    assert [e[2] for e in fake.ops("alloc")] == ([workspace] if workspace else [])


@pytest.mark.parametrize("name,shape,dtype,kw,n", [
    ("fft", (64, 1024), torch.complex64, {}, [1024]),
    ("fft", (1024, 64), torch.complex64, {"axis": 0}, [1024]),
    ("fft2", (256, 256), torch.complex64, {}, [256, 256]),
    ("rfftn", (32, 32, 32), torch.float32, {}, [32, 32, 32]),
    ("ifft", (64, 1024), torch.complex64, {"norm": "forward"}, [1024]),
])
def test_no_callback_and_no_copy_without_scaling(fake, name, shape, dtype, kw, n):
    x = torch.randn(*shape, dtype=dtype)
    for _ in range(2):
        _scipy(name, x, **kw)
    assert fake.calls["cufftCreate"] == 1 and fake.calls["cufftXtExec"] == 2
    assert fake.calls["cufftXtSetJITCallback"] == 0
    assert [p["n"] for p in fake.plans] == [n]
    assert fake.ops("memcpy", "alloc") == []


def test_scaled_inverse_fuses_its_norm(fake):
    x = torch.randn(64, 1024, dtype=torch.complex64)
    for _ in range(3):
        _scipy("ifft", x)  # SciPy's default norm scales the inverse: one fused callback
    assert fake.calls["cufftXtSetJITCallback"] == 1 and fake.calls["cufftXtExec"] == 3
    assert fake.calls["cufftCreate"] == 1 and fake.ops("memcpy") == []


def test_simple_recipes_go_straight_to_the_plan_cache(fake, monkeypatch):
    """No per-call layout probing in the NumPy layer: a simple recipe calls the function
    forms' body directly, and every call after the first hits the plan cache."""

    def no_engine(*args):
        raise AssertionError("_engine called on the direct path")

    monkeypatch.setattr(_numpy_api, "_engine", no_engine)
    x = torch.randn(64, 1024, dtype=torch.float32)
    c = torch.randn(64, 513, dtype=torch.complex64)
    d = torch.randn(64, 512, dtype=torch.complex64)
    hits = F.plan_cache.hits
    for _ in range(3):
        _scipy("rfft", x)
        _scipy("irfft", c)  # even length: no options
        _scipy("irfft", d, n=1023)  # odd length: the one odd-parity options object
    assert fake.calls["cufftCreate"] == 3 and F.plan_cache.hits == hits + 6
    assert [p["n"] for p in fake.plans] == [[1024], [1024], [1023]]


def test_unexpressible_layout_moves_axes_once(fake):
    x = torch.randn(3, 10, 15, dtype=torch.complex64)  # axis 1 between two batch axes
    for _ in range(3):
        y = _scipy("fft", x, axis=1)
        assert tuple(y.shape) == (3, 10, 15)
    assert fake.calls["cufftCreate"] == 1 and fake.calls["cufftXtExec"] == 3
    r = _numpy_api.recipe("fft", x, None, (1,), None, one_d=True)
    assert r.direct is None  # later calls skip the failing attempt
    assert ("torch", (3, 10, 15), (150, 15, 1), (1,)) in _numpy_api._MOVED


def test_workers_are_still_checked(fake):
    x = torch.randn(8, 64, dtype=torch.complex64)
    with pytest.raises(ValueError, match="workers"):
        _scipy("fft", x, workers=0)
    _scipy("fft", x, workers=2)  # accepted, unused on the GPU
    assert fake.calls["cufftXtExec"] == 1
