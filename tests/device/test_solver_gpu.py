"""GPU tests of the cuSOLVERDx device solvers against NumPy/SciPy float64 references.

Every specialised class (Cholesky, LU, LU with pivoting, triangular solve, QR and LQ factorize
plus multiply, least squares) and the fused functions of ``Solver.execute`` (posv, gesv with
and without pivoting), over precision x real/complex x arrangement x size class: by default the
8 configurations per function that give every dtype both size classes and rotate the three
arrangements; ``CUWEAVE_SOLVER_FULL_GRID=1`` adds the other 16 of the full product (marked
``slow``). Also padded and run-time
leading dimensions, transposed solves, ``batches_per_block='suggested'``, Thread execution, and
non-positive-definite / singular problems (``info`` as LAPACK reports it, the other problems of
the block unharmed). trsm has no ``info``: its buffer must keep its poison and A its values.

Each kernel copies its block's problems from global memory, laid out on the host exactly as in
shared memory (the solver's strides), calls the solver and copies back; the code of every
configuration is generated first, in parallel (``warm_cache``). One kernel per configuration:
about 60 kernels for the default selection. QR/LQ kernels move the reflectors into the
multiply's own layout where it differs from the factorization's (``reflector_move``).
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from tests.device.conftest import WARM_WORKERS

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
scipy_linalg = pytest.importorskip("scipy.linalg")

pytestmark = pytest.mark.gpu

ROW, COL = "row_major", "col_major"
DTYPES = {"float32": (np.float32, "real"), "float64": (np.float64, "real"),
          "complex64": (np.float32, "complex"), "complex128": (np.float64, "complex")}
ARRANGEMENTS = {"cc": (COL, COL), "rr": (ROW, ROW), "cr": (COL, ROW)}
# (m, n, k) per function family and size class: small problems several to a block
# (batches_per_block='suggested'), medium ones one per block
SIZES = {
    "square": {"small": (5, 5, 3), "medium": (32, 32, 4)},
    "trsm": {"small": (6, 4, 1), "medium": (32, 16, 1)},
    "qr": {"small": (7, 4, 1), "medium": (24, 40, 1)},
    "gels": {"small": (9, 5, 2), "medium": (20, 36, 3)},
}
FUNCTIONS = {"cholesky": "square", "lu": "square", "lu_pivot": "square", "trsm": "trsm",
             "qr": "qr", "lq": "qr", "gels": "gels", "posv": "square",
             "gesv_no_pivot": "square", "gesv_partial_pivot": "square"}
BLOCKS = 24  # thread blocks per launch
POISON = -7  # what info and ipiv hold before a kernel runs

ALL = list(itertools.product(FUNCTIONS, DTYPES, ARRANGEMENTS, ("small", "medium")))
# every dtype with both size classes, the arrangement rotating: 8 of 24 per function
COVER = {(f, d, a, s) for f in FUNCTIONS for i, d in enumerate(DTYPES)
         for j, s in enumerate(("small", "medium"))
         for a in [list(ARRANGEMENTS)[(i + j) % 3]]}
# The full product (240 kernels, several minutes of kernel compilation) with
# CUWEAVE_SOLVER_FULL_GRID=1; its configurations beyond COVER are marked slow.
GRID = ALL if os.environ.get("CUWEAVE_SOLVER_FULL_GRID") else [c for c in ALL if c in COVER]


def _grid(functions):
    return [pytest.param(c, marks=() if c in COVER else pytest.mark.slow, id="-".join(c))
            for c in GRID if c[0] in functions]


def make_solver(function, dtype, arrangement, size, **extra):
    """The solver object of one configuration (``sm`` of the current device)."""
    import cuweave.device as dx

    precision, data_type = DTYPES[dtype]
    mnk = SIZES[FUNCTIONS[function]][size] if isinstance(size, str) else size
    kw = dict(precision=precision, execution=extra.pop("execution", "Block"),
              data_type=data_type, arrangement=ARRANGEMENTS[arrangement], **extra)
    if kw["execution"] == "Block":
        kw.setdefault("batches_per_block", "suggested" if max(mnk) <= 16 else 1)
    if function == "cholesky":
        return dx.CholeskySolver(mnk, fill_mode=kw.pop("fill_mode", "lower"), **kw)
    if function in ("lu", "lu_pivot"):
        cls = dx.LUSolver if function == "lu" else dx.LUPivotSolver
        return cls(mnk, **kw)
    if function == "trsm":
        knobs = dict(side="left", fill_mode="lower", diag="non_unit") | \
            {k: kw.pop(k) for k in ("side", "fill_mode", "diag") if k in kw}
        return dx.TriangularSolver(mnk, **knobs, **kw)
    if function in ("qr", "lq"):
        m, n, _ = mnk
        fact_cls, mult_cls = ((dx.QRFactorize, dx.QRMultiply) if function == "qr"
                              else (dx.LQFactorize, dx.LQMultiply))
        arr = kw.pop("arrangement")
        fact = fact_cls((m, n), arrangement=arr[0], **kw)
        side = "left" if function == "qr" else "right"
        op = "conj_transposed" if data_type == "complex" else "transposed"
        # Q^H A (QR) or A Q^H (LQ): the reflectors are the factorized A's, C is A itself
        kw |= {"batches_per_block": fact.batches_per_block, "block_dim": fact.block_dim}
        mult = mult_cls((m, n, min(m, n)), side=side, transpose_mode=op,
                        arrangement=(arr[0], arr[0]), leading_dimensions=(fact.lda, fact.lda),
                        **kw)
        return fact, mult
    if function == "gels":
        return dx.LeastSquaresSolver(mnk, **kw)
    # a fused Solver function, with the specialised object of the same problem for its
    # operand layout (shapes, strides, sizes)
    layout = {"posv": lambda: dx.CholeskySolver(mnk, fill_mode="lower", **kw),
              "gesv_no_pivot": lambda: dx.LUSolver(mnk, **kw),
              "gesv_partial_pivot": lambda: dx.LUPivotSolver(mnk, **kw)}[function]()
    kw |= {"batches_per_block": layout.batches_per_block, "block_dim": layout.block_dim}
    fused = dx.Solver(function, mnk, fill_mode="lower" if function == "posv" else None, **kw)
    return fused, layout


# ---------------------------------------------------------------------------------------------
# Host layout: problems <-> the shared-memory layout of each block
# ---------------------------------------------------------------------------------------------


def _index(shape, strides):
    bpb, rows, cols = shape
    sb, sr, sc = strides
    return (np.arange(bpb)[:, None, None] * sb + np.arange(rows)[None, :, None] * sr +
            np.arange(cols)[None, None, :] * sc)


def pack(mats, shape, strides, size) -> np.ndarray:
    """``mats`` (problems, rows, cols) laid out as ``blocks`` shared-memory buffers of
    ``size`` elements each (padding zero), flattened."""
    bpb = shape[0]
    blocks = mats.shape[0] // bpb
    out = np.zeros((blocks, size), dtype=mats.dtype)
    out[:, _index(shape, strides)] = mats.reshape(blocks, *shape)
    return out.ravel()


def unpack(buf, shape, strides, size) -> np.ndarray:
    blocks = buf.size // size
    return buf.reshape(blocks, size)[:, _index(shape, strides)].reshape(-1, *shape[1:])


def random(shape, dtype, rng) -> np.ndarray:
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return x.astype(dtype)


def spd(problems, n, dtype, rng) -> np.ndarray:
    m = random((problems, n, n), np.complex128 if np.dtype(dtype).kind == "c" else np.float64,
               rng)
    a = m @ np.conj(np.swapaxes(m, 1, 2)) / n + np.eye(n)
    return a.astype(dtype)


def eps(dtype) -> float:
    return float(np.finfo(np.dtype(dtype).type(0).real.dtype).eps)


def residual(a, x, b) -> float:
    """Largest ``||A X - B|| / (||A|| ||X|| + ||B||)`` over problems, in float64."""
    a, x, b = (np.asarray(v, np.complex128) for v in (a, x, b))
    r = np.linalg.norm(a @ x - b, axis=(1, 2))
    scale = np.linalg.norm(a, axis=(1, 2)) * np.linalg.norm(x, axis=(1, 2)) + \
        np.linalg.norm(b, axis=(1, 2))
    return float(np.max(r / scale))


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------


def _copy(cuda, nthreads):
    @cuda.jit(device=True, forceinline=True)
    def load(src, dst, n):
        tid = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y *
                                                     cuda.threadIdx.z)
        base = cuda.blockIdx.x * n
        for i in range(tid, n, nthreads):
            dst[i] = src[base + i]

    @cuda.jit(device=True, forceinline=True)
    def store(src, dst, n):
        tid = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y *
                                                     cuda.threadIdx.z)
        base = cuda.blockIdx.x * n
        for i in range(tid, n, nthreads):
            dst[base + i] = src[i]

    return load, store


def _linear_call(s, kind: str, runtime: bool, fused=None):
    """The solver calls of one kernel, chosen here (in Python) rather than by branches the
    kernel would have to prune."""
    from numba import cuda

    if fused is not None and kind == "gesv_partial_pivot":
        def call(sa, sb, sp, info, lda, ldb):
            fused.execute(sa, sp, sb, info)
    elif fused is not None:
        def call(sa, sb, sp, info, lda, ldb):
            fused.execute(sa, sb, info)
    elif kind == "trsm" and runtime:
        def call(sa, sb, sp, info, lda, ldb):
            s.solve(sa, sb, lda=lda, ldb=ldb)
    elif kind == "trsm":
        def call(sa, sb, sp, info, lda, ldb):
            s.solve(sa, sb)
    elif kind == "lu_pivot" and s.m != s.n:  # factorization only
        def call(sa, sb, sp, info, lda, ldb):
            s.factorize(sa, sp, info)
    elif kind == "lu_pivot" and runtime:
        def call(sa, sb, sp, info, lda, ldb):
            s.factorize(sa, sp, info, lda=lda)
            cuda.syncthreads()
            s.solve(sa, sp, sb, lda=lda, ldb=ldb)
    elif kind == "lu_pivot":
        def call(sa, sb, sp, info, lda, ldb):
            s.factorize(sa, sp, info)
            cuda.syncthreads()
            s.solve(sa, sp, sb)
    elif runtime:
        def call(sa, sb, sp, info, lda, ldb):
            s.factorize(sa, info, lda=lda)
            cuda.syncthreads()
            s.solve(sa, sb, lda=lda, ldb=ldb)
    else:
        def call(sa, sb, sp, info, lda, ldb):
            s.factorize(sa, info)
            cuda.syncthreads()
            s.solve(sa, sb)
    return cuda.jit(device=True, forceinline=True)(call)


def linear_kernel(s, kind: str, lds=None, fused=None):
    """Kernel ``(a, b, ipiv, info, lda, ldb)`` of a linear solver (``s``: the specialised
    object, or the layout of the ``fused`` Solver function): factorize and solve. ``lds``:
    the leading dimensions the buffers have, passed at run time (the run-time form)."""
    from numba import cuda

    n_a = s.a_size() if lds is None else s.a_size(lda=lds[0])
    n_b = s.b_size() if lds is None else s.b_size(ldb=lds[1])
    n_p = s.batches_per_block * min(s.m, s.n)
    bpb, vt = s.batches_per_block, s.value_type
    load, store = _copy(cuda, s.block_size)
    call = _linear_call(s, kind, lds is not None, fused)

    @cuda.jit
    def kernel(a, b, ipiv, info, lda, ldb):
        sa = cuda.shared.array(n_a, dtype=vt)
        sb = cuda.shared.array(n_b, dtype=vt)
        sp = cuda.shared.array(n_p, dtype=np.int32)
        load(a, sa, n_a)
        load(b, sb, n_b)
        cuda.syncthreads()
        call(sa, sb, sp, info[cuda.blockIdx.x * bpb:], lda, ldb)
        cuda.syncthreads()
        store(sa, a, n_a)
        store(sb, b, n_b)
        store(sp, ipiv, n_p)

    return kernel, (n_a, n_b, n_p)


def reflector_index(i, rows, cols, s0, s1, s2, d0, d1, d2):
    """Element ``i`` (problem, row, column, in that order) of a ``rows x cols`` operand: its
    offset with strides ``(s0, s1, s2)`` and with ``(d0, d1, d2)``."""
    p, rest = i // (rows * cols), i % (rows * cols)
    r, c = rest // cols, rest % cols
    return p * s0 + r * s1 + c * s2, p * d0 + r * d1 + c * d2


def reflector_move(fact, mult):
    """``(rows, cols, src_strides, dst_strides)`` copying the K reflectors a factorization
    left in its A into the layout of the multiply's A, or None where they coincide.

    The multiply's A holds only the reflectors: K x N for LQ (right side), M x K for QR (left
    side), K = min(M, N). Its problems lie ``lda * K`` elements apart where the
    factorization's M x N ones lie ``lda * M`` (row-major LQ) or ``lda * N`` (column-major
    QR) apart: with several problems per block, a row-major LQ with M > N or a column-major
    QR with M < N reads the wrong problems' reflectors from the factorization's buffer (the
    first run on an H100: lq-float64-rr-small, every problem but each block's first wrong)."""
    src, dst = fact.a_strides(), mult.a_strides()
    if src == dst:
        return None
    return (*mult.a_shape[1:], src, dst)


def orthogonal_kernel(fact, mult):
    """Kernel ``(a, c, tau)``: factorize A, then multiply C (a copy of A) by op(Q), the
    reflectors moved into the multiply's layout first where it differs (``reflector_move``)."""
    from numba import cuda

    n_a, n_c, n_t = fact.a_size(), mult.c_size(), fact.tau_size
    vt = fact.value_type
    load, store = _copy(cuda, fact.block_size)
    move = reflector_move(fact, mult)
    n_r = 1 if move is None else mult.a_size()
    if move is None:
        def apply(sa, sr, st, sc):
            mult.multiply(sa, st, sc)
    else:
        rows, cols, (s0, s1, s2), (d0, d1, d2) = move
        total, nthreads = fact.batches_per_block * rows * cols, fact.block_size
        index = cuda.jit(device=True, forceinline=True)(reflector_index)

        def apply(sa, sr, st, sc):
            tid = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y *
                                                         cuda.threadIdx.z)
            for i in range(tid, total, nthreads):
                src, dst = index(i, rows, cols, s0, s1, s2, d0, d1, d2)
                sr[dst] = sa[src]
            cuda.syncthreads()
            mult.multiply(sr, st, sc)
    apply = cuda.jit(device=True, forceinline=True)(apply)

    @cuda.jit
    def kernel(a, c, tau):
        sa = cuda.shared.array(n_a, dtype=vt)
        sc = cuda.shared.array(n_c, dtype=vt)
        st = cuda.shared.array(n_t, dtype=vt)
        sr = cuda.shared.array(n_r, dtype=vt)
        load(a, sa, n_a)
        load(c, sc, n_c)
        cuda.syncthreads()
        fact.factorize(sa, st)
        cuda.syncthreads()
        apply(sa, sr, st, sc)
        cuda.syncthreads()
        store(sa, a, n_a)
        store(sc, c, n_c)
        store(st, tau, n_t)

    return kernel, (n_a, n_c, n_t)


