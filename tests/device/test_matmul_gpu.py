"""GPU tests of cuweave.device.Matmul against NumPy float64 references.

Every dtype x arrangement x size class of the shared-memory pointer API (the core subset runs
by default, the rest is marked ``slow``), ``transpose_mode``, leading dimensions with padding,
the opaque-tensor API (gmem -> smem copy, register accumulation, ``axpby``) and ``MM(...)``.
All configurations are compiled first in parallel processes (``warm_cache``).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")

pytestmark = pytest.mark.gpu

ROW, COL = "row_major", "col_major"
DTYPES = {  # name -> (precision, data_type, numpy dtype, relative tolerance)
    "float16": (np.float16, "real", np.float16, 1e-2),
    "float32": (np.float32, "real", np.float32, 1e-5),
    "float64": (np.float64, "real", np.float64, 1e-12),
    "complex64": (np.float32, "complex", np.complex64, 1e-5),
    "complex128": (np.float64, "complex", np.complex128, 1e-12),
}
ARRANGEMENTS = {"rcc": (ROW, COL, COL), "crr": (COL, ROW, ROW), "ccc": (COL, COL, COL),
                "rrr": (ROW, ROW, ROW)}
SIZES = {"tiny": (8, 8, 8), "square": (32, 32, 32), "rect": (16, 48, 24), "odd": (20, 12, 28)}
CORE = {(d, a, s) for d in DTYPES for a, s in (("rcc", "square"), ("crr", "rect"),
                                                ("ccc", "odd"), ("rrr", "tiny"))}
CORE |= {(d, "rcc", s) for d in DTYPES for s in SIZES}


def _knobs(dtype, arrangement, size, **extra):
    precision, data_type, _, _ = DTYPES[dtype]
    return dict(size=SIZES[size], precision=precision, data_type=data_type,
                arrangement=ARRANGEMENTS[arrangement], **extra)


ALL = list(itertools.product(DTYPES, ARRANGEMENTS, SIZES))
EXTRA = {
    "transposed": dict(size=(32, 16, 64), precision=np.float32, data_type="real",
                       transpose_mode=("non_transposed", "transposed"), block_size=128),
    "padded_ld": dict(size=(32, 32, 32), precision=np.float64, data_type="real",
                      arrangement=(ROW, COL, COL), leading_dimension=(40, 36, 33)),
    "suggested": dict(size=(64, 64, 64), precision=np.float16, data_type="real",
                      arrangement=(ROW, COL, ROW), block_size="suggested",
                      leading_dimension="suggested"),
}


@pytest.fixture(scope="module")
def built():
    from cuweave.device import warm_cache

    configs = [_knobs(*c) for c in ALL] + list(EXTRA.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mms = warm_cache(configs)
    return dict(zip(ALL + list(EXTRA), mms))


def _random(shape, dtype, rng, order="C"):
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return np.asarray(x, dtype=dtype, order=order)


def _kernel(mm, orders, runtime_lds=None):
    """Global (2-D arrays) -> shared (cuBLASDx layout) -> execute -> global. With
    ``runtime_lds`` the leading dimensions are kernel arguments (dynamic-ld execute)."""
    from numba import cuda

    from cuweave.device.matmul import SharedStorageCalc

    ta, tb, tc = mm.a_value_type, mm.b_value_type, mm.c_value_type
    lds = runtime_lds or tuple(mm.leading_dimension)
    sizes = mm._sizes(lds)
    a_n, b_n, c_n = sizes
    dynamic = runtime_lds is not None
    offsets, calc = [], SharedStorageCalc()
    for i, (t, n) in enumerate(zip((ta, tb, tc), sizes)):
        before = calc.get()
        calc.add(mm.alignment[i], np.dtype(t).itemsize, n)
        offsets.append((calc.get() - n * np.dtype(t).itemsize) // np.dtype(t).itemsize)
        assert before <= calc.get()
    oa, ob, oc = offsets
    lda, ldb, ldc = lds
    ra, rb, rc = (o == ROW for o in orders)
    (am, ak), (bk, bn), (cm, cn) = mm.a_dim, mm.b_dim, mm.c_dim
    nthreads = mm.block_size

    @cuda.jit(device=True, forceinline=True)
    def load(src, dst, rows, cols, ld, row_major):
        tid = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
        for idx in range(tid, rows * cols, nthreads):
            i, j = idx // cols, idx % cols
            dst[i * ld + j if row_major else i + j * ld] = src[i, j]

    @cuda.jit(device=True, forceinline=True)
    def store(src, dst, rows, cols, ld, row_major):
        tid = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
        for idx in range(tid, rows * cols, nthreads):
            i, j = idx // cols, idx % cols
            dst[i, j] = src[i * ld + j if row_major else i + j * ld]

    @cuda.jit
    def kernel(a, b, c, alpha, beta, out, twice):
        sa = cuda.shared.array(0, dtype=ta)[oa:oa + a_n]
        sb = cuda.shared.array(0, dtype=tb)[ob:ob + b_n]
        sc = cuda.shared.array(0, dtype=tc)[oc:oc + c_n]
        load(a, sa, am, ak, lda, ra)
        load(b, sb, bk, bn, ldb, rb)
        load(c, sc, cm, cn, ldc, rc)
        cuda.syncthreads()
        if dynamic:
            mm.execute(alpha, sa, lda, sb, ldb, beta, sc, ldc)
        elif twice:
            mm(alpha, sa, sb, beta, sc)               # earlier spelling, same function
        else:
            mm.execute(alpha, sa, sb, beta, sc)
        cuda.syncthreads()
        store(sc, out, cm, cn, ldc, rc)

    return kernel, calc.get()


def _run(mm, orders, rng, *, transpose_b=False, twice=False, runtime_lds=None):
    from numba import cuda

    dt = mm.c_value_type
    a = _random(mm.a_dim, mm.a_value_type, rng)
    b = _random(mm.b_dim, mm.b_value_type, rng)
    c = _random(mm.c_dim, dt, rng)
    alpha, beta = (1.5 - 0.5j, 0.75 + 0.25j) if np.dtype(dt).kind == "c" else (1.5, 0.75)
    kernel, smem = _kernel(mm, orders, runtime_lds)
    out = cuda.device_array(mm.c_dim, dtype=dt)
    kernel[1, mm.block_dim, 0, smem](cuda.to_device(a), cuda.to_device(b), cuda.to_device(c),
                                     alpha, beta, out, twice)
    got = out.copy_to_host().astype(np.complex128)
    b64 = b.astype(np.complex128)
    ref = alpha * (a.astype(np.complex128) @ (b64.T if transpose_b else b64)) + beta * c
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize("dtype, arrangement, size", [
    pytest.param(*c, marks=() if c in CORE else pytest.mark.slow) for c in ALL])
def test_pointer_api_matches_numpy(built, dtype, arrangement, size):
    mm = built[(dtype, arrangement, size)]
    err = _run(mm, ARRANGEMENTS[arrangement], np.random.default_rng(list(SIZES).index(size)))
    assert err < DTYPES[dtype][3], f"relative error {err:.3g}"


def test_call_spelling_matches(built):
    mm = built[("float32", "rcc", "square")]
    assert _run(mm, ARRANGEMENTS["rcc"], np.random.default_rng(5), twice=True) < 1e-4


def test_transpose_mode(built):
    mm = built["transposed"]
    # with transpose_mode both operands are stored column-major as given by a_dim / b_dim
    err = _run(mm, (COL, COL, COL), np.random.default_rng(6), transpose_b=True)
    assert err < 1e-4


def test_padded_leading_dimensions(built):
    mm = built["padded_ld"]
    assert tuple(mm.leading_dimension) == (40, 36, 33)
    assert _run(mm, (ROW, COL, COL), np.random.default_rng(7)) < 1e-11


def test_runtime_leading_dimensions(built):
    """execute(alpha, a, lda, b, ldb, beta, c, ldc): leading dimensions chosen at run time."""
    mm = built[("float64", "rcc", "square")]
    err = _run(mm, ARRANGEMENTS["rcc"], np.random.default_rng(11), runtime_lds=(37, 41, 35))
    assert err < 1e-11


def test_suggested_knobs(built):
    mm = built["suggested"]
    assert _run(mm, (ROW, COL, ROW), np.random.default_rng(8)) < 2e-2


def test_tensor_api_register_accumulation():
    """nvmath's tensor example: gmem -> smem copies, execute into a register fragment, then
    ``out = alpha * acc + beta * c`` with copy_fragment / axpby."""
    from numba import cuda

    from cuweave.device.matmul import (
        Matmul,
        axpby,
        clear,
        copy,
        copy_fragment,
        copy_wait,
        make_tensor,
    )

    mm = Matmul((64, 64, 32), (np.float16, np.float16, np.float32), "real",
                arrangement=(COL, ROW, ROW), block_size=128)
    la, lb, lc = mm.suggest_layout_smem_a(), mm.suggest_layout_smem_b(), mm.suggest_layout_rmem_c()

    @cuda.jit
    def kernel(alpha, a, b, beta, c, out):
        smem = cuda.shared.array(shape=(0,), dtype=np.float16, alignment=16)
        sa = make_tensor(smem[:la.cosize], la)
        sb = make_tensor(smem[la.cosize:la.cosize + lb.cosize], lb)
        acc = make_tensor(cuda.local.array(lc.cosize, dtype=np.float32), lc)
        copy(make_tensor(a, mm.get_layout_gmem_a()), sa, alignment=16)   # 128 B columns
        copy(make_tensor(b, mm.get_layout_gmem_b()), sb)
        clear(acc)
        copy_wait()
        mm.execute(sa, sb, acc)
        cf = make_tensor(cuda.local.array(lc.cosize, dtype=np.float32), lc)
        copy_fragment(make_tensor(c, mm.get_layout_gmem_c()), cf)
        axpby(alpha, acc, beta, cf)
        copy_fragment(cf, make_tensor(out, mm.get_layout_gmem_c()))

    rng = np.random.default_rng(9)
    a = _random(mm.a_dim, np.float16, rng, order="F")
    b = _random(mm.b_dim, np.float16, rng, order="C")
    c = _random(mm.c_dim, np.float32, rng, order="C")
    out = cuda.device_array(mm.c_dim, np.float32)
    smem = mm.get_shared_storage_size_ab(la, lb)
    kernel[1, mm.block_dim, 0, smem](2.0, cuda.to_device(a), cuda.to_device(b), 3.0,
                                     cuda.to_device(c), out)
    ref = 2.0 * a.astype(np.float64) @ b.astype(np.float64) + 3.0 * c
    err = np.linalg.norm(out.copy_to_host() - ref) / np.linalg.norm(ref)
    assert err < 1e-3, f"relative error {err:.3g}"


def test_accumulator_and_fragment_like():
    """nvmath's accumulator examples: execute into ``MM.suggest_accumulator()``, results
    widened to float64 with ``make_fragment_like``, C read through the partitioner, and a
    partitioner query (``map_fragment_index``) checked against the fragment's values."""
    from numba import cuda

    from cuweave.device.matmul import (
        Matmul,
        axpby,
        copy,
        copy_fragment,
        copy_wait,
        make_fragment_like,
        make_tensor,
    )

    mm = Matmul((64, 64, 32), (np.float16, np.float16, np.float32), "real",
                arrangement=(COL, ROW, ROW), block_size=128)
    la, lb = mm.suggest_layout_smem_a(), mm.suggest_layout_smem_b()

    @cuda.jit
    def kernel(alpha, a, b, beta, c, where):
        smem = cuda.shared.array(shape=(0,), dtype=np.float16, alignment=16)
        sa = make_tensor(smem[:la.cosize], la)
        sb = make_tensor(smem[la.cosize:la.cosize + lb.cosize], lb)
        acc = mm.suggest_accumulator()
        copy(make_tensor(a, mm.get_layout_gmem_a()), sa)
        copy(make_tensor(b, mm.get_layout_gmem_b()), sb)
        copy_wait()
        mm.execute(sa, sb, acc)
        res = acc.get_results()
        wide = make_fragment_like(res, np.float64)
        for i in range(res.layout.cosize):
            wide[i] = np.float64(res[i])
        gmem_c = make_tensor(c, mm.get_layout_gmem_c())
        frag = acc.make_partition_and_copy(gmem_c)
        if acc.is_thread_active():
            for i in range(res.layout.cosize):
                if acc.is_index_in_bounds(i):
                    r, col = acc.map_fragment_index(i)
                    where[r, col] = wide[i]          # A B at its (row, column)
        axpby(alpha, wide, beta, frag)
        copy_fragment(frag, gmem_c)

    rng = np.random.default_rng(10)
    a = _random(mm.a_dim, np.float16, rng, order="F")
    b = _random(mm.b_dim, np.float16, rng, order="C")
    c = _random(mm.c_dim, np.float64, rng, order="C")
    dc = cuda.to_device(c)
    where = cuda.to_device(np.full(mm.c_dim, np.nan))
    kernel[1, mm.block_dim, 0, mm.get_shared_storage_size_ab(la, lb)](
        2.0, cuda.to_device(a), cuda.to_device(b), 3.0, dc, where)
    ab = a.astype(np.float64) @ b.astype(np.float64)
    got = dc.copy_to_host()
    err = np.linalg.norm(got - (2.0 * ab + 3.0 * c)) / np.linalg.norm(2.0 * ab + 3.0 * c)
    assert err < 1e-5, f"relative error {err:.3g}"
    mapped = where.copy_to_host()
    assert not np.isnan(mapped).any(), "map_fragment_index must cover every element of C"
    assert np.allclose(mapped, ab, rtol=1e-4, atol=1e-4)
