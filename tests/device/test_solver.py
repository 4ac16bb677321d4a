"""CPU tests of the cuSOLVERDx device solvers (cuweave.device.Solver, CholeskySolver, ...):
knob validation, libmathdx traits without a GPU, operand shapes and strides, code generation
and the disk cache, warm_cache, and numba typing/lowering of every device method to LTO-IR
(linked with nvJitLink into an sm_90 cubin where cuda-bindings has it).

Skipped without libmathdx (``nvidia-libmathdx-cu13``, the 'dx' extra); the kernel tests also
without numba-cuda. Results on a GPU: test_solver_gpu.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types as pytypes

import numpy as np
import pytest

import cuweave.device as dx
from cuweave._internal.errors import InvalidOptionError, LibraryNotFoundError


@pytest.fixture(scope="module", autouse=True)
def mathdx():
    from cuweave.device import _solver_mathdx

    try:
        return _solver_mathdx.versions()
    except LibraryNotFoundError as e:
        pytest.skip(f"libmathdx is not installed: {e}")


def _solver(function, size=(16, 16, 2), precision=np.float32, execution="Block", **kw):
    return dx.Solver(function, size, precision, execution, sm=90, **kw)


# ---------------------------------------------------------------------------------------------
# Knobs
# ---------------------------------------------------------------------------------------------

BAD = [
    (dict(function="potrx"), "function must be one of"),
    (dict(size=(0, 4)), "size must be a sequence of 1 to 3 positive integers"),
    (dict(size=(4, 4, 4, 4)), "size must be a sequence of 1 to 3"),
    (dict(precision=np.float16), "precision must be numpy.float32 or numpy.float64"),
    (dict(execution="Warp"), "execution must be one of 'Thread', 'Block'"),
    (dict(arrangement="col_major"), "arrangement must be a sequence of 1 or 2"),
    (dict(arrangement=("col_major", "diag")), r"arrangement\[1\] must be one of"),
    (dict(fill_mode=None), "fill_mode must be given for function 'potrf'"),
    (dict(fill_mode="middle"), "fill_mode must be one of 'upper', 'lower'"),
    (dict(side="left"), "side is not a knob of function 'potrf'"),
    (dict(transpose_mode="transposed"), "transpose_mode is not a knob of function 'potrf'"),
    (dict(data_type="quaternion"), "data_type must be one of 'real', 'complex'"),
    (dict(batches_per_block=0), "batches_per_block must be a positive integer or 'suggested'"),
    (dict(batches_per_block=2, execution="Thread"), "batches_per_block applies to execution"),
    (dict(block_dim=(0,)), "block_dim must be a sequence of 1 to 3 positive integers"),
    (dict(block_dim=(64,), execution="Thread"), "block_dim applies to execution='Block' only"),
    (dict(leading_dimensions=(32, 32, 32)), "leading_dimensions must be a sequence of 1 to 2"),
    (dict(sm=13), "sm must be a compute capability"),
    (dict(job="no_vectors"), "job is not a knob of function 'potrf'"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m.split()[0] + str(i)
                                                      for i, (_, m) in enumerate(BAD)])
def test_invalid_knobs_raise_typed_errors_naming_the_knob(change, message):
    kw = dict(function="potrf", size=(32,), precision=np.float32, execution="Block", sm=90,
              fill_mode="lower") | change
    with pytest.raises(InvalidOptionError, match=message) as info:
        dx.Solver(kw.pop("function"), kw.pop("size"), kw.pop("precision"),
                  kw.pop("execution"), **kw)
    assert isinstance(info.value, ValueError)


def test_function_specific_rules():
    with pytest.raises(InvalidOptionError, match="transpose_mode must be 'non_transposed' for "
                                                 "function 'getrf_partial_pivot'"):
        _solver("getrf_partial_pivot", transpose_mode="transposed")
    with pytest.raises(InvalidOptionError, match="diag must be given for function 'trsm'"):
        _solver("trsm", side="left", fill_mode="lower")
    with pytest.raises(InvalidOptionError, match="job must be one of 'no_vectors', "
                                                 "'overwrite_vectors'"):
        _solver("heev", fill_mode="lower", job="all_vectors")
    with pytest.raises(InvalidOptionError, match="size must describe a square A"):
        dx.CholeskySolver((32, 16), np.float32, "Block", "lower", sm=90)
    with pytest.raises(InvalidOptionError, match="fill_mode must be 'upper' or 'lower', got None"):
        dx.CholeskySolver((32,), np.float32, "Block", None, sm=90)
    with pytest.raises(InvalidOptionError, match="arrangement must be 'col_major' or "
                                                 "'row_major'"):
        dx.QRFactorize((16, 8), np.float32, "Block", arrangement=("col_major",), sm=90)
    with pytest.raises(InvalidOptionError, match="side must be 'left' or 'right', got None"):
        dx.QRMultiply((16, 8, 4), np.float32, "Block", None, sm=90)
    with pytest.raises(InvalidOptionError, match="transpose_mode must be one of"):
        dx.LUSolver((16, 8), np.float32, "Block", transpose_mode="sideways", sm=90)


def test_unsupported_descriptions_raise_value_and_runtime_errors():
    from cuweave.device._solver_mathdx import UnsupportedSolverError

    for build in (lambda: _solver("potrf", (32, 16), fill_mode="lower"),
                  lambda: _solver("potrf", (32,), fill_mode="lower", block_dim=(4096,))):
        with pytest.raises(UnsupportedSolverError, match="not supported by cuSOLVERDx") as e:
            build()
        assert isinstance(e.value, ValueError) and isinstance(e.value, RuntimeError)


def test_nvbug_5288270_guard(monkeypatch):
    """Real gesv_no_pivot on sm_120 is refused, as nvmath-python refuses it, unless the
    variable is set; then the code is generated with cuSOLVERDx's own opt-out."""
    from cuweave.device import _solver_mathdx

    for var in _solver_mathdx.NVBUG_5288270_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(RuntimeError, match="NVBUG 5288270"):
        dx.Solver("gesv_no_pivot", (8, 8, 1), np.float32, "Block", sm=120)
    complex_ok = dx.Solver("gesv_no_pivot", (8, 8, 1), np.float32, "Block", sm=120,
                           data_type="complex")
    assert complex_ok.sm == dx.ComputeCapability(12, 0)
    monkeypatch.setenv("NVMATH_CUSOLVERDX_IGNORE_NVBUG_5288270_ASSERT", "1")
    s = dx.Solver("gesv_no_pivot", (8, 8, 1), np.float32, "Block", sm=120)
    code, symbol = dx.compile_solver_execute(s)
    assert code.size > 1000