def gels_kernel(s):
    from numba import cuda

    n_a, n_b, n_t = s.a_size(), s.bx_size(), s.tau_size
    vt = s.value_type
    load, store = _copy(cuda, s.block_size)

    @cuda.jit
    def kernel(a, b, tau):
        sa = cuda.shared.array(n_a, dtype=vt)
        sb = cuda.shared.array(n_b, dtype=vt)
        st = cuda.shared.array(n_t, dtype=vt)
        load(a, sa, n_a)
        load(b, sb, n_b)
        cuda.syncthreads()
        s.solve(sa, st, sb)
        cuda.syncthreads()
        store(sa, a, n_a)
        store(sb, b, n_b)
        store(st, tau, n_t)

    return kernel, (n_a, n_b, n_t)


def thread_kernel(s, pivot: bool):
    """Thread execution: every thread factorizes and solves its own problem in global
    memory."""
    from numba import cuda

    n_a, n_b, n_p = s.a_size(), s.b_size(), min(s.m, s.n)
    if pivot:
        def solve(a, b, ipiv, info):
            s.factorize(a, ipiv, info)
            s.solve(a, ipiv, b)
    else:
        def solve(a, b, ipiv, info):
            s.factorize(a, info)
            s.solve(a, b)
    solve = cuda.jit(device=True, forceinline=True)(solve)

    @cuda.jit
    def kernel(a, b, ipiv, info, problems):
        i = cuda.grid(1)
        if i < problems:
            solve(a[i * n_a:], b[i * n_b:], ipiv[i * n_p:], info[i:])

    return kernel, (n_a, n_b, n_p)


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------

