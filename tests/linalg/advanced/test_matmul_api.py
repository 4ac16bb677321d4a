"""nvmath-compatible API behaviour of matmul: exception types (cuweave's typed classes that are
also the builtin nvmath raises), autotune pruning, scalars and raw-error regressions.

GPU-side logic runs under the recording fakes of tests/fakes/cublaslt.py (``gpu`` fixture)."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave._bindings import cublaslt as lt
from cuweave._internal import cuda
from cuweave._internal.errors import (
    CuweaveError,
    InvalidOperandError,
    InvalidOptionError,
    InvalidStateError,
)
from cuweave.linalg.advanced import Matmul, enable_autotune_cache, matmul
from tests.references import rel_l2

CPU = {"execution": "cpu"}


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ---- exception types ---------------------------------------------------------------------
def test_partial_reset_after_release_is_a_value_error():
    rng = np.random.default_rng(21)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    with Matmul(a, b, **CPU) as mm:
        mm.plan()
        mm.release_operands()
        with pytest.raises(ValueError, match=r"needs a, b") as e:
            mm.reset_operands(a=a)
        assert isinstance(e.value, InvalidStateError)
        mm.reset_operands(a=a, b=b)
        np.testing.assert_allclose(mm.execute(), a @ b, rtol=1e-5, atol=1e-6)


def test_package_mismatch_on_reset_is_a_type_error():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(22)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    with Matmul(a, b, **CPU) as mm:
        mm.plan()
        with pytest.raises(TypeError, match=r"^a must come from the planned operand's package "
                                            r"\(numpy\), got a torch operand") as e:
            mm.reset_operands(a=torch.from_numpy(a))
        assert isinstance(e.value, InvalidOperandError)


@pytest.mark.parametrize("algorithms", [[0], (None,), "x"])
def test_plan_algorithms_of_wrong_type_are_type_errors(algorithms):
    rng = np.random.default_rng(23)
    with Matmul(rand(rng, (4, 3)), rand(rng, (3, 5)), **CPU) as mm:
        with pytest.raises(TypeError, match=r"^algorithms") as e:
            mm.plan(algorithms=algorithms)
        assert isinstance(e.value, InvalidOptionError)


def test_plan_empty_algorithms_refused():
    rng = np.random.default_rng(24)
    with Matmul(rand(rng, (4, 3)), rand(rng, (3, 5)), **CPU) as mm:
        with pytest.raises(InvalidOptionError, match=r"non-empty list"):
            mm.plan(algorithms=[])


def test_execute_unplanned_algorithm_is_a_value_error(gpu):
    a, b = gpu.tensor(16, 16), gpu.tensor(16, 16)
    mm = Matmul(a, b)
    mm.plan()
    other = lt.HeuristicResult()
    other.algo.data[0] = 77
    from cuweave.linalg.advanced import Algorithm

    with pytest.raises(ValueError, match=r"^algorithm must be one of the planned"):
        mm.execute(algorithm=Algorithm.from_heuristic(other))
    with pytest.raises(TypeError, match=r"^algorithm must be"):
        mm.execute(algorithm=0)
    calls = len(gpu.matmul_calls)
    mm.execute(algorithm=mm.algorithms[0])
    assert len(gpu.matmul_calls) == calls + 1
    mm.free()


# ---- autotune(prune=N) ---------------------------------------------------------------------
def _four_algorithms(gpu, monkeypatch):
    def heuristic(*a, **k):
        out = []
        for i in range(4):
            r = lt.HeuristicResult()
            r.algo.data[0] = i + 1
            r.workspaceSize = 1024
            out.append(r)
        return out

    monkeypatch.setattr(lt, "algo_get_heuristic", heuristic)
    # the i-th timed algorithm (in plan order) takes 4 - i ms: the last planned is the fastest
    state = {"alg": None}
    gpu.on_matmul = lambda args: None
    durations = {1: 4.0, 2: 3.0, 3: 2.0, 4: 1.0}

    def elapsed(self, end):
        return durations[state["alg"]]

    monkeypatch.setattr(gpu.Event, "elapsed_ms", elapsed, raising=False)
    real_run = None

    def run(self, a, b, c, d, alg, stream):
        state["alg"] = alg.algorithm_id if alg is not None else self.algorithms[0].algorithm_id
        return real_run(self, a, b, c, d, alg, stream)

    from cuweave.linalg.advanced import _cuda

    real_run = _cuda.CudaEngine.run
    monkeypatch.setattr(_cuda.CudaEngine, "run", run)
    monkeypatch.setattr(cuda, "l2_cache_size", lambda dev: 1 << 20, raising=False)
    drv = cuda.driver()
    drv.cuMemsetD8Async = lambda *a: (0,)
    monkeypatch.setattr(cuda, "check", lambda res, name=None: res, raising=False)


@pytest.mark.parametrize("prune, kept", [(None, [4, 3, 2, 1]), (2, [4, 3]), (1, [4]),
                                         (9, [4, 3, 2, 1])])
def test_autotune_prune_keeps_the_fastest_n(gpu, monkeypatch, prune, kept):
    _four_algorithms(gpu, monkeypatch)
    mm = Matmul(gpu.tensor(16, 16), gpu.tensor(16, 16))
    assert [x.algorithm_id for x in mm.plan()] == [1, 2, 3, 4]
    got = mm.autotune(iterations=2, prune=prune)
    assert [x.algorithm_id for x in got] == kept
    assert [x.algorithm_id for x in mm.algorithms] == kept
    mm.free()


@pytest.mark.parametrize("prune", [0, -1, 1.5, True, "2"])
def test_autotune_bad_prune(gpu, prune):
    mm = Matmul(gpu.tensor(16, 16), gpu.tensor(16, 16))
    mm.plan()
    with pytest.raises(InvalidOptionError, match=r"^prune must be"):
        mm.autotune(prune=prune)
    mm.free()


# ---- scalars and raw-error regressions ------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["alpha", "beta"])
def test_complex_scalars_refused_for_real_operands(dtype, name):
    from cuweave._internal.dtypes import numpy_dtype

    rng = np.random.default_rng(25)
    a = rand(rng, (4, 3)).astype(numpy_dtype(dtype))
    b = rand(rng, (3, 5)).astype(numpy_dtype(dtype))
    c = rand(rng, (4, 5)).astype(numpy_dtype(dtype))
    kw = {"alpha": 1.0, "beta": 1.0, name: 1j}
    with pytest.raises(InvalidOperandError, match=r"must be real for real operands"):
        matmul(a, b, c, **kw, **CPU)
    kw[name] = np.complex64(1)
    with pytest.raises(InvalidOperandError, match=r"must be real for real operands"):
        matmul(a, b, c, **kw, **CPU)


@pytest.mark.parametrize("value", [10**400, -(10**400)])
def test_unrepresentable_scalar(value):
    rng = np.random.default_rng(26)
    with pytest.raises(InvalidOperandError, match=r"^alpha must be representable as a float64"):
        matmul(rand(rng, (4, 3)), rand(rng, (3, 5)), alpha=value, **CPU)


@pytest.mark.parametrize("value", [np.True_, True, "1", [1.0]])
def test_non_scalar_alpha(value):
    rng = np.random.default_rng(27)
    with pytest.raises(InvalidOperandError, match=r"^alpha must be a real or complex scalar"):
        matmul(rand(rng, (4, 3)), rand(rng, (3, 5)), alpha=value, **CPU)


def test_autotune_cache_path_type():
    with pytest.raises(InvalidOptionError, match=r"^path must be"):
        enable_autotune_cache(5)


@pytest.mark.parametrize("w", [float("nan"), float("inf"), -1.0])
def test_max_waves_count(w):
    rng = np.random.default_rng(28)
    with pytest.raises(InvalidOptionError, match=r"^max_waves_count must be"):
        matmul(rand(rng, (4, 3)), rand(rng, (3, 5)), preferences={"max_waves_count": w}, **CPU)


def test_masked_array_refused():
    rng = np.random.default_rng(29)
    a = np.ma.masked_array(rand(rng, (4, 3)), mask=np.eye(4, 3, dtype=bool))
    with pytest.raises(InvalidOperandError, match=r"^a must not be a masked array"):
        matmul(a, rand(rng, (3, 5)), **CPU)


class _BadCAI:
    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


class _BadDLPack:
    def __dlpack__(self, stream=None, max_version=None):
        return object()

    def __dlpack_device__(self):
        return (2, 0)


@pytest.mark.parametrize("x, proto", [
    (_BadCAI({"shape": (4, 3)}), "__cuda_array_interface__"),
    (_BadCAI({"shape": (4, 3), "typestr": "<zz", "data": (0, False), "version": 3}),
     "__cuda_array_interface__"),
    (_BadDLPack(), "__dlpack__"),
])
def test_malformed_exports_are_typed_errors(x, proto):
    rng = np.random.default_rng(30)
    with pytest.raises(CuweaveError, match=r"^a ") as e:
        matmul(x, rand(rng, (3, 5)))
    assert isinstance(e.value, ValueError | TypeError)


@pytest.mark.parametrize("junk", ["junk", (3,), (0, "x"), (0, -5), None])
def test_cuda_stream_protocol_returning_junk(junk):
    class S:
        def __cuda_stream__(self):
            return junk

    rng = np.random.default_rng(31)
    with pytest.raises(InvalidOptionError, match=r"__cuda_stream__"):
        matmul(rand(rng, (4, 3)), rand(rng, (3, 5)), stream=S(), **CPU)


@pytest.mark.parametrize("dt", [object, np.longdouble, "U3", np.uint64])
@pytest.mark.parametrize("which", ["a", "b"])
def test_dtype_errors_name_the_operand(dt, which):
    rng = np.random.default_rng(32)
    ops = {"a": rand(rng, (4, 3)), "b": rand(rng, (3, 5))}
    ops[which] = ops[which].astype(dt)
    with pytest.raises(InvalidOperandError, match=rf"^{which} dtype must be"):
        matmul(ops["a"], ops["b"], **CPU)


@pytest.mark.parametrize("da, db", [("float8_e5m2", "float8_e5m2"),
                                    ("float8_e4m3fn", "float8_e5m2"),
                                    ("float8_e5m2", "float8_e4m3fn")])
def test_fp8_e5m2_operands_on_the_cpu(da, db):
    from cuweave._internal.dtypes import numpy_dtype, to_float32

    rng = np.random.default_rng(33)
    a = rand(rng, (8, 16)).astype(numpy_dtype(da))
    b = np.asfortranarray(rand(rng, (16, 4))).astype(numpy_dtype(db))
    got = matmul(a, b, alpha=0.5, quantization_scales={"a": 1.0, "b": 1.0, "d": 1.0}, **CPU)
    assert got.shape == (8, 4)
    want = 0.5 * (to_float32(a, da).astype(np.float64) @ to_float32(b, db))
    err = np.abs(to_float32(np.asarray(got), _name(got)) - want)
    assert np.all(err <= 0.13 * np.abs(want) + 1e-2)


def _name(x):
    from cuweave._internal.dtypes import canonical_name

    return canonical_name(x.dtype)


# ---- BGRADA / BGRADB layouts (cuBLASLt restricts them; nvmath accepts any order) ------------
def test_bgradb_degenerate_b_picks_the_operation_cublaslt_needs(gpu):
    from cuweave._bindings.cublaslt import Operation
    from cuweave.linalg.advanced._epilogs import lt_epilog
    from cuweave.linalg.advanced._layout import lt_layout_ok

    x, dz = gpu.tensor(128, 16), gpu.tensor(128, 1)  # matmul(x.T, dz, epilog="bgradb")
    mm = Matmul(x.t(), dz)
    mm.plan(epilog="bgradb")
    p = mm._plan.problem
    assert lt_layout_ok(lt_epilog(mm._plan.epilog, p.swap), p)
    assert (p.b if not p.swap else p.a).op == (Operation.T if not p.swap else Operation.N)
    mm.execute()
    mm.free()
    mm = Matmul(gpu.tensor(1, 128).t(), gpu.tensor(1, 16))  # a degenerate (K, 1) a: BGRADA
    mm.plan(epilog="bgrada")
    mm.free()


@pytest.mark.parametrize("epilog, order_a, order_b", [("bgrada", "C", "C"), ("bgradb", "F", "F"),
                                                       ("bgrada", "C", "F"), ("bgradb", "C", "F")])
def test_bgrad_host_operands_are_staged_in_the_order_cublaslt_needs(gpu, epilog, order_a, order_b):
    from cuweave.linalg.advanced._epilogs import lt_epilog
    from cuweave.linalg.advanced._layout import lt_layout_ok

    rng = np.random.default_rng(34)
    a = np.asarray(rand(rng, (32, 16)), order=order_a)
    b = np.asarray(rand(rng, (16, 24)), order=order_b)
    with Matmul(a, b, execution="cuda") as mm:
        mm.plan(epilog=epilog)
        p = mm._plan.problem
        assert lt_layout_ok(lt_epilog(mm._plan.epilog, p.swap), p)
        staged_a, staged_b = mm._call.staged["a"][0], mm._call.staged["b"][0]
        np.testing.assert_array_equal(staged_a, a)  # same values, maybe another order
        np.testing.assert_array_equal(staged_b, b)
        mm.execute()
        assert len(gpu.matmul_calls) == 1


def test_epilog_input_from_another_package_is_a_type_error(gpu):
    mm = Matmul(gpu.tensor(16, 8), gpu.tensor(8, 12))
    with pytest.raises(TypeError, match=r"^epilog_inputs\['bias'\] must come from the operands' "
                                        r"package \(torch\), got a numpy array") as e:
        mm.plan(epilog="bias", epilog_inputs={"bias": np.zeros(16, np.float32)})
    assert isinstance(e.value, InvalidOperandError)
    mm.free()


def test_host_bias_with_device_operands_is_a_value_error_naming_the_memory_space():
    import types

    from cuweave._internal.arrays import Operand
    from cuweave._internal.packages import wrap_operand
    from cuweave.linalg.advanced._binding import EpilogBinding
    from cuweave.linalg.advanced._epilogs import epilog_spec

    torch = pytest.importorskip("torch")
    bias = torch.zeros(16)
    dev = Operand(None, "torch", 256, (16, 8), (8, 1), "float32", "cuda", 0)
    with pytest.raises(ValueError, match=r"epilog_inputs\['bias'\] must be in the same memory "
                                         r"space as a \(cuda:0\), got host"):
        EpilogBinding(epilog_spec("bias"), {"bias": wrap_operand(bias, "bias")},
                      types.SimpleNamespace(swap=False), None, {"a": dev}, None)


# ---- fp8 bias types (cuBLASLt: the result's type; float32 results take bfloat16, fp8
# results C's type) -----------------------------------------------------------------------------
@pytest.mark.parametrize("result_type, ok, bad", [
    ("float32", "bfloat16", ["float32", "float16"]),
    ("bfloat16", "bfloat16", ["float32", "float16"]),
    ("float16", "float16", ["float32", "bfloat16"]),
    (None, "float16", ["bfloat16", "float32"]),  # an e4m3 result: C (float16 by default)
])
def test_fp8_bias_types(result_type, ok, bad):
    from cuweave._internal.dtypes import numpy_dtype, to_float32

    rng = np.random.default_rng(35)
    e4m3 = numpy_dtype("float8_e4m3fn")
    a, b = rand(rng, (16, 32)).astype(e4m3), rand(rng, (32, 8)).astype(e4m3)
    options = {"result_type": result_type} if result_type else None
    scales = {"a": 1.0, "b": 1.0} if result_type else {"a": 1.0, "b": 1.0, "d": 1.0}
    bias = rand(rng, (16,))
    got = matmul(a, b, epilog="bias", epilog_inputs={"bias": bias.astype(numpy_dtype(ok))},
                 quantization_scales=scales, options=options, **CPU)
    want = to_float32(a, "float8_e4m3fn").astype(np.float64) @ to_float32(b, "float8_e4m3fn")
    want += to_float32(bias.astype(numpy_dtype(ok)), ok)[:, None]
    name = result_type or "float8_e4m3fn"
    tol = {"float32": 1e-6, "bfloat16": 1e-2, "float16": 2e-3, "float8_e4m3fn": 8e-2}[name]
    assert rel_l2(to_float32(np.asarray(got), name), want) < tol
    for dt in bad:
        with pytest.raises(InvalidOperandError, match=rf"^epilog_inputs\['bias'\] dtype must be "
                                                      rf"'{ok}', got '{dt}'"):
            matmul(a, b, epilog="bias", epilog_inputs={"bias": bias.astype(numpy_dtype(dt))},
                   quantization_scales=scales, options=options, **CPU)


# ---- the fp8 aux output's scale (epilog_inputs["aux_quantization_scale"], nvmath's) ------------
def _fp8_gelu_problem():
    from cuweave._internal.dtypes import numpy_dtype, to_float32

    rng = np.random.default_rng(36)
    e4m3 = numpy_dtype("float8_e4m3fn")
    a, b = rand(rng, (16, 32)).astype(e4m3), rand(rng, (32, 8)).astype(e4m3)
    pre = to_float32(a, "float8_e4m3fn").astype(np.float64) @ to_float32(b, "float8_e4m3fn")
    return a, b, pre


# cuBLASLt's rule for an fp8 aux output: e4m3 operands and result, float16 C, GELU_AUX(_BIAS)
_FP8_GELU = dict(epilog="gelu_aux", quantization_scales={"a": 1.0, "b": 1.0, "d": 1.0},
                 preferences={"epilog": {"aux_type": "float8_e4m3fn"}}, **CPU)


@pytest.mark.parametrize("scale", [1.0, 0.25, 2, np.float32(0.5), np.array([0.125], np.float32)])
def test_fp8_aux_scale_as_a_scalar_or_array(scale):
    from cuweave._internal.dtypes import to_float32

    a, b, pre = _fp8_gelu_problem()
    s = float(np.asarray(scale).reshape(-1)[0])
    for _ in range(2):  # the second call: the function form's cached plan, value read again
        _, aux = matmul(a, b, epilog_inputs={"aux_quantization_scale": scale}, **_FP8_GELU)
        got = to_float32(aux["gelu_aux"], "float8_e4m3fn")[:16]
        assert np.max(np.abs(got - s * pre)) <= np.max(np.abs(s * pre)) / 16 + 1e-6


def test_fp8_aux_scale_value_is_not_part_of_the_cached_plan():
    from cuweave._internal.dtypes import to_float32

    a, b, pre = _fp8_gelu_problem()
    for s in (1.0, 0.25, 0.5):
        _, aux = matmul(a, b, epilog_inputs={"aux_quantization_scale": s}, **_FP8_GELU)
        got = to_float32(aux["gelu_aux"], "float8_e4m3fn")[:16]
        assert np.max(np.abs(got - s * pre)) <= np.max(np.abs(s * pre)) / 16 + 1e-6
    with Matmul(a, b, quantization_scales={"a": 1.0, "b": 1.0, "d": 1.0}, **CPU) as mm:
        mm.plan(epilog="gelu_aux", preferences={"epilog": {"aux_type": "float8_e4m3fn"}},
                epilog_inputs={"aux_quantization_scale": 1.0})
        mm.reset_operands(epilog_inputs={"aux_quantization_scale": 0.25})
        _, aux = mm.execute()
        got = to_float32(aux["gelu_aux"], "float8_e4m3fn")[:16]
        assert np.max(np.abs(got - 0.25 * pre)) <= np.max(np.abs(0.25 * pre)) / 16 + 1e-6


def test_fp8_aux_scale_rules():
    a, b, _ = _fp8_gelu_problem()
    kw = dict(_FP8_GELU)
    with pytest.raises(ValueError, match=r"aux_quantization_scale'\] must be given when"):
        matmul(a, b, **kw)
    del kw["preferences"]
    with pytest.raises(ValueError, match=r"aux_quantization_scale'\] must be given only when"):
        matmul(a, b, epilog_inputs={"aux_quantization_scale": 1.0}, **kw)
    with pytest.raises(ValueError, match=r"aux_quantization_scale'\] must be a real"):
        matmul(a, b, epilog_inputs={"aux_quantization_scale": np.array([1], np.int32)},
               **_FP8_GELU)


def test_fp8_aux_type_follows_cublaslts_rule_before_any_work():
    """An fp8 aux output needs e4m3 a, b and result, a float16 C and GELU_AUX(_BIAS): other
    combinations are refused at plan time (on the GPU cuBLASLt's heuristic answered
    INVALID_VALUE for a bfloat16 result, H200 2026-12-01)."""
    a, b, _ = _fp8_gelu_problem()
    kw = dict(_FP8_GELU, epilog_inputs={"aux_quantization_scale": 0.5})
    kw["quantization_scales"] = {"a": 1.0, "b": 1.0}
    for result_type in ("bfloat16", "float16", "float32"):
        with pytest.raises(ValueError, match=r"^preferences.epilog.aux_type must be "
                           r"'float8_e4m3fn' only with .* result='" + result_type):
            matmul(a, b, options={"result_type": result_type}, **kw)
    with pytest.raises(ValueError, match="aux_type must be 'float8_e4m3fn' only"):
        matmul(a, b, **dict(_FP8_GELU, preferences={"epilog": {"aux_type": "float8_e5m2"}},
                            epilog_inputs={"aux_quantization_scale": 0.5}))
    with pytest.raises(ValueError, match=r"^preferences.epilog.aux_amax must be False unless"):
        matmul(a, b, **dict(_FP8_GELU, preferences={"epilog": {"aux_amax": True}}))


def test_fp8_aux_amax_as_nvmath_example24():
    """``preferences.epilog.aux_amax``: the aux output's amax (before its scale) is returned
    as ``gelu_aux_amax`` beside ``gelu_aux``."""
    from cuweave._internal.dtypes import to_float32

    a, b, pre = _fp8_gelu_problem()
    prefs = {"epilog": {"aux_type": "float8_e4m3fn", "aux_amax": True}}
    _, aux = matmul(a, b, **dict(_FP8_GELU, preferences=prefs,
                                 epilog_inputs={"aux_quantization_scale": 0.1}))
    assert set(aux) == {"gelu_aux", "gelu_aux_amax"}
    got = to_float32(aux["gelu_aux"], "float8_e4m3fn")[:16]
    assert np.max(np.abs(got - 0.1 * pre)) <= np.max(np.abs(0.1 * pre)) / 16 + 1e-6
    want = np.abs(pre).max()  # within the fp8 rounding of the stored aux (1/16)
    assert abs(float(aux["gelu_aux_amax"]) - want) <= want / 16


@pytest.mark.parametrize("cls", ["MatmulOptions", "MatmulPlanPreferences",
                                 "MatmulEpilogPreferences", "MatmulQuantizationScales"])
def test_option_classes_name_unknown_keywords(cls):
    import cuweave.linalg.advanced as adv

    with pytest.raises(TypeError, match=rf"^{cls} keywords must be among .* got unknown "
                                        r"\['foo'\]") as e:
        getattr(adv, cls)(foo=1)
    assert isinstance(e.value, InvalidOptionError)


# ---- a 1-D c: the result's own shape for vector results; refused for matrix results, as in
# nvmath-python 1.0 (NumPy adds (N,) to every row, older nvmath (M,) to every column) ---------
@pytest.mark.parametrize("a_shape, b_shape, c_len, want", [
    ((4, 3), (3,), 4, lambda a, b, c: a @ b + 1.5 * c),
    ((3,), (3, 2), 2, lambda a, b, c: a @ b + 1.5 * c),
    ((3,), (5, 3, 2), 2, lambda a, b, c: a @ b + 1.5 * c),
])
def test_one_dimensional_c_of_a_vector_result(a_shape, b_shape, c_len, want):
    rng = np.random.default_rng(61)
    a, b, c = rng.standard_normal(a_shape), rng.standard_normal(b_shape), rng.standard_normal(
        c_len)
    for _ in range(2):  # the second call: the function form's cached plan
        np.testing.assert_allclose(matmul(a, b, c, beta=1.5, **CPU), want(a, b, c), rtol=1e-12)
    with Matmul(a, b, c, beta=1.5, **CPU) as mm:
        mm.plan()
        mm.execute()
        mm.reset_operands(c=2 * c)
        np.testing.assert_allclose(mm.execute(), want(a, b, 2 * c), rtol=1e-12)


@pytest.mark.parametrize("a_shape, b_shape, c_len", [
    ((4, 3), (3, 2), 4), ((4, 3), (3, 2), 2), ((3, 3), (3, 3), 3), ((5, 4, 3), (3, 2), 4)])
def test_one_dimensional_c_of_a_matrix_result_is_refused(a_shape, b_shape, c_len):
    a, b = np.ones(a_shape), np.ones(b_shape)
    msg = (r"^c must be at least 2-D for a matrix result \(\(M, 1\) adds a column to every "
           rf"column, \(M, N\) is the whole matrix\), got shape \({c_len},\)")
    with pytest.raises(InvalidOperandError, match=msg) as e:
        matmul(a, b, np.ones(c_len), beta=1.0, **CPU)
    assert isinstance(e.value, ValueError)
    with Matmul(a, b, np.ones(a_shape[:-2] + (a_shape[-2], 1)), beta=1.0, **CPU) as mm:
        with pytest.raises(InvalidOperandError, match=msg):
            mm.reset_operands(c=np.ones(c_len))


def test_one_dimensional_c_of_the_wrong_length_names_c():
    a, b = np.ones((4, 3)), np.ones((3,))
    with pytest.raises(ValueError, match=r"^c shape must be the result's, \(4,\), got \(2,\)"):
        matmul(a, b, np.ones(2), beta=1.0, **CPU)


# ---- block-scaled (MXFP8/NVFP4) requests name what they need ---------------------------------
def test_block_scaling_names_the_gpu_it_needs():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match=r"^block_scaling must be False: .* compute capability "
                                         r">= 10\.0 and are not supported by cuweave yet"):
        matmul(a, a, options={"block_scaling": True}, **CPU)


def test_fp4_operands_name_the_gpu_they_need():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("this torch has no float4_e2m1fn_x2")
    a = torch.zeros(4, 2, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    with pytest.raises(ValueError, match=r"^a dtype must be one of .* packed FP4 \(NVFP4\) "
                                         r"operands need block-scaled matmuls"):
        matmul(a, a, **CPU)


# ---- 16-bit operands with a float32 result (cuBLASLt: A/B 16F or 16BF, C/D 32F, COMPUTE_32F;
# nvmath-python takes the result type from options.result_type, else from c) ------------------
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
def test_half_operands_float32_result(ab):
    from cuweave._internal.dtypes import numpy_dtype, to_float32

    rng = np.random.default_rng(41)
    a, b = rand(rng, (24, 40)).astype(numpy_dtype(ab)), rand(rng, (40, 16)).astype(numpy_dtype(ab))
    c, bias = rand(rng, (24, 16)), rand(rng, (24,))
    a64, b64 = to_float32(a, ab).astype(np.float64), to_float32(b, ab).astype(np.float64)
    got = matmul(a, b, c, alpha=2.0, beta=0.5, **CPU)  # the result type from c
    assert got.dtype == np.float32 and rel_l2(got, 2.0 * a64 @ b64 + 0.5 * c) < 1e-6
    got = matmul(a, b, epilog="relu_bias", epilog_inputs={"bias": bias},
                 options={"result_type": "float32"}, **CPU)  # bias: the result's type
    assert got.dtype == np.float32
    assert rel_l2(got, np.maximum(a64 @ b64 + bias[:, None], 0)) < 1e-6
    c0 = c.copy()
    with Matmul(a, b, c, beta=1.0, options={"inplace": True}, **CPU) as mm:
        mm.plan()
        assert mm.execute() is c
    assert rel_l2(c, a64 @ b64 + c0) < 1e-6  # written into the float32 c


@pytest.mark.parametrize("kw, exc, msg", [
    (dict(c="float64"), InvalidOperandError,
     r"^c dtype must be one of \['float16', 'float32'\] for float16 operands, got 'float64'"),
    (dict(c="float16", result_type="float32"), InvalidOperandError,
     r"^c dtype must be the result type \('float32'\) for float16 operands, got 'float16'"),
    (dict(result_type="float64"), InvalidOptionError,
     r"^result_type must be None or one of \['float16', 'float32'\] for float16 operands, "
     r"got 'float64'"),
    (dict(result_type="float32", compute_type="COMPUTE_16F"), InvalidOptionError,
     r"^compute_type must be COMPUTE_32F or COMPUTE_32F_PEDANTIC for float16 operands with a "
     r"float32 result, got COMPUTE_16F"),
    (dict(c="float16", ab="float32"), InvalidOperandError,
     r"^c dtype must be one of \['float32'\] for float32 operands, got 'float16'"),
])
def test_result_type_errors(kw, exc, msg):
    from cuweave.linalg.advanced import MatmulComputeType

    ab = kw.get("ab", "float16")
    a = np.ones((8, 8), ab)
    c = np.ones((8, 8), kw["c"]) if "c" in kw else None
    options = {k: v for k, v in (("result_type", kw.get("result_type")),
                                 ("compute_type", getattr(MatmulComputeType,
                                                          kw.get("compute_type", ""), None)))
               if v is not None}
    with pytest.raises(exc, match=msg) as info:
        matmul(a, a, c, beta=1.0 if c is not None else None, options=options or None, **CPU)
    assert isinstance(info.value, ValueError)