def test_a_failing_compilation_is_a_library_error(monkeypatch):
    """NVRTC failing inside libmathdx is reported as the library failure it is (status and
    NVRTC's log), not as an unsupported description."""
    from cuweave.device import _blas_mathdx, _solver_mathdx
    from cuweave.device._solver_mathdx import UnsupportedSolverError

    real = _blas_mathdx.call

    def call(function, *args):
        if function == "cusolverdxFinalizeCode":
            raise _blas_mathdx.MathdxError(3, function, hint="nvrtc: error: out of builtins")
        return real(function, *args)

    monkeypatch.setattr(_blas_mathdx, "call", call)
    s = _solver("potrf", (13,), fill_mode="upper")
    with pytest.raises(_blas_mathdx.MathdxError, match="COMMONDX_COMPILATION_ERROR.*builtins") \
            as e:
        _solver_mathdx.compile_execute(s._resolved)
    assert not isinstance(e.value, UnsupportedSolverError)


# ---------------------------------------------------------------------------------------------
# Traits and operands (no GPU: sm given)
# ---------------------------------------------------------------------------------------------


def test_traits_without_a_gpu():
    s = _solver("potrf", (32,), fill_mode="lower")
    assert s.size == (32, 32, 1) and (s.m, s.n, s.k) == (32, 32, 1)
    assert s.leading_dimensions == (32, 32) and s.arrangement == ("col_major", "col_major")
    assert s.batches_per_block == 1 and s.data_type == "real" and s.workspace_size == 0
    assert isinstance(s.block_dim, dx.Dim3) and s.block_size == s.block_dim.x > 0
    assert s.value_type is np.float32 and s.info_type is np.int32 and s.tau_type is np.float32
    assert s.sm == dx.ComputeCapability(9, 0) and s.precision is np.float32

    suggested = _solver("getrf_partial_pivot", (8,), np.float64, data_type="complex",
                        batches_per_block="suggested", block_dim="suggested")
    assert isinstance(suggested.batches_per_block, int) and suggested.batches_per_block >= 1
    assert suggested.value_type is np.complex128
    given = _solver("getrf_partial_pivot", (8,), block_dim=(96, 2), batches_per_block=3)
    assert given.block_dim == (96, 2, 1) and given.block_size == 192
    assert given.batches_per_block == 3

    thread = _solver("potrf", (8,), execution="Thread", fill_mode="upper")
    assert thread.block_dim is None and thread.block_size is None
    assert thread.batches_per_block == 1

    heev = _solver("heev", (16,), np.float64, fill_mode="lower", job="no_vectors")
    assert heev.workspace_size > 0


@pytest.mark.parametrize("function, knobs, size, arrangement, expected", [
    ("potrs", {"fill_mode": "lower"}, (8, 8, 3), ("row_major", "row_major"), (8, 3)),
    ("getrs_partial_pivot", {}, (8, 8, 3), ("col_major", "row_major"), (8, 3)),
    ("trsm", {"side": "right", "fill_mode": "upper", "diag": "unit"}, (6, 9, 1), None, (9, 6)),
    ("geqrf", {}, (12, 5, 1), ("row_major",), (5, 0)),
    ("unmqr", {"side": "left"}, (12, 7, 4), None, (12, 12)),
    ("unmlq", {"side": "right"}, (12, 7, 4), None, (4, 12)),
    ("gels", {}, (12, 5, 2), ("col_major", "row_major"), (12, 2)),
    ("gels", {}, (5, 12, 2), None, (5, 12)),
])
def test_default_leading_dimensions(function, knobs, size, arrangement, expected):
    s = _solver(function, size, arrangement=arrangement, **knobs)
    assert s.leading_dimensions == expected
    assert (s.lda, s.ldb) == expected


