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
