"""``DirectSolver`` and ``direct_solver``: dense ``a @ x = b`` by LU (partial pivoting) or,
EXT, Cholesky (symmetric / Hermitian positive definite ``a``), single or batched systems,
factorizations reused across solves (nvmath-python's ``nvmath.linalg.DirectSolver``).

GPU: cuSOLVER-Dn's 64-bit ``Xgetrf``/``Xgetrs``/``Xpotrf``/``Xpotrs`` for one system; for
batches cuBLAS's ``getrfBatched``/``getrsBatched`` (LU) and cuSOLVER's ``potrfBatched`` with
cuBLAS's ``trsmBatched`` (Cholesky). CPU: LAPACK's ``getrf``/``getrs``/``potrf``/``potrs``
(SciPy's), a batch split over threads. A factorization that fails raises
:class:`~cuweave.linalg.FactorizationError` naming the factorization, the systems and the
position cuSOLVER / LAPACK reported (``info``).
"""

from __future__ import annotations

import numpy as np

from ..._internal import cuda
from ..._internal.cache import PlanCache
from ..._internal.errors import InvalidOperandError, UnsupportedLayoutError
from ..._internal.lifecycle import StatefulObject
from ..._internal.logging import get_logger
from ..._internal.options import ExecutionCPU, coerce_options, resolve_execution
from ..._internal.packages import adapter, empty, resolve_stream, wrap_operand
from ._options import (
    DirectSolverOptions,
    FactorizationError,
    FillMode,
    InvalidDirectSolverState,
)
from ._solver_layout import Side, match_rhs, parse_side

__all__ = ["DirectSolver", "direct_solver"]

_log = get_logger("linalg")
N, T = 0, 1


class _PackageTypeError(InvalidOperandError, TypeError):
    """Operands of different packages (also a ``TypeError``)."""


def _explicit_offsets(ops, itemsize):
    """Explicit batches: base 0 and each entry's address in elements as its offset."""
    ptrs = np.array([o.ptr for o in ops], np.int64)
    if np.any(ptrs % itemsize):
        raise InvalidOperandError("every array of an explicit batch must be aligned to its "
                                  "element size, got a misaligned one")
    return ptrs // itemsize


