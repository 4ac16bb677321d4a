"""CPU tests of cuweave.device.Matmul: knob validation, traits from libmathdx, the disk cache,
and kernels typed by numba and linked for sm_90 by nvJitLink (no GPU needed).

The library-backed tests are skipped without nvidia-libmathdx-cu13 / numba-cuda / nvJitLink.
"""

from __future__ import annotations

import os
import re
import sys
import types as pytypes
import warnings

import numpy as np
import pytest

from cuweave._internal.errors import InvalidOptionError
from cuweave.device._blas_options import MatmulSpec
from tests.device._nvjitlink import link_sm90 as _link_objects

ROW, COL = "row_major", "col_major"


# ---------------------------------------------------------------------------------------------
# Knobs (pure Python)
# ---------------------------------------------------------------------------------------------


def _spec(**kw):
    base = dict(size=(32, 16, 64), precision=np.float32, data_type="real",
                arrangement=(ROW, COL, COL), sm=90)
    base.update(kw)
    return MatmulSpec.from_knobs(**base)


@pytest.mark.parametrize("kw, fragment", [
    (dict(size=(32, 16)), "size must be a sequence (m, n, k)"),
    (dict(size=(32, 0, 4)), "size must be a positive integer"),
    (dict(precision=np.bool_), "precision.a must be one of"),
    (dict(precision=np.int8, data_type="complex"), "precision must be floating-point"),
    (dict(precision=(np.float16, np.float32)), "precision must be one dtype or a 3-sequence"),
    (dict(data_type="quaternion"), "data_type must be one of"),
    (dict(execution="Thread"), "execution must be 'Block'"),
    (dict(function="TRSM"), "function must be 'MM'"),
    (dict(arrangement=None), "exactly one of arrangement and transpose_mode"),
    (dict(arrangement=(ROW, COL)), "arrangement must be a 3-sequence"),
    (dict(arrangement=(ROW, COL, "diagonal")), "arrangement.c must be one of"),
    (dict(block_size=64, block_dim=(64, 1, 1)), "block_size and block_dim must not both"),
    (dict(block_dim=(64, 32, 1)), "at most 1024 threads"),
    (dict(block_size=-3), "block_size must be a positive integer"),
    (dict(leading_dimension=(64, 64)), "leading_dimension must be a 3-sequence"),
    (dict(alignment=(4, 4, 6)), "alignment.c must be a multiple of 4"),
    (dict(alignment=(32, 4, 4)), "at most 16"),
    (dict(with_pipeline="yes"), "with_pipeline must be a bool"),
    (dict(static_block_dim="yes"), "static_block_dim must be a bool"),
    (dict(sm=12), "sm must be a compute capability"),
])
def test_bad_knobs_raise_typed_value_errors(kw, fragment):
    with pytest.raises(InvalidOptionError, match=None) as info:
        _spec(**kw)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


def test_both_arrangement_and_transpose_mode_rejected():
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidOptionError, match="exactly one"):
        _spec(transpose_mode=("non_transposed", "transposed"))


def test_knob_normalization_and_dims():
    s = _spec(precision=(np.float16, np.float16, np.float32), block_size=128, sm=(9, 0))
    assert tuple(s.precision) == ("float16", "float16", "float32")
    assert s.block_dim == (128, 1, 1) and s.sm == 900
    assert (s.a_dim, s.b_dim, s.c_dim) == ((32, 64), (64, 16), (32, 16))
    assert _spec(block_dim=(32, 2)).block_dim == (32, 2, 1)
    assert _spec(block_size="suggested").block_dim == "suggested"
    assert _spec(leading_dimension="suggested").leading_dimension == "suggested"
    with pytest.warns(DeprecationWarning):
        t = _spec(arrangement=None, transpose_mode=("transposed", "transposed"))
    # transposed operands are stored as op(X)^T: A is k x m, B is n x k
    assert (t.a_dim, t.b_dim, t.c_dim) == ((64, 32), (16, 64), (32, 16))
    assert hash(s.key()) == hash(_spec(precision=(np.float16, np.float16, np.float32),
                                       block_size=128).key())


def test_shared_storage_calc():
    from cuweave.device.matmul import SharedStorageCalc

    calc = SharedStorageCalc()
    calc.add(16, 2, 10)      # 20 bytes
    assert calc.get() == 20
    calc.add(16, 8)          # aligned up to 32, then 8
    assert calc.get() == 40
    calc.add(4, 4, 3)
    assert calc.get() == 52
    with pytest.raises(InvalidOptionError, match="alignment must be a positive integer"):
        calc.add(0, 4)
    with pytest.raises(InvalidOptionError, match="add takes 2 or 3 arguments"):
        calc.add(1)