EXTRA = {  # name -> (function, dtype, arrangement, size, knobs)
    "cholesky_upper": ("cholesky", "complex128", "rr", "medium", {"fill_mode": "upper"}),
    "cholesky_padded": ("cholesky", "float32", "cc", "medium",
                        {"leading_dimensions": (40, 36)}),
    "cholesky_runtime_ld": ("cholesky", "float64", "cr", "medium", {}),
    "lu_pivot_transposed": ("lu_pivot", "float64", "cc", "medium",
                            {"transpose_mode": "transposed"}),
    "lu_pivot_conj": ("lu_pivot", "complex64", "rr", "small",
                      {"transpose_mode": "conj_transposed"}),
    "lu_pivot_runtime_ld": ("lu_pivot", "float32", "rr", "medium", {}),
    "lu_pivot_tall": ("lu_pivot", "float64", "cc", (40, 24, 1), {}),
    "trsm_right_upper_unit": ("trsm", "complex128", "cr", "medium",
                              {"side": "right", "fill_mode": "upper", "diag": "unit",
                               "transpose_mode": "conj_transposed"}),
    "trsm_runtime_ld": ("trsm", "float32", "cc", "small", {}),
    "gels_transposed": ("gels", "float64", "cc", "medium", {"transpose_mode": "transposed"}),
    # several problems per block whose reflectors the multiply reads in another layout
    "qr_wide_cc": ("qr", "complex64", "cc", (4, 7, 1), {}),
    "lq_tall_rr": ("lq", "complex128", "rr", "small", {}),
    "cholesky_thread": ("cholesky", "float32", "cc", (8, 8, 2), {"execution": "Thread"}),
    "lu_pivot_thread": ("lu_pivot", "float64", "rr", (6, 6, 1), {"execution": "Thread"}),
    "cholesky_not_spd": ("cholesky", "float64", "cc", "medium", {}),
    "cholesky_not_spd_small": ("cholesky", "complex64", "rr", "small", {}),
    "lu_pivot_singular": ("lu_pivot", "float32", "cc", "medium", {}),
    "lu_singular": ("lu", "complex128", "cr", "small", {}),
    "gesv_partial_pivot_singular": ("gesv_partial_pivot", "float64", "rr", "medium", {}),
}


