"""Every pointer handed to cuBLASLt/cuFFT lives where the library reads it.

A host pointer passed to cuBLASLt as a device pointer faults the kernel and poisons the process's
CUDA context for good; these tests run every kind of fp8 scale against every operand space and
then check the context still works. The CPU part runs in CI.
"""

from __future__ import annotations

import numpy as np
import pytest

from cuweave._internal.errors import InvalidOperandError, InvalidOptionError
from cuweave.linalg.advanced import matmul

SCALE = 0.5
# kind -> (builder(torch) -> scale, where it lives: "scalar" | "host" | "device", accepted dtype)
SCALE_KINDS = {
    "python float": lambda t: SCALE,
    "numpy scalar": lambda t: np.float32(SCALE),
    "0-d numpy array": lambda t: np.array(SCALE, np.float32),
    "1-element numpy array": lambda t: np.array([SCALE], np.float64),
    "host tensor": lambda t: t.tensor(SCALE),
    "host bf16 tensor": lambda t: t.tensor([SCALE], dtype=t.bfloat16),
    "device tensor": lambda t: t.tensor([SCALE], device="cuda"),
    "device fp16 tensor": lambda t: t.tensor(SCALE, device="cuda", dtype=t.float16),
}
LIVES = {"python float": "scalar", "numpy scalar": "scalar", "0-d numpy array": "host",
         "1-element numpy array": "host", "host tensor": "host", "host bf16 tensor": "host",
         "device tensor": "device", "device fp16 tensor": "device"}


def _fp8_operands(t, device):
    rng = np.random.default_rng(11)
    a = t.from_numpy(rng.standard_normal((32, 48)).astype(np.float32)).to(t.float8_e4m3fn)
    b = t.from_numpy(rng.standard_normal((16, 48)).astype(np.float32)).to(t.float8_e4m3fn).T
    ref = a.double().numpy() @ b.double().numpy()
    return a.to(device), b.to(device), ref


def _expect(kind, space):
    """None if the call must run, else the error it must raise."""
    lives = LIVES[kind]
    if lives == "scalar":
        return None
    if (lives == "host") != (space == "host"):
        return "memory space"
    if kind == "device fp16 tensor":
        return "float32"
    return None


def _check(t, kind, space, execution=None):
    device = "cuda" if space == "device" else "cpu"
    a, b, ref = _fp8_operands(t, device)
    scale = SCALE_KINDS[kind](t)
    expect = _expect(kind, space)
    call = lambda: matmul(a, b, quantization_scales={"a": scale, "b": 1.0},  # noqa: E731
                          options={"result_type": "float32"}, execution=execution)
    if expect is not None:
        with pytest.raises(InvalidOperandError, match=expect) as info:
            call()
        assert "quantization_scales.a" in str(info.value)
        return
    r = call()
    got = r.double().cpu().numpy()
    err = np.linalg.norm(got - SCALE * ref) / np.linalg.norm(SCALE * ref)
    assert err < 1e-3, (kind, space, err)  # Hopper's fp8 MMA accumulates in reduced precision


@pytest.mark.parametrize("kind", [k for k, v in LIVES.items() if v != "device"])
def test_fp8_host_scales_on_cpu_execution(kind):
    t = pytest.importorskip("torch")
    _check(t, kind, "host", execution="cpu")


def test_scale_checks_need_no_gpu():
    t = pytest.importorskip("torch")
    a, b, _ = _fp8_operands(t, "cpu")
    with pytest.raises(InvalidOperandError, match="quantization_scales.b must be a real"):
        matmul(a, b, quantization_scales={"a": 1.0, "b": np.array([1], np.int32), "d": 1.0},
               execution="cpu")
    with pytest.raises(InvalidOptionError, match="^Quantization scaling is not supported for D"):
        matmul(a, b, quantization_scales={"a": 1.0, "b": 1.0, "d": 2.0},
               options={"result_type": "float32"}, execution="cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("space", ["host", "device"])
@pytest.mark.parametrize("kind", sorted(SCALE_KINDS))
def test_fp8_scale_kinds_by_operand_space(kind, space):
    t = pytest.importorskip("torch")
    _check(t, kind, space)
    # the context is still usable: a later GPU call (and a sync) succeeds
    x = t.ones(4, device="cuda")
    assert float((x * 2).sum().cpu()) == 8.0
    t.cuda.synchronize()


@pytest.mark.gpu
def test_fft_callback_user_data_must_be_device_readable():
    t = pytest.importorskip("torch")
    from cuweave.fft import DeviceCallable, fft

    x = t.randn(4, 64, dtype=t.complex64, device="cuda")
    pageable = np.zeros(16, np.float32)
    bogus = DeviceCallable(ltoir=b"never linked", data=pageable.ctypes.data)
    with pytest.raises(InvalidOptionError, match="epilog.data must be a pointer to device"):
        fft(x, epilog=bogus)
    assert float(t.ones(4, device="cuda").sum().cpu()) == 4.0
    t.cuda.synchronize()