def test_operand_shapes_strides_and_sizes():
    c = dx.CholeskySolver((32, 32, 4), np.float64, "Block", "upper", sm=90,
                          arrangement=("col_major", "row_major"), batches_per_block=2)
    assert c.a_shape == (2, 32, 32) and c.b_shape == (2, 32, 4)
    assert c.a_strides() == (32 * 32, 1, 32) and c.b_strides() == (32 * 4, 4, 1)
    assert c.a_strides(lda=40) == (40 * 32, 1, 40) and c.a_size(lda=40) == 2 * 40 * 32
    assert c.b_size() == 2 * 32 * 4 and c.info_shape == (2,) and c.info_strides == (1,)
    assert c.fill_mode == "upper" and c.info_type is np.int32
    with pytest.raises(InvalidOptionError, match="the only keyword is lda"):
        c.a_strides(ldb=3)
    with pytest.raises(InvalidOptionError, match="lda must be a positive integer"):
        c.a_size(lda=0)
    with pytest.raises(RuntimeError, match="device function"):
        c.factorize(None, None)

    lu = dx.LUPivotSolver((12, 8), np.float32, "Block", sm=90, batches_per_block=3)
    assert lu.ipiv_shape == (3, 8) and lu.ipiv_strides == (8, 1) and lu.ipiv_size == 24
    assert lu._solve is None and lu.transpose_mode == "non_transposed"
    lu_t = dx.LUSolver((8,), np.float32, "Block", sm=90, transpose_mode="transposed")
    assert lu_t._solve.transpose_mode == "transposed"
    assert lu_t._factorize.transpose_mode == "non_transposed"

    t = dx.TriangularSolver((6, 9, 1), np.float32, "Block", "right", "lower", "non_unit",
                            sm=90, arrangement=("row_major", "col_major"))
    assert t.a_shape == (1, 9, 9) and t.b_shape == (1, 6, 9) and t.a_strides() == (81, 9, 1)

    qr = dx.QRFactorize((12, 5), np.float32, "Block", sm=90, arrangement="row_major",
                        leading_dimension=8)
    assert qr.a_shape == (1, 12, 5) and qr.a_strides() == (96, 8, 1)
    assert qr.tau_shape == (1, 5) and qr.tau_size == 5 and qr.tau_type is np.float32
    lq = dx.LQFactorize((5, 12), np.float64, "Block", sm=90, data_type="complex")
    assert lq.tau_shape == (1, 5) and lq.tau_type is np.complex128

    qm = dx.QRMultiply((12, 7, 4), np.float32, "Block", "left", sm=90)
    assert qm.a_shape == (1, 12, 4) and qm.c_shape == (1, 12, 7) and qm.tau_shape == (1, 4)
    assert qm.c_strides(ldc=16) == (16 * 7, 1, 16) and qm.c_size() == 12 * 7
    lm = dx.LQMultiply((12, 7, 4), np.float32, "Block", "right", sm=90,
                       transpose_mode="transposed")
    assert lm.a_shape == (1, 4, 7) and lm.transpose_mode == "transposed"

    ls = dx.LeastSquaresSolver((5, 12, 2), np.float32, "Block", sm=90,
                               transpose_mode="transposed")
    assert ls.b_shape == (1, 12, 2) and ls.x_shape == (1, 5, 2) and ls.bx_shape == (1, 12, 2)
    assert ls.bx_strides() == (24, 1, 12) and ls.bx_size() == 24 and ls.tau_shape == (1, 5)


@pytest.mark.parametrize("cls, size, precision, bpb", [
    (dx.CholeskySolver, (16, 16, 1), np.float64, 2),        # potrf 64 threads, potrs 32
    (dx.LUPivotSolver, (3, 3, 1), np.float32, "suggested"),   # getrf 64 per block, getrs 32
    (dx.LUSolver, (5, 5, 1), np.float32, "suggested"),
])
def test_functions_of_one_object_share_one_launch(cls, size, precision, bpb):
    """The factorization and the solve run in one kernel: one block dimension and one number
    of problems per block for both (cuSOLVERDx's choices for each alone differ here)."""
    kw = {"fill_mode": "lower"} if cls is dx.CholeskySolver else {}
    alone = [_solver(f, size, precision, batches_per_block=bpb, **kw)
             for f in {dx.CholeskySolver: ("potrf", "potrs"),
                       dx.LUPivotSolver: ("getrf_partial_pivot", "getrs_partial_pivot"),
                       dx.LUSolver: ("getrf_no_pivot", "getrs_no_pivot")}[cls]]
    assert (alone[0].block_dim, alone[0].batches_per_block) != \
        (alone[1].block_dim, alone[1].batches_per_block)
    s = cls(size, precision, "Block", sm=90, batches_per_block=bpb, **kw)
    assert s._factorize.block_dim == s._solve.block_dim == s.block_dim == alone[0].block_dim
    assert s._factorize.batches_per_block == s._solve.batches_per_block == \
        s.batches_per_block == alone[0].batches_per_block


