"""GPU tests of cuweave.linalg.advanced (cuBLASLt): epilogs × dtypes × layouts, backward
passes, CPU/GPU agreement, lifecycle, host operands, fp8. Run with ``-m gpu``."""

from __future__ import annotations

import pickle
import zlib

import numpy as np
import pytest

from cuweave._internal.errors import (  # noqa: E402
    InvalidOperandError,
    InvalidOptionError,
    InvalidStateError,
)
from cuweave.linalg.advanced import (  # noqa: E402
    Matmul,
    MatmulOptions,
    MatmulQuantizationScales,
    matmul,
    matrix_qualifiers_dtype,
)
from cuweave.linalg.advanced._function import plan_cache  # noqa: E402
from tests.references import MATMUL_TOL as TOL
from tests.references import dgelu, forward
from tests.references import rel_l2 as rel_err

pytestmark = pytest.mark.gpu
M, N, K = 40, 24, 32
FORWARD = {"DEFAULT": None, "RELU": "relu", "GELU": "gelu", "BIAS": None, "RELU_BIAS": "relu",
           "GELU_BIAS": "gelu", "RELU_AUX": "relu", "GELU_AUX": "gelu", "RELU_AUX_BIAS": "relu",
           "GELU_AUX_BIAS": "gelu", "BGRADA": None, "BGRADB": None}
LAYOUTS = ["row", "col", "transposed", "batched", "broadcast"]
DTYPES = ["float16", "bfloat16", "float32", "float64"]


def torch():
    import torch as t

    return t


def tt(x, dtype):
    t = torch()
    return t.from_numpy(np.ascontiguousarray(x)).to(getattr(t, dtype)).cuda()


def host64(x):
    return x.detach().cpu().to(torch().float64 if not x.is_complex()
                               else torch().complex128).numpy()


