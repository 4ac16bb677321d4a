"""Bad inputs on every FFT entry point raise a typed error naming the parameter (hypothesis);
valid strided layouts give correct results and write nothing outside an in-place target.

The layout property runs on host operands here and on torch CUDA tensors under ``-m gpu``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cuweave.fft as F
from cuweave._internal.errors import CuweaveError
from tests.references import fft_reference as reference
from tests.references import fft_tol as tol
from tests.references import rel_l2, rng_array

X = rng_array((4, 8), "complex64")
R = rng_array((4, 8), "float64")


def _planned(**kw):
    f = F.FFT(X, **kw)
    f.plan()
    return f


#: entry point -> (call taking the parameter as a keyword, its parameters)
ENTRY_POINTS = {
    "fft": (lambda **kw: F.fft(X, **kw),
            ("axes", "direction", "options", "execution", "prolog", "epilog", "stream", "norm")),
    "ifft": (lambda **kw: F.ifft(X, **kw),
             ("axes", "direction", "options", "execution", "prolog", "epilog", "norm")),
    "rfft": (lambda **kw: F.rfft(R, **kw),
             ("axes", "options", "execution", "prolog", "epilog", "norm")),
    "irfft": (lambda **kw: F.irfft(X, **kw),
              ("axes", "options", "execution", "prolog", "epilog", "norm")),
    "FFT": (lambda **kw: F.FFT(X, **kw), ("axes", "options", "execution", "stream")),
    "FFT.plan": (lambda **kw: F.FFT(X).plan(**kw),
                 ("prolog", "epilog", "stream", "direction", "norm")),
    "FFT.execute": (lambda **kw: _planned().execute(**kw),
                    ("direction", "stream", "release_workspace")),
    "FFT.reset_operand": (lambda operand=X, **kw: _planned().reset_operand(operand, **kw),
                          ("operand", "stream")),
    "FFT.create_key": (lambda **kw: F.FFT.create_key(X, **kw),
                       ("axes", "options", "execution", "prolog", "epilog")),
    "FFT.create_key_from_metadata": (
        lambda shape=(4, 8), dtype="complex64", memory_space="cpu", **kw:
        F.FFT.create_key_from_metadata(shape, dtype, memory_space, **kw),
        ("shape", "dtype", "memory_space", "strides")),
    "estimate_workspace_size": (
        lambda key=None, **kw: F.estimate_workspace_size(
            F.FFT.create_key(X) if key is None else key, **kw), ("key", "technique")),
    "fftn": (lambda **kw: F.fftn(X, **kw), ("s", "axes", "norm", "out", "execution")),
    "numpy.fft": (lambda **kw: F.numpy.fft(X, **kw), ("n", "axis", "norm", "out")),
    "numpy.rfft": (lambda **kw: F.numpy.rfft(R, **kw), ("n", "axis", "norm", "out")),
}
CASES = [(e, p) for e, (_, params) in ENTRY_POINTS.items() for p in params]

_RESERVED = {"cpu", "gpu", "cuda", "c2c", "r2c", "c2r", "even", "odd", "auto"}
junk = st.one_of(
    st.text(max_size=4).filter(lambda t: t.strip().lower() not in _RESERVED),
    st.floats(allow_nan=True, allow_infinity=True).filter(lambda f: f != int(f)
                                                          if np.isfinite(f) else True),
    st.complex_numbers(min_magnitude=0.5).filter(lambda c: c.imag != 0),
    st.lists(st.text(min_size=1, max_size=2), min_size=1, max_size=3),
    st.dictionaries(st.text(min_size=4, max_size=6), st.integers(), min_size=1, max_size=2),
    st.builds(object),
    st.just(np.ma.masked_array([1.0 + 0j, 2.0])),
)


@pytest.mark.parametrize("entry, param", CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=junk)
def test_bad_value_raises_a_typed_error_naming_the_parameter(entry, param, value):
    call = ENTRY_POINTS[entry][0]
    try:
        call(**{param: value})
    except CuweaveError as e:
        assert isinstance(e, (ValueError, TypeError, IndexError)), repr(e)
        msg = str(e)
        assert param in msg or (param == "operand" and "operand" in msg), (entry, param, msg)
    else:
        pytest.fail(f"{entry}({param}={value!r}) was accepted")


# ---- valid layouts: correct results, no writes outside the operand ----------------------------
@st.composite
def strided_problems(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=ndim, max_size=ndim)))
    steps = tuple(draw(st.lists(st.sampled_from([1, 2, 3, -1, -2]), min_size=ndim,
                                max_size=ndim)))
    perm = tuple(draw(st.permutations(range(ndim))))
    naxes = draw(st.integers(1, ndim))
    axes = tuple(draw(st.permutations(range(ndim)))[:naxes])
    kind = draw(st.sampled_from(["C2C", "C2C-inplace", "R2C", "C2R"]))
    precision = draw(st.sampled_from(["single", "double"]))
    return shape, steps, perm, axes, kind, precision


def _view_in_guarded_buffer(xp_empty, base_shape, steps, perm, dtype, fill):
    """A strided view into the middle of a larger buffer whose other elements are ``fill``."""
    full = tuple(n * abs(s) for n, s in zip(base_shape, steps))
    guard = 7
    buf = xp_empty(int(np.prod(full)) + 2 * guard, dtype)
    buf[...] = fill
    block = buf[guard:guard + int(np.prod(full))].reshape(full)
    index = tuple(slice(None, None, s) for s in steps)
    view = block[index]
    return buf, view.permute(perm) if hasattr(view, "permute") else view.transpose(perm)


def _check(problem, to_device, to_host, empty):
    shape, steps, perm, axes, kind, precision = problem
    real, cplx = ("float32", "complex64") if precision == "single" else ("float64", "complex128")
    dtype = real if kind == "R2C" else cplx
    base_shape = tuple(shape[perm.index(i)] for i in range(len(shape)))
    buf, x = _view_in_guarded_buffer(empty, base_shape, steps, perm, dtype, fill=12345)
    if kind == "C2R":  # a Hermitian-consistent input: the rfftn of a real signal
        m = x.shape[axes[-1]]
        want_last = 2 * (m - 1) if m > 1 else 1
        opts = {"last_axis_parity": "even" if m > 1 else "odd"}
        signal_shape = list(x.shape)
        signal_shape[axes[-1]] = want_last
        src = np.fft.rfftn(rng_array(signal_shape, "float64"), axes=axes).astype(dtype)
    else:
        src = rng_array(x.shape, dtype)
        want_last, opts = None, {}
    x[...] = to_device(src)
    before = to_host(buf).copy()
    inplace = kind == "C2C-inplace"
    if inplace:
        opts["inplace"] = True
    fn = {"C2C": F.fft, "C2C-inplace": F.fft, "R2C": F.rfft, "C2R": F.irfft}[kind]
    try:
        y = fn(x, axes=axes, options=opts)
    except F.UnsupportedLayoutError:
        assert to_device is not _identity, "host operands run in every layout"
        np.testing.assert_array_equal(to_host(buf), before)
        return
    fft_type = kind.split("-")[0]
    direction = "inverse" if fft_type == "C2R" else "forward"
    want = reference(src, fft_type, direction, axes, out_last=want_last)
    n = int(np.prod([want.shape[a] if fft_type == "C2R" else src.shape[a] for a in axes]))
    assert rel_l2(to_host(y), want) < 4 * tol(cplx, n)
    after = to_host(buf)
    touched = np.zeros(buf.shape, bool)
    _view_in_guarded_buffer(lambda n, d: touched, base_shape, steps, perm, bool, False)[1][...] \
        = inplace
    np.testing.assert_array_equal(after[~touched], before[~touched])  # guard and gaps intact
    if not inplace:
        np.testing.assert_array_equal(after, before)  # the operand itself is never written


def _identity(a):
    return a


@settings(max_examples=150, deadline=None)
@given(problem=strided_problems())
def test_valid_strided_layouts_host(problem):
    _check(problem, _identity, np.asarray, lambda n, d: np.empty(n, d))


@pytest.mark.gpu
@settings(max_examples=150, deadline=None)
@given(problem=strided_problems())
def test_valid_strided_layouts_device(problem):
    torch = pytest.importorskip("torch")
    shape, steps, *rest = problem
    problem = (shape, tuple(abs(s) for s in steps), *rest)  # torch has no negative strides

    def empty(n, dtype):
        return torch.empty(n, dtype=getattr(torch, np.dtype(dtype).name), device="cuda")

    def to_device(a):
        return torch.from_numpy(np.ascontiguousarray(a)).cuda()

    def to_host(t):
        return t.cpu().numpy() if hasattr(t, "cpu") else np.asarray(t)

    _check(problem, to_device, to_host, empty)