def _selected(request) -> set:
    keys = set()
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.path == request.path and "config" in params:
            keys.add(params["config"])
    return keys


@pytest.fixture(scope="module")
def built(request):
    """The solver objects of the selected tests, the code of their functions generated first
    in parallel processes."""
    from cuweave.device.cusolverdx import generate_missing

    objects = {c: make_solver(*c) for c in sorted(_selected(request))}
    objects.update({name: make_solver(f, d, a, s, **dict(kw))
                    for name, (f, d, a, s, kw) in EXTRA.items()})
    generate_missing([o for v in objects.values()
                      for o in (v if isinstance(v, tuple) else (v,))], WARM_WORKERS)
    return objects


# ---------------------------------------------------------------------------------------------
# Running one configuration
# ---------------------------------------------------------------------------------------------


def _inputs(function, s, problems, rng):
    dt = s.value_type
    if function in ("cholesky", "posv"):
        a = spd(problems, s.m, dt, rng)
    elif function in ("lu", "gesv_no_pivot"):
        a = random((problems, s.m, s.n), dt, rng) + s.n * np.eye(s.m, s.n, dtype=dt)
    elif function == "trsm":  # well conditioned with a unit diagonal too
        dim = s.a_shape[1]
        a = random((problems, dim, dim), dt, rng) / dim + 2 * np.eye(dim, dtype=dt)
    else:
        a = random((problems, s.m, s.n), dt, rng)
    b = random((problems, *s.b_shape[1:]), dt, rng)
    return a, b


