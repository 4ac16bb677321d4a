"""The CPU FFT backends: MKL's DFTI (the ``cpu-fft`` extra) against NumPy, and pocketfft where
MKL is absent, unwanted (``CUWEAVE_CPU_FFT``) or leaves a layout to it.

The MKL tests skip where MKL cannot be loaded; the rest run either way. The whole CPU FFT suite
(``test_fft_cpu.py``, ``test_numpy_api.py``, ...) runs on whichever backend the process has.
"""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

import cuweave.fft as F
from cuweave._internal.errors import InvalidOptionError, LibraryNotFoundError
from cuweave.fft import _cpu_backends as B
from cuweave.fft._cpu import CpuPlan
from cuweave.fft._options import FFTDirection
from tests.references import fft_tol, rel_l2, rng_array

FWD, INV = FFTDirection.FORWARD, FFTDirection.INVERSE


def _dfti():
    try:
        return B.mkl_library()
    except LibraryNotFoundError:
        return None


needs_mkl = pytest.mark.skipif(_dfti() is None,
                               reason="MKL not installed (pip install 'cuweave[cpu-fft]')")


@pytest.fixture
def fresh_choice(monkeypatch):
    """Forget the loaded backend, so that ``CUWEAVE_CPU_FFT`` is read again; restored after."""
    saved = dict(B._STATE)
    B._STATE.clear()
    yield monkeypatch
    B._STATE.clear()
    B._STATE.update(saved)


def _numpy(x, fft_type, direction, axes, norm, out_lengths=None):
    """NumPy's float64 transform with cuweave's meaning of ``norm=None`` (unscaled)."""
    xd = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    fwd = direction == FWD
    norm = norm or ("backward" if fwd else "forward")
    if fft_type == "C2C":
        return (np.fft.fftn if fwd else np.fft.ifftn)(xd, axes=axes, norm=norm)
    if fft_type == "R2C":
        return np.fft.rfftn(xd, axes=axes, norm=norm)
    return np.fft.irfftn(xd, s=out_lengths, axes=axes, norm=norm)


def _lengths(shape, fft_type, axes, parity="even"):
    """Output lengths along ``axes`` (C2R: from the halved input's last axis and parity)."""
    out = [shape[a] for a in axes]
    if fft_type == "C2R":
        out[-1] = 2 * (shape[axes[-1]] - 1) + (parity == "odd")
    return out


LAYOUTS = {  # shape, axes: 1-D..4-D, odd/prime/power-of-two, batches before, after, between
    "1d-pow2": ((256,), (0,)),
    "1d-prime": ((1009,), (0,)),
    "1d-odd-batched": ((7, 45), (1,)),
    "axis0-batched": ((30, 6), (0,)),
    "2d": ((24, 20), (0, 1)),
    "2d-reversed-axes": ((12, 10), (1, 0)),
    "2d-batched-prime": ((3, 13, 11), (1, 2)),
    "middle-axis": ((4, 9, 6), (1,)),
    "outer-axes": ((5, 4, 6), (2, 0)),
    "3d": ((8, 6, 10), (0, 1, 2)),
    "4d-two-batches": ((3, 4, 5, 6), (1, 3)),
    "unit-dims": ((1, 16, 1, 3), (1,)),
}
DTYPES = {"C2C": ("complex64", "complex128"), "R2C": ("float32", "float64"),
          "C2R": ("complex64", "complex128")}
CASES = [(t, d, lay) for t, ds in DTYPES.items() for d in ds for lay in sorted(LAYOUTS)]


@needs_mkl
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("fft_type, dtype, layout", CASES)
def test_mkl_matches_numpy(fft_type, dtype, layout, norm, threads, monkeypatch):
    """Every layout, dtype and norm, on one thread (one DFTI call) and on three (chunks and
    stages handed out to the threads: forced here at any size)."""
    monkeypatch.setattr(B, "PARALLEL_MIN", 1)
    shape, axes = LAYOUTS[layout]
    x = rng_array(shape, dtype)  # C2R: not Hermitian, so the leading axes must be C2C'd first
    keep = x.copy()
    lengths = _lengths(shape, fft_type, axes)
    plan = B.MklPlan(_dfti(), fft_type, axes, lengths, threads)
    logical = lengths if fft_type == "C2R" else [shape[a] for a in axes]
    # double precision with a large prime factor is pocketfft's (MKL is less accurate there)
    inaccurate = np.dtype(dtype).char in "dD" and any(
        B.largest_prime_factor(n) >= B.ACCURATE_PRIME_LIMIT for n in logical)
    for direction in ((FWD, INV) if fft_type == "C2C" else (FWD if fft_type == "R2C" else INV,)):
        y = plan.run(x, direction, norm)
        if inaccurate:
            assert y is None, "MKL kept a double-precision length it computes inaccurately"
            continue
        assert y is not None, "MKL handed a plain layout to pocketfft"
        want = _numpy(x, fft_type, direction, axes, norm, lengths)
        assert y.shape == want.shape and y.flags.c_contiguous
        real = np.dtype(dtype).type(0).real.dtype
        assert y.dtype == (real if fft_type == "C2R" else np.result_type(real, np.complex64))
        assert rel_l2(y, want) < fft_tol(str(real), x.size)
        np.testing.assert_array_equal(x, keep)


