"""The GPU path of cuweave.linalg (cuBLAS / cuSOLVER calls, uploads, pointer arrays, result
layouts) run on the CPU against float64 references, with tests/linalg/generic/fake_gpu.py
computing each cuBLAS / cuSOLVER routine on host memory. Host operands with
``execution="cuda"`` (staged) and device operands (``__cuda_array_interface__`` views) walk
a sample of the same grids as the CPU tests. What the fake cannot show (the real libraries'
behaviour, streams, the device allocator) is tested on a GPU by test_linalg_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave.linalg import FactorizationError, direct_solver, matmul
from tests.linalg.generic._reference import (
    DTYPES,
    layout,
    logical,
    qualifiers,
    rand,
    record,
    rel_err,
)
from tests.linalg.generic.fake_gpu import DeviceView, to_host
from tests.linalg.generic.test_matmul_cpu import (
    KINDS,
    _run_case,
    _sample,
    structured_factors,
)


def _device(x):
    return DeviceView(x) if x is not None else None


@pytest.mark.parametrize("where", ["staged", "device", "fetched"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_structured_products_on_the_gpu_path(fake_gpu, where, dtype):
    """staged: NumPy operands on the GPU; device: device operands; fetched: device operands
    with ``execution="cpu"`` (copied to the host and back, as nvmath-python)."""
    rng = np.random.default_rng(9)
    on_device = where != "staged"
    for kind in KINDS:
        for side in "ab":
            factors = structured_factors(dtype, kind)
            if where == "device":  # layouts without a unit stride need torch/CuPy copies
                factors["order_s"] = [o for o in factors["order_s"] if o != "S" or kind == "dg"]
                factors["order_g"] = ["C", "F"]
            for case in _sample(factors, 12, seed=sum(map(ord, kind + side + where))):
                _run_case(dtype, kind, side, case, rng,
                          execution="cpu" if where == "fetched" else "cuda",
                          wrap=_device if on_device else None,
                          unwrap=to_host if on_device else None)
    names = set(fake_gpu.calls)
    if where == "fetched":
        assert not any(n.startswith("cublas") for n in names)
    else:
        assert any("symm" in n for n in names) and any("trmm" in n for n in names)
        assert any("dgmm" in n for n in names)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_structured_products(fake_gpu, dtype):
    """``MatmulOptions(structured="dense")``: the structured operand's dense form, then GEMM."""
    rng = np.random.default_rng(12)
    for kind in ("tr", "sy", "he"):
        for side in "ab":
            factors = structured_factors(dtype, kind)
            factors["conj_s"] = [False]  # conjugated operands keep the native routine
            for case in _sample(factors, 10, seed=sum(map(ord, kind + side + "dense"))):
                _run_case(dtype, kind, side, case, rng, execution="cuda", wrap=_device,
                          unwrap=to_host, options={"structured": "dense"})
    assert "densify" in fake_gpu.calls
    if not dtype.startswith("complex"):  # (a Hermitian operand read transposed stays native)
        assert not any(n.endswith(("trmm_v2", "symm_v2", "hemm_v2")) for n in fake_gpu.calls)


@pytest.mark.parametrize("where", ["staged", "device"])
def test_batched_general_products_use_strided_batched_gemm(fake_gpu, where):
    rng = np.random.default_rng(2)
    a, b = rand((6, 3, 4), "float32", rng), rand((6, 4, 5), "float32", rng)
    w = _device if where == "device" else (lambda x: x)
    got = matmul(w(a), w(b), execution="cuda")
    got = to_host(got) if where == "device" else got
    assert rel_err(got, a @ b) < 1e-5
    assert fake_gpu.calls.count("cublasSgemmStridedBatched") == 1
    # the function form's second call hits the plan cache and runs the same calls
    n = len(fake_gpu.calls)
    matmul(w(a), w(b), execution="cuda")
    assert fake_gpu.calls[n:] == ["cublasSgemmStridedBatched"]