def test_docstring_examples():
    import doctest

    from cuweave.device import _solver_core, cusolverdx

    for module in (cusolverdx, _solver_core):
        res = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert res.attempted > 0 and res.failed == 0, module.__name__


def test_nvmath_names():
    from cuweave.device import cusolverdx

    for name in cusolverdx.__all__:
        assert getattr(dx, name) is getattr(cusolverdx, name)
        assert name in dx.__all__
    assert "CholeskySolver" in repr(dx.CholeskySolver((8,), np.float32, "Block", "lower",
                                                      sm=90))


# ---------------------------------------------------------------------------------------------
# Code generation and the disk cache
# ---------------------------------------------------------------------------------------------

CODEGEN = {
    "potrf": {"fill_mode": "lower"}, "potrs": {"fill_mode": "upper"},
    "posv": {"fill_mode": "lower"}, "getrf_no_pivot": {}, "getrs_no_pivot": {},
    "gesv_no_pivot": {}, "getrf_partial_pivot": {}, "getrs_partial_pivot": {},
    "gesv_partial_pivot": {}, "geqrf": {}, "gelqf": {}, "ungqr": {}, "unglq": {},
    "unmqr": {"side": "left"}, "unmlq": {"side": "right"},
    "trsm": {"side": "left", "fill_mode": "lower", "diag": "non_unit"}, "gels": {},
    "gtsv_no_pivot": {}, "htev": {"job": "all_vectors"},
    "heev": {"fill_mode": "lower", "job": "no_vectors"},
}


@pytest.mark.parametrize("function", sorted(CODEGEN))
def test_code_generation_of_every_function(function):
    s = _solver(function, (16, 16, 2), np.float64, **CODEGEN[function])
    code, symbol = dx.compile_solver_execute(s, dx.CodeType("lto", dx.ComputeCapability(9, 0)))
    assert function in symbol and code.size > 1000 and code.code_type.cc == s.sm
    dynamic, symbol2 = dx.compile_solver_execute(s, execution_api="runtime_leading_dim")
    assert symbol2 != symbol and dynamic.size > 1000


def test_compile_solver_execute_checks_its_arguments():
    s = _solver("potrf", (8,), fill_mode="lower")
    with pytest.raises(InvalidOptionError, match="execution_api must be one of"):
        dx.compile_solver_execute(s, execution_api="fast")
    with pytest.raises(InvalidOptionError, match="code_type must target the solver's sm"):
        dx.compile_solver_execute(s, dx.CodeType("lto", dx.ComputeCapability(8, 0)))
    with pytest.raises(InvalidOptionError, match="solver must be a Solver"):
        dx.compile_solver_execute("potrf")


def test_a_second_process_generates_nothing(tmp_path):
    """The code and the fatbin come from the disk cache in a new process: its generator is
    switched off there."""
    first = ("import numpy as np, cuweave.device as dx\n"
             "from cuweave.device import _solver_core as c\n"
             "s = dx.LUPivotSolver((24,), np.float64, 'Block', sm=90)\n"
             "for x in (s._factorize, s._solve): x._generate()\n"
             "print(len(c.fatbin_code()['ltoir']))\n")
    second = ("import numpy as np, cuweave.device as dx\n"
              "from cuweave.device import _solver_core as c, _solver_mathdx as m\n"
              "def off(*a, **k): raise AssertionError('generated again')\n"
              "m.compile_execute = m.universal_fatbin = off\n"
              "s = dx.LUPivotSolver((24,), np.float64, 'Block', sm=90)\n"
              "print(sum(len(x._generate()['ltoir']) for x in (s._factorize, s._solve)),\n"
              "      len(c.fatbin_code()['ltoir']))\n")
    env = {**os.environ, "CUWEAVE_CACHE_DIR": str(tmp_path), "PYTHONPATH": ":".join(sys.path)}
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, timeout=120) for code in (first, second)]
    for out in outs:
        assert out.returncode == 0, out.stderr[-2000:]
    fatbin = int(outs[0].stdout.split()[-1])
    ltoir, fatbin2 = map(int, outs[1].stdout.split())
    assert fatbin == fatbin2 > 100_000 and ltoir > 1000