def run_linear(function, s, rng, *, lds=None, a=None, fused=None):
    """Run a linear solver over ``BLOCKS`` blocks; returns inputs and outputs as problems."""
    from numba import cuda

    problems = BLOCKS * s.batches_per_block
    a0, b = _inputs(function, s, problems, rng)
    a = a0 if a is None else a
    kernel, (n_a, n_b, n_p) = linear_kernel(s, function, lds, fused)
    a_strides = s.a_strides() if lds is None else s.a_strides(lda=lds[0])
    b_strides = s.b_strides() if lds is None else s.b_strides(ldb=lds[1])
    d_a = cuda.to_device(pack(a, s.a_shape, a_strides, n_a))
    d_b = cuda.to_device(pack(b, s.b_shape, b_strides, n_b))
    d_p = cuda.to_device(np.full(BLOCKS * n_p, POISON, np.int32))
    d_info = cuda.to_device(np.full(problems, POISON, np.int32))
    kernel[BLOCKS, s.block_dim](d_a, d_b, d_p, d_info, *(lds or (0, 0)))
    cuda.synchronize()
    out_a = unpack(d_a.copy_to_host(), s.a_shape, a_strides, n_a)
    out_b = unpack(d_b.copy_to_host(), s.b_shape, b_strides, n_b)
    ipiv = d_p.copy_to_host().reshape(problems, -1)
    return a, b, out_a, out_b, ipiv, d_info.copy_to_host()


def _op(a, mode):
    if mode == "transposed":
        return np.swapaxes(a, 1, 2)
    if mode == "conj_transposed":
        return np.conj(np.swapaxes(a, 1, 2))
    return a