@pytest.mark.parametrize("where", ["staged", "device"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_solver_on_the_gpu_path(fake_gpu, where, dtype):
    rng = np.random.default_rng(3)
    n = 4
    w = _device if where == "device" else (lambda x: x)
    uw = to_host if where == "device" else (lambda x: x)
    for fac in ("LU", "Cholesky"):
        for bs in ((), (3,), (2, 2)):
            for order_a in ("C", "F"):
                for rhs in ("vec", "C", "F"):
                    a = rand(bs + (n, n), dtype, rng)
                    if fac == "Cholesky":
                        a = a @ np.swapaxes(a, -1, -2).conj()
                    a = a + n * np.eye(n, dtype=dtype)  # LU: not symmetric
                    a = layout(a.astype(dtype), order_a)
                    b = layout(rand(bs + ((n,) if rhs == "vec" else (n, 3)), dtype, rng),
                               "C" if rhs == "vec" else rhs)
                    ref = np.linalg.solve(a.astype(np.complex128),
                                          b[..., None] if rhs == "vec" else b)
                    ref = ref[..., 0] if rhs == "vec" else ref
                    got = uw(direct_solver(w(a), w(b), options={"factorization": fac},
                                           execution="cuda"))
                    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
                    assert rel_err(got, ref) < tol, (fac, bs, order_a, rhs)
    names = set(fake_gpu.calls)
    assert {"cusolverDnXgetrf", "cusolverDnXgetrs", "cusolverDnXpotrf",
            "cusolverDnXpotrs"} <= names
    assert "batch_pointers" in names  # dense batches: pointer arrays written on the device
    letter = {"float32": "S", "float64": "D", "complex64": "C", "complex128": "Z"}[dtype]
    assert {f"cublas{letter}getrfBatched", f"cublas{letter}getrsBatched",
            f"cusolverDn{letter}potrfBatched", f"cublas{letter}trsmBatched"} <= names


def test_solver_failures_on_the_gpu_path(fake_gpu):
    a = np.stack([np.eye(3), np.zeros((3, 3)), np.eye(3)])
    with pytest.raises(FactorizationError) as e:
        direct_solver(DeviceView(a), DeviceView(np.ones((3, 3))), execution="cuda")
    assert e.value.batch_indices == ((1,),) or e.value.batch_indices == (1,)
    spd = np.eye(3)
    spd[2, 2] = -1
    with pytest.raises(FactorizationError, match="order 3"):
        direct_solver(spd, np.ones(3), options={"factorization": "Cholesky"},
                      execution="cuda")


def test_explicit_batches_on_the_gpu_path(fake_gpu):
    rng = np.random.default_rng(5)
    a = [rand((3, 3), "complex128", rng) + 3 * np.eye(3) for _ in range(3)]
    b = [rand((3, 2), "complex128", rng) for _ in range(3)]
    got = direct_solver([DeviceView(x) for x in a], [DeviceView(x) for x in b],
                        execution="cuda")
    for g, x, y in zip(got, a, b):
        assert rel_err(to_host(g), np.linalg.solve(x, y)) < 1e-10
    q = qualifiers(record("tr", lower=False), record("ge"))
    prods = matmul([DeviceView(x) for x in a], [DeviceView(y) for y in b], qualifiers=[q],
                   execution="cuda")
    for p, x, y in zip(prods, a, b):
        assert rel_err(to_host(p), np.triu(x) @ y) < 1e-12


def test_batched_structured_products_are_two_calls(fake_gpu):
    """structured="auto" (the default) on a uniform batch: every dense form in one launch and
    one strided-batched GEMM; "native": a cuBLAS symm per matrix."""
    rng = np.random.default_rng(13)
    a, b = rand((5, 6, 6), "float64", rng), rand((5, 6, 3), "float64", rng)
    q = qualifiers(record("sy", lower=False), record("ge"))
    want = logical(a, "sy", lower=False) @ b
    got = to_host(matmul(DeviceView(a), DeviceView(b), qualifiers=q))
    assert rel_err(got, want) < 1e-12
    assert fake_gpu.calls == ["densify", "cublasDgemmStridedBatched"]
    fake_gpu.calls.clear()
    got = to_host(matmul(DeviceView(a), DeviceView(b), qualifiers=q,
                         options={"structured": "native"}))
    assert rel_err(got, want) < 1e-12
    assert fake_gpu.calls == ["cublasDsymm_v2"] * 5