def test_warm_cache_builds_solvers_of_every_kind():
    configs = [
        dict(function="potrf", size=(20,), precision=np.float32, execution="Block", sm=90,
             fill_mode="lower"),
        dict(solver=dx.CholeskySolver, size=(20,), precision=np.float32, execution="Block",
             fill_mode="lower", sm=90),
        dict(solver="LeastSquaresSolver", size=(20, 10, 1), precision=np.float64,
             execution="Block", sm=90),
    ]
    made = dx.warm_cache(configs, max_workers=1)
    assert [type(m).__name__ for m in made] == ["Solver", "CholeskySolver",
                                                 "LeastSquaresSolver"]
    from cuweave.device._solver_core import is_cached

    assert all(is_cached(s._resolved) for s in made[1]._solvers() + made[2]._solvers())
    with pytest.raises(InvalidOptionError, match="solver must be one of"):
        dx.warm_cache([dict(solver="QRSolver", size=(4,), precision=np.float32,
                            execution="Block", sm=90)])


# ---------------------------------------------------------------------------------------------
# Inside kernels: typing and lowering to LTO-IR for sm_90
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def compile_kernel(monkeypatch):
    """``compile_kernel(pyfunc, signature)``: the kernel's LTO-IR for sm_90 and the linkable
    objects numba collected for it (the solvers' LTO-IR and cuSOLVERDx's fatbin)."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    from numba import cuda
    from numba.cuda import dispatcher

    monkeypatch.setattr(dispatcher, "get_current_device",
                        lambda: pytypes.SimpleNamespace(compute_capability=(9, 0)))

    def run(pyfunc, sig):
        try:
            ir, _ = cuda.compile(pyfunc, sig, cc=(9, 0), output="ltoir")
        except Exception as e:
            if "NVVM" in type(e).__name__ or "libNVVM" in str(e):
                pytest.skip(f"libNVVM is not available: {e}")
            raise
        return ir

    return run


def _sig(*dtypes):
    from numba.cuda import types
    from numba.np.numpy_support import from_dtype

    return tuple(types.Array(from_dtype(np.dtype(d)), 1, "C") for d in dtypes)


def _linked_objects(*solvers):
    """The LTO-IR of every function of ``solvers`` (both forms) and the fatbin."""
    from cuweave.device._solver_core import execute_code, fatbin_code

    objs = [(bytes(execute_code(s._resolved, d)["ltoir"]), "lto") for s in solvers
            for d in (False, True)]
    return objs + [(bytes(fatbin_code()["ltoir"]), "fatbin")]


def _link_sm90(kernel_ir, objects) -> int:
    """nvJitLink the kernel with the solvers' code into an sm_90 cubin; its size."""
    nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink")
    options = ["-arch=sm_90", "-lto"]
    handle = nvjitlink.create(len(options), options)
    try:
        for i, (data, kind) in enumerate([(kernel_ir, "lto"), *objects]):
            t = nvjitlink.InputType.FATBIN if kind == "fatbin" else nvjitlink.InputType.LTOIR
            nvjitlink.add_data(handle, t, data, len(data), f"object{i}")
        try:
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError:
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            raise AssertionError(log.decode(errors="replace")[:2000]) from None
        return nvjitlink.get_linked_cubin_size(handle)
    finally:
        nvjitlink.destroy(handle)


