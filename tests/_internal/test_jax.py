"""JAX arrays in (DLPack) and results back as JAX arrays: the JAX adapter (``_internal/_jax.py``)
on CPU JAX, through both engines' CPU execution and, under the recording fakes, their CUDA runs
on staged host operands. Skipped without JAX."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from cuweave._internal.errors import InvalidOperandError
from cuweave._internal.packages import adapter, adapter_of, wrap_operand
from tests.references import rel_l2

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import cuweave.fft as F  # noqa: E402
from cuweave.linalg.advanced import Matmul, MatmulEpilog, matmul  # noqa: E402
from tests.fakes.cublaslt import FakeGPU  # noqa: E402

RNG = np.random.default_rng(7)


@pytest.fixture
def gpu(monkeypatch):
    """The recording cuBLASLt fakes (tests/fakes/cublaslt.py)."""
    from cuweave.linalg.advanced._function import plan_cache

    yield FakeGPU().install(monkeypatch)
    plan_cache.clear()


def _j(shape, dtype=np.float32):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return jnp.asarray(x.astype(dtype))


def _is_cpu_jax(x) -> bool:
    return isinstance(x, jax.Array) and next(iter(x.devices())).platform == "cpu"


# ---- the adapter ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "complex64", "int8"])
def test_wrap_reads_the_array_in_place(dtype):
    x = jnp.ones((3, 5), dtype=dtype)
    op = wrap_operand(x, "a")
    assert adapter_of(x) is adapter("jax") and op.package == "jax"
    assert (op.shape, op.strides, op.dtype, op.device) == ((3, 5), (5, 1), dtype, "cpu")
    assert op.ptr == x.unsafe_buffer_pointer() and op.obj is x  # zero-copy, the user's array


def test_host_view_is_read_only_and_shares_memory():
    x = _j((4, 6))
    view = wrap_operand(x, "a").host_array()
    assert not view.flags.writeable
    np.testing.assert_array_equal(view, np.asarray(x))


def test_tracers_and_deleted_arrays_are_refused():
    b = _j((3, 2))
    with pytest.raises(InvalidOperandError, match="a must be a concrete JAX array, got a tracer"):
        jax.jit(lambda t: matmul(t, b))(_j((4, 3)))
    x = _j((4, 3))
    x.delete()
    with pytest.raises(InvalidOperandError, match="a must be a live JAX array"):
        wrap_operand(x, "a")


def test_packages_are_not_mixed():
    with pytest.raises(InvalidOperandError, match="b must come from the same package"):
        Matmul(_j((4, 3)), np.ones((3, 2), np.float32), execution="cpu")


def test_deliver_puts_host_results_on_the_cpu_device():
    ad = adapter("jax")
    got = ad.deliver(np.arange(6.0, dtype=np.float32).reshape(2, 3).T)  # F-ordered
    assert _is_cpu_jax(got) and got.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(got), np.arange(6.0).reshape(2, 3).T)
    same = _j((2,))
    assert ad.deliver(same) is same


def test_import_cuweave_does_not_import_jax():
    code = ("import sys, cuweave, cuweave.fft, cuweave.linalg.advanced; "
            "print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# ---- matmul --------------------------------------------------------------------------------------
def test_matmul_function_form_returns_a_jax_array():
    a, b = _j((6, 4)), _j((4, 5))
    got = matmul(a, b, execution="cpu")
    assert _is_cpu_jax(got) and got.shape == (6, 5) and got.dtype == jnp.float32
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    assert rel_l2(np.asarray(got), ref) < 1e-5


def test_stateful_matmul_with_epilog_outputs_and_new_operands():
    a, b, bias = _j((8, 6)), _j((6, 5)), _j((8,))
    with Matmul(a, b, execution="cpu") as mm:
        mm.plan(epilog=MatmulEpilog.RELU_AUX_BIAS, epilog_inputs={"bias": bias})
        out, aux = mm.execute()
        assert _is_cpu_jax(out) and all(_is_cpu_jax(v) for v in aux.values())
        a2 = _j((8, 6))
        mm.reset_operands(a=a2)
        out2, _ = mm.execute()
    for x, res in ((a, out), (a2, out2)):
        ref = np.maximum(np.asarray(x, np.float64) @ np.asarray(b, np.float64)
                         + np.asarray(bias, np.float64)[:, None], 0)
        assert rel_l2(np.asarray(res), ref) < 1e-5


def test_matmul_1d_operand_result_is_squeezed_then_delivered():
    a, v = _j((5, 4)), _j((4,))
    got = matmul(a, v, execution="cpu")
    assert _is_cpu_jax(got) and got.shape == (5,)
    assert rel_l2(np.asarray(got), np.asarray(a, np.float64) @ np.asarray(v, np.float64)) < 1e-5


def test_inplace_targets_are_refused_before_any_work():
    a, b, c = _j((4, 3)), _j((3, 2)), _j((4, 2))
    with pytest.raises(InvalidOperandError, match="c must be writable for inplace=True"):
        Matmul(a, b, c, beta=1.0, options={"inplace": True}, execution="cpu")
    with pytest.raises(InvalidOperandError, match="operand must be writable for inplace=True"):
        F.fft(_j((8,), np.complex64), options={"inplace": True})


# ---- FFT -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["C2C", "R2C", "C2R"])
def test_fft_kinds_return_jax_arrays(kind):
    if kind == "C2C":
        x = _j((4, 16), np.complex64)
        got, ref = F.fft(x, axes=[1]), np.fft.fft(np.asarray(x, np.complex128), axis=1)
    elif kind == "R2C":
        x = _j((4, 16))
        got, ref = F.rfft(x, axes=[1]), np.fft.rfft(np.asarray(x, np.float64), axis=1)
    else:
        x = jnp.asarray(np.fft.rfft(RNG.standard_normal((4, 16)), axis=1).astype(np.complex64))
        got = F.irfft(x, axes=[1])  # unnormalized, as cuFFT and nvmath
        ref = np.fft.irfft(np.asarray(x, np.complex128), axis=1) * 16
    assert _is_cpu_jax(got) and got.shape == ref.shape
    assert rel_l2(np.asarray(got), ref) < 1e-5


def test_fft_object_reset_operand_keeps_returning_jax():
    x, x2 = _j((16, 8), np.complex64), _j((16, 8), np.complex64)
    with F.FFT(x, axes=[0]) as f:
        f.plan()
        first = f.execute()
        f.reset_operand(x2)
        second = f.execute(direction="inverse")
    assert _is_cpu_jax(first) and _is_cpu_jax(second)
    assert rel_l2(np.asarray(first), np.fft.fft(np.asarray(x, np.complex128), axis=0)) < 1e-5
    ref = np.fft.ifft(np.asarray(x2, np.complex128), axis=0) * 16  # cuFFT's unnormalized
    assert rel_l2(np.asarray(second), ref) < 1e-5


# ---- the CUDA runs on staged host operands, under the recording fakes ---------------------------
def test_staged_matmul_run_delivers_jax(gpu):
    a, b = _j((48, 32)), _j((32, 40))
    got = matmul(a, b)  # host operands, CUDA execution: uploaded, run, downloaded
    assert _is_cpu_jax(got) and got.shape == (48, 40)
    assert len(gpu.matmul_calls) == 1
    with Matmul(a, b) as mm:
        mm.plan(epilog="relu_aux")
        out, aux = mm.execute()
    assert _is_cpu_jax(out) and _is_cpu_jax(aux["relu_aux"])


def test_cached_plans_are_not_shared_with_numpy(gpu):
    """The function forms' plan caches key on the package: the same shapes from NumPy and
    JAX, alternately, each come back in their own package (CPU and staged CUDA runs)."""
    a, b = np.ones((48, 32), np.float32), np.ones((32, 40), np.float32)
    x = np.ones((4, 16), np.complex64)
    for execution in ("cpu", None):
        for wrap in (np.asarray, jnp.asarray, np.asarray):
            got = matmul(wrap(a), wrap(b), execution=execution)
            assert isinstance(got, np.ndarray) == (wrap is np.asarray)
            got = F.fft(wrap(x), axes=[1], execution=execution)
            assert isinstance(got, np.ndarray) == (wrap is np.asarray)


def test_staged_fft_run_delivers_jax(monkeypatch):
    from tests.fakes.cufft import fake_cuda

    run_mod = sys.modules["cuweave.fft._run"]

    class Stager:
        def upload(self, host, ptr, stream, direct=False):
            pass

        def download(self, ptr, dst, stream):
            dst[...] = 0

    monkeypatch.setattr(run_mod, "shared_stager", lambda: Stager())
    with fake_cuda() as fake:
        got = F.fft(_j((4, 16), np.complex64), axes=[1], execution="cuda")
        assert fake.execs and _is_cpu_jax(got) and got.shape == (4, 16)
