"""CPU numerics of cuweave.linalg.advanced (``_cpu.execute_cpu``) in the lt frame.

Every result is compared with a float64 NumPy reference computed here from the same (already
rounded) inputs, by relative L2 error with a bound that fits the result dtype. Outputs are
poisoned before each run.
"""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuweave._bindings.library_types import ComputeType as CT
from cuweave._internal.dtypes import numpy_dtype, to_float32
from cuweave._internal.errors import InvalidOptionError
from cuweave.linalg.advanced._cpu import (
    execute_cpu,
    gelu,
    gelu_grad,
    pack_relu_mask,
    round_operand,
    unpack_relu_mask,
)
from cuweave.linalg.advanced._epilogs import EPILOGS, MatmulEpilog, aux_layout
from tests.references import dgelu as ref_gelu_grad
from tests.references import gelu as ref_gelu
from tests.references import rel_l2

BOUND = {"float64": 1e-12, "float32": 2e-6, "float16": 2e-3, "bfloat16": 1.5e-2,
         "float8_e4m3fn": 0.12, "complex64": 2e-6, "complex128": 1e-12}
REAL = ["float16", "bfloat16", "float32", "float64"]
EPILOG_NAMES = [e.name for e in MatmulEpilog]


# --------------------------------------------------------------------------- references