class DirectSolver(StatefulObject):
    """Solve ``a @ x = b`` with a factorization of ``a`` reused across solves.

    Parameters
    ----------
    a : array or sequence of arrays
        A square matrix, a batch ``(*batch, n, n)``, or a sequence of ``(n, n)`` matrices
        (float32, float64, complex64, complex128).
    b : array or sequence of arrays
        ``(n,)``, ``(n, nrhs)``, ``(*batch, n)``, ``(*batch, n, nrhs)`` or a sequence of
        vectors / matrices, one per system of ``a``.
    options : DirectSolverOptions or dict, optional
        ``factorization="Cholesky"`` (EXT) for symmetric / Hermitian positive definite
        ``a`` (only the ``fill_mode`` triangle is read).
    execution : "cuda", "cpu", ExecutionCUDA, ExecutionCPU or dict, optional
        Default: the operands' device; host operands run on the GPU when one is usable (as
        nvmath-python), else on the CPU.
    stream : optional

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.linalg import DirectSolver
    >>> a = np.array([[4.0, 1.0], [1.0, 3.0]]); b = np.array([1.0, 2.0])
    >>> with DirectSolver(a, b, execution="cpu") as solver:
    ...     solver.plan()
    ...     solver.factorize()
    ...     x = solver.solve()
    >>> np.allclose(a @ x, b)
    True
    """

    def __init__(self, a, b, options=None, execution=None, stream=None):
        self.options = opts = coerce_options(options, DirectSolverOptions, "options")
        self.logger = opts.logger or _log
        A = parse_side(a, "a", square=True)
        B = match_rhs(A, parse_side(b, "b", square=False))
        if B.op.package != A.op.package:
            raise _PackageTypeError(f"b must come from a's package ({A.op.package}), got "
                                    f"{B.op.package}")
        if B.op.place != A.op.place:
            raise InvalidOperandError(f"b must be on a's device ({A.op.place}), got "
                                      f"{B.op.place}")
        if B.op.dtype != A.op.dtype:
            raise InvalidOperandError(f"b must have a's dtype ({A.op.dtype}), got "
                                      f"{B.op.dtype}")
        if any(o.conj for o in A.ops + B.ops):
            raise InvalidOperandError("a and b must not be lazily conjugated tensors, got one; "
                                      "call resolve_conj()")
        self.A, self.B = A, B
        self.dtype = A.op.dtype
        self.itemsize = A.op.itemsize
        self.complex = self.dtype.startswith("complex")
        self.kind = opts.factorization
        self.execution = resolve_execution(execution, operand_device=A.op.device,
                                           operand_device_id=A.op.device_id,
                                           host_default="cuda")
        self.mode = ("cpu" if isinstance(self.execution, ExecutionCPU) else
                     "staged" if A.op.device == "cpu" else "device")
        self._stream = stream
        self._a_sig, self._b_sig = A.signature(), B.signature()
        self._layout_a()
        if opts.inplace_b and not adapter(B.op.package).writable:
            raise InvalidOperandError("b must be writable for inplace_b, got a "
                                      f"{B.op.package} array")
        if opts.inplace_b and self.mode != "staged" and not self._rhs_in_place_ok():
            raise UnsupportedLayoutError(
                "b must have column-major matrices (unit stride along n) or contiguous vectors "
                f"for inplace_b, got strides {B.op.strides}")
        self._factorized = False
        self._released = False
        self._state = None
        self._factors = None  # (base pointer, offsets, lda, keepalive) of the factor buffer
        self.logger.info("direct solver: %s of %d system(s) of order %d, %d right-hand "
                         "side(s), on %s", self.kind, A.count, A.n, B.nrhs,
                         self.execution.name)

    # ---- layouts ---------------------------------------------------------------------------
    def _layout_a(self) -> None:
        """How ``a`` becomes the factor buffer: ``self.a_trans`` (it holds ``A^T``: a row-major
        ``a`` copied as is; LU solves with ``op = T``, a real Cholesky reads the other
        triangle) and the copy (``"memcpy"``, ``"stack"``: one transposing copy of a dense
        row-major batch, or ``"each"``: matrix by matrix)."""
        A, opts = self.A, self.options
        order = A.dense_order()
        can_flip = self.kind == "LU" or not self.complex
        if opts.inplace_a:
            view = A.matrix_view()
            if view is None and self.mode != "staged":
                raise UnsupportedLayoutError(
                    "a must have a unit stride in one of its last two dimensions for "
                    f"inplace_a, got strides {A.op.strides}")
            trans = bool(view and view[0])
            if trans and not can_flip:
                raise UnsupportedLayoutError(
                    "a must be column-major for an in-place Cholesky factorization of complex "
                    "matrices, got a row-major one")
            self.a_trans, self.a_copy = trans, "inplace"
            return
        if order == "C" and can_flip:
            self.a_trans, self.a_copy = True, "memcpy"
        elif order == "F":
            self.a_trans, self.a_copy = False, "memcpy"
        elif order == "C":
            self.a_trans, self.a_copy = False, "stack"
        else:
            self.a_trans, self.a_copy = False, "each"

    def _rhs_in_place_ok(self) -> bool:
        view = self.B.matrix_view()
        return view is not None and not view[0]

    @property
    def _uplo(self) -> int:
        lower = self.options.fill_mode == FillMode.LOWER
        return int(FillMode.LOWER if lower ^ self.a_trans else FillMode.UPPER)

    # ---- backends --------------------------------------------------------------------------
    def _backend(self, stream):
        if self.mode == "cpu":
            from ._cpu import CpuBackend

            return CpuBackend(self.dtype, self.execution.num_threads)
        from ._cuda import CudaBackend

        s = resolve_stream(self._stream if stream is None else stream,
                           package=None if self.mode == "staged" else self.A.op.package,
                           device_id=self.execution.device_id)
        return CudaBackend(self.dtype, self.execution.device_id, s.ptr,
                           package=None if self.mode == "staged" else self.A.op.package,
                           allocator=self.options.allocator)

    # ---- lifecycle -------------------------------------------------------------------------
    def _require_valid(self, method: str) -> None:
        if self._freed:
            raise InvalidDirectSolverState(f"DirectSolver.{method}() cannot be called after "
                                           "free()")

    def _require_operands(self, method: str) -> None:
        if self._released:  # a RuntimeError, as nvmath-python raises
            raise InvalidDirectSolverState(f"DirectSolver.{method}() needs operands: set them "
                                           "with reset_operands() after release_operands()")

    def plan(self, stream=None) -> None:
        """Prepare the factorization (pivot and status buffers)."""
        self._require_valid("plan")
        self._require_operands("plan")
        if self._planned:
            return
        be = self._backend(stream)
        self._state = be.solver_state(self.kind, self.A.n, self.A.count,
                                      handle=self.options.handle)
        self._mark_planned()

    def factorize(self, *, stream=None) -> None:
        """Factorize ``a`` (LU or Cholesky); raises :class:`FactorizationError` when ``a`` is
        singular / not positive definite."""
        self._require_planned("factorize")
        self._require_operands("factorize")
        self._factorized = False
        be = self._backend(stream)
        try:
            base, offsets, lda, sources = self._factor_target(be)
            n = self.A.n
            kw = {} if sources is None else {"sources": sources}
            if self.kind == "LU":
                be.lu_factor(n, base, offsets, lda, self._state, **kw)
            else:
                be.cholesky_factor(self._uplo, n, base, offsets, lda, self._state, **kw)
            info = be.read_info(self._state)
        except BaseException:
            if self.mode != "cpu":
                cuda.settle(be.stream)
            raise
        self._factors = (base, offsets, lda, be.keep)
        self._check_info(info)
        if self.options.inplace_a and self.mode == "staged":
            self._download_factors(be, base)
        self._factorized = True

    def _factor_target(self, be):
        """``(base, offsets, lda, sources)``: where ``a`` is factorized; ``sources`` (CPU
        batches of dense matrices): the addresses each matrix is copied from right before its
        factorization (then in cache), else None (the buffer is filled already)."""
        if self.mode == "cpu" and self.a_copy == "memcpy" and self.A.count > 1:
            base, offsets, lda = self._new_factor_buffer(be)
            return base, offsets, lda, self.A.op.ptr + self.A.offsets * self.itemsize
        return (*self._factor_buffer(be), None)

    def _factorize_and_solve(self, stream=None):
        """:meth:`factorize` then :meth:`solve`; on the CPU one LAPACK call per system
        (``gesv`` / ``posv``), as :func:`direct_solver` keeps no factorization."""
        if self.mode != "cpu":
            self.factorize(stream=stream)
            return self.solve(stream=stream)
        self._require_planned("factorize")
        self._require_operands("factorize")
        be = self._backend(stream)
        if self._gufunc_batch():
            try:
                return self._gufunc_solve(be)
            except np.linalg.LinAlgError:
                pass  # a singular system: the LAPACK loop below names it
        base, offsets, lda, sources = self._factor_target(be)
        out, bbase, boffsets, ldb, _ = self._rhs_buffer(be)
        be.factor_solve(self.kind, T if self.a_trans else N, self._uplo, self.A.n,
                        self.B.nrhs, base, offsets, lda, self._state, bbase, boffsets, ldb,
                        sources=sources)
        self._factors = (base, offsets, lda, be.keep)
        self._check_info(be.read_info(self._state))
        self._factorized = True
        return out

    def _gufunc_batch(self) -> bool:
        """Whether a CPU batch of small LU systems goes to NumPy's ``linalg.solve`` loop (the
        same LAPACK ``gesv`` per system, its loop in C: a Python loop of ctypes calls costs a
        few microseconds per system, as much as a 32 x 32 solve), in chunks over threads."""
        A, B, o = self.A, self.B, self.options
        return (self.kind == "LU" and not A.explicit and not B.explicit and A.count >= 64
                and A.n <= 256 and not (o.inplace_a or o.inplace_b)
                and A.op.package == "numpy")

    def _gufunc_solve(self, be):
        A, B = self.A, self.B
        count, n = A.count, A.n
        a = A.op.host_array().reshape(count, n, n)
        b = B.op.host_array().reshape(count, n, B.nrhs)
        out = np.empty((count, n, B.nrhs), self.dtype)

        def chunk(idx):
            sl = slice(idx.start, idx.stop)
            np.copyto(out[sl], np.linalg.solve(a[sl], b[sl]))

        be.for_chunks(count, chunk, work=n ** 3)
        self._factorized = False  # no factorization is kept (the function form's path)
        return out.reshape(B.op.shape)

    def solve(self, *, stream=None):
        """Solve with the current factorization and ``b``; returns ``x`` (``b``'s shape, in
        the operands' package and memory space; a list for an explicit batch of ``b``)."""
        self._require_planned("solve")
        self._require_operands("solve")
        if not self._factorized:
            raise InvalidDirectSolverState("DirectSolver.solve() requires factorize() to be "
                                           "called first")
        be = self._backend(stream)
        try:
            out, base, offsets, ldb, finish = self._rhs_buffer(be)
            a_base, a_off, lda, _ = self._factors
            A, B = self.A, self.B
            if self.kind == "LU":
                be.lu_solve(T if self.a_trans else N, A.n, B.nrhs, a_base, a_off, lda,
                            self._state, base, offsets, ldb)
            else:
                be.cholesky_solve(self._uplo, A.n, B.nrhs, a_base, a_off, lda, self._state,
                                  base, offsets, ldb)
            result = finish() if finish is not None else out
        except BaseException:
            if self.mode != "cpu":
                cuda.settle(be.stream)
            raise
        if self.mode == "device" and self.options.blocking is True:
            cuda.synchronize(be.stream)
        return result

    def reset_operands(self, a=None, b=None, *, stream=None) -> None:
        """Replace ``a`` and/or ``b`` (same package, device, dtype, shapes and strides); a new
        ``a`` needs a new :meth:`factorize`."""
        self._require_valid("reset_operands")
        if self._released and (a is None or b is None):
            raise InvalidOperandError("reset_operands() must be given both a and b after "
                                      "release_operands()")
        if a is None and b is None:
            raise InvalidOperandError("reset_operands() must be given a or b, got neither")
        new_a = parse_side(a, "a", square=True) if a is not None else None
        new_b = parse_side(b, "b", square=False) if b is not None else None
        if new_a is not None and new_a.signature() != self._a_sig:
            raise InvalidOperandError("a must match the planned operand (package, dtype, "
                                      "shape, strides, device), got another one")
        if new_b is not None and new_b.signature() != self._b_sig:
            raise InvalidOperandError("b must match the planned operand (package, dtype, "
                                      "shape, strides, device), got another one")
        self._set(new_a, new_b)

    def reset_operands_unchecked(self, a=None, b=None, *, stream=None) -> None:
        """:meth:`reset_operands` without the checks."""
        self._set(None if a is None else _rewrap(self.A, a),
                  None if b is None else _rewrap(self.B, b))

    def _set(self, new_a, new_b):
        if new_a is not None:
            self.A.ops = new_a.ops
            self.A.offsets = new_a.offsets
            self._factorized = False
        if new_b is not None:
            self.B.ops = new_b.ops
            if not self.B.explicit:
                self.B.offsets = match_rhs(self.A, new_b).offsets
        self._released = False

    def release_operands(self) -> None:
        """Drop the references to ``a`` and ``b`` (the factorization is kept)."""
        self._require_valid("release_operands")
        self._released = True
        self.A.ops = [None] * len(self.A.ops)
        self.B.ops = [None] * len(self.B.ops)

    def _release(self) -> None:
        self._state = None
        self._factors = None

    # ---- the factor buffer ---------------------------------------------------------------
    def _new_factor_buffer(self, be):
        """An unfilled host factor buffer: ``(base, offsets, lda)``."""
        n, count = self.A.n, self.A.count
        host = np.empty((count, n, n), self.dtype)
        be.keep.append(host)
        return host.ctypes.data, np.arange(count, dtype=np.int64) * (n * n), n

    def _factor_buffer(self, be):
        """``(base, offsets, lda)`` of the matrices to factorize, filled from ``a``."""
        A, isz = self.A, self.itemsize
        n, count = A.n, A.count
        size = n * n
        dense_off = np.arange(count, dtype=np.int64) * size
        if self.a_copy == "inplace" and self.mode != "staged":
            view = A.matrix_view()
            offsets = _explicit_offsets(A.ops, isz) if A.explicit else A.offsets
            return (0 if A.explicit else A.op.ptr), offsets, view[1]
        if self.mode in ("cpu", "staged"):
            host = np.empty((count, n, n), self.dtype)
            mats = host if self.a_trans else host.transpose(0, 2, 1)  # F matrices
            if A.explicit:
                for i, o in enumerate(A.ops):
                    mats[i] = o.host_array()
            else:
                mats[...] = A.op.host_array().reshape(count, n, n)
            if self.mode == "cpu":
                be.keep.append(host)
                return host.ctypes.data, dense_off, n
            from ._cuda import upload

            return upload(be, host), dense_off, n
        # device operands
        buf = be.alloc(count * size)
        if self.a_copy == "memcpy":
            be.copy(buf, A.op.ptr, count * size * isz)
            return buf, dense_off, n
        if self.a_copy == "stack":  # the row-major batch is one n x (count n) matrix
            be.geam(T, T, count * n, n, 1, A.op.ptr, n, 0, A.op.ptr, n, buf, count * n)
            return buf, np.arange(count, dtype=np.int64) * n, count * n
        self._copy_each(be, A, buf, n, n)
        return buf, dense_off, n

    def _copy_each(self, be, side: Side, buf, rows, cols):
        """Copy every matrix of ``side`` into column-major ``rows x cols`` matrices at ``buf``
        (matrix by matrix; a layout without a unit stride through the package's copy)."""
        isz = side.op.itemsize
        view = side.matrix_view()
        ops, offsets = side.ops, side.offsets
        if view is None:
            ad = adapter(side.op.package)
            if not ad.can_copy or side.explicit:
                raise UnsupportedLayoutError(
                    f"{side.name} needs a copy into a unit-stride layout, which needs torch or "
                    f"CuPy for {side.op.package} operands; pass a contiguous array")
            obj = side.op.obj
            copy = ad.dense_copy(obj, tuple(obj.shape), "C" if side.vector else "F",
                                 be.stream, self.execution.device_id)
            be.keep.append(copy)
            be.copy(buf, wrap_operand(copy, "copy").ptr, side.count * rows * cols * isz)
            return
        trans, ld = view
        if side.explicit:
            ptrs = [o.ptr for o in ops]
        else:
            ptrs = [side.op.ptr + int(off) * isz for off in offsets]
        for i, p in enumerate(ptrs):
            dst = buf + i * rows * cols * isz
            if side.vector:
                be.copy(dst, p, rows * isz)
            else:
                be.geam(T if trans else N, T if trans else N, rows, cols, 1, p, ld, 0, p, ld,
                        dst, rows)

    def _check_info(self, info) -> None:
        bad = np.nonzero(info > 0)[0]
        if np.any(info < 0):
            raise AssertionError(f"internal error: the {self.kind} factorization reported an "
                                 f"invalid argument (info={int(info[info < 0][0])})")
        if not len(bad):
            return
        A = self.A
        idx = [tuple(int(v) for v in np.unravel_index(i, A.batch_shape)) if A.batch_shape
               else int(i) for i in bad] if (A.batch_shape or A.explicit) else []
        first = int(info[bad[0]])
        if self.kind == "LU":
            what = (f"a is singular: the LU factorization (getrf) found U[{first - 1}, "
                    f"{first - 1}] exactly zero")
        else:
            what = (f"a is not positive definite: the Cholesky factorization (potrf) found its "
                    f"leading minor of order {first} not positive definite")
        where = f" in {len(bad)} system(s) at batch indices {idx[:8]}" if idx else ""
        raise FactorizationError(what + where + f" (info={info[bad][:8].tolist()})", self.kind,
                                 info, tuple(idx))

    def _download_factors(self, be, base):
        """inplace_a on host operands: the factors back into ``a``."""
        from ._cuda import download

        A, n = self.A, self.A.n
        host = np.empty((A.count, n, n), self.dtype)
        download(be, base, host)
        mats = host if self.a_trans else host.transpose(0, 2, 1)
        if A.explicit:
            for i, o in enumerate(A.ops):
                o.host_array()[...] = mats[i]
        else:
            A.op.host_array()[...] = mats.reshape(A.op.shape)

    # ---- the right-hand sides ------------------------------------------------------------
    def _rhs_buffer(self, be):
        """``(out, base, offsets, ldb, finish)``: the solution's memory (``b`` copied in) and
        ``finish()`` returning the result (``out``: the result when it is ready already)."""
        B, isz = self.B, self.itemsize
        n, nrhs, count = B.n, B.nrhs, B.count
        size = n * nrhs
        dense_off = np.arange(count, dtype=np.int64) * size
        nb = len(B.batch_shape)
        f_perm = tuple(range(nb)) + ((nb + 1, nb) if not B.vector else (nb,))
        if self.options.inplace_b and self.mode != "staged":
            offsets = _explicit_offsets(B.ops, isz) if B.explicit else B.offsets
            view = B.matrix_view()
            out = [o.obj for o in B.ops] if B.explicit else B.op.obj
            return out, (0 if B.explicit else B.op.ptr), offsets, view[1], None
        if self.mode in ("cpu", "staged"):
            host_out = [empty(o, B.mat_shape, self.dtype, perm=(1, 0) if not B.vector
                              else None) for o in B.ops] if B.explicit else \
                [empty(B.op, B.op.shape, self.dtype, perm=f_perm)]
            for i, h in enumerate(host_out):
                src = B.ops[i] if B.explicit else B.op
                h.obj[...] = src.host_array()
            offs = _explicit_offsets(host_out, isz) if B.explicit else \
                _dense_offsets(B, host_out[0])
            result = [h.obj for h in host_out] if B.explicit else host_out[0].obj
            if self.mode == "cpu":
                return result, (0 if B.explicit else host_out[0].ptr), offs, n, None
            from ._cuda import download, upload

            stack = np.empty((count, max(size, 1)), self.dtype)
            for i in range(count):  # column-major systems, one after another
                src = host_out[i].obj if B.explicit else _system(host_out[0].obj, B, i)
                stack[i, :size] = np.asarray(src).reshape(-1, order="F")
            dev = upload(be, stack)
            stride = max(size, 1)

            def finish():
                download(be, dev, stack)
                for i in range(count):
                    vals = stack[i, :size].reshape(B.mat_shape, order="F")
                    if B.explicit:
                        host_out[i].obj[...] = vals
                    else:
                        _system(host_out[0].obj, B, i)[...] = vals
                if self.options.inplace_b:
                    for i, o in enumerate(B.ops):
                        dst = o.host_array()
                        dst[...] = result[i] if B.explicit else result
                    return [o.obj for o in B.ops] if B.explicit else B.op.obj
                return result

            return None, dev, np.arange(count, dtype=np.int64) * stride, n, finish
        # device operands: a new result in the package, b copied in
        if B.explicit:
            outs = [empty(o, B.mat_shape, self.dtype, perm=(1, 0) if not B.vector else None,
                          stream=be.stream) for o in B.ops]
            for o, dst in zip(B.ops, outs):
                one = Side(B.name, [o], False, (), 1, n, nrhs, B.vector, B.mat_shape,
                           np.zeros(1, np.int64))
                self._copy_rhs(be, one, dst.ptr, one.dense_order())
            return [d.obj for d in outs], 0, _explicit_offsets(outs, isz), n, None
        order = B.dense_order()
        if order == "C" and not B.vector and nrhs > 1:  # stacked: x[i] at i*n, ldb = count*n
            perm = (nb + 1,) + tuple(range(nb)) + (nb,)
            res = empty(B.op, B.op.shape, self.dtype, perm=perm, stream=be.stream)
            be.geam(T, T, count * n, nrhs, 1, B.op.ptr, nrhs, 0, B.op.ptr, nrhs, res.ptr,
                    count * n)
            return res.obj, res.ptr, np.arange(count, dtype=np.int64) * n, count * n, None
        res = empty(B.op, B.op.shape, self.dtype, perm=f_perm, stream=be.stream)
        self._copy_rhs(be, B, res.ptr, order)
        return res.obj, res.ptr, dense_off, n, None

    def _copy_rhs(self, be, side, dst, order):
        isz = self.itemsize
        total = side.count * side.n * side.nrhs * isz
        if order == "F" or (order == "C" and (side.vector or side.nrhs == 1)):
            be.copy(dst, side.op.ptr, total)
        else:
            self._copy_each(be, side, dst, side.n, side.nrhs)