@pytest.mark.parametrize("kw, fragment", [
    (dict(compiler="nvcc"), "compiler must be 'numba'"),
    (dict(execute_api="dynamic"), "execute_api must be"),
    (dict(tensor_types=("smem_a", "smem_b")), "tensor_types must be 3 of"),
])
def test_matmul_factory_validates_legacy_knobs(kw, fragment):
    from cuweave.device.matmul import matmul

    with pytest.raises(InvalidOptionError, match=fragment):
        matmul((16, 16, 16), np.float32, "real", arrangement=(ROW, COL, COL), sm=90, **kw)


def test_libmathdx_found_in_pip_target_folders(tmp_path, monkeypatch):
    """Wheels installed with ``pip --target`` (on sys.path, not site-packages) are searched."""
    import sys

    from cuweave.device import _blas_mathdx

    lib = tmp_path / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libmathdx.so.0").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert str(lib / "libmathdx.so.0") in list(_blas_mathdx._wheel_candidates())


# ---------------------------------------------------------------------------------------------
# libmathdx-backed (CPU)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mathdx(tmp_path_factory):
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    from cuweave._internal.errors import LibraryNotFoundError
    from cuweave.device import _blas_mathdx, _cache

    try:
        _blas_mathdx.versions()
    except LibraryNotFoundError as e:
        pytest.skip(f"libmathdx is not available: {e}")
    old = os.environ.get("CUWEAVE_CACHE_DIR")
    os.environ["CUWEAVE_CACHE_DIR"] = str(tmp_path_factory.mktemp("blascache"))
    _cache.clear_memory()
    yield _blas_mathdx
    if old is None:
        os.environ.pop("CUWEAVE_CACHE_DIR", None)
    else:
        os.environ["CUWEAVE_CACHE_DIR"] = old
    _cache.clear_memory()


@pytest.fixture(scope="module")
def mm_f32(mathdx):
    from cuweave.device.matmul import Matmul

    return Matmul((32, 16, 64), np.float32, "real", arrangement=(ROW, COL, COL), sm=90,
                  block_size=64)


def test_versions(mathdx):
    v = mathdx.versions()
    assert v["libmathdx"] >= 400 and v["cublasdx"].count(".") == 2


def test_traits_without_gpu(mm_f32):
    mm = mm_f32
    assert mm.block_dim == (64, 1, 1) and mm.block_size == 64 == mm.max_threads_per_block
    assert tuple(mm.leading_dimension) == (64, 64, 32)     # row A: k; col B: k; col C: m
    assert (mm.a_size, mm.b_size, mm.c_size) == (32 * 64, 64 * 16, 32 * 16)
    assert mm.a_value_type is np.float32 and mm.value_type is np.float32
    assert tuple(mm.alignment) == (4, 4, 4)
    assert mm.get_shared_storage_size() == 4 * (2048 + 1024 + 512)
    assert mm.get_shared_storage_size(80, 80, 40) == 4 * (32 * 80 + 16 * 80 + 16 * 40)
    assert mm.get_shared_storage_size_ab() == 4 * (2048 + 1024)
    assert mm.sm[:2] == (9, 0) and mm.arrangement == (ROW, COL, COL)
    assert list(mm.valid("block_dim"))[0][0].x > 0
    with pytest.raises(InvalidOptionError, match="get_shared_storage_size takes"):
        mm.get_shared_storage_size(1, 2)
    with pytest.raises(RuntimeError, match="inside a @cuda.jit kernel"):
        mm.execute(1.0, None, None, 0.0, None)


def test_matmul_factory_builds_the_same_object(mm_f32):
    from cuweave.device.matmul import matmul

    mm = matmul((32, 16, 64), np.float32, "real", compiler="numba", execute_api="tensors",
                tensor_types=("suggested_smem_a", "suggested_smem_b", "suggested_rmem_c"),
                arrangement=(ROW, COL, COL), sm=90, block_size=64)
    assert mm._kernel_key() == mm_f32._kernel_key()
    assert mm.leading_dimension == mm_f32.leading_dimension