def operands(rng, layout, dtype, m=M, n=N, k=K):
    r = rng.standard_normal
    if layout == "row":
        return tt(r((m, k)), dtype), tt(r((k, n)), dtype)
    if layout == "col":
        return tt(r((k, m)), dtype).T, tt(r((n, k)), dtype).T
    if layout == "transposed":
        return tt(r((k, m)), dtype).t(), tt(r((k, n)), dtype)
    if layout == "batched":
        return tt(r((3, m, k)), dtype), tt(r((3, k, n)), dtype)
    return tt(r((2, m, k)), dtype), tt(r((k, n)), dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("epilog", sorted(FORWARD))
def test_forward_epilogs(epilog, dtype, layout):
    rng = np.random.default_rng(zlib.crc32(f"{epilog}/{dtype}/{layout}".encode()))
    a, b = operands(rng, layout, dtype)
    bias = None
    inputs = None
    if "BIAS" in epilog and not epilog.startswith("BGRAD"):
        along_n = layout in ("row", "batched")
        bias = tt(rng.standard_normal(N if along_n else M), dtype)
        inputs = {"bias": bias}
    # cuBLASLt: BGRADA needs a column-major a, BGRADB a row-major b: other orders are copied
    out = matmul(a, b, epilog=epilog, epilog_inputs=inputs, alpha=0.75)
    res, aux = out if isinstance(out, tuple) else (out, {})
    _, ref = forward(host64(a), host64(b), alpha=0.75,
                     bias=host64(bias) if bias is not None else None, act=FORWARD[epilog])
    assert res.dtype == a.dtype and tuple(res.shape) == ref.shape
    # cuBLASLt's double-precision GELU uses a fast tanh (relative error ~1e-10)
    tol = 1e-9 if dtype == "float64" and "GELU" in epilog else TOL[dtype] * 5
    assert rel_err(host64(res), ref) < tol
    if epilog == "BGRADA":
        assert rel_err(host64(aux["bgrada"]).reshape(ref.shape[:-2] + (M,)),
                       host64(a).sum(-1)) < TOL[dtype] * 5
    if epilog == "BGRADB":
        assert rel_err(host64(aux["bgradb"]).reshape(-1, N)[0], host64(b).sum(-2).reshape(
            -1, N)[0]) < TOL[dtype] * 5


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_complex_with_conjugation_and_c(dtype, layout):
    rng = np.random.default_rng(1)
    ar, br = operands(rng, layout, "float64")
    a = (ar + 1j * ar.flip(-1)).to(getattr(torch(), dtype))
    b = (br + 1j * br).to(getattr(torch(), dtype))
    q = np.zeros(3, dtype=matrix_qualifiers_dtype)
    q["is_conjugate"][1] = True
    c = torch().randn(M, 1, dtype=a.dtype, device="cuda")
    r = matmul(a, b, c, alpha=0.5, beta=2.0, qualifiers=q)
    ref = 0.5 * host64(a) @ np.conj(host64(b)) + 2.0 * host64(c)
    assert rel_err(host64(r), ref) < TOL[dtype] * 5
    r = matmul(a.conj(), b)  # torch's lazy conjugation bit
    assert rel_err(host64(r), np.conj(host64(a)) @ host64(b)) < TOL[dtype] * 5


@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("along_n", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_backward_epilogs_reproduce_gradients(act, along_n, dtype):
    rng = np.random.default_rng(2)
    a, b = operands(rng, "row", dtype)
    bias = tt(rng.standard_normal(N if along_n else M), dtype)
    _, aux = matmul(a, b, epilog=f"{act.upper()}_AUX_BIAS", epilog_inputs={"bias": bias})
    z, _ = forward(host64(a), host64(b), bias=host64(bias))
    g, h = tt(rng.standard_normal((M, 16)), dtype), tt(rng.standard_normal((16, N)), dtype)
    dy = host64(g) @ host64(h)
    gaux = host64(aux["gelu_aux"]) if act == "gelu" else None
    if act == "relu":
        grad = dy * (z > 0)
    else:  # the GPU's own (rounded) pre-activations define the reference derivative
        zz = gaux.reshape(gaux.shape)
        zz = (zz[:N, :M].T if along_n else zz[:M, :N])
        grad = dy * dgelu(zz)
    r, aux2 = matmul(g, h, epilog=f"D{act.upper()}_BGRAD",
                                          epilog_inputs={f"{act}_aux": aux[f"{act}_aux"]})
    mism = np.mean(np.abs(host64(r) - grad) > 1e-2 * np.abs(grad).max())
    assert mism < 0.01 and rel_err(host64(r), grad) < 0.05
    expect = grad.sum(axis=0) if along_n else grad.sum(axis=1)
    assert rel_err(host64(aux2[f"d{act}_bgrad"]).ravel(), expect) < 0.05
    r2 = matmul(g, h, epilog=f"D{act.upper()}", epilog_inputs={f"{act}_aux": aux[f"{act}_aux"]})
    assert rel_err(host64(r2), host64(r)) < 1e-6


@pytest.mark.parametrize("epilog", sorted(FORWARD) + ["DRELU", "DGELU"])
def test_cpu_and_gpu_agree(epilog):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal(
        (K, N)).astype(np.float32)
    if epilog == "BGRADA":
        a = np.asfortranarray(a)  # cuBLASLt's BGRADA needs a column-major a
    inputs = {}
    if "BIAS" in epilog and not epilog.startswith("BGRAD"):
        inputs["bias"] = rng.standard_normal(N).astype(np.float32)
    if epilog in ("DRELU", "DGELU"):
        act = epilog[1:].lower()
        _, fwd = matmul(a, b, epilog=f"{act}_aux", execution="cpu")
        inputs[f"{act}_aux"] = fwd[f"{act}_aux"]
    out_c = matmul(a, b, epilog=epilog, epilog_inputs=inputs or None, execution="cpu")
    dev_inputs = {k: torch().from_numpy(v).cuda() for k, v in inputs.items()}
    a_dev = tt(a.T, "float32").T if epilog == "BGRADA" else tt(a, "float32")  # keep F order
    out_g = matmul(a_dev, tt(b, "float32"), epilog=epilog,
                   epilog_inputs=dev_inputs or None)
    rc, ac = out_c if isinstance(out_c, tuple) else (out_c, {})
    rg, ag = out_g if isinstance(out_g, tuple) else (out_g, {})
    assert rel_err(host64(rg), rc.astype(np.float64)) < 1e-5
    assert sorted(ac) == sorted(ag)
    for k in ac:
        x, y = ac[k], ag[k].cpu().numpy()
        assert x.shape == y.shape and x.dtype == y.dtype, k
        if x.dtype == np.uint8:  # compare the mask bits of real rows (padding unspecified)
            m_lt = N if "BIAS" in epilog else M
            bits_x = np.unpackbits(x, axis=0, bitorder="little")[:m_lt]
            bits_y = np.unpackbits(y, axis=0, bitorder="little")[:m_lt]
            assert np.mean(bits_x != bits_y) < 1e-3, k
        else:
            assert rel_err(y.astype(np.float64), x.astype(np.float64)) < 1e-5, k


def test_lifecycle_autotune_reset_and_algorithms():
    rng = np.random.default_rng(4)
    a, b = operands(rng, "row", "float32", 256, 256, 256)
    with Matmul(a, b) as mm:
        algos = mm.plan()
        assert algos and all(x.algorithm_id >= 0 for x in algos)
        tuned = mm.autotune(iterations=3)
        assert sorted(map(pickle.dumps, tuned)) == sorted(map(pickle.dumps, algos))
        r = mm.execute()
        assert rel_err(host64(r), host64(a) @ host64(b)) < 1e-5
        a2 = torch().randn_like(a)
        mm.reset_operands(a2)
        r = mm.execute(algorithm=mm.algorithms[-1])
        assert rel_err(host64(r), host64(a2) @ host64(b)) < 1e-5
        mm.reset_operands_unchecked(b=b.clone())
        mm.execute(release_workspace=True)
        assert mm.applicable_algorithm_ids(limit=4)
        alg = pickle.loads(pickle.dumps(mm.algorithms[0]))
        alg.split_k = alg.split_k  # configurable attribute round trip
    with pytest.raises(InvalidStateError):
        mm.execute()
    with Matmul(a, b) as mm2:
        mm2.plan(algorithms=[alg])
        assert rel_err(host64(mm2.execute()), host64(a) @ host64(b)) < 1e-5


def test_function_form_second_call_plans_nothing():
    rng = np.random.default_rng(5)
    a, b = operands(rng, "row", "float16")
    matmul(a, b)
    hits = plan_cache.hits
    a2 = torch().randn_like(a)
    r = matmul(a2, b)
    assert plan_cache.hits == hits + 1
    assert rel_err(host64(r), host64(a2) @ host64(b)) < TOL["float16"]


@pytest.mark.parametrize("epilog", [None, "RELU_BIAS", "GELU_AUX_BIAS"])
def test_host_operands_on_cuda(epilog):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, M, K)).astype(np.float32)
    b = np.asfortranarray(rng.standard_normal((K, N)).astype(np.float32))
    inputs = {"bias": rng.standard_normal(M).astype(np.float32)} if epilog else None
    with Matmul(a, b) as mm:
        assert mm.execution_space == "cuda:0"
        mm.plan(epilog=epilog, epilog_inputs=inputs)
        out = mm.execute()
    res = out[0] if isinstance(out, tuple) else out
    assert isinstance(res, np.ndarray)
    _, ref = forward(a, b, bias=inputs["bias"] if inputs else None,
                     act={"RELU_BIAS": "relu", "GELU_AUX_BIAS": "gelu"}.get(epilog))
    assert rel_err(res, ref) < 1e-5
    if epilog == "GELU_AUX_BIAS":
        cpu_aux = matmul(a, b, epilog=epilog, epilog_inputs=inputs, execution="cpu")[1]
        assert rel_err(out[1]["gelu_aux"], cpu_aux["gelu_aux"]) < 1e-5