def _dense_offsets(B: Side, out) -> np.ndarray:
    """Offsets of each system in the new host result ``out`` (batch axes in C order)."""
    nb = len(B.batch_shape)
    from ._layout import batch_offsets

    return batch_offsets(B.batch_shape, out.strides[:nb])


def _system(x, B: Side, i: int):
    """The ``i``-th system's right-hand side(s) of the batched array ``x``."""
    if not B.batch_shape:
        return x
    return x[np.unravel_index(i, B.batch_shape)]


def _rewrap(side: Side, x) -> Side:
    new = parse_side(x, side.name, square=side.name == "a")
    new.offsets = side.offsets if not new.explicit else new.offsets
    return new


def direct_solver(a, b, *, options=None, execution=None, stream=None):
    """Solve ``a @ x = b`` (see :class:`DirectSolver`): plan, factorize and solve once. Solvers
    are cached by the operands' metadata (a repeated problem reuses its buffers and handles).

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.linalg import direct_solver
    >>> a = np.array([[[2.0, 0.0], [0.0, 4.0]], [[1.0, 1.0], [0.0, 1.0]]])
    >>> direct_solver(a, np.ones((2, 2)), execution="cpu").tolist()
    [[0.5, 0.25], [0.0, 1.0]]
    """
    key = _key(a, b, options, execution)
    solver = solver_cache.pop(key) if key is not None else None
    if solver is None:
        solver = DirectSolver(a, b, options=options, execution=execution, stream=stream)
        solver.plan(stream=stream)
    else:
        solver.reset_operands_unchecked(a, b)
        solver._stream = stream
    try:
        return solver._factorize_and_solve(stream=stream)
    finally:
        solver.release_operands()
        if key is not None:
            solver_cache.put(key, solver)
        else:
            solver.free()


#: planned solvers of the function form, keyed by :func:`_key`
solver_cache = PlanCache(maxsize=16)


def _key(a, b, options, execution):
    """The cache key of a :func:`direct_solver` call, or None (explicit batches, options that
    cannot be keyed): the operands' package, dtype, shape, strides and device, the options'
    values and the execution space."""
    from ._solver_layout import is_batch

    if is_batch(a) or is_batch(b):
        return None
    try:
        sig = tuple((o.package, o.dtype, o.shape, o.strides, o.device, o.device_id, o.conj)
                    for o in (wrap_operand(a, "a"), wrap_operand(b, "b")))
    except Exception:  # the constructor reports it
        return None
    if isinstance(options, DirectSolverOptions):
        options = {f: getattr(options, f) for f in options.__dataclass_fields__}
    if options is not None and not isinstance(options, dict):
        return None
    opts = tuple(sorted((k, v if isinstance(v, int | str | bool | type(None)) else id(v))
                        for k, v in (options or {}).items()))
    exe = tuple(sorted(execution.items())) if isinstance(execution, dict) else execution
    try:
        hash((opts, exe))
    except TypeError:
        return None
    return sig, opts, exe
