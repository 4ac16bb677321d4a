"""Soak test: 10,000 matmul cycles on the CPU through every entry point keep host memory flat
(no growth of Python objects, plan caches, aux-frame tables or native memory). ``-m slow``."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

from cuweave.linalg.advanced import Matmul, _layout, matmul
from cuweave.linalg.advanced._function import plan_cache

pytestmark = pytest.mark.slow
CYCLES = 10_000


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _cycle(i, rng, a, b, c, bias):
    kind = i % 5
    if kind == 0:
        matmul(a, b, **{"execution": "cpu"})
    elif kind == 1:
        _, aux = matmul(a, b, epilog="relu_aux_bias", epilog_inputs={"bias": bias},
                        execution="cpu")
        matmul(a, b, epilog="drelu_bgrad", epilog_inputs={"relu_aux": aux["relu_aux"]},
               execution="cpu")
    elif kind == 2:
        with Matmul(a, b, c, beta=0.5, execution="cpu") as mm:
            mm.plan(epilog="gelu")
            mm.execute()
            mm.reset_operands(a=a * 0.5)
            mm.execute()
    elif kind == 3:
        out = np.zeros((a.shape[0], b.shape[1] + 3), np.float32)
        matmul(a, b, out[:, 1:-2], beta=0.0, options={"inplace": True}, execution="cpu")
    else:  # errors must not leak either
        with pytest.raises(ValueError):
            matmul(a, b, epilog=2.0, execution="cpu")


def test_ten_thousand_cycles_keep_host_memory_flat():
    rng = np.random.default_rng(60)
    a = rng.standard_normal((32, 16)).astype(np.float32)
    b = rng.standard_normal((16, 32)).astype(np.float32)
    c = rng.standard_normal((32, 32)).astype(np.float32)
    bias = rng.standard_normal(32).astype(np.float32)
    warm = 1_000
    for i in range(warm):
        _cycle(i, rng, a, b, c, bias)
    gc.collect()
    tracemalloc.start()
    rss0 = _rss_bytes()
    traced0 = tracemalloc.get_traced_memory()[0]
    for i in range(warm, CYCLES):
        _cycle(i, rng, a, b, c, bias)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - traced0
    tracemalloc.stop()
    rss = _rss_bytes() - rss0
    assert traced < 512 * 1024, f"Python allocations grew by {traced} bytes"
    assert rss < 32 * 2**20, f"resident memory grew by {rss / 2**20:.1f} MiB"
    assert len(plan_cache) <= plan_cache.maxsize
    assert len(_layout._AUX_FRAMES) <= 2 * 512  # dead entries are swept


def _device_cycle(i, t, cp, ops):
    """One of the GPU paths that hold device memory: results, aux outputs, per-run copies,
    staging buffers, workspaces, cached plans (function forms) and FFT plans."""
    from cuweave.fft import fft

    a, b, bias, ah, bh, ac, bc, x = ops
    kind = i % 6
    if kind == 0:
        matmul(a, b)
        matmul(ac, bc)
    elif kind == 1:
        _, aux = matmul(a, b, epilog="relu_aux_bias", epilog_inputs={"bias": bias})
        matmul(a, b, epilog="drelu_bgrad", epilog_inputs={"relu_aux": aux["relu_aux"]})
    elif kind == 2:
        matmul(a, b, epilog="bgrada")  # row-major a: a per-run copy into column-major
    elif kind == 3:
        with Matmul(a, b) as mm:
            mm.plan(epilog="gelu")
            mm.execute()
            mm.reset_operands(a=a * 0.5)
            mm.execute()
    elif kind == 4:
        matmul(ah, bh, execution="cuda")  # host operands staged through device buffers
        fft(x, axes=[-1])
    else:
        with pytest.raises(ValueError):
            matmul(a, b, epilog=2.0)


def _process_device_bytes():
    """Device memory this process holds (nvidia-smi's per-process figure: contexts, every
    pool), or None where nvidia-smi cannot tell. The device's free memory would also move with
    other processes (parallel test workers share the GPU)."""
    import os
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        pid, _, mib = line.partition(",")
        if pid.strip() == str(os.getpid()) and mib.strip().isdigit():
            return int(mib) << 20
    return None


@pytest.mark.gpu
def test_ten_thousand_gpu_cycles_keep_device_memory_flat():
    """10,000 cycles through the GPU paths: torch's and CuPy's pools and this process's device
    memory stay flat after warm-up (no leaked results, copies, buffers or plans)."""
    t = pytest.importorskip("torch")
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(61)
    ah = rng.standard_normal((64, 32)).astype(np.float32)
    bh = rng.standard_normal((32, 48)).astype(np.float32)
    a, b = t.from_numpy(ah).cuda(), t.from_numpy(bh).cuda()
    bias = t.randn(64, device="cuda")
    ops = (a, b, bias, ah, bh, cp.asarray(ah), cp.asarray(bh),
           t.randn(16, 256, dtype=t.complex64, device="cuda"))
    for i in range(600):
        _device_cycle(i, t, cp, ops)
    t.cuda.synchronize()
    pool = cp.get_default_memory_pool()
    before = (t.cuda.memory_allocated(), pool.used_bytes(), _process_device_bytes())
    for i in range(600, CYCLES):
        _device_cycle(i, t, cp, ops)
    t.cuda.synchronize()
    gc.collect()
    after = (t.cuda.memory_allocated(), pool.used_bytes(), _process_device_bytes())
    assert after[0] - before[0] <= 1 << 20, f"torch allocations grew by {after[0] - before[0]}"
    assert after[1] - before[1] <= 1 << 20, f"CuPy allocations grew by {after[1] - before[1]}"
    if before[2] is not None and after[2] is not None:  # the whole process: pools, cuda.core
        assert after[2] - before[2] <= 64 << 20, \
            f"this process's device memory grew by {(after[2] - before[2]) / 2**20:.1f} MiB"
    assert len(plan_cache) <= plan_cache.maxsize
