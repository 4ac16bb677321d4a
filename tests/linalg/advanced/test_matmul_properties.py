"""Property tests of the matmul entry points on the CPU (hypothesis, about 2,500 cases a run).

* every NumPy-valid layout (orders, transposed and strided views, batch broadcasting, 1-D
  operands, ``c`` forms) gives NumPy's result, and an in-place ``c`` that is a view into a larger
  buffer is written in its own elements only (the rest of the buffer is a guard that must not
  change);
* every bad input raises a typed cuweave error that is a ``ValueError``/``TypeError`` and names
  the parameter, before any work (the in-place target is unchanged).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuweave._internal.errors import CuweaveError
from cuweave.linalg.advanced import Matmul, MatmulEpilog, matmul
from tests.references import rel_l2

CPU = {"execution": "cpu"}

def _fits_float32(value) -> bool:
    """Whether a real scalar keeps its magnitude as the float32 scale type (else refused)."""
    with np.errstate(over="ignore"):
        return not np.isfinite(value) or bool(np.isfinite(np.float32(value)))

def fast(n):
    """Settings of these properties: ``n`` derandomized examples (the same cases each run)."""
    return settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck),
                    derandomize=True, database=None)
TOL = {"float32": 2e-5, "float64": 1e-12}


# ---- layouts ------------------------------------------------------------------------------------
@st.composite
def _matrix(draw, shape, dtype, name):
    """An array of ``shape`` with NumPy-valid but arbitrary strides: C or F order, a transposed
    view, or a strided slice of a larger buffer (values from a seeded generator)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["C", "F", "T", "slice", "neg"] if shape else ["C"]))
    if kind in ("C", "F"):
        return np.asarray(rng.standard_normal(shape), dtype=dtype, order=kind)
    if kind == "T":
        return np.ascontiguousarray(rng.standard_normal(shape[::-1]), dtype=dtype).T
    steps = tuple(draw(st.integers(1, 2)) for _ in shape)
    big = rng.standard_normal(tuple(n * s + 1 for n, s in zip(shape, steps))).astype(dtype)
    view = big[tuple(slice(0, n * s, s) for n, s in zip(shape, steps))]
    if kind == "neg":  # a reversed axis: negative strides
        axis = draw(st.integers(0, len(shape) - 1))
        view = np.flip(view, axis)
    return view


def _batch_pair(draw):
    """Batch shapes of a and b that broadcast (NumPy's rule), up to 3 axes."""
    full = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    shapes = []
    for _ in range(2):
        keep = draw(st.integers(0, len(full)))
        tail = full[len(full) - keep:]
        shapes.append(tuple(1 if draw(st.booleans()) else n for n in tail))
    return shapes


@st.composite
def _problems(draw):
    dtype = draw(st.sampled_from(["float32", "float64"]))
    m, n, k = (draw(st.integers(1, 6)) for _ in range(3))
    ba, bb = _batch_pair(draw)
    one_d = draw(st.sampled_from([None, None, None, "a", "b"]))
    a_shape = (k,) if one_d == "a" else ba + (m, k)
    b_shape = (k,) if one_d == "b" else bb + (k, n)
    a = draw(_matrix(a_shape, dtype, "a"))
    b = draw(_matrix(b_shape, dtype, "b"))
    return dtype, a, b