def test_c_broadcast_and_inplace_on_device():
    rng = np.random.default_rng(7)
    a, b = operands(rng, "row", "float32")
    c1 = torch().randn(M, 1, device="cuda")
    r = matmul(a, b, c1, beta=0.5)
    assert rel_err(host64(r), host64(a) @ host64(b) + 0.5 * host64(c1)) < 1e-5
    c = torch().randn(M, N, device="cuda")
    ref = host64(a) @ host64(b) + host64(c)
    r = matmul(a, b, c, beta=1.0, options=MatmulOptions(inplace=True))
    assert r.data_ptr() == c.data_ptr() and rel_err(host64(c), ref) < 1e-5


def test_fp8_with_scales_and_amax():
    t = torch()
    rng = np.random.default_rng(8)
    a = tt(rng.standard_normal((64, 64)), "float32").to(t.float8_e4m3fn)
    b = tt(rng.standard_normal((64, 64)), "float32").to(t.float8_e4m3fn).T  # column-major
    ref = host64(a.float()) @ host64(b.float())
    r = matmul(a, b, quantization_scales={"a": 0.5, "b": 2.0},
                                    options={"result_type": "bfloat16"})
    assert r.dtype == t.bfloat16 and rel_err(host64(r), ref) < 2e-2
    scales = MatmulQuantizationScales(a=1.0, b=1.0, d=0.125)
    r, aux = matmul(a, b, quantization_scales=scales,
                                         options={"result_amax": True})
    assert r.dtype == t.float8_e4m3fn
    assert rel_err(host64(r.float()) / 0.125, ref) < 0.1
    assert abs(float(aux["result_amax"].cpu()) - np.abs(ref).max()) < 0.05 * np.abs(ref).max()
    with pytest.raises(InvalidOptionError, match="result_amax"):
        matmul(a, b, options={"result_type": "bfloat16", "result_amax": True})


