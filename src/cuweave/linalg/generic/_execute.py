"""The one execution of a planned generic matmul, over a BLAS *backend*.

A backend (``_cpu.CpuBackend``: the CPU's Fortran BLAS; ``_cuda.CudaBackend``: cuBLAS) offers
the column-major primitives ``gemm``, ``gemm_strided``, ``symm``, ``hemm``, ``trmm``
(out of place), ``dgmm``, ``geam``, ``scal``, ``zero``, ``alloc`` and ``for_batch``; this
module turns a :class:`~cuweave.linalg.generic._layout.Plan` and the operands' base pointers
into calls of them. The CPU and the GPU therefore run the very same sequence of BLAS calls
(the CPU tests exercise the GPU's logic).

How each kind adds ``beta * c`` (``R`` is the result's memory, ``op(c)`` c's memory matrix
transposed where its orientation differs from the result's):

* gemm, symm, hemm: ``R <- op(c)`` (geam), then the routine with ``beta`` (in place: ``R`` is
  ``c``);
* trmm, dgmm (no ``beta`` in BLAS): the routine writes ``R`` (a scratch matrix when ``R`` is
  ``c``), then ``R <- alpha' * R + beta * op(c)`` (geam; dgmm takes ``alpha`` there too).
"""

from __future__ import annotations

import numpy as np

from ._layout import Matrix, N, Plan

__all__ = ["execute", "materialize"]


def _progression(offsets: np.ndarray):
    """The common step of ``offsets`` if they are an arithmetic progression, else None."""
    if len(offsets) < 2:
        return 0
    step = int(offsets[1] - offsets[0])
    if np.array_equal(offsets, offsets[0] + step * np.arange(len(offsets), dtype=np.int64)):
        return step
    return None


def materialize(mat: Matrix, base: int, be):
    """``(base pointer, element offsets)`` of ``mat`` after its transpose / conjugate-transpose
    preparations (new buffers from ``be.alloc``, kept in ``be.keep``); ``base`` is the memory
    of ``mat``'s first (root) form."""
    steps = []
    m = mat
    while m.source is not None:
        steps.append(m)
        m = m.source
    ptr, offsets = base, m.offsets
    isz = be.itemsize
    for after in reversed(steps):
        before = after.source
        step = after.preps[-1]
        op = 2 if step == "C" else 1
        uniq, inverse = np.unique(offsets, return_inverse=True)
        if before.vector:
            mr, mc, ld = 1, before.rows, before.vstride
        else:
            (mr, mc), ld = before.mem_shape, before.ld
        size = max(mr * mc, 1)
        dst = be.alloc(size * len(uniq))

        def copy(j, src=ptr, uniq=uniq, dst=dst, mr=mr, mc=mc, ld=ld, size=size, op=op):
            be.geam(op, op, mc, mr, 1, src + int(uniq[j]) * isz, ld, 0,
                    src + int(uniq[j]) * isz, ld, dst + j * size * isz, max(mc, 1))

        be.for_batch(len(uniq), copy, work=mr * mc)
        ptr, offsets = dst, inverse.reshape(-1).astype(np.int64) * size
    return ptr, offsets