def test_cholesky_kernel_compiles_and_links(compile_kernel):
    from numba import cuda

    s = dx.CholeskySolver((16, 16, 2), np.float32, "Block", "lower", sm=90,
                          batches_per_block=2, data_type="complex")
    n_a, n_b = s.a_size(), s.b_size()

    def kernel(a, b, info):
        sa = cuda.shared.array(n_a, dtype=s.value_type)
        sb = cuda.shared.array(n_b, dtype=s.value_type)
        base = cuda.blockIdx.x * s.batches_per_block
        st = s.a_strides()
        for i in range(cuda.threadIdx.x, n_a, s.block_size):
            sa[i] = a[base * st[0] + i]
        for i in range(cuda.threadIdx.x, n_b, s.block_size):
            sb[i] = b[base * s.b_strides()[0] + i]
        cuda.syncthreads()
        s.factorize(sa, info[base:])
        cuda.syncthreads()
        s.solve(sa, sb)
        cuda.syncthreads()
        s.factorize(sa, info[base:], lda=s.lda)          # run-time leading dimensions
        s.solve(sa, sb, lda=16, ldb=s.b_strides(ldb=16)[2])
        b[base * 32 + cuda.threadIdx.x % (s.b_size(ldb=16) // 2)] = sb[0]

    ir = compile_kernel(kernel, _sig(np.complex64, np.complex64, np.int32))
    assert _link_sm90(ir, _linked_objects(s._factorize, s._solve)) > 10_000


@pytest.mark.parametrize("name", ["lu", "lu_pivot", "trsm", "qr", "lq", "unmqr", "unmlq",
                                  "gels", "execute"])
def test_every_device_method_lowers(compile_kernel, name):
    from numba import cuda

    f8, i4 = np.float64, np.int32
    if name in ("lu", "lu_pivot"):
        cls = dx.LUSolver if name == "lu" else dx.LUPivotSolver
        s = cls((8, 8, 2), f8, "Block", sm=90, arrangement=("row_major", "col_major"))
        pivot = name == "lu_pivot"

        def kernel(a, b, ipiv, info):
            sa = cuda.shared.array(64, dtype=f8)
            sb = cuda.shared.array(16, dtype=f8)
            sa[0] = a[0]
            if pivot:
                s.factorize(sa, ipiv, info)
                s.solve(sa, ipiv, sb)
                s.factorize(sa, ipiv, info, lda=8)
                s.solve(sa, ipiv, sb, lda=8, ldb=8)
            else:
                s.factorize(sa, info)
                s.solve(sa, sb)
                s.factorize(sa, info, lda=8)
                s.solve(sa, sb, lda=8, ldb=8)
            b[0] = sb[0]

        sig, solvers = _sig(f8, f8, i4, i4), (s._factorize, s._solve)
    elif name == "trsm":
        s = dx.TriangularSolver((8, 4, 1), f8, "Block", "left", "upper", "unit", sm=90)

        def kernel(a, b):
            s.solve(a, b)
            s.solve(a, b, lda=8, ldb=8)

        sig, solvers = _sig(f8, f8), (s._solve,)
    elif name in ("qr", "lq"):
        s = (dx.QRFactorize if name == "qr" else dx.LQFactorize)((8, 6), f8, "Block", sm=90)

        def kernel(a, tau):
            s.factorize(a, tau)
            s.factorize(a, tau, lda=10)

        sig, solvers = _sig(f8, f8), (s._factorize,)
    elif name in ("unmqr", "unmlq"):
        s = (dx.QRMultiply if name == "unmqr" else dx.LQMultiply)((8, 6, 4), f8, "Block",
                                                                   "left", sm=90)

        def kernel(a, tau, c):
            s.multiply(a, tau, c)
            s.multiply(a, tau, c, lda=8, ldc=s.c_strides(ldc=9)[2])

        sig, solvers = _sig(f8, f8, f8), (s._multiply,)
    elif name == "gels":
        s = dx.LeastSquaresSolver((8, 6, 2), f8, "Block", sm=90)

        def kernel(a, tau, b):
            s.solve(a, tau, b)
            s.solve(a, tau, b, lda=8, ldb=s.bx_strides()[2])
            b[0] = s.bx_size() + s.a_size(lda=9)

        sig, solvers = _sig(f8, f8, f8), (s._solve,)
    else:
        s = _solver("gesv_partial_pivot", (8, 8, 1), f8)

        def kernel(a, ipiv, b, info):
            s.execute(a, ipiv, b, info)
            s.execute(a, 8, ipiv, b, 8, info)

        sig, solvers = _sig(f8, i4, f8, i4), (s,)
    ir = compile_kernel(kernel, sig)
    assert _link_sm90(ir, _linked_objects(*solvers)) > 10_000


def test_kernel_typing_errors_name_the_argument(compile_kernel):
    from numba.core.errors import TypingError

    errors = (TypingError, InvalidOptionError)  # numba passes cuweave's typed error through
    s = dx.CholeskySolver((8,), np.float32, "Block", "lower", sm=90)

    def wrong_dtype(a, info):
        s.factorize(a, info)

    with pytest.raises(errors, match="a must hold float32 elements for this solver, "
                                          "got float64"):
        compile_kernel(wrong_dtype, _sig(np.float64, np.int32))

    def one_ld(a, b):
        s.solve(a, b, lda=8)

    with pytest.raises(errors, match="takes lda and ldb together, got lda"):
        compile_kernel(one_ld, _sig(np.float32, np.float32))

    def info_float(a, info):
        s.factorize(a, info)

    with pytest.raises(errors, match="info must hold int32 elements"):
        compile_kernel(info_float, _sig(np.float32, np.float32))

    lu = dx.LUSolver((8, 6), np.float32, "Block", sm=90)

    def not_square(a, b):
        lu.solve(a, b)

    with pytest.raises(errors, match="solve needs a square matrix"):
        compile_kernel(not_square, _sig(np.float32, np.float32))

    g = _solver("potrs", (8, 8, 1), fill_mode="lower")

    def bad_execute(a, b):
        g.execute(a, 8, b)

    with pytest.raises(errors, match=r"Solver.execute takes \(a, b\) or \(a, lda, b, ldb\)"):
        compile_kernel(bad_execute, _sig(np.float32, np.float32))


# ---------------------------------------------------------------------------------------------
# The kernels of test_solver_gpu.py, lowered here so that the GPU run meets no typing error
# ---------------------------------------------------------------------------------------------

GPU_KERNELS = [  # every path of the kernel builders there
    ("cholesky", "complex64", "cr", "small", {}, None),
    ("lu_pivot", "float32", "cc", "medium", {}, (34, 33)),
    ("trsm", "complex128", "cr", "medium", {"side": "right", "diag": "unit"}, (33, 35)),
    ("gesv_partial_pivot", "complex128", "rr", "medium", {}, None),
    ("lq", "complex64", "cc", "medium", {}, None),
    ("lq", "float64", "rr", "small", {}, None),           # reflectors moved (reflector_move)
    ("gels", "float64", "cr", "small", {}, None),
    ("lu_pivot", "float64", "rr", (6, 6, 1), {"execution": "Thread"}, None),
]


@pytest.mark.parametrize("function, dtype, arrangement, size, knobs, lds", GPU_KERNELS,
                         ids=[f"{c[0]}-{c[1]}-{c[4].get('execution', 'Block')}"
                              for c in GPU_KERNELS])
def test_gpu_test_kernels_lower(compile_kernel, function, dtype, arrangement, size, knobs,
                                lds):
    from numba.cuda import types

    from tests.device import test_solver_gpu as g

    obj = g.make_solver(function, dtype, arrangement, size, sm=90, **knobs)
    if function in ("qr", "lq"):
        kernel, _ = g.orthogonal_kernel(*obj)
        sig = _sig(obj[0].value_type, obj[0].value_type, obj[0].value_type)
    elif function == "gels":
        kernel, _ = g.gels_kernel(obj)
        sig = _sig(obj.value_type, obj.value_type, obj.value_type)
    elif knobs.get("execution") == "Thread":
        kernel, _ = g.thread_kernel(obj, function == "lu_pivot")
        sig = _sig(obj.value_type, obj.value_type, np.int32, np.int32) + (types.int64,)
    else:
        fused, s = obj if isinstance(obj, tuple) else (None, obj)
        kernel, _ = g.linear_kernel(s, function, lds, fused)
        sig = _sig(s.value_type, s.value_type, np.int32, np.int32) + (types.int64,) * 2
    assert len(compile_kernel(kernel.py_func, sig)) > 1000


@pytest.mark.parametrize("example", [
    "solver_cholesky_batched", "solver_lu_pivot", "solver_least_squares",
    # its cuBLASDx GEMM's code generation adds 1.2 GB to the process: with the cuBLASDx links
    # in the slow set (the other three examples lower in the fast one)
    pytest.param("solver_gemm_cholesky", marks=pytest.mark.slow)])
def test_examples_lower(compile_kernel, monkeypatch, example):
    """The kernels of examples/device/solver_*.py typed and lowered for sm_90 (they run on
    the GPU machine)."""
    import importlib
    from pathlib import Path

    from numba.cuda import types

    from cuweave.device import _options, fft

    for module in (_options, fft):  # where it is defined (device Matmul's), and the FFT's name
        monkeypatch.setattr(module, "default_sm", lambda: 900)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples" / "device"))
    module = importlib.import_module(example)
    built = module.build()
    kernel = built[-1]
    f4, f8, i4 = np.float32, np.float64, np.int32
    sigs = {
        "solver_cholesky_batched": _sig(f4, f4, f4, i4, f4),
        "solver_lu_pivot": _sig(f8, f8, f8, i4, i4, f8),
        "solver_least_squares": tuple(types.Array(types.float32, 3, "C") for _ in range(3)),
        "solver_gemm_cholesky": (types.Array(types.float32, 3, "C"),
                                 types.Array(types.float32, 2, "C"),
                                 types.Array(types.float32, 2, "C"), _sig(i4)[0]),
    }
    assert len(compile_kernel(kernel.py_func, sigs[example])) > 1000


# ---------------------------------------------------------------------------------------------
# The host checks of test_solver_gpu.py against emulated kernel outputs
# ---------------------------------------------------------------------------------------------


def _emulated_trsm(s, a, b):
    """What the GPU's trsm kernel leaves: A and info untouched, B overwritten by X."""
    from tests.device import test_solver_gpu as g

    tri = np.tril(a) if s.fill_mode == "lower" else np.triu(a)
    if s.diag == "unit":
        idx = np.arange(tri.shape[1])
        tri[:, idx, idx] = 1
    op = g._op(tri, s.transpose_mode)
    if s.side == "left":
        x = np.linalg.solve(op, b)
    else:  # X op(A) = B
        x = np.swapaxes(np.linalg.solve(np.swapaxes(op, 1, 2), np.swapaxes(b, 1, 2)), 1, 2)
    info = np.full(a.shape[0], g.POISON, np.int32)
    ipiv = np.zeros((a.shape[0], min(s.m, s.n)), np.int32)
    return a, b, a.copy(), x.astype(b.dtype), ipiv, info


@pytest.mark.parametrize("config, knobs", [
    (("trsm", "float64", "rr", "small"), {}),
    (("trsm", "complex128", "cr", "medium"),
     {"side": "right", "fill_mode": "upper", "diag": "unit", "transpose_mode": "conj_transposed"}),
])
def test_gpu_trsm_check_wants_info_untouched_and_the_solution(config, knobs):
    """cuSOLVERDx's trsm has no info (nvmath's TriangularSolver.solve(a, b, lda, ldb)): the
    check passes the poison and rejects a written info, a changed A or a wrong X."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    from tests.device import test_solver_gpu as g

    s = g.make_solver(*config, sm=90, **knobs)
    rng = np.random.default_rng(0)
    a, b = g._inputs("trsm", s, 2 * s.batches_per_block, rng)
    out = _emulated_trsm(s, a, b)
    g.check_linear("trsm", s, *out)
    written_info = out[:5] + (np.zeros_like(out[5]),)
    changed_a = out[:2] + (out[2] + np.eye(a.shape[1], dtype=a.dtype),) + out[3:]
    wrong_x = out[:3] + (out[3] * 1.001,) + out[4:]
    for bad in (written_info, changed_a, wrong_x):
        with pytest.raises(AssertionError):
            g.check_linear("trsm", s, *bad)


def _householder_q(refl, tau, function):
    """Q (or Q^T) of real LAPACK reflectors: geqrf's below the diagonal of the M x K columns,
    ``Q = H(1) ... H(K)``; gelqf's right of the diagonal of the K x N rows, where
    ``H(K) ... H(1)`` is Q and A = L Q."""
    vecs = refl if function == "qr" else refl.T  # reflector j in column j
    q = np.eye(vecs.shape[0])
    for j, t in enumerate(tau):
        v = np.concatenate([np.zeros(j), [1.0], vecs[j + 1:, j]])
        q = q @ (np.eye(len(v)) - t * np.outer(v, v))
    return q if function == "qr" else q.T


def _emulated_orthogonal(function, fact, mult, a, move):
    """The GPU's QR/LQ kernel with LAPACK's dgeqrf for the factorization (dgelqf: dgeqrf of
    A^T), the multiply reading its reflectors through its own strides, from the
    factorization's buffer (``move`` None, the first kernel) or after the kernel's move."""
    from scipy.linalg import lapack

    from tests.device import test_solver_gpu as g

    f, tau = [], []
    for p in range(a.shape[0]):
        x = a[p] if function == "qr" else a[p].T
        r, t = lapack.dgeqrf(np.asfortranarray(x))[:2]
        f.append(r if function == "qr" else r.T)
        tau.append(t)
    f = np.array(f)
    fbuf = g.pack(f, fact.a_shape, fact.a_strides(), fact.a_size())
    if move is None:
        refl = g.unpack(fbuf, mult.a_shape, mult.a_strides(), fact.a_size())
    else:
        rows, cols, src, dst = move
        blocks = fbuf.size // fact.a_size()
        rbuf = np.zeros((blocks, mult.a_size()), fbuf.dtype)
        for i in range(fact.batches_per_block * rows * cols):
            s, d = g.reflector_index(i, rows, cols, *src, *dst)
            rbuf[:, d] = fbuf.reshape(blocks, -1)[:, s]
        refl = g.unpack(rbuf.ravel(), mult.a_shape, mult.a_strides(), mult.a_size())
    q = np.array([_householder_q(refl[p], tau[p], function) for p in range(a.shape[0])])
    c = np.swapaxes(q, 1, 2) @ a if function == "qr" else a @ np.swapaxes(q, 1, 2)
    return f, c


MOVE_CASES = [("lq", "float64", "rr", "small"), ("qr", "float32", "cc", (4, 7, 1)),
              ("lq", "float64", "cc", "small"), ("qr", "float64", "rr", "small")]


@pytest.mark.parametrize("config", MOVE_CASES, ids=["-".join(map(str, c)) for c in MOVE_CASES])
def test_gpu_qr_lq_kernel_moves_reflectors_where_layouts_differ(config):
    """The multiply's A (K x N for LQ, M x K for QR) has its own batch stride: a row-major LQ
    with M > N or a column-major QR with M < N, several problems per block, read the wrong
    problems' reflectors from the factorization's buffer. The first kernel, emulated with
    LAPACK, gives the H100 run's lq-float64-rr-small failure to the last digit (same seed and
    problems); the move fixes it."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    from tests.device import test_solver_gpu as g

    fact, mult = g.make_solver(*config, sm=90)
    move = g.reflector_move(fact, mult)
    differ = config in MOVE_CASES[:2]
    assert (move is not None) == differ and fact.batches_per_block > 1
    rng = np.random.default_rng(g.ALL.index(config) if config in g.ALL else 0)
    a = g.random((24 * fact.batches_per_block, fact.m, fact.n), fact.value_type, rng)
    g.check_orthogonal(config[0], fact, a, *_emulated_orthogonal(config[0], fact, mult, a,
                                                                 move))
    if differ:
        with pytest.raises(AssertionError) as failed:
            g.check_orthogonal(config[0], fact, a,
                               *_emulated_orthogonal(config[0], fact, mult, a, None))
        if config == MOVE_CASES[0]:  # the run's 'assert np.float64(4.184326542309147) < ...'
            assert "4.18432654230914" in str(failed.value)