def test_suggested_knobs_resolve(mathdx):
    from cuweave.device.matmul import Matmul

    mm = Matmul((32, 16, 64), np.float32, "real", arrangement=(ROW, COL, COL), sm=90,
                block_size=64, leading_dimension="suggested")
    lda, ldb, ldc = mm.leading_dimension
    assert lda >= 64 and ldb >= 64 and ldc >= 32          # padded against bank conflicts
    assert mm.a_size == 32 * lda


def test_layouts_and_cache(mathdx, mm_f32):
    from cuweave.device import _cache
    from cuweave.device.matmul import Layout, Matmul

    sa, rc = mm_f32.suggest_layout_smem_a(), mm_f32.suggest_layout_rmem_c()
    assert isinstance(sa, Layout) and sa.size == 32 * 64 and sa.cosize >= sa.size
    assert rc.size == 32 * 16 // 64                       # one fragment per thread
    g = mm_f32.get_layout_gmem_a(80)
    assert g.cosize == 32 * 80 and g.leading_dimension == 80
    with pytest.raises(InvalidOptionError, match="global-memory layouts only"):
        Layout(mm_f32, "suggest_layout_smem_a", 8)
    assert mm_f32.get_shared_storage_size_ab(sa, mm_f32.suggest_layout_smem_b()) >= 4 * 3072
    entries = os.listdir(_cache.cache_dir())
    assert any(e.endswith(".json") for e in entries)
    _cache.clear_memory()                                 # a new process: disk only
    again = Matmul((32, 16, 64), np.float32, "real", arrangement=(ROW, COL, COL), sm=90,
                   block_size=64)
    assert again.leading_dimension == mm_f32.leading_dimension
    assert again.suggest_layout_smem_a().cosize == sa.cosize


def test_unsupported_description_is_a_typed_error(mathdx):
    from cuweave.device.matmul import Matmul

    with pytest.raises(InvalidOptionError, match="precision must be floating-point"):
        Matmul((16, 16, 16), np.int8, "complex", arrangement=(ROW, COL, COL), sm=90)


def test_complex_half_elements_are_complex32(mathdx):
    """Complex half GEMMs (nvmath's cfp16 examples): elements are cuweave.device.complex32,
    four bytes on the host, float16x2 inside kernels."""
    from cuweave.device import types as element_types
    from cuweave.device.matmul import Matmul

    mm = Matmul((16, 16, 16), np.float16, "complex", arrangement=(ROW, COL, COL), sm=90)
    assert mm.value_type is element_types.complex32
    assert np.dtype(mm.a_value_type).itemsize == 4 and tuple(mm.alignment) == (4, 4, 4)
    assert mm.shared_memory_size >= 3 * 16 * 16 * 4


# ---------------------------------------------------------------------------------------------
# Kernels: numba typing + lowering, then an nvJitLink link for sm_90 (CPU only)
# ---------------------------------------------------------------------------------------------


_EVER_LINKED: dict = {}
_EVER_DECLARED: dict = {}


@pytest.fixture
def link_sm90(monkeypatch):
    """``link_sm90(pyfunc, sig)``: compile a kernel for sm_90 and link it with the generated
    cuBLASDx LTO-IR into a cubin; returns ``(cubin, symbols)`` (the cuBLASDx functions and
    call shims the kernel's link defines)."""
    from numba import cuda
    from numba.cuda import dispatcher

    pytest.importorskip("cuda.bindings.nvjitlink")
    from cuweave.device import _blas_numba

    monkeypatch.setattr(dispatcher, "get_current_device",
                        lambda: pytypes.SimpleNamespace(compute_capability=(9, 0)))
    linked = []
    original = _blas_numba._link

    def record(context, code):
        linked.append(code)
        _EVER_LINKED[id(code)] = code
        original(context, code)

    monkeypatch.setattr(_blas_numba, "_link", record)
    declare = cuda.declare_device  # device FFTs (cuFFTDx code and twiddle tables) link this way
    monkeypatch.setattr(cuda, "declare_device", lambda *a, **k: (
        _EVER_DECLARED.update({id(o): o for o in k.get("link", ())}), declare(*a, **k))[1])

    def run(pyfunc, sig, ptx=False):
        linked.clear()
        try:
            # a kernel (not a device function, which the link would drop unreferenced)
            ir, _ = cuda.compile(pyfunc, sig, cc=(9, 0), output="ltoir", device=False,
                                 abi="numba")
        except Exception as e:
            if "NVVM" in type(e).__name__ or "libNVVM" in str(e):
                pytest.skip(f"libNVVM is not available: {e}")
            raise
        return _nvjitlink(ir, linked, ptx)

    return run