def execute(plan: Plan, be, base_first: int, base_second: int, base_c: int | None,
            base_r: int, alpha, beta) -> None:
    """Run ``plan`` on ``be``: the result is written at ``base_r`` (a dense new result in the
    plan's frame, or ``c`` itself in place)."""
    m, n, k, isz = plan.m, plan.n, plan.k, be.itemsize
    if m == 0 or n == 0 or plan.count == 0:
        return
    pf, off_f = materialize(plan.first, base_first, be)
    ps, off_s = materialize(plan.second, base_second, be)
    c = plan.c
    if c is not None:
        pc, off_c = materialize(c, base_c, be)
        ldc_in = c.ld
    if plan.inplace:
        off_r, ldr = off_c, c.ld
    else:
        off_r, ldr = np.arange(plan.count, dtype=np.int64) * (m * n), m
    if k == 0:  # an empty product: R = beta * op(c), or zeros
        def empty(i):
            r = base_r + int(off_r[i]) * isz
            if c is None:
                be.zero(m, n, r, ldr)
            elif not plan.inplace or beta != 1:
                src = pc + int(off_c[i]) * isz
                be.geam(plan.c_op, plan.c_op, m, n, beta, src, ldc_in, 0, src, ldc_in, r, ldr)
        be.for_batch(plan.count, empty, work=m * n)
        return
    kind = plan.kind
    add_c = c is not None and not plan.inplace
    if plan.dense >= 0:
        _dense(plan, be, pf, off_f, ps, off_s, base_r, off_r, ldr,
               (pc, off_c, ldc_in) if add_c else None, alpha, beta)
        return
    if plan.uses_beta:
        b = beta if c is not None else 0
        if kind == "gemm" and plan.count > 1 and not add_c:
            steps = [_progression(o) for o in (off_f, off_s, off_r)]
            if None not in steps:
                be.gemm_strided(plan.op_first, plan.op_second, m, n, k, alpha,
                                pf + int(off_f[0]) * isz, plan.first.ld, steps[0],
                                ps + int(off_s[0]) * isz, plan.second.ld, steps[1], b,
                                base_r + int(off_r[0]) * isz, ldr, steps[2], plan.count)
                return

        def body(i):
            r = base_r + int(off_r[i]) * isz
            if add_c:
                src = pc + int(off_c[i]) * isz
                be.geam(plan.c_op, plan.c_op, m, n, 1, src, ldc_in, 0, src, ldc_in, r, ldr)
            f = pf + int(off_f[i]) * isz
            s = ps + int(off_s[i]) * isz
            if kind == "gemm":
                be.gemm(plan.op_first, plan.op_second, m, n, k, alpha, f, plan.first.ld, s,
                        plan.second.ld, b, r, ldr)
            else:
                getattr(be, kind)(plan.side, plan.uplo, m, n, alpha, f, plan.first.ld, s,
                                  plan.second.ld, b, r, ldr)
        be.for_batch(plan.count, body, work=2 * m * n * k)
        return
    # trmm / dgmm: the routine writes a matrix, beta * c is added after
    scratch = be.alloc(m * n) if (plan.inplace and c is not None) else None

    def body2(i):
        r = base_r + int(off_r[i]) * isz
        out, ldo = (scratch, m) if scratch is not None else (r, ldr)
        f = pf + int(off_f[i]) * isz
        s = ps + int(off_s[i]) * isz
        if kind == "trmm":
            be.trmm(plan.side, plan.uplo, plan.op_first, plan.diag, m, n, alpha, f,
                    plan.first.ld, s, plan.second.ld, out, ldo)
            a2 = 1
        else:
            be.dgmm(plan.side, m, n, s, plan.second.ld, f, plan.incx, out, ldo)
            a2 = alpha
        if c is not None:
            src = pc + int(off_c[i]) * isz
            if scratch is not None:  # r is c: r = a2 * scratch + beta * r
                be.geam(N, N, m, n, a2, out, ldo, beta, r, ldr, r, ldr)
            else:
                be.geam(N, plan.c_op, m, n, a2, r, ldr, beta, src, ldc_in, r, ldr)
        elif a2 != 1:  # r is a new dense result here (in place needs c)
            be.scal(m * n, a2, r)
    if scratch is not None and plan.count > 1:
        for i in range(plan.count):  # one scratch matrix: in order
            body2(i)
    else:
        be.for_batch(plan.count, body2, work=m * n * k)


def _dense(plan, be, pf, off_f, ps, off_s, base_r, off_r, ldr, add_c, alpha, beta) -> None:
    """The structured operand's dense form (``be.densify``) times the general one by GEMM: a
    uniform batch in two calls (every dense form in one launch, one strided-batched GEMM),
    else matrix by matrix through one scratch matrix (reused in stream order)."""
    m, n, k, isz = plan.m, plan.n, plan.k, be.itemsize
    op_s = N if plan.first.trans == plan.frame_t else 1
    lower = plan.uplo == 0
    b = beta if plan.c is not None else 0
    if add_c is not None:  # R <- op(c), then the GEMMs add to it with beta
        pc, off_c, ldc = add_c

        def copy_c(i):
            src = pc + int(off_c[i]) * isz
            be.geam(plan.c_op, plan.c_op, m, n, 1, src, ldc, 0, src, ldc,
                    base_r + int(off_r[i]) * isz, ldr)

        be.for_batch(plan.count, copy_c, work=m * n)
    steps = [_progression(o) for o in (off_f, off_s, off_r)]
    if plan.count > 1 and None not in steps:
        scratch = be.alloc(plan.count * k * k)
        be.densify(plan.dense, lower, k, pf + int(off_f[0]) * isz, plan.first.ld, scratch, k,
                   count=plan.count, stride_a=steps[0], stride_out=k * k)
        f = (scratch, k, k * k)
        s = (ps + int(off_s[0]) * isz, plan.second.ld, steps[1])
        first, second = (f, s) if plan.side == 0 else (s, f)
        ops = (op_s, N) if plan.side == 0 else (N, op_s)
        be.gemm_strided(*ops, m, n, k, alpha, *first, *second, b,
                        base_r + int(off_r[0]) * isz, ldr, steps[2], plan.count)
        return
    scratch = be.alloc(k * k)
    for i in range(plan.count):
        r = base_r + int(off_r[i]) * isz
        be.densify(plan.dense, lower, k, pf + int(off_f[i]) * isz, plan.first.ld, scratch, k)
        s = ps + int(off_s[i]) * isz
        if plan.side == 0:
            be.gemm(op_s, N, m, n, k, alpha, scratch, k, s, plan.second.ld, b, r, ldr)
        else:
            be.gemm(N, op_s, m, n, k, alpha, s, plan.second.ld, scratch, k, b, r, ldr)