@needs_mkl
@pytest.mark.parametrize("layout", ["F", "transposed", "strided", "sliced-last"])
@pytest.mark.parametrize("fft_type", ["C2C", "R2C"])
def test_mkl_takes_strided_operands(layout, fft_type):
    base = rng_array((12, 16, 10), "complex128" if fft_type == "C2C" else "float64")
    x = {"F": np.asfortranarray(base), "transposed": base.transpose(2, 0, 1),
         "strided": base[::2, 1::3], "sliced-last": base[:, :, ::3]}[layout]
    plan = B.MklPlan(_dfti(), fft_type, (0, 2), [x.shape[0], x.shape[2]], 1)
    y = plan.run(x, FWD, "ortho")
    assert y is not None
    assert rel_l2(y, _numpy(x, fft_type, FWD, (0, 2), "ortho")) < 1e-13


@needs_mkl
def test_mkl_keeps_single_precision():
    """complex64 is computed in single precision (not through complex128): its error is that
    of float32 arithmetic, and the result is complex64."""
    x = rng_array((64, 4096), "complex64")
    y = B.MklPlan(_dfti(), "C2C", (1,), [4096], 1).run(x, FWD, None)
    assert y.dtype == np.complex64
    err = rel_l2(y, _numpy(x, "C2C", FWD, (1,), None))
    assert 1e-9 < err < fft_tol("complex64", 4096)


@needs_mkl
def test_mkl_c2r_odd_length_and_hermitian_round_trip():
    r = rng_array((6, 7, 9), "float64")
    c = np.fft.rfftn(r, axes=(0, 2))
    plan = B.MklPlan(_dfti(), "C2R", (0, 2), [6, 9], 2)
    back = plan.run(c, INV, "backward")
    assert back.shape == r.shape and rel_l2(back, r) < 1e-13


@needs_mkl
def test_loops_over_unmergeable_batches_then_leaves_long_loops_to_pocketfft():
    dfti = _dfti()
    x = rng_array((3, 8, 5), "complex128")
    plan = B.MklPlan(dfti, "C2C", (1,), [8], 1)
    y = plan.run(x, FWD, None)  # batches 3 and 5 around the axis: 3 DFTI calls of 5
    assert y is not None and rel_l2(y, np.fft.fft(x, axis=1)) < 1e-13
    many = rng_array((B.MAX_CALLS + 1, 4, B.MAX_CALLS + 2), "complex128")
    assert B.MklPlan(dfti, "C2C", (1,), [4], 1).run(many, FWD, None) is None
    cpu = CpuPlan("C2C", (1,), [4], 1, "complex128")
    assert rel_l2(cpu.run(many, FWD, None), np.fft.fft(many, axis=1)) < 1e-13


@needs_mkl
@pytest.mark.parametrize("make", [
    lambda a: a[::-1],  # negative stride
    lambda a: np.broadcast_to(a[:1], a.shape),  # zero stride
    lambda a: np.zeros((0, a.shape[1]), a.dtype),  # empty batch
    lambda a: np.frombuffer(b"\0" + a.tobytes(), a.dtype, offset=1).reshape(a.shape),  # unaligned
])
def test_layouts_mkl_declines_run_on_pocketfft(make):
    x = make(rng_array((6, 10), "complex128"))
    assert B.MklPlan(_dfti(), "C2C", (1,), [10], 1).run(x, FWD, None) is None
    y = CpuPlan("C2C", (1,), [10], 1, "complex128").run(x, FWD, None)
    assert y.shape == x.shape and rel_l2(y, np.fft.fft(x, axis=1)) < 1e-13