def _nvjitlink(ir, linked, ptx):
    """Link a kernel's LTO-IR with every cuBLASDx object made so far (reading them generates
    the pending device-function groups) into a cubin, or the post-LTO PTX with ``ptx``."""
    # numba reuses the overloads compiled for earlier kernels of this process (their code was
    # linked there): everything linked so far goes into the link
    objects = [(ir, "kernel")] + [(code.data, code.name) for code in
                                  list(_EVER_LINKED.values()) + list(_EVER_DECLARED.values())]
    out = _link_objects(objects, ptx=ptx)
    symbols = sorted({s for code in linked for s in code.symbols})
    return out, symbols


@pytest.mark.slow  # libmathdx's code generation and the link peak near 1.5 GB in the process
def test_pointer_execute_links_for_sm90(mm_f32, link_sm90):
    from numba import cuda
    from numba.cuda import types

    mm = mm_f32

    def kernel(a, b, c, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.float32)
        sa = smem[:mm.a_size]
        sb = smem[mm.a_size:mm.a_size + mm.b_size]
        sc = smem[mm.a_size + mm.b_size:]
        for i in range(cuda.threadIdx.x, mm.a_size, mm.block_size):
            sa[i] = a[i]
        cuda.syncthreads()
        mm.execute(alpha, sa, sb, beta, sc)
        mm(alpha, sa, sb, beta, sc)                       # nvmath's earlier spelling
        mm.execute(alpha, sa, 72, sb, 64, beta, sc, 40)   # leading dimensions at run time
        cuda.syncthreads()
        for i in range(cuda.threadIdx.x, mm.c_size, mm.block_size):
            c[i] = sc[i]

    arr = types.float32[::1]
    cubin, symbols = link_sm90(kernel, (arr, arr, arr, types.float32, types.float64))
    assert len(cubin) > 1000 and len(symbols) == 2
    assert all(s.startswith("cublasdx_") for s in symbols)


def test_pointer_execute_rejects_wrong_dtype(mm_f32, link_sm90):
    from numba import cuda
    from numba.cuda import types

    mm = mm_f32

    def kernel(a, alpha):
        sa = cuda.shared.array(2048, dtype=np.float64)
        mm.execute(alpha, sa, sa, alpha, sa)

    with pytest.raises(Exception, match="a must hold float32 elements"):
        link_sm90(kernel, (types.float32[::1], types.float32))


@pytest.mark.slow
def test_tensor_api_links_for_sm90(mathdx, link_sm90):
    from numba import cuda
    from numba.cuda import types

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
                arrangement=(COL, ROW, ROW), sm=90, block_size=128)
    la, lb, lc = mm.suggest_layout_smem_a(), mm.suggest_layout_smem_b(), mm.suggest_layout_rmem_c()

    def kernel(alpha, a, b, beta, c, out):
        smem = cuda.shared.array(shape=(0,), dtype=np.float16, alignment=16)
        sa = make_tensor(smem[:la.cosize], la)
        sb = make_tensor(smem[la.cosize:la.cosize + lb.cosize], lb)
        acc = make_tensor(cuda.local.array(lc.cosize, dtype=np.float32), lc)
        copy(make_tensor(a, mm.get_layout_gmem_a()), sa, alignment=16)
        copy(make_tensor(b, mm.get_layout_gmem_b()), sb)
        clear(acc)
        copy_wait()
        mm.execute(sa, sb, acc)
        cf = make_tensor(cuda.local.array(lc.cosize, dtype=np.float32), lc)
        copy_fragment(make_tensor(c, mm.get_layout_gmem_c()), cf)
        axpby(alpha, acc, beta, cf)
        copy_fragment(cf, make_tensor(out, mm.get_layout_gmem_c()))

    f16c, f16f = types.float16[:, ::1], types.Array(types.float16, 2, "F")
    f32c = types.float32[:, ::1]
    cubin, symbols = link_sm90(kernel, (types.float32, f16f, f16c, types.float32, f32c, f32c))
    kinds = {s.split("_")[1] for s in symbols}
    assert {"copy", "execute", "axpby", "zero"} <= kinds and len(cubin) > 1000