def _unit_lower(lu, m, n):
    k = min(m, n)
    low = np.tril(lu[:, :, :k], -1) + np.eye(m, k)
    return low, np.triu(lu[:, :k, :])


def _apply_pivots(a, ipiv):
    """``P A`` for LAPACK's 1-based row interchanges."""
    out = np.array(a, dtype=np.complex128)
    for p in range(out.shape[0]):
        for i, j in enumerate(ipiv[p] - 1):
            out[p, [i, j]] = out[p, [j, i]]
    return out


def check_linear(function, s, a, b, out_a, out_b, ipiv, info, bad=()):
    """Factors and solutions of the good problems against float64; ``info`` zero there.

    cuSOLVERDx's trsm takes no ``info`` (nor does nvmath's ``TriangularSolver.solve``): its
    ``info`` must keep the poison the buffer was filled with, and A must come back as it went
    in (only B is written)."""
    tol = 60 * max(s.m, s.n) * eps(s.value_type)
    good = np.setdiff1d(np.arange(a.shape[0]), list(bad))
    if function == "trsm":
        assert (info == POISON).all(), f"trsm wrote info: {info[info != POISON][:5]}"
        assert np.array_equal(out_a, a), "trsm wrote into A"
    else:
        assert (info[good] == 0).all(), f"info {info[good][info[good] != 0][:5]}"
    a64, x = a[good].astype(np.complex128), out_b[good]
    mode = getattr(s, "transpose_mode", "non_transposed")
    if function == "trsm":
        tri = np.tril(a64) if s.fill_mode == "lower" else np.triu(a64)
        if s.diag == "unit":
            idx = np.arange(tri.shape[1])
            tri[:, idx, idx] = 1
        op = _op(tri, s.transpose_mode)
        lhs = op if s.side == "left" else None
        if lhs is not None:
            assert residual(lhs, x, b[good]) < tol
        else:  # X op(A) = B  <=>  op(A)^T X^T = B^T
            assert residual(np.swapaxes(op, 1, 2), np.swapaxes(x, 1, 2),
                            np.swapaxes(b[good], 1, 2)) < tol
        return
    if function in ("cholesky", "posv"):
        fill = getattr(s, "fill_mode", "lower")
        f = out_a[good].astype(np.complex128)
        if fill == "lower":
            low = np.tril(f)
            rebuilt = low @ np.conj(np.swapaxes(low, 1, 2))
        else:
            up = np.triu(f)
            rebuilt = np.conj(np.swapaxes(up, 1, 2)) @ up
        err = np.linalg.norm(rebuilt - a64, axis=(1, 2)) / np.linalg.norm(a64, axis=(1, 2))
        assert np.max(err) < tol, f"||L L^H - A|| / ||A|| = {np.max(err):.3g}"
    else:
        low, up = _unit_lower(out_a[good].astype(np.complex128), s.m, s.n)
        lhs = a64 if function in ("lu", "gesv_no_pivot") else _apply_pivots(a64, ipiv[good])
        err = np.linalg.norm(low @ up - lhs, axis=(1, 2)) / np.linalg.norm(a64, axis=(1, 2))
        assert np.max(err) < tol, f"||P A - L U|| / ||A|| = {np.max(err):.3g}"
        if function in ("lu_pivot", "gesv_partial_pivot"):
            k = min(s.m, s.n)
            assert ((ipiv[good] >= np.arange(1, k + 1)) & (ipiv[good] <= s.m)).all()
    if s.m == s.n:
        assert residual(_op(a64, mode), x, b[good]) < tol


@pytest.mark.parametrize("config", _grid(set(FUNCTIONS) - {"qr", "lq", "gels"}))
def test_linear_solvers_match_float64(built, config):
    obj = built[config]
    fused, s = obj if isinstance(obj, tuple) else (None, obj)
    rng = np.random.default_rng(ALL.index(config))
    check_linear(config[0], s, *run_linear(config[0], s, rng, fused=fused))


