"""GPU tests of cuweave.device.Matmul against NumPy float64 references.

The shared-memory pointer API over dtype x arrangement x size class: by default 20
configurations that cover every pair (every dtype with every arrangement, every dtype and every
arrangement with every size class); the other 60 of the full product are marked ``slow``. Also
``transpose_mode``, padded and run-time leading dimensions, the opaque-tensor API (gmem -> smem
copy, register accumulation, ``axpby``), accumulators and ``MM(...)``.

Only the configurations of the selected tests are built, all at once in parallel processes
(``warm_cache``); the device functions of the tensor kernels are generated in parallel too
(``warm_kernels``). Under xdist use ``--dist loadfile`` (every worker that runs a test of this
module builds them all again; the CPUs are shared out among the workers, ``WARM_WORKERS``): on a
cold cache with 16 CPU cores and no xdist the default selection takes about a minute.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from tests.device.conftest import WARM_WORKERS

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


def _knobs(dtype, arrangement, size, **extra):
    precision, data_type, _, _ = DTYPES[dtype]
    return dict(size=SIZES[size], precision=precision, data_type=data_type,
                arrangement=ARRANGEMENTS[arrangement], **extra)


ALL = list(itertools.product(DTYPES, ARRANGEMENTS, SIZES))
# every (dtype, arrangement) once, the size class rotating: each dtype and each arrangement
# meets every size class
COVER = {(d, a, list(SIZES)[(i + j) % len(SIZES)])
         for i, d in enumerate(DTYPES) for j, a in enumerate(ARRANGEMENTS)}
EXTRA = {
    "transposed": dict(size=(32, 16, 64), precision=np.float32, data_type="real",
                       transpose_mode=("non_transposed", "transposed"), block_size=128),
    "padded_ld": dict(size=(32, 32, 32), precision=np.float64, data_type="real",
                      arrangement=(ROW, COL, COL), leading_dimension=(40, 36, 33)),
    "suggested": dict(size=(64, 64, 64), precision=np.float16, data_type="real",
                      arrangement=(ROW, COL, ROW), block_size="suggested",
                      leading_dimension="suggested"),
    "int8": dict(size=(32, 32, 64), precision=(np.int8, np.int8, np.int32), data_type="real",
                 arrangement=(ROW, COL, COL), block_size=128),
    "uint8": dict(size=(16, 24, 32), precision=(np.uint8, np.uint8, np.uint32),
                  data_type="real", arrangement=(COL, ROW, ROW), block_size=64),
    # complex half: cuweave.device.complex32 elements, float16x2 in kernels
    "complex_half": dict(size=(32, 16, 24), precision=np.float16, data_type="complex",
                         arrangement=(ROW, COL, COL)),
}


def _selected(request) -> set:
    """Configurations of the pointer-API tests pytest selected in this module."""
    keys = set()
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.path == request.path and "dtype" in params:
            keys.add((params["dtype"], params["arrangement"], params["size"]))
    return keys


@pytest.fixture(scope="module")
def built(request):
    from cuweave.device import warm_cache
    from cuweave.device._warm import warm_kernels

    keys = sorted(_selected(request) | {("float32", "rcc", "square"), ("float64", "rcc", "rect")})
    configs = [_knobs(*c) for c in keys] + list(EXTRA.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mms = warm_cache(configs, max_workers=WARM_WORKERS)
    errors = warm_kernels([(__file__, name) for name in
                           ("_tensor_target", "_accumulator_target", "_runtime_ld_target")],
                          max_workers=WARM_WORKERS)
    for e in errors:  # compiled (and raised, typed) again by the tests themselves
        warnings.warn(f"warm_kernels: {e}", stacklevel=1)
    return dict(zip(keys + list(EXTRA), mms))


def _random(shape, dtype, rng, order="C"):
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "V":  # complex half: complex64 values exact in float16
        x = x + 1j * rng.uniform(-1, 1, shape)
        return np.asarray(x.real.astype(np.float16) + 1j * x.imag.astype(np.float16),
                          dtype=np.complex64, order=order)
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

    a = _random(mm.a_dim, mm.a_value_type, rng)
    b = _random(mm.b_dim, mm.b_value_type, rng)
    c = _random(mm.c_dim, mm.c_value_type, rng)
    dt = c.dtype                       # complex64 on the host for complex half
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
    pytest.param(*c, marks=() if c in COVER else pytest.mark.slow) for c in ALL])
def test_pointer_api_matches_numpy(built, dtype, arrangement, size):
    mm = built[(dtype, arrangement, size)]
    err = _run(mm, ARRANGEMENTS[arrangement], np.random.default_rng(list(SIZES).index(size)))
    assert err < DTYPES[dtype][3], f"relative error {err:.3g}"


def test_complex_half(built):
    """Complex half GEMMs (nvmath's cfp16 examples): float16x2 shared arrays loaded from and
    stored to complex64 arrays, complex alpha/beta."""
    mm = built["complex_half"]
    assert mm.value_type.dtype.itemsize == 4
    assert _run(mm, (ROW, COL, COL), np.random.default_rng(12)) < 2e-2


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


def _runtime_ld_target():
    from cuweave.device.fft import default_sm
    from cuweave.device.matmul import Matmul

    mm = Matmul(**_knobs("float64", "rcc", "rect"))
    kernel, _ = _kernel(mm, ARRANGEMENTS["rcc"], (37, 41, 35))
    sig = _types("float64:C", "float64:C", "float64:C", "float64", "float64", "float64:C",
                 "boolean")
    return kernel.py_func, sig, default_sm()


def test_runtime_leading_dimensions(built):
    """execute(alpha, a, lda, b, ldb, beta, c, ldc): leading dimensions chosen at run time."""
    mm = built[("float64", "rcc", "rect")]
    err = _run(mm, ARRANGEMENTS["rcc"], np.random.default_rng(11), runtime_lds=(37, 41, 35))
    assert err < 1e-11


@pytest.mark.parametrize("name", ["int8", "uint8"])
def test_integer_gemm_is_exact(built, name):
    """Integer GEMMs (nvmath-python 1.0's integer precisions) equal NumPy's exactly."""
    from numba import cuda

    mm = built[name]
    rng = np.random.default_rng(12)
    low = 0 if np.dtype(mm.a_value_type).kind == "u" else -20
    a = rng.integers(low, 20, mm.a_dim).astype(mm.a_value_type)
    b = rng.integers(low, 20, mm.b_dim).astype(mm.b_value_type)
    c = rng.integers(low * 50, 1000, mm.c_dim).astype(mm.c_value_type)
    kernel, smem = _kernel(mm, tuple(mm.arrangement))
    out = cuda.device_array(mm.c_dim, dtype=mm.c_value_type)
    kernel[1, mm.block_dim, 0, smem](cuda.to_device(a), cuda.to_device(b), cuda.to_device(c),
                                     2, 3, out, False)
    ref = 2 * (a.astype(np.int64) @ b.astype(np.int64)) + 3 * c.astype(np.int64)
    ref = ref.astype(mm.c_value_type)  # C's type wraps around as in the kernel
    np.testing.assert_array_equal(out.copy_to_host(), ref)


def test_suggested_knobs(built):
    mm = built["suggested"]
    assert _run(mm, (ROW, COL, ROW), np.random.default_rng(8)) < 2e-2


def _tensor_mm():
    from cuweave.device.matmul import Matmul

    return Matmul((64, 64, 32), (np.float16, np.float16, np.float32), "real",
                  arrangement=(COL, ROW, ROW), block_size=128)


def _types(*names):
    from numba.cuda import types

    out = []
    for name in names:
        dtype, _, order = name.partition(":")
        t = getattr(types, dtype)
        out.append(types.Array(t, 2, order) if order else t)
    return tuple(out)


def _tensor_kernel(mm):
    """nvmath's tensor example: gmem -> smem copies, execute into a register fragment, then
    ``out = alpha * acc + beta * c`` with copy_fragment / axpby."""
    from numba import cuda

    from cuweave.device.matmul import axpby, clear, copy, copy_fragment, copy_wait, make_tensor

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

    return kernel, mm.get_shared_storage_size_ab(la, lb)


def _tensor_target():
    from cuweave.device.fft import default_sm

    kernel, _ = _tensor_kernel(_tensor_mm())
    sig = _types("float64", "float16:F", "float16:C", "float64", "float32:C", "float32:C")
    return kernel.py_func, sig, default_sm()


def test_tensor_api_register_accumulation(built):
    from numba import cuda

    mm = _tensor_mm()
    kernel, smem = _tensor_kernel(mm)
    rng = np.random.default_rng(9)
    a = _random(mm.a_dim, np.float16, rng, order="F")
    b = _random(mm.b_dim, np.float16, rng, order="C")
    c = _random(mm.c_dim, np.float32, rng, order="C")
    out = cuda.device_array(mm.c_dim, np.float32)
    kernel[1, mm.block_dim, 0, smem](2.0, cuda.to_device(a), cuda.to_device(b), 3.0,
                                     cuda.to_device(c), out)
    ref = 2.0 * a.astype(np.float64) @ b.astype(np.float64) + 3.0 * c
    err = np.linalg.norm(out.copy_to_host() - ref) / np.linalg.norm(ref)
    assert err < 1e-3, f"relative error {err:.3g}"


def _runtime_ld_kernel(mm):
    """The tensor kernel with C read and written through flat buffers whose leading dimension
    is a kernel argument (``MM.get_layout_gmem_c(ldc)``, as nvmath's performance examples)."""
    from numba import cuda

    from cuweave.device.matmul import axpby, clear, copy, copy_fragment, copy_wait, make_tensor

    la, lb, lc = mm.suggest_layout_smem_a(), mm.suggest_layout_smem_b(), mm.suggest_layout_rmem_c()

    @cuda.jit
    def kernel(alpha, a, b, beta, c, ldc, out):
        smem = cuda.shared.array(shape=(0,), dtype=np.float16, alignment=16)
        sa = make_tensor(smem[:la.cosize], la)
        sb = make_tensor(smem[la.cosize:la.cosize + lb.cosize], lb)
        acc = make_tensor(cuda.local.array(lc.cosize, dtype=np.float32), lc)
        copy(make_tensor(a, mm.get_layout_gmem_a()), sa)
        copy(make_tensor(b, mm.get_layout_gmem_b()), sb)
        clear(acc)
        copy_wait()
        mm.execute(sa, sb, acc)
        cf = make_tensor(cuda.local.array(lc.cosize, dtype=np.float32), lc)
        copy_fragment(make_tensor(c, mm.get_layout_gmem_c(ldc)), cf)
        axpby(alpha, acc, beta, cf)
        copy_fragment(cf, make_tensor(out, mm.get_layout_gmem_c(ldc)))

    return kernel, mm.get_shared_storage_size_ab(la, lb)


def test_runtime_leading_dimension_in_kernel(built):
    from numba import cuda

    mm = _tensor_mm()
    kernel, smem = _runtime_ld_kernel(mm)
    rows, cols = mm.c_dim                     # C is row-major: ldc counts elements per row
    ldc = cols + 16
    rng = np.random.default_rng(11)
    a = _random(mm.a_dim, np.float16, rng, order="F")
    b = _random(mm.b_dim, np.float16, rng, order="C")
    c = _random((rows, ldc), np.float32, rng)
    out = cuda.to_device(np.full((rows, ldc), -7.0, np.float32))
    kernel[1, mm.block_dim, 0, smem](2.0, cuda.to_device(a), cuda.to_device(b), 3.0,
                                     cuda.to_device(c.reshape(-1)), ldc, out.reshape(-1))
    got = out.copy_to_host()
    ref = 2.0 * a.astype(np.float64) @ b.astype(np.float64) + 3.0 * c[:, :cols]
    err = np.linalg.norm(got[:, :cols] - ref) / np.linalg.norm(ref)
    assert err < 1e-3, f"relative error {err:.3g}"
    assert (got[:, cols:] == -7.0).all(), "the padding past each row must stay untouched"


def _accumulator_kernel(mm):
    """nvmath's accumulator examples: execute into ``MM.suggest_accumulator()``, results
    widened to float64 with ``make_fragment_like``, C read through the partitioner, and a
    partitioner query (``map_fragment_index``) recording where each fragment value belongs."""
    from numba import cuda

    from cuweave.device.matmul import (
        axpby,
        copy,
        copy_fragment,
        copy_wait,
        make_fragment_like,
        make_tensor,
    )

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

    return kernel, mm.get_shared_storage_size_ab(la, lb)


def _accumulator_target():
    from cuweave.device.fft import default_sm

    kernel, _ = _accumulator_kernel(_tensor_mm())
    sig = _types("float64", "float16:F", "float16:C", "float64", "float64:C", "float64:C")
    return kernel.py_func, sig, default_sm()


def test_accumulator_and_fragment_like(built):
    from numba import cuda

    mm = _tensor_mm()
    kernel, smem = _accumulator_kernel(mm)
    rng = np.random.default_rng(10)
    a = _random(mm.a_dim, np.float16, rng, order="F")
    b = _random(mm.b_dim, np.float16, rng, order="C")
    c = _random(mm.c_dim, np.float64, rng, order="C")
    dc = cuda.to_device(c)
    where = cuda.to_device(np.full(mm.c_dim, np.nan))
    kernel[1, mm.block_dim, 0, smem](2.0, cuda.to_device(a), cuda.to_device(b), 3.0, dc, where)
    ab = a.astype(np.float64) @ b.astype(np.float64)
    got = dc.copy_to_host()
    err = np.linalg.norm(got - (2.0 * ab + 3.0 * c)) / np.linalg.norm(2.0 * ab + 3.0 * c)
    assert err < 1e-5, f"relative error {err:.3g}"
    mapped = where.copy_to_host()
    assert not np.isnan(mapped).any(), "map_fragment_index must cover every element of C"
    assert np.allclose(mapped, ab, rtol=1e-4, atol=1e-4)