@needs_mkl
@pytest.mark.parametrize("shape, axes", [((64, 1024), (1,)), ((256, 256), (0, 1)),
                                         ((40, 40, 40), (0, 1, 2)), ((2, 128, 130), (1, 2))])
def test_threads_are_ours_and_nothing_global_changes(shape, axes):
    """Large enough to be cut among threads (batch chunks; stages for few batches): results
    match at 1-3 threads, and MKL's own thread count is what it was."""
    get_max = _dfti().lib.MKL_Get_Max_Threads
    before = get_max()
    x = rng_array(shape, "complex128")
    assert x.size >= B.PARALLEL_MIN
    want = np.fft.fftn(x, axes=axes)
    for threads in (1, 2, 3):
        y = F.fft(x, axes=axes, execution=F.ExecutionCPU(num_threads=threads))
        assert rel_l2(y, want) < 1e-13
        r = F.rfft(x.real.copy(), axes=axes, execution=F.ExecutionCPU(num_threads=threads))
        assert rel_l2(r, np.fft.rfftn(x.real, axes=axes)) < 1e-13
    assert get_max() == before


@needs_mkl
def test_one_plan_from_many_threads():
    x = rng_array((32, 512), "complex128")
    want = np.fft.fft(x, axis=1)
    plan = CpuPlan("C2C", (1,), [512], 1, "complex128")
    errs = []

    def work():
        for _ in range(20):
            errs.append(rel_l2(plan.run(x, FWD, None), want))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errs) == 80 and max(errs) < 1e-13


@needs_mkl
def test_descriptor_cache_is_bounded():
    dfti = _dfti()
    for n in range(2, B.CACHE_SIZE + 10):
        B.MklPlan(dfti, "C2C", (0,), [n], 1).run(rng_array((n,), "complex64"), FWD, None)
    assert B.cached_descriptors() == B.CACHE_SIZE
    B.clear_cache()
    assert B.cached_descriptors() == 0
    x = rng_array((16,), "complex64")
    assert rel_l2(F.fft(x), np.fft.fft(x)) < 1e-6  # plans still holding freed entries work


@needs_mkl
def test_function_forms_run_on_mkl():
    x = rng_array((8, 64), "complex64")
    f = F.FFT(x, axes=(1,), execution=F.ExecutionCPU(num_threads=1))
    f.plan()
    assert f._plan.cpu_plan.backend == "mkl" and B.backend_name() == "mkl"
    y = f.execute(direction="inverse")
    assert rel_l2(y, np.fft.ifft(x, axis=1, norm="forward")) < 1e-6
    f.free()


# ---- choosing a backend (run with and without MKL) ---------------------------------------------
def test_pocketfft_by_choice(fresh_choice):
    fresh_choice.setenv("CUWEAVE_CPU_FFT", "pocketfft")
    assert B.mkl_library() is None and B.backend_name() == "pocketfft"
    plan = CpuPlan("R2C", (0, 1), [6, 10], 1, "float64")
    assert plan.backend == "pocketfft"
    x = rng_array((6, 10), "float64")
    assert rel_l2(plan.run(x, FWD, "ortho"), np.fft.rfftn(x, norm="ortho")) < 1e-13


def test_bad_choice_raises_typed_error(fresh_choice):
    fresh_choice.setenv("CUWEAVE_CPU_FFT", "fftw")
    with pytest.raises(InvalidOptionError, match="CUWEAVE_CPU_FFT must be"):
        B.mkl_library()


def test_mkl_by_choice_without_mkl_names_the_extra(fresh_choice):
    fresh_choice.setenv("CUWEAVE_CPU_FFT", "mkl")
    fresh_choice.setattr(B, "_mkl_paths", lambda: [])
    with pytest.raises(LibraryNotFoundError, match=r"cuweave\[cpu-fft\]"):
        B.mkl_library()


def test_auto_without_mkl_falls_back_to_pocketfft(fresh_choice):
    fresh_choice.delenv("CUWEAVE_CPU_FFT", raising=False)
    fresh_choice.setattr(B, "_mkl_paths", lambda: ["/nonexistent/libmkl_rt.so.2"])
    assert B.mkl_library() is None
    x = rng_array((4, 9), "complex64")
    plan = CpuPlan("C2C", (1,), [9], 2, "complex64")
    assert plan.backend == "pocketfft"
    assert rel_l2(plan.run(x, INV, "backward"), np.fft.ifft(x, axis=1)) < 1e-6