def _orthogonal(function, fact, mult, rng):
    from numba import cuda

    problems = BLOCKS * fact.batches_per_block
    a = random((problems, fact.m, fact.n), fact.value_type, rng)
    kernel, (n_a, n_c, n_t) = orthogonal_kernel(fact, mult)
    d_a = cuda.to_device(pack(a, fact.a_shape, fact.a_strides(), n_a))
    d_c = cuda.to_device(pack(a, mult.c_shape, mult.c_strides(), n_c))
    d_t = cuda.device_array(BLOCKS * n_t, dtype=fact.value_type)
    kernel[BLOCKS, fact.block_dim](d_a, d_c, d_t)
    cuda.synchronize()
    f = unpack(d_a.copy_to_host(), fact.a_shape, fact.a_strides(), n_a)
    c = unpack(d_c.copy_to_host(), mult.c_shape, mult.c_strides(), n_c)
    check_orthogonal(function, fact, a, f, c)


def check_orthogonal(function, fact, a, f, c):
    """``f``: the factorized A (R or L with the reflectors), ``c``: op(Q) applied to A."""
    a64, f, c = (np.asarray(v, np.complex128) for v in (a, f, c))
    tol = 60 * max(fact.m, fact.n) * eps(fact.value_type)
    norm = np.linalg.norm(a64, axis=(1, 2))
    if function == "qr":   # Q^H A = R: upper trapezoidal, R^H R = A^H A
        r = np.triu(f)
        gram = np.conj(np.swapaxes(a64, 1, 2)) @ a64
        rebuilt = np.conj(np.swapaxes(r, 1, 2)) @ r
        assert np.max(np.linalg.norm(np.tril(c, -1), axis=(1, 2)) / norm) < tol
    else:                  # A Q^H = L: lower trapezoidal, L L^H = A A^H
        r = np.tril(f)
        gram = a64 @ np.conj(np.swapaxes(a64, 1, 2))
        rebuilt = r @ np.conj(np.swapaxes(r, 1, 2))
        assert np.max(np.linalg.norm(np.triu(c, 1), axis=(1, 2)) / norm) < tol
    assert np.max(np.linalg.norm(c - r, axis=(1, 2)) / norm) < tol
    assert np.max(np.linalg.norm(rebuilt - gram, axis=(1, 2)) / norm ** 2) < tol


@pytest.mark.parametrize("config", _grid({"qr", "lq"}))
def test_qr_lq_factorize_and_multiply_match_float64(built, config):
    fact, mult = built[config]
    _orthogonal(config[0], fact, mult, np.random.default_rng(ALL.index(config)))


@pytest.mark.parametrize("name", ["qr_wide_cc", "lq_tall_rr"])
def test_qr_lq_reflectors_moved_to_the_multiply_layout(built, name):
    fact, mult = built[name]
    assert fact.batches_per_block > 1 and reflector_move(fact, mult) is not None
    _orthogonal(EXTRA[name][0], fact, mult, np.random.default_rng(len(name)))


def _gels(s, rng):
    from numba import cuda

    problems = BLOCKS * s.batches_per_block
    a = random((problems, s.m, s.n), s.value_type, rng)
    b = random((problems, *s.b_shape[1:]), s.value_type, rng)
    kernel, (n_a, n_b, n_t) = gels_kernel(s)
    bx_shape, bx_strides = s.bx_shape, s.bx_strides()
    buf = np.zeros((problems, *bx_shape[1:]), dtype=s.value_type)
    buf[:, :b.shape[1]] = b
    d_a = cuda.to_device(pack(a, s.a_shape, s.a_strides(), n_a))
    d_b = cuda.to_device(pack(buf, bx_shape, bx_strides, n_b))
    d_t = cuda.device_array(BLOCKS * n_t, dtype=s.value_type)
    kernel[BLOCKS, s.block_dim](d_a, d_b, d_t)
    cuda.synchronize()
    x = unpack(d_b.copy_to_host(), bx_shape, bx_strides, n_b)[:, :s.x_shape[1]]
    check_gels(s, a, b, x)


def check_gels(s, a, b, x):
    problems = a.shape[0]
    op = _op(a.astype(np.complex128), s.transpose_mode)
    ref = np.stack([np.linalg.lstsq(op[p], b[p].astype(np.complex128), rcond=None)[0]
                    for p in range(problems)])
    err = np.linalg.norm(x - ref, axis=(1, 2)) / np.linalg.norm(ref, axis=(1, 2))
    assert np.max(err) < 200 * max(s.m, s.n) * eps(s.value_type), f"{np.max(err):.3g}"


@pytest.mark.parametrize("config", _grid({"gels"}))
def test_least_squares_matches_numpy(built, config):
    _gels(built[config], np.random.default_rng(ALL.index(config)))


# ---------------------------------------------------------------------------------------------
# Knobs and forms
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cholesky_upper", "cholesky_padded", "lu_pivot_transposed",
                                  "lu_pivot_conj", "lu_pivot_tall", "trsm_right_upper_unit"])