@pytest.mark.slow  # another kernel linked; the pointer and tensor links run in the fast set
def test_runtime_leading_dimension_and_literal_dims_in_kernels(mathdx, link_sm90):
    """nvmath's kernels pass a kernel variable as a global layout's leading dimension, and size
    shared arrays by ``MM.a_dim[::-1]`` (a compile-time tuple)."""
    from numba import cuda
    from numba.cuda import types

    from cuweave.device.matmul import Matmul, copy, copy_fragment, copy_wait, make_tensor

    mm = Matmul((32, 32, 32), np.float32, "real", arrangement=(ROW, COL, ROW), sm=90,
                block_size=64)
    la, lc = mm.suggest_layout_smem_a(), mm.suggest_layout_rmem_c()

    def kernel(a, lda, c, ldc, out):
        smem = cuda.shared.array(shape=(0,), dtype=np.float32, alignment=16)
        grid = cuda.shared.array(shape=mm.b_dim[::-1], dtype=mm.b_value_type)
        grid[0, 0] = mm.a_dim[0] + mm.c_dim[1]
        copy(make_tensor(a, mm.get_layout_gmem_a(lda)), make_tensor(smem, la))
        copy_wait()
        frag = make_tensor(cuda.local.array(lc.cosize, dtype=np.float32), lc)
        copy_fragment(make_tensor(c, mm.get_layout_gmem_c(ldc)), frag)
        copy_fragment(frag, make_tensor(out, mm.get_layout_gmem_c(ldc)))
        out[0] = grid[0, 0] + smem[0]

    f32 = types.float32[::1]
    ptx, _ = link_sm90(kernel, (f32, types.int64, f32, types.int32, f32), ptx=True)
    ptx = ptx.decode(errors="replace")
    assert ".entry" in ptx                   # typed: the static shape is a constant tuple
    # lda and ldc (parameters 7 and 15: each 1-D array is 7 parameters) are read at run time
    assert re.search(r"ld\.param\.u64\s+%rd\d+, \[\S+_param_7\]", ptx)
    assert re.search(r"ld\.param\.u32\s+%r\d+, \[\S+_param_15\]", ptx)


@pytest.mark.slow  # one libmathdx compilation of five functions and the link: 2 GB, 25 s
def test_tensor_functions_inline_and_generate_in_one_compilation(mathdx, link_sm90,
                                                                 monkeypatch):
    """A kernel's tensor device functions are generated in one libmathdx compilation when it
    is linked, and after the link nothing is left of them but inlined code: no calls (numba's
    struct-by-value calls became indirect calls, never inlined, with the accumulator in local
    memory; they go through C++ shims now)."""
    import re

    from numba import cuda
    from numba.cuda import types

    from cuweave.device import _blas_mathdx
    from cuweave.device.matmul import Matmul, clear, copy, copy_fragment, copy_wait, make_tensor

    mm = Matmul((32, 32, 16), np.float64, "real", arrangement=(ROW, ROW, ROW), sm=90,
                block_size=64)
    la, lb, lc = mm.suggest_layout_smem_a(), mm.suggest_layout_smem_b(), mm.suggest_layout_rmem_c()
    calls = []
    real = _blas_mathdx.compile_functions
    monkeypatch.setattr(_blas_mathdx, "compile_functions",
                        lambda *a, **k: (calls.append(len(a[2])), real(*a, **k))[1])

    def kernel(a, b, c):
        g = cuda.blockIdx.x
        smem = cuda.shared.array(0, dtype=np.float64, alignment=16)
        sa = make_tensor(smem[:la.cosize], la)
        sb = make_tensor(smem[la.cosize:la.cosize + lb.cosize], lb)
        acc = make_tensor(cuda.local.array(lc.cosize, dtype=np.float64), lc)
        copy(make_tensor(a[g], mm.get_layout_gmem_a()), sa, alignment=16)
        copy(make_tensor(b[g], mm.get_layout_gmem_b()), sb, alignment=16)
        clear(acc)
        copy_wait()
        mm.execute(sa, sb, acc)
        copy_fragment(acc, make_tensor(c[g], mm.get_layout_gmem_c()))

    arr = types.float64[:, :, ::1]
    ptx, symbols = link_sm90(kernel, (arr, arr, arr), ptx=True)
    ptx = ptx.decode(errors="replace")
    assert calls == [5]                                   # copy A, copy B, clear, execute, store
    assert {s.split("_")[1] for s in symbols} == {"copy", "zero", "execute"}
    assert "callprototype" not in ptx and not re.search(r"^\.func", ptx, re.M)
    assert not re.search(r"\b(ld|st)\.local", ptx)        # the accumulator lives in registers
    assert re.search(r"cp\.async\.c[ag]\.shared\.global\S* \[[^]]+\], \[[^]]+\], 16", ptx)