@needs_mkl
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_runs_threaded_transforms():
    """The child of a fork has none of the parent's pool threads; its transforms still run
    on its own (new) helpers."""
    x = rng_array((64, 1024), "complex128")
    space = F.ExecutionCPU(num_threads=2)
    F.fft(x, axes=(1,), execution=space)  # the parent's pool exists
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            signal.alarm(60)
            y = F.fft(x, axes=(1,), execution=space)
            os.write(w, b"1" if rel_l2(y, np.fft.fft(x, axis=1)) < 1e-13 else b"0")
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"1"


# ---- accuracy: every length within a small factor of NumPy's error ------------------------------
def _exact_dft(x: np.ndarray) -> np.ndarray:
    """The DFT of the 1-D ``x`` summed in extended precision (long double, twiddles indexed by
    ``j * k mod n`` so none is computed from a large angle): an independent reference."""
    n = x.shape[0]
    t = -2 * np.longdouble(np.pi) * np.arange(n, dtype=np.longdouble) / n
    w = (np.cos(t) + 1j * np.sin(t)).astype(np.clongdouble)
    idx = np.outer(np.arange(n), np.arange(n)) % n
    return (w[idx] * x.astype(np.clongdouble)).sum(axis=1)


def _error(got, want) -> float:
    want = want.astype(np.complex128)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


#: lengths where MKL's double precision was 5-70x less accurate than NumPy's (prime factors
#: >= 17), neighbours that stay on MKL, and powers of small primes
_ACCURACY_LENGTHS = [17, 23, 26, 38, 46, 47, 53, 59, 97, 106, 127, 211, 251, 257, 509,
                     16, 18, 30, 45, 64, 105, 168, 243, 360, 625, 1024]


@pytest.mark.parametrize("dtype", ["complex128", "float64"])
def test_double_precision_accuracy_within_small_factor_of_numpy(dtype):
    """cuweave's CPU FFT (whichever backend runs) is within 3x NumPy's error against an
    extended-precision DFT, for the lengths where MKL alone was not."""
    rng = np.random.default_rng(5)
    worst = []
    for n in _ACCURACY_LENGTHS:
        x = rng.standard_normal(n)
        if dtype == "complex128":
            x = x + 1j * rng.standard_normal(n)
        exact = _exact_dft(x)
        if dtype == "float64":
            exact = exact[: n // 2 + 1]
            got, numpy_ = F.rfft(x, execution="cpu"), np.fft.rfft(x)
        else:
            got, numpy_ = F.fft(x, execution="cpu"), np.fft.fft(x)
        ours, theirs = _error(got, exact), _error(numpy_, exact)
        worst.append((ours / max(theirs, 1e-17), n))
    ratio, n = max(worst)
    assert ratio < 3.0, f"n={n}: {ratio:.1f}x NumPy's error"


def test_largest_prime_factor_routes_double_precision_to_pocketfft():
    assert [B.largest_prime_factor(n) for n in (1, 2, 12, 17, 38, 106, 1024, 1021)] == [
        1, 2, 3, 17, 19, 53, 2, 1021]
    dfti = _dfti()
    if dfti is None:
        pytest.skip("MKL not installed: every transform runs on pocketfft")
    for n, dtype, on_mkl in ((38, np.complex128, False), (38, np.complex64, True),
                             (48, np.complex128, True), (106, np.float64, False)):
        plan = B.MklPlan(dfti, "R2C" if dtype == np.float64 else "C2C", (0,), (n,), 1)
        got = plan.run(np.ones(n, dtype), FWD, None)
        assert (got is not None) == on_mkl, (n, dtype)


@pytest.mark.slow
def test_double_precision_accuracy_every_length_to_1024():
    """The sweep behind :data:`~cuweave.fft._cpu_backends.ACCURATE_PRIME_LIMIT`: complex128
    transforms of every length 2..1024 within 3x NumPy's error (about a minute)."""
    rng = np.random.default_rng(6)
    worst = (0.0, 0)
    for n in range(2, 1025):
        x = rng.standard_normal(n) + 1j * rng.standard_normal(n)
        exact = _exact_dft(x)
        ratio = _error(F.fft(x, execution="cpu"), exact) / max(
            _error(np.fft.fft(x), exact), 1e-17)
        worst = max(worst, (ratio, n))
    assert worst[0] < 3.0, f"n={worst[1]}: {worst[0]:.1f}x NumPy's error"