def ref_unpack(aux, m):
    """Bit i%8 (LSB first) of byte i//8 in column j, written with plain loops."""
    aux = np.asarray(aux)
    out = np.zeros((*aux.shape[:-2], m, aux.shape[-1]), bool)
    for i in range(m):
        out[..., i, :] = (aux[..., i // 8, :] >> (i % 8)) & 1
    return out


def dec64(x, name):
    """Stored values as float64 (complex128 for complex)."""
    if name.startswith("complex"):
        return np.asarray(x).astype(np.complex128)
    if name in ("float64", "float32", "float16"):
        return np.asarray(x).astype(np.float64)
    return to_float32(np.asarray(x), name).astype(np.float64)




def close(x, ref, dtype, factor=1.0, scale=None):
    """Relative L2 within the dtype bound, allowing underflow to the dtype's subnormal floor.

    ``scale`` (default ``ref``) is the array whose norm the error is relative to: for an
    activation ``f(x)`` pass ``x`` too, since ``|f'| <= 1.13`` turns the error of ``x`` into an
    absolute, not relative, error of ``f(x)`` (think GELU's tail at ``x = -7``).
    """
    tiny = ml_dtypes.finfo(numpy_dtype(dtype) if dtype != "bfloat16" else ml_dtypes.bfloat16)
    floor = float(tiny.smallest_subnormal) * np.sqrt(np.size(ref))
    err = np.linalg.norm(np.asarray(x, np.complex128) - np.asarray(ref, np.complex128))
    norm = np.linalg.norm(ref) + (0.0 if scale is None else 1.13 * np.linalg.norm(scale))
    return err <= factor * BOUND[dtype] * norm + floor


def reference(spec, a, b, c, alpha, beta, bias, aux_in, m):
    """float64 reference: (d, pre-activation, bgrad vector or None)."""
    x = alpha * np.matmul(a, b)
    if c is not None and beta:
        x = x + beta * c
    if spec.bias:
        x = x + bias[:, :, None]
    pre = x
    act = spec.activation
    if act == "relu":
        x = np.where(x > 0, x, 0.0)
    elif act == "gelu":
        x = ref_gelu(x)
    elif act == "drelu":
        x = x * ref_unpack(aux_in, m)
    elif act == "dgelu":
        x = x * ref_gelu_grad(aux_in[..., :m, :])
    bgrad = {"d": lambda: x.sum(-1), "a": lambda: a.sum(-1), "b": lambda: b.sum(-2),
             None: lambda: None}[spec.bgrad_source]()
    return x, pre, bgrad


# --------------------------------------------------------------------------- operand makers
def storage(x64, name, rng=None):
    """(storage array, decoded float64 values) of float64 data rounded to ``name``."""
    s = x64.astype(numpy_dtype(name))
    return s, dec64(s, name)


def make(rng, shape, name, scale=1.0):
    x = rng.standard_normal(shape) * scale
    if name.startswith("complex"):
        x = x + 1j * rng.standard_normal(shape) * scale
    return storage(x, name)


def empty_aux(name, m, n, batch, dtype):
    shape, strides, dt = aux_layout(name, m, n, batch, dtype)
    npdt = numpy_dtype(dt)
    size = int(np.prod(shape))
    base = np.empty(size, npdt)
    base.view(np.uint8)[:] = 0xA5  # poison
    return np.lib.stride_tricks.as_strided(base, shape, tuple(s * npdt.itemsize for s in strides))


def poisoned(shape, name, order="C"):
    dt = numpy_dtype(name)
    x = np.empty(shape[:-2] + (shape[-1], shape[-2]) if order == "F" else shape, dt)
    x.view(np.uint8)[...] = 0xFF  # NaN pattern for every float type
    return x.swapaxes(-1, -2) if order == "F" else x


def run_case(rng, epilog, dtype, *, batch=2, m=19, n=13, k=11, d_order="C", a_bcast=False,
             b_trans=False, with_c=False, alpha=1.0, beta=0.0, compute_type=None,
             conj=(False, False), aux_in=None, d=None, bias_batched=True, num_threads=None):
    spec = EPILOGS[MatmulEpilog[epilog]]
    ct = compute_type or (CT.COMPUTE_64F if dtype in ("float64", "complex128") else CT.COMPUTE_32F)
    a_s, a64 = make(rng, (1 if a_bcast else batch, m, k), dtype)
    if a_bcast:
        a_s, a64 = (np.broadcast_to(x, (batch, m, k)) for x in (a_s, a64))
    if b_trans:
        b_s, b64 = make(rng, (batch, n, k), dtype)
        b_s, b64 = b_s.swapaxes(-1, -2), b64.swapaxes(-1, -2)
    else:
        b_s, b64 = make(rng, (batch, k, n), dtype)
    c_s = c64 = None
    if with_c:
        c_s, c64 = make(rng, (batch, m, 1), dtype)
        c_s, c64 = (np.broadcast_to(x, (batch, m, n)) for x in (c_s, c64))
    bias_s = bias64 = None
    if spec.bias:
        bias_s, bias64 = make(rng, (batch if bias_batched else 1, m), dtype)
    a_op = np.conj(a64) if conj[0] else a64
    b_op = np.conj(b64) if conj[1] else b64
    aux_in64 = None
    if aux_in is not None:
        aux_in64 = aux_in if spec.aux_input == "relu_aux" else dec64(aux_in, dtype)
    ref, pre, bgrad = reference(spec, a_op, b_op, c64, alpha, beta, bias64, aux_in64, m)
    if d is None:
        d = poisoned((batch, m, n), dtype, d_order)
    aux_out = {name: empty_aux(name, m, n, (batch,), dtype) for name in spec.outputs}
    execute_cpu(a_s, b_s, c_s, d, alpha=alpha, beta=beta, epilog=epilog, bias=bias_s,
                aux_in=aux_in, aux_out=aux_out,
                dtypes={"a": dtype, "b": dtype, "c": dtype if with_c else None, "d": dtype},
                compute_type=ct, conj_a=conj[0], conj_b=conj[1], num_threads=num_threads)

    def dec(x):
        return dec64(x, dtype)

    assert close(dec(d), ref, dtype, scale=pre), (epilog, dtype, rel_l2(dec(d), ref))
    check_aux(spec, aux_out, pre, bgrad, m, dtype, dec)
    return d, aux_out, pre


def check_aux(spec, aux_out, pre, bgrad, m, dtype, dec):
    if spec.aux_output == "relu_aux":
        aux = aux_out["relu_aux"]
        bits = ref_unpack(aux, aux.shape[-2] * 8)
        clear = np.abs(pre) > 1e-2 * np.abs(pre).max()  # away from rounding-sensitive zeros
        assert np.array_equal(bits[..., :m, :][clear], (pre > 0)[clear])
        assert not bits[..., m:, :].any()  # padding bits are zero
    if spec.aux_output == "gelu_aux":
        aux = dec(aux_out["gelu_aux"])
        assert close(aux[..., :m, :], pre, dtype)
        assert not np.any(aux[..., m:, :])
    if spec.bgrad_output:
        vec = dec(aux_out[spec.bgrad_output])[..., 0]
        assert vec.shape == bgrad.shape
        assert close(vec, bgrad, dtype, 4)


# --------------------------------------------------------------------------- tests
def forward_aux(spec):
    return spec.aux_input is None


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("epilog", [n for n in EPILOG_NAMES
                                    if forward_aux(EPILOGS[MatmulEpilog[n]])])
def test_forward_epilogs_every_real_dtype(epilog, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{epilog}/{dtype}".encode()))
    run_case(rng, epilog, dtype)


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("epilog", ["DRELU", "DRELU_BGRAD", "DGELU", "DGELU_BGRAD"])
def test_backward_epilogs_every_real_dtype(epilog, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{epilog}/{dtype}".encode()))
    spec = EPILOGS[MatmulEpilog[epilog]]
    m, n, batch = 19, 13, 2
    if spec.aux_input == "relu_aux":
        aux = pack_relu_mask(rng.random((batch, m, n)) > 0.5)
    else:
        aux = empty_aux("gelu_aux", m, n, (batch,), dtype)
        vals, _ = make(rng, (batch, m, n), dtype, scale=2.0)
        aux[...] = 0
        aux[:, :m, :] = vals
    run_case(rng, epilog, dtype, aux_in=aux, m=m, n=n, batch=batch)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("conj", [(False, False), (True, False), (False, True)])
def test_complex_default_with_conjugation(dtype, conj):
    rng = np.random.default_rng(7)
    run_case(rng, "DEFAULT", dtype, conj=conj, with_c=True, alpha=0.5 - 0.25j, beta=1.5 + 1j)


@pytest.mark.parametrize("epilog", ["RELU_AUX_BIAS", "GELU_AUX_BIAS", "DEFAULT", "BGRADA"])
@pytest.mark.parametrize("d_order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_layouts_alpha_beta_broadcast(epilog, d_order, dtype):
    rng = np.random.default_rng(3)
    run_case(rng, epilog, dtype, d_order=d_order, a_bcast=True, b_trans=True, with_c=True,
             alpha=0.75, beta=-1.25, bias_batched=False, m=150, n=37, k=21)


def test_non_contiguous_result_view():
    rng = np.random.default_rng(4)
    big = np.full((2, 40, 30), np.nan, np.float32)
    d = big[:, ::2, 1::2]  # neither row- nor column-contiguous
    run_case(rng, "GELU_BIAS", "float32", m=20, n=15, d=d)
    assert np.isnan(big[:, 1::2, :]).all() and np.isnan(big[:, :, ::2]).all()  # untouched


def test_raw_bfloat16_storage():
    """bfloat16 stored as raw uint16 (no ml_dtypes on the caller's side) decodes and encodes."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1, 8, 5)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((1, 5, 6)).astype(ml_dtypes.bfloat16)
    d_raw = np.full((1, 8, 6), 0xFFFF, np.uint16)
    execute_cpu(a.view(np.uint16), b.view(np.uint16), None, d_raw, alpha=1, beta=0,
                epilog="relu", dtypes={"a": "bfloat16", "b": "bfloat16", "c": None,
                                       "d": "bfloat16"}, compute_type=CT.COMPUTE_32F)
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)
    assert rel_l2(d_raw.view(ml_dtypes.bfloat16).astype(np.float64), ref) < BOUND["bfloat16"]


def test_fp8_inputs_float32_result():
    rng = np.random.default_rng(6)
    a_s, a64 = make(rng, (1, 16, 32), "float8_e4m3fn")
    b_s, b64 = make(rng, (1, 32, 8), "float8_e4m3fn")
    bias = rng.standard_normal((1, 16)).astype(ml_dtypes.bfloat16)
    d = poisoned((1, 16, 8), "float32")
    execute_cpu(a_s, b_s, None, d, alpha=1, beta=0, epilog="gelu_bias", bias=bias,
                dtypes={"a": "float8_e4m3fn", "b": "float8_e4m3fn", "c": None, "d": "float32"},
                compute_type=CT.COMPUTE_32F)
    ref = ref_gelu(a64 @ b64 + bias.astype(np.float64)[:, :, None])
    assert rel_l2(d, ref) < 1e-5


def test_inplace_result_is_c():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 9, 4))
    b = rng.standard_normal((2, 4, 7))
    c = rng.standard_normal((2, 9, 7))
    ref = 2.0 * a @ b + 0.5 * c
    execute_cpu(a, b, c, c, alpha=2.0, beta=0.5, epilog=None,
                dtypes={"a": "float64", "b": "float64", "c": "float64", "d": "float64"},
                compute_type=CT.COMPUTE_64F)
    assert rel_l2(c, ref) < 1e-13


@pytest.mark.parametrize("ct,kind", [(CT.COMPUTE_32F_FAST_16F, "float16"),
                                     (CT.COMPUTE_32F_FAST_16BF, "bfloat16"),
                                     (CT.COMPUTE_32F_FAST_TF32, "tf32")])
def test_fast_compute_types_round_inputs(ct, kind):
    rng = np.random.default_rng(9)
    a = rng.standard_normal((1, 64, 256)).astype(np.float32)
    b = rng.standard_normal((1, 256, 32)).astype(np.float32)
    d = poisoned((1, 64, 32), "float32")
    execute_cpu(a, b, None, d, alpha=1, beta=0, epilog=None, compute_type=ct,
                dtypes={"a": "float32", "b": "float32", "c": None, "d": "float32"})
    exact = a.astype(np.float64) @ b.astype(np.float64)
    ar, br = round_operand(a.copy(), kind), round_operand(b.copy(), kind)
    rounded = ar.astype(np.float64) @ br.astype(np.float64)
    assert rel_l2(d, rounded) < 1e-6
    assert rel_l2(d, exact) > 1e-5  # the rounding is real, not skipped
    assert np.array_equal(a[0, 0, :4], a[0, 0, :4].copy())  # caller's input untouched


def test_round_operand_matches_reference_rounding():
    x = np.random.default_rng(10).standard_normal(1000).astype(np.float32)
    assert np.array_equal(round_operand(x.copy(), "float16"), x.astype(np.float16))
    assert np.array_equal(round_operand(x.copy(), "bfloat16"),
                          x.astype(ml_dtypes.bfloat16).astype(np.float32))
    ulp = 2.0**-10  # tf32 keeps 10 mantissa bits, round to nearest even
    vals = np.array([1 + ulp / 2, 1 + 1.5 * ulp, 1 + 0.75 * ulp, -(1 + 1.5 * ulp)], np.float32)
    assert round_operand(vals, "tf32").tolist() == [1.0, 1 + 2 * ulp, 1 + ulp, -(1 + 2 * ulp)]
    c = (x[:8] + 1j * x[8:16]).astype(np.complex64)
    r = round_operand(c.copy(), "float16")
    assert np.array_equal(r.real, c.real.astype(np.float16)) and np.array_equal(
        r.imag, c.imag.astype(np.float16))


def test_compute_16f_rounds_the_product():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((1, 8, 64)).astype(np.float16)
    b = rng.standard_normal((1, 64, 8)).astype(np.float16)
    d = poisoned((1, 8, 8), "float16")
    execute_cpu(a, b, None, d, alpha=0.5, beta=0, epilog=None, compute_type=CT.COMPUTE_16F,
                dtypes={"a": "float16", "b": "float16", "c": None, "d": "float16"})
    ref = 0.5 * (a.astype(np.float64) @ b.astype(np.float64))
    assert rel_l2(d, ref) < 2e-3


def test_compute_32i_is_rejected():
    a = np.ones((1, 2, 2), np.float32)
    with pytest.raises(InvalidOptionError, match="compute_type must be a floating-point"):
        execute_cpu(a, a, None, a.copy(), alpha=1, beta=0, epilog=None,
                    compute_type=CT.COMPUTE_32I,
                    dtypes={"a": "float32", "b": "float32", "c": None, "d": "float32"})


def test_num_threads_limits_and_restores():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = [(i["internal_api"], i["num_threads"]) for i in threadpoolctl.threadpool_info()]
    rng = np.random.default_rng(12)
    run_d = poisoned((1, 64, 64), "float32")
    a = rng.standard_normal((1, 64, 64)).astype(np.float32)
    execute_cpu(a, a, None, run_d, alpha=1, beta=0, epilog="relu", num_threads=1,
                compute_type=CT.COMPUTE_32F,
                dtypes={"a": "float32", "b": "float32", "c": None, "d": "float32"})
    after = [(i["internal_api"], i["num_threads"]) for i in threadpoolctl.threadpool_info()]
    assert before == after
    assert rel_l2(run_d, np.maximum(a.astype(np.float64) @ a, 0)) < 2e-6


def test_relu_nan_maps_to_zero_and_mask_clear():
    a = np.ones((1, 2, 2), np.float32)
    b = np.eye(2, dtype=np.float32)[None]
    c = np.zeros((1, 2, 2), np.float32)
    c[0, 0, 0] = np.nan
    c[0, 1, 1] = -3
    d = poisoned((1, 2, 2), "float32")
    aux = empty_aux("relu_aux", 2, 2, (1,), "float32")
    execute_cpu(a, b, c, d, alpha=1, beta=1, epilog="relu_aux", aux_out={"relu_aux": aux},
                compute_type=CT.COMPUTE_32F,
                dtypes={"a": "float32", "b": "float32", "c": "float32", "d": "float32"})
    assert d.tolist() == [[[0.0, 1.0], [1.0, 0.0]]]
    assert ref_unpack(aux, 2)[0].tolist() == [[False, True], [True, False]]


@pytest.mark.parametrize("epilog,d_order", [("DRELU_BGRAD", "F"), ("DGELU_BGRAD", "C"),
                                           ("GELU_AUX_BIAS", "F"), ("RELU_AUX_BIAS", "C")])
def test_threaded_epilog_pass(monkeypatch, epilog, d_order):
    """Small blocks spread over 3 workers: same results (incl. bgrad partial sums)."""
    import cuweave.linalg.advanced._cpu as cpu

    for knob in ("PARALLEL_MIN_ELEMENTS", "PARALLEL_MIN_ELEMENTS_LIGHT"):
        monkeypatch.setattr(cpu, knob, 0)
    for knob in ("BLOCK_ELEMENTS", "BLOCK_ELEMENTS_LIGHT"):
        monkeypatch.setattr(cpu, knob, 64)
    rng = np.random.default_rng(14)
    m, n, batch = 45, 30, 2
    spec = EPILOGS[MatmulEpilog[epilog]]
    aux = None
    if spec.aux_input == "relu_aux":
        aux = pack_relu_mask(rng.random((batch, m, n)) > 0.5)
    elif spec.aux_input == "gelu_aux":
        aux = np.zeros((batch, n, 48), np.float32).swapaxes(-1, -2)
        aux[:, :m, :] = rng.standard_normal((batch, m, n))
    run_case(rng, epilog, "float32", batch=batch, m=m, n=n, d_order=d_order, aux_in=aux,
             num_threads=3)


def test_unbatched_and_permuted_aux_outputs():
    """Aux outputs given as 2-D / 1-D arrays, and with a batch order that cannot be merged."""
    rng = np.random.default_rng(15)
    m, n, k = 20, 6, 5
    a, b = rng.standard_normal((1, m, k)), rng.standard_normal((1, k, n))
    bias = rng.standard_normal((1, m))
    d = poisoned((1, m, n), "float64")
    relu = empty_aux("relu_aux", m, n, (), "float64")
    execute_cpu(a, b, None, d, alpha=1, beta=0, epilog="relu_aux_bias", bias=bias,
                aux_out={"relu_aux": relu}, compute_type=CT.COMPUTE_64F,
                dtypes={"a": "float64", "b": "float64", "c": None, "d": "float64"})
    pre = (a @ b + bias[:, :, None])[0]
    assert relu.shape == (16, n) and np.array_equal(ref_unpack(relu, m), pre > 0)
    grad = np.empty((m,))
    execute_cpu(a, b, None, d, alpha=1, beta=0, epilog="drelu_bgrad", aux_in=relu,
                aux_out={"drelu_bgrad": grad}, compute_type=CT.COMPUTE_64F,
                dtypes={"a": "float64", "b": "float64", "c": None, "d": "float64"})
    assert rel_l2(grad, ((a @ b)[0] * (pre > 0)).sum(-1)) < 1e-12
    # batch (2, 3) stored with the batch axes swapped: written through a copy-back
    a6, b6 = rng.standard_normal((6, m, k)), rng.standard_normal((6, k, n))
    gelu_aux = np.full((3, 2, n, 24), np.nan).transpose(1, 0, 3, 2)  # (2, 3, 24, n)
    bgrad = np.full((3, 2, m, 1), np.nan).transpose(1, 0, 2, 3)      # (2, 3, m, 1)
    d6 = poisoned((6, m, n), "float64")
    execute_cpu(a6, b6, None, d6, alpha=1, beta=0, epilog="gelu_aux", compute_type=CT.COMPUTE_64F,
                aux_out={"gelu_aux": gelu_aux},
                dtypes={"a": "float64", "b": "float64", "c": None, "d": "float64"})
    pre6 = (a6 @ b6).reshape(2, 3, m, n)
    assert rel_l2(gelu_aux[..., :m, :], pre6) < 1e-13 and not gelu_aux[..., m:, :].any()
    execute_cpu(a6, b6, None, d6, alpha=1, beta=0, epilog="bgrada", compute_type=CT.COMPUTE_64F,
                aux_out={"bgrada": bgrad},
                dtypes={"a": "float64", "b": "float64", "c": None, "d": "float64"})
    assert rel_l2(bgrad[..., 0], a6.sum(-1).reshape(2, 3, m)) < 1e-13


# --------------------------------------------------------------------------- aux round trips
@pytest.mark.parametrize("fwd,bwd", [("RELU_AUX_BIAS", "DRELU_BGRAD"), ("RELU_AUX", "DRELU"),
                                     ("GELU_AUX_BIAS", "DGELU_BGRAD"), ("GELU_AUX", "DGELU")])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_forward_aux_feeds_backward(fwd, bwd, dtype):
    """The forward aux reproduces the reference activation gradient in the backward epilog."""
    rng = np.random.default_rng(13)
    m, n = 140, 33
    _, aux_out, pre = run_case(rng, fwd, dtype, m=m, n=n, k=17)
    aux = next(iter(aux_out.values()))
    spec = EPILOGS[MatmulEpilog[bwd]]
    a_s, a64 = make(rng, (2, m, 9), dtype)
    b_s, b64 = make(rng, (2, 9, n), dtype)
    d = poisoned((2, m, n), dtype, "F")
    out = {name: empty_aux(name, m, n, (2,), dtype) for name in spec.outputs}
    execute_cpu(a_s, b_s, None, d, alpha=1, beta=0, epilog=bwd, aux_in=aux, aux_out=out,
                dtypes={"a": dtype, "b": dtype, "c": None, "d": dtype},
                compute_type=CT.COMPUTE_32F)
    grad = (pre > 0) if spec.aux_input == "relu_aux" else ref_gelu_grad(pre)
    ref = (a64 @ b64) * grad
    got = dec64(d, dtype)
    clear = np.abs(pre) > 1e-2 * np.abs(pre).max()
    assert rel_l2(got[clear], ref[clear]) < 4 * BOUND[dtype]
    if spec.bgrad_output:
        assert rel_l2(dec64(out[spec.bgrad_output], dtype)[..., 0], got.sum(-1)) < 4 * BOUND[dtype]


def test_pack_unpack_bit_order_and_padding():
    mask = np.zeros((1, 130, 2), bool)
    mask[0, 0, 0] = mask[0, 9, 0] = mask[0, 129, 1] = True
    aux = pack_relu_mask(mask)
    assert aux.shape == (1, 32, 2) and aux.strides == (64, 1, 32)
    assert aux[0, 0, 0] == 0b1 and aux[0, 1, 0] == 0b10 and aux[0, 16, 1] == 0b10
    assert aux.sum() == 1 + 2 + 2
    assert np.array_equal(unpack_relu_mask(aux, 130), mask)


def test_gelu_kernels_against_reference():
    x = np.linspace(-6, 6, 2001)
    assert np.max(np.abs(gelu(x) - ref_gelu(x))) < 1e-14
    assert np.max(np.abs(gelu_grad(x) - ref_gelu_grad(x))) < 1e-13


# --------------------------------------------------------------------------- hypothesis
@settings(max_examples=40, deadline=None)
@given(epilog=st.sampled_from([n for n in EPILOG_NAMES if forward_aux(EPILOGS[MatmulEpilog[n]])]),
       dtype=st.sampled_from(["float32", "float64", "float16"]),
       batch=st.integers(1, 3), m=st.integers(1, 140), n=st.integers(1, 40),
       k=st.integers(1, 24), d_order=st.sampled_from("CF"), a_bcast=st.booleans(),
       b_trans=st.booleans(), with_c=st.booleans(), seed=st.integers(0, 2**31))
def test_hypothesis_shapes_layouts(epilog, dtype, batch, m, n, k, d_order, a_bcast, b_trans,
                                   with_c, seed):
    rng = np.random.default_rng(seed)
    run_case(rng, epilog, dtype, batch=batch, m=m, n=n, k=k, d_order=d_order, a_bcast=a_bcast,
             b_trans=b_trans, with_c=with_c, alpha=1.5, beta=0.5 if with_c else 0.0)