def test_bad_inputs_on_gpu():
    t = torch()
    a = t.randn(8, 8, device="cuda")
    with pytest.raises(InvalidOperandError, match="same memory space"):
        Matmul(a, t.randn(8, 8))
    with pytest.raises(InvalidOptionError, match="execution"):
        Matmul(a, a, execution="cpu")
    with pytest.raises(InvalidOperandError, match="bias"):
        matmul(a, a, epilog="bias", epilog_inputs={"bias": t.randn(5, device="cuda")})
    with pytest.raises(InvalidOperandError, match="relu_aux"):
        matmul(a, a, epilog="drelu")


@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
def test_half_operands_float32_result(ab):
    """cuBLASLt's 16F/16BF A/B with 32F C/D (nvmath-python: the result type from c, else from
    options.result_type), with a float32 bias."""
    t = torch()
    rng = np.random.default_rng(12)
    a, b = tt(rng.standard_normal((96, 64)), ab), tt(rng.standard_normal((64, 80)), ab)
    c = tt(rng.standard_normal((96, 80)), "float32")
    bias = tt(rng.standard_normal((96, 1)), "float32")
    ref = host64(a.float()) @ host64(b.float())
    r = matmul(a, b, c, alpha=2.0, beta=0.5)
    assert r.dtype == t.float32 and rel_err(host64(r), 2.0 * ref + 0.5 * host64(c)) < 1e-5
    r = matmul(a, b, epilog="relu_bias", epilog_inputs={"bias": bias},
               options={"result_type": "float32"})
    assert r.dtype == t.float32
    assert rel_err(host64(r), np.maximum(ref + host64(bias), 0)) < 1e-5