def test_knob_variants(built, name):
    function = EXTRA[name][0]
    s = built[name]
    if name == "cholesky_padded":
        assert s.leading_dimensions == (40, 36) and s.a_strides()[2] == 40
    check_linear(function, s, *run_linear(function, s, np.random.default_rng(len(name))))


@pytest.mark.parametrize("name, lds", [("cholesky_runtime_ld", (35, 37)),
                                       ("lu_pivot_runtime_ld", (34, 33)),
                                       ("trsm_runtime_ld", (9, 7))])
def test_runtime_leading_dimensions(built, name, lds):
    function = EXTRA[name][0]
    s = built[name]
    check_linear(function, s, *run_linear(function, s, np.random.default_rng(3), lds=lds))


def test_gels_transposed(built):
    _gels(built["gels_transposed"], np.random.default_rng(11))


@pytest.mark.parametrize("name", ["cholesky_thread", "lu_pivot_thread"])
def test_thread_execution(built, name):
    from numba import cuda

    function = EXTRA[name][0]
    s = built[name]
    problems = 200
    rng = np.random.default_rng(5)
    a, b = _inputs(function, s, problems, rng)
    kernel, (n_a, n_b, n_p) = thread_kernel(s, function == "lu_pivot")
    d_a = cuda.to_device(pack(a, s.a_shape, s.a_strides(), n_a))
    d_b = cuda.to_device(pack(b, s.b_shape, s.b_strides(), n_b))
    d_p = cuda.to_device(np.zeros(problems * n_p, np.int32))
    d_info = cuda.to_device(np.full(problems, POISON, np.int32))
    kernel[(problems + 63) // 64, 64](d_a, d_b, d_p, d_info, problems)
    cuda.synchronize()
    out_a = unpack(d_a.copy_to_host(), s.a_shape, s.a_strides(), n_a)
    out_b = unpack(d_b.copy_to_host(), s.b_shape, s.b_strides(), n_b)
    check_linear(function, s, a, b, out_a, out_b, d_p.copy_to_host().reshape(problems, -1),
                 d_info.copy_to_host())


# ---------------------------------------------------------------------------------------------
# Non-positive-definite and singular problems
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cholesky_not_spd", "cholesky_not_spd_small"])
def test_cholesky_reports_non_positive_definite(built, name):
    """A[p, p] = -1 in an SPD matrix: the Schur complement at step p is negative, so the
    factorization stops at the (p+1)-th leading minor, as LAPACK's potrf reports it."""
    s = built[name]
    rng = np.random.default_rng(21)
    problems = BLOCKS * s.batches_per_block
    a, _ = _inputs("cholesky", s, problems, rng)
    bad = {1: 0, 5: s.m - 1, problems - 1: s.m // 2}
    for p, j in bad.items():
        a[p, j, j] = -1
    potrf = scipy_linalg.get_lapack_funcs("potrf", (a[0],))
    for p, j in bad.items():
        assert potrf(a[p], lower=True)[1] == j + 1  # LAPACK agrees on the failing minor
    out = run_linear("cholesky", s, rng, a=a)
    info = out[-1]
    for p, j in bad.items():
        assert info[p] == j + 1, (p, info[p])
    check_linear("cholesky", s, *out, bad=list(bad))


@pytest.mark.parametrize("name", ["lu_pivot_singular", "lu_singular",
                                  "gesv_partial_pivot_singular"])
def test_lu_reports_exactly_singular(built, name):
    """A zero column j makes U(j, j) exactly zero with or without pivoting: info = j + 1 as
    LAPACK's getrf reports it; the other problems of every block are solved."""
    function = EXTRA[name][0]
    obj = built[name]
    fused, s = obj if isinstance(obj, tuple) else (None, obj)
    rng = np.random.default_rng(22)
    problems = BLOCKS * s.batches_per_block
    a, _ = _inputs(function, s, problems, rng)
    bad = {0: s.n - 1, 3: 0, problems - 2: s.n // 2}
    for p, j in bad.items():
        a[p, :, j] = 0
    if function != "lu":
        getrf = scipy_linalg.get_lapack_funcs("getrf", (a[0],))
        for p, j in bad.items():
            assert getrf(a[p])[2] == j + 1
    out = run_linear(function, s, rng, a=a, fused=fused)
    info = out[-1]
    for p, j in bad.items():
        assert info[p] == j + 1, (p, info[p])
    check_linear(function, s, *out, bad=list(bad))