def test_warm_cache_validates_before_compiling(mathdx):
    from cuweave.device import warm_cache

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(InvalidOptionError, match="size must be a positive integer"):
            warm_cache([dict(size=(16, 16, 16), precision=np.float32, data_type="real",
                             arrangement=(ROW, COL, COL), sm=90),
                        dict(size=(16, -1, 16), precision=np.float32, data_type="real",
                             arrangement=(ROW, COL, COL), sm=90)])
    assert warm_cache([]) == []


def _example(name):
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "device", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_cw_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _example_signature(name):
    from numba.cuda import types

    f16, f32, f64, c64 = types.float16, types.float32, types.float64, types.complex64
    if name == "matmul_simple":
        return (f32[:, ::1],) * 3 + (f64, f64, f32[:, ::1])
    if name == "gemm_batched":
        return (f64[:, :, ::1],) * 3
    if name == "gemm_fused_bias_relu":
        return (f16[:, ::1], f16[:, ::1], f32[::1], f32[:, ::1])
    return (c64[:, ::1],) * 3 + (types.complex128, types.complex128, c64[:, ::1])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["matmul_simple", "gemm_batched", "gemm_fused_bias_relu",
                                  "gemm_fft"])
def test_examples_link_for_sm90(mathdx, link_sm90, monkeypatch, name):
    """Every example's kernel types, lowers and links for sm_90 (they run on the GPU)."""
    from cuweave.device import _options
    from cuweave.device import fft as fft_module

    for module in (_options, fft_module):  # where it is defined, and the FFT's own name
        monkeypatch.setattr(module, "default_sm", lambda: 900)
    if name == "gemm_fft":
        pytest.importorskip("nvidia.mathdx", reason="nvidia-mathdx (cuFFTDx) is not installed")
    built = _example(name).build()
    kernel = next(k for k in built if hasattr(k, "py_func"))
    cubin, symbols = link_sm90(kernel.py_func, _example_signature(name))
    assert len(cubin) > 1000 and any(s.startswith("cublasdx_execute") for s in symbols)


@pytest.mark.slow
def test_accumulator_api_links_for_sm90(mathdx, link_sm90):
    """Accumulator, partitioner queries, make_fragment_like and a float64 C tensor over a
    float32 GEMM (a libmathdx tensor made ``like`` another type)."""
    from numba import cuda
    from numba.cuda import types

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
                arrangement=(COL, ROW, ROW), sm=90, block_size=128)
    la, lb = mm.suggest_layout_smem_a(), mm.suggest_layout_smem_b()

    def kernel(alpha, a, b, beta, c):
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
        axpby(alpha, wide, beta, frag)
        copy_fragment(frag, gmem_c)
        if acc.is_thread_active() and acc.is_index_in_bounds(0):
            r, col = acc.map_fragment_index(0)
            c[r, col] += 0.0

    f16c, f16f = types.float16[:, ::1], types.Array(types.float16, 2, "F")
    sig = (types.float64, f16f, f16c, types.float64, types.float64[:, ::1])
    ptx, symbols = link_sm90(kernel, sig, ptx=True)
    kinds = {s.split("_")[1] for s in symbols}
    assert {"create", "execute", "copy", "axpby", "is", "map"} <= kinds
    ptx = ptx.decode(errors="replace")
    assert ".entry" in ptx and "callprototype" not in ptx     # every call inlined


def test_make_tensor_rejects_non_arrays_and_accumulator_layouts(mm_f32, link_sm90):
    from numba import cuda
    from numba.cuda import types

    from cuweave.device.matmul import make_tensor

    layout = mm_f32._suggest_accumulator_c()

    def kernel(c):
        buf = cuda.local.array(8, dtype=np.float32)
        make_tensor(buf, layout)
        c[0] = 0

    with pytest.raises(Exception, match="accumulators come from MM.suggest_accumulator"):
        link_sm90(kernel, (types.float32[::1],))


def test_copy_alignment_must_be_a_power_of_two(mm_f32, link_sm90):
    from numba import cuda
    from numba.cuda import types

    from cuweave.device.matmul import copy, make_tensor

    la = mm_f32.get_layout_smem_a()

    def kernel(a):
        smem = cuda.shared.array(0, dtype=np.float32)
        copy(make_tensor(a, mm_f32.get_layout_gmem_a()), make_tensor(smem, la), alignment=3)

    with pytest.raises(Exception, match="alignment must be one of 1, 2, 4, 8, 16"):
        link_sm90(kernel, (types.float32[:, ::1],))