def _reference(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


@fast(700)
@given(_problems(), st.sampled_from([None, 0.5, -2.0]))
def test_valid_layouts_match_numpy(problem, alpha):
    dtype, a, b = problem
    got = matmul(a, b, alpha=alpha, **CPU)
    want = _reference(a, b) * (1.0 if alpha is None else alpha)
    assert np.shape(got) == want.shape
    assert rel_l2(np.asarray(got, np.float64), want) < TOL[dtype] or np.allclose(got, want,
                                                                                 atol=1e-5)


@st.composite
def _inplace_cases(draw):
    """2-D or batched a @ b with an in-place ``c``: a view (offset, row/column steps, either
    order) into a larger guard buffer."""
    dtype = draw(st.sampled_from(["float32", "float64"]))
    m, n, k = (draw(st.integers(1, 5)) for _ in range(3))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=1)))
    a = draw(_matrix(batch + (m, k), dtype, "a"))
    b = draw(_matrix(batch + (k, n), dtype, "b"))
    steps = tuple(draw(st.integers(1, 2)) for _ in batch + (m, n))
    offsets = tuple(draw(st.integers(0, 2)) for _ in batch + (m, n))
    order = draw(st.sampled_from(["C", "F"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    buf_shape = tuple(o + x * s + 1 for o, x, s in zip(offsets, batch + (m, n), steps))
    buf = np.asarray(rng.standard_normal(buf_shape), dtype=dtype, order=order)
    index = tuple(slice(o, o + x * s, s) for o, x, s in zip(offsets, batch + (m, n), steps))
    return dtype, a, b, buf, index


@fast(500)
@given(_inplace_cases(), st.sampled_from([0.0, 1.0, -0.5]))
def test_inplace_views_write_only_their_elements(case, beta):
    dtype, a, b, buf, index = case
    before = buf.copy()
    c = buf[index]
    want = _reference(a, b) + beta * c.astype(np.float64)
    got = matmul(a, b, c, beta=beta, options={"inplace": True}, **CPU)
    assert got is c
    assert rel_l2(buf[index], want) < TOL[dtype] or np.allclose(buf[index], want, atol=1e-5)
    guard = np.ones(buf.shape, bool)
    guard[index] = False
    np.testing.assert_array_equal(buf[guard], before[guard])


# ---- bad inputs ---------------------------------------------------------------------------------
def _ok_operands(rng):
    return rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(
        (3, 5)).astype(np.float32)


_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
                  st.text(max_size=4), st.lists(st.integers(0, 2), max_size=2),
                  st.just(object()), st.just(np.float32(1)), st.just(1j))


def _bad_cases():
    """(parameter name the error must mention, kwargs builder) for each kind of bad input."""
    def dtype_of(name, dt):
        def build(a, b, c):
            ops = {"a": a, "b": b}
            ops[name] = ops[name].astype(dt)
            return dict(args=(ops["a"], ops["b"]))
        return build

    cases = []
    for name in ("a", "b"):
        for dt in (np.int32, np.uint8, np.bool_, object, "U2", np.longdouble):
            cases.append((name, dtype_of(name, dt)))
    cases += [
        ("b", lambda a, b, c: dict(args=(a, b[:2]))),                        # K mismatch
        ("a", lambda a, b, c: dict(args=(np.float32(1.0), b))),             # a scalar
        ("b", lambda a, b, c: dict(args=(a, [[1.0] * 5] * 3))),              # a list
        ("a", lambda a, b, c: dict(args=(np.ma.masked_array(a), b))),
        ("c", lambda a, b, c: dict(args=(a, b, np.zeros((3, 3), np.float32)), beta=1.0)),
        ("beta", lambda a, b, c: dict(args=(a, b, c))),                      # c without beta
        ("c", lambda a, b, c: dict(args=(a, b, np.broadcast_to(c[:1], c.shape)), beta=1.0,
                                   options={"inplace": True})),
        ("epilog_inputs", lambda a, b, c: dict(args=(a, b), epilog="bias")),
        ("epilog_inputs", lambda a, b, c: dict(args=(a, b), epilog="relu",
                                               epilog_inputs={"bias": np.zeros(4, np.float32)})),
        ("bias", lambda a, b, c: dict(args=(a, b), epilog="bias",
                                      epilog_inputs={"bias": np.zeros(7, np.float32)})),
        ("bias", lambda a, b, c: dict(args=(a, b), epilog="bias",
                                      epilog_inputs={"bias": np.zeros(4, np.float64)})),
        ("relu_aux", lambda a, b, c: dict(args=(a, b), epilog="drelu",
                                          epilog_inputs={"relu_aux": np.zeros((16, 5),
                                                                              np.float32)})),
        ("options", lambda a, b, c: dict(args=(a, b), options={"no_such_option": 1})),
        ("options", lambda a, b, c: dict(args=(a, b), options=3)),
        ("inplace", lambda a, b, c: dict(args=(a, b), options={"inplace": 1})),
        ("compute_type", lambda a, b, c: dict(args=(a, b), options={"compute_type": "fast"})),
        ("preferences", lambda a, b, c: dict(args=(a, b), preferences={"x": 1})),
        ("limit", lambda a, b, c: dict(args=(a, b), preferences={"limit": 0})),
        ("max_waves_count", lambda a, b, c: dict(args=(a, b),
                                                 preferences={"max_waves_count": float("nan")})),
        ("execution", lambda a, b, c: dict(args=(a, b), execution="tpu")),
        ("num_threads", lambda a, b, c: dict(args=(a, b),
                                             execution={"name": "cpu", "num_threads": 0})),
        ("stream", lambda a, b, c: dict(args=(a, b), stream="s", **CPU)),
        ("stream", lambda a, b, c: dict(args=(a, b), stream=-1, **CPU)),
        ("qualifiers", lambda a, b, c: dict(args=(a, b), qualifiers=[1, 2, 3])),
        ("algorithm", lambda a, b, c: dict(args=(a, b), algorithm=0)),
        ("alpha", lambda a, b, c: dict(args=(a, b), alpha=10**400)),
        ("alpha", lambda a, b, c: dict(args=(a, b), alpha=1j)),
        ("beta", lambda a, b, c: dict(args=(a, b, c), beta=np.complex64(1j))),
    ]
    return cases


_BAD = _bad_cases()


@fast(600)
@given(st.sampled_from(range(len(_BAD))), st.integers(0, 2**32 - 1))
def test_bad_inputs_are_typed_errors_naming_the_parameter(which, seed):
    name, build = _BAD[which]
    rng = np.random.default_rng(seed)
    a, b = _ok_operands(rng)
    c = rng.standard_normal((4, 5)).astype(np.float32)
    kw = build(a, b, c)
    args = kw.pop("args")
    kw.setdefault("execution", "cpu")
    snapshot = [np.array(x, copy=True) for x in args if isinstance(x, np.ndarray)]
    with pytest.raises(CuweaveError) as e:
        matmul(*args, **kw)
    assert isinstance(e.value, ValueError | TypeError)
    assert name in str(e.value), (name, str(e.value))
    for x, before in zip([x for x in args if isinstance(x, np.ndarray)], snapshot):
        np.testing.assert_array_equal(x, before)


@fast(400)
@given(st.sampled_from(["epilog", "alpha", "beta", "algorithm"]), _JUNK)
def test_junk_scalars_and_enums(param, value):
    rng = np.random.default_rng(1)
    a, b = _ok_operands(rng)
    c = rng.standard_normal((4, 5)).astype(np.float32)
    args, kw = (a, b), {param: value}
    if param == "beta":
        args = (a, b, c)
    valid = value is None or (
        param in ("alpha", "beta") and isinstance(value, int | float | np.floating)
        and not isinstance(value, bool) and _fits_float32(value)) or (
        param == "epilog" and isinstance(value, int) and not isinstance(value, bool)
        and value in (1, 2))
    if valid:
        if param == "beta" and value is None:
            return  # c without beta: a bad-input case of its own
        matmul(*args, **kw, **CPU)  # runs
        return
    if param == "epilog" and isinstance(value, str) and \
            value.strip().upper().removeprefix("CUBLASLT_EPILOGUE_") in MatmulEpilog.__members__:
        return  # a name ("GELU" is four letters): not junk
    with pytest.raises(CuweaveError) as e:
        matmul(*args, **kw, **CPU)
    assert isinstance(e.value, ValueError | TypeError)
    assert param in str(e.value)


@fast(300)
@given(st.sampled_from(["a", "b", "c"]), st.sampled_from(["shape", "dtype", "order", "junk"]))
def test_reset_operands_refuses_other_layouts(name, change):
    rng = np.random.default_rng(2)
    a, b = _ok_operands(rng)
    c = rng.standard_normal((4, 5)).astype(np.float32)
    ops = {"a": a, "b": b, "c": c}
    bad = {"shape": ops[name][:-1], "dtype": ops[name].astype(np.float64),
           "order": np.asfortranarray(ops[name]), "junk": "x"}[change]
    with Matmul(a, b, c, beta=1.0, **CPU) as mm:
        mm.plan()
        with pytest.raises(CuweaveError) as e:
            mm.reset_operands(**{name: bad})
        assert isinstance(e.value, ValueError | TypeError)
        assert name in str(e.value)
        if change != "junk":  # the field that differs is named ("order": the strides)
            field = {"shape": "shape", "dtype": "dtype", "order": "strides"}[change]
            assert f"planned operand's {field}" in str(e.value)
        np.testing.assert_allclose(mm.execute(), a.astype(np.float64) @ b + c, rtol=1e-5,
                                   atol=1e-5)
