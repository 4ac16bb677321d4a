"""Page-locked results and registered operands (``cuweave._internal.pinned``) on the GPU: the
numbers stay right while arrays are registered, changed in place, dropped and replaced."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import cuweave.fft as F
from cuweave._internal import pinned
from cuweave.linalg.advanced import Matmul, matmul
from tests.references import rel_l2, rng_array

pytestmark = pytest.mark.gpu


@pytest.fixture
def fresh(monkeypatch):
    """A pool and a registry of this test's own (the process's may hold others' blocks)."""
    pool, regs = pinned.PinnedPool(256 << 20), pinned.Registrations(1 << 30)
    monkeypatch.setattr(pinned, "_POOL", [pool])
    monkeypatch.setattr(pinned, "_REGISTERED", [regs])
    yield pool, regs
    gc.collect()


def test_repeated_matmul_round_trips_register_and_stay_right(fresh):
    pool, regs = fresh
    a = rng_array((1024, 512), "float32", seed=1)  # 2 MiB operands, a 4 MiB result
    b = rng_array((512, 1024), "float32", seed=2)
    for run in range(6):
        if run == 4:
            a[::3] *= -2.0  # changed in place while registered: the next run reads it
        d = matmul(a, b)
        assert rel_l2(d, a.astype(np.float64) @ b) < 1e-5, run
        assert pinned.owns(d.ctypes.data, d.nbytes) == (run >= 1), run
    assert regs.held == a.nbytes + b.nbytes
    del a, b, d
    gc.collect()
    assert regs.held == 0  # unregistered as the arrays went
    for seed in range(3):  # new arrays (maybe at the old addresses) are right from the start
        a = rng_array((1024, 512), "float32", seed=10 + seed)
        b = rng_array((512, 1024), "float32", seed=20 + seed)
        assert rel_l2(matmul(a, b), a.astype(np.float64) @ b) < 1e-5


def test_planned_execute_and_results_fed_back(fresh):
    a = rng_array((768, 768), "float64", seed=3)  # 4.5 MiB
    want = a @ a
    with Matmul(a, a) as mm:
        mm.plan()
        for _ in range(4):
            assert rel_l2(mm.execute(), want) < 1e-12
    x = a
    for i in range(4):  # a pooled result as the next operand: DMA-ed from its block
        x = matmul(x, a, alpha=1 / 30)
        assert i == 0 or pinned.owns(x.ctypes.data, x.nbytes)
    ref = a
    for _ in range(4):
        ref = ref @ a / 30.0
    assert rel_l2(x, ref) < 1e-11


def test_repeated_fft_round_trips(fresh):
    x = rng_array((512, 1024), "complex64", seed=4)  # 4 MiB
    for run in range(5):
        if run == 3:
            x[:, ::7] = 1.0
        y = F.fft(x, axes=(1,), execution="cuda")
        assert rel_l2(y, np.fft.fft(x.astype(np.complex128), axis=1)) < 1e-5, run
    z = F.ifft(np.asfortranarray(x), axes=(0,), execution="cuda", norm="backward")
    assert rel_l2(z, np.fft.ifft(x.astype(np.complex128), axis=0)) < 1e-5


def _record_dmas(monkeypatch):
    """Every cuda.memcpy_async as (dst, src, nbytes), still run."""
    from cuweave._internal import cuda

    seen, real = [], cuda.memcpy_async

    def memcpy_async(dst, src, nbytes, stream):
        seen.append((dst, src, nbytes))
        real(dst, src, nbytes, stream)

    monkeypatch.setattr(cuda, "memcpy_async", memcpy_async)
    return seen


def test_memory_page_locked_by_torch_is_dma_ed_in_place(fresh, monkeypatch):
    torch = pytest.importorskip("torch")
    a = torch.from_numpy(rng_array((1024, 512), "float32", seed=5)).pin_memory()  # 2 MiB
    b = torch.from_numpy(rng_array((512, 1024), "float32", seed=6)).pin_memory()
    dmas = _record_dmas(monkeypatch)
    d = matmul(a, b)  # CPU tensors: run on the GPU, the result a CPU tensor
    want = a.numpy().astype(np.float64) @ b.numpy()
    assert isinstance(d, torch.Tensor) and d.device.type == "cpu"
    assert rel_l2(d.numpy(), want) < 1e-5
    # the first call already: one DMA straight from each pinned tensor, nothing registered
    assert {(src, n) for _dst, src, n in dmas} >= {(a.data_ptr(), a.nbytes),
                                                  (b.data_ptr(), b.nbytes)}
    assert fresh[1].held == 0


def test_in_place_fft_downloads_into_a_registered_array(fresh, monkeypatch):
    x = rng_array((512, 1024), "complex64", seed=7)  # 4 MiB
    want = x.astype(np.complex128)
    dmas = _record_dmas(monkeypatch)
    for run in range(4):
        F.fft(x, axes=(1,), execution="cuda", options={"inplace": True})
        want = np.fft.fft(want, axis=1)
        assert rel_l2(x, want) < 1e-4, run
    # registered on its third upload: the last run's download is one DMA into x itself
    assert fresh[1].held == x.nbytes
    assert dmas[-1][0] == x.ctypes.data and dmas[-1][2] == x.nbytes