_WARM_TARGET = '''
import types as pytypes

import numpy as np
from numba import cuda
from numba.cuda import dispatcher, types

from cuweave.device.matmul import Matmul, clear, copy, copy_wait, make_tensor

# no GPU here: numba types device functions for the given architecture
dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))


def kernel_and_mm():
    mm = Matmul((32, 32, 32), np.float32, "real", arrangement=("row_major", "col_major",
                "col_major"), sm=90, block_size=64)
    la, lc = mm.suggest_layout_smem_a(), mm.get_layout_rmem_c()

    def kernel(a):
        smem = cuda.shared.array(0, dtype=np.float32)
        copy(make_tensor(a, mm.get_layout_gmem_a()), make_tensor(smem, la))
        acc = make_tensor(cuda.local.array(lc.cosize, dtype=np.float32), lc)
        clear(acc)
        copy_wait()

    return kernel, mm


def target():
    kernel, _ = kernel_and_mm()
    return kernel, (types.float32[:, ::1],), 900
'''


@pytest.mark.slow
def test_warm_kernels_generates_every_device_function_first(mathdx, link_sm90, tmp_path,
                                                             monkeypatch):
    """warm_kernels lowers the kernel in a worker without generating code, generates the
    functions it lists in parallel workers, and the kernel's own compilation then generates
    nothing (everything comes from the disk cache)."""
    import importlib.util

    from cuweave.device import _blas_mathdx
    from cuweave.device._warm import warm_kernels

    path = tmp_path / "warm_target.py"
    path.write_text(_WARM_TARGET)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    assert warm_kernels([(str(path), "target")], max_workers=2) == []
    spec = importlib.util.spec_from_file_location("_cw_warm_target", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel, _ = module.kernel_and_mm()

    def generated(*a, **k):
        raise AssertionError("code generated after warm_kernels")

    monkeypatch.setattr(_blas_mathdx, "compile_functions", generated)
    from numba.cuda import types

    cubin, symbols = link_sm90(kernel, (types.float32[:, ::1],))
    assert len([s for s in symbols if not s.endswith("_shim")]) == 2 and len(cubin) > 1000
    errors = warm_kernels([(str(path), "no_such_builder")], max_workers=2)
    assert len(errors) == 1 and "no_such_builder" in errors[0]


def test_warm_kernels_knows_and_makes_pointer_executes(mathdx, monkeypatch, tmp_path):
    """A kernel's pointer execute (``MM.execute(alpha, a, b, beta, c)``) as warm_kernels sees
    it: missing from the disk cache until generated, then found, and the kernel's own
    compilation takes it from the cache (H200 2026-12-02: the check looked for a cache helper
    that was gone, so every kernel with a pointer execute failed to warm)."""
    from cuweave.device import _blas_mathdx, _blas_numba, _cache
    from cuweave.device._warm import _generate_request, _generated
    from cuweave.device.matmul import Matmul

    made = []

    def compile_execute(spec, block_dim, ld, dynamic_ld=False):
        made.append(dynamic_ld)
        return b"ltoir", f"execute_{len(made)}"

    monkeypatch.setattr(_blas_mathdx, "compile_execute", compile_execute)
    monkeypatch.setenv("CUWEAVE_CACHE_DIR", str(tmp_path))  # the fake code stays out of the
    monkeypatch.setattr(_cache, "_memory", {})  # module's cache, on disk and in memory
    mm = Matmul((24, 16, 8), np.float64, "real", arrangement=(ROW, COL, COL), sm=90,
                block_size=32)
    for dynamic_ld in (False, True):
        request = ("execute", mm, dynamic_ld)
        assert not _generated(request)
        assert _generate_request(request) is None
        assert _generated(request)
    assert made == [False, True]
    _cache.clear_memory()  # from the disk now
    assert _blas_numba._execute_code(mm, True)["symbol"] == "execute_2" and len(made) == 2


def _int8_matmul():
    from cuweave.device.matmul import Matmul

    return Matmul((32, 32, 64), (np.int8, np.int8, np.int32), "real", sm=90, block_size=128,
                  arrangement=(ROW, COL, COL))


def test_integer_precisions(mathdx):
    """nvmath-python 1.0's integer GEMMs: int8 A and B with an int32 C (traits on the CPU);
    complex integers do not exist in NumPy."""
    from cuweave.device.matmul import Matmul

    mm = _int8_matmul()
    assert (mm.a_value_type, mm.b_value_type, mm.c_value_type) == (np.int8, np.int8, np.int32)
    assert tuple(mm.alignment) == (1, 1, 4)
    assert mm.get_shared_storage_size() == 32 * 64 + 64 * 32 + 4 * 32 * 32
    with pytest.raises(InvalidOptionError, match="precision.*complex"):
        Matmul((32, 32, 64), np.int8, "complex", sm=90, arrangement=(ROW, COL, COL))
    with pytest.raises(InvalidOptionError, match="precision.a must be one of"):
        Matmul((32, 32, 64), np.bool_, "real", sm=90, arrangement=(ROW, COL, COL))


@pytest.mark.slow  # a third libmathdx code generation and link (the float ones run fast)
def test_integer_pointer_execute_links_for_sm90(mathdx, link_sm90):
    """The int8 x int8 -> int32 pointer execute links for sm_90."""
    from numba import cuda
    from numba.cuda import types

    mm = _int8_matmul()

    def kernel(a, b, c):
        sa = cuda.shared.array(32 * 64, dtype=np.int8)
        sb = cuda.shared.array(64 * 32, dtype=np.int8)
        sc = cuda.shared.array(32 * 32, dtype=np.int32)
        for i in range(cuda.threadIdx.x, 32 * 64, 128):
            sa[i] = a[i]
            sb[i] = b[i]
        for i in range(cuda.threadIdx.x, 32 * 32, 128):
            sc[i] = c[i]
        cuda.syncthreads()
        mm.execute(2, sa, sb, 3, sc)
        cuda.syncthreads()
        for i in range(cuda.threadIdx.x, 32 * 32, 128):
            c[i] = sc[i]

    i8 = types.int8[::1]
    cubin, symbols = link_sm90(kernel, (i8, i8, types.int32[::1]))
    assert len(cubin) > 1000 and len(symbols) == 1


_DERIVED = [
    dict(size=(32, 16, 64), precision=np.float32, arrangement=(ROW, COL, COL), block_size=64),
    dict(size=(20, 12, 28), precision=np.float64, arrangement=(COL, ROW, ROW), block_dim=(32, 2)),
    dict(size=(16, 48, 24), precision=(np.float16, np.float16, np.float32),
         arrangement=(ROW, ROW, COL), block_size=128, static_block_dim=True),
    dict(size=(8, 8, 8), precision=np.float32, data_type="complex", arrangement=(COL, COL, ROW),
         block_size=32, alignment=(16, 8, 8)),
    dict(size=(32, 32, 32), precision=np.float64, data_type="complex",
         arrangement=(ROW, COL, COL), block_size=128, leading_dimension=(40, 36, 33)),
    dict(size=(32, 16, 64), precision=np.float32, transpose_mode=("transposed", "non_transposed"),
         block_size=128),
    dict(size=(32, 32, 64), precision=(np.int8, np.int8, np.int32),
         arrangement=(COL, ROW, ROW), block_size=64),
]


# each configuration costs a libmathdx traits compilation: the fast set keeps a real one, a
# complex one with alignments and an integer one; the others run with -m slow
_DERIVED_FAST = (0, 3, 6)


@pytest.mark.parametrize("knobs", [
    pytest.param(k, id=str(i), marks=() if i in _DERIVED_FAST else pytest.mark.slow)
    for i, k in enumerate(_DERIVED)])
def test_derived_traits_equal_libmathdx(mathdx, knobs):
    """Configurations with a given block dimension skip libmathdx's traits compilation
    (cuBLASDx's defaults computed here): they must equal what libmathdx reports."""
    from cuweave.device.matmul import _derived, _resolve

    knobs = dict(knobs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        spec = MatmulSpec.from_knobs(knobs.pop("size"), knobs.pop("precision"),
                                     knobs.pop("data_type", "real"), sm=90, **knobs)
    derived = _derived(spec)
    # libmathdx's traits of the same block dimension and leading dimensions, through the disk
    # cache (test_traits_without_gpu asked for configuration 0's already)
    reported = _resolve(spec)
    for name, value in derived.items():
        if name == "arrangement" and spec.arrangement is None:
            continue  # transpose_mode: the data is column-major as given (storage_orders)
        assert reported[name] == value, name
