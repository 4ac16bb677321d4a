"""``Matmul`` and ``matmul``: ``alpha * a @ b + beta * c`` with matrix qualifiers
(nvmath-python's ``nvmath.linalg.Matmul`` / ``matmul``).

A product is planned once (``_layout.plan_matmul``: the BLAS routine, frame, sides,
triangles and preparations) and run by ``_execute.execute`` on cuBLAS (GPU) or the
CPU's BLAS. ``a``/``b``/``c`` may be single arrays, batched arrays (leading axes; ``a`` and
``b`` broadcast as in NumPy) or Python sequences of arrays (explicit batches: each entry is
its own product; single entries are broadcast to the sequences' length).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from ..._internal import cuda
from ..._internal.cache import PlanCache
from ..._internal.errors import InvalidOperandError, InvalidOptionError, UnsupportedLayoutError
from ..._internal.lifecycle import StatefulObject
from ..._internal.logging import get_logger
from ..._internal.options import ExecutionCPU, coerce_options, resolve_execution
from ..._internal.packages import adapter, empty, resolve_stream, wrap_operand
from ._execute import execute
from ._layout import plan_matmul
from ._options import InvalidMatmulState, MatmulOptions
from ._qualifiers import parse_qualifiers

__all__ = ["Matmul", "matmul"]

_log = get_logger("linalg")


class _PackageTypeError(InvalidOperandError, TypeError):
    """Operands of different packages (a ``TypeError``, as nvmath-python raises)."""


def _scalar(value, default, dtype: str, name: str):
    v = default if value is None else value
    try:
        return np.array(v, dtype=dtype)[()].item()
    except (TypeError, ValueError, OverflowError):
        raise InvalidOptionError(f"{name} must be a number convertible to {dtype}, got "
                                 f"{value!r}") from None


def _signature(op):
    return (op.package, op.dtype, op.shape, op.strides, op.device, op.device_id, op.conj)


def _root(mat):
    while mat.source is not None:
        mat = mat.source
    return mat


def _squeezed_perm(perm, squeezed):
    kept = [p for p in perm if p not in squeezed]
    rank = {p: i for i, p in enumerate(sorted(kept))}
    return tuple(rank[p] for p in kept)


class _Product:
    """One implicitly batched product: wrapped operands, its plan and how it runs."""

    def __init__(self, a, b, c, alpha, beta, qualifiers, options: MatmulOptions, execution,
                 logger):
        self.options, self.logger = options, logger
        ops = [wrap_operand(a, "a"), wrap_operand(b, "b")]
        if c is not None:
            ops.append(wrap_operand(c, "c"))
        first = ops[0]
        for op, name in zip(ops[1:], ("b", "c")):
            if op.package != first.package:
                raise _PackageTypeError(f"{name} must come from the same package as a "
                                        f"({first.package}), got {op.package}")
            if op.place != first.place:
                raise InvalidOperandError(f"{name} must be on the same device as a "
                                          f"({first.place}), got {op.place}")
        self.execution = resolve_execution(execution, operand_device=first.device,
                                           operand_device_id=first.device_id,
                                           host_default="cpu", cpu_for_device=True)
        self.on_cpu = isinstance(self.execution, ExecutionCPU)
        self.staged = first.device == "cpu" and not self.on_cpu  # host operands on the GPU
        self.fetched = first.device == "cuda" and self.on_cpu  # device operands on the CPU
        if c is not None and beta is None:
            raise InvalidOptionError("beta must be given when c is given, got None")
        if c is None and beta is not None:
            logger.warning("Matmul: beta=%r is ignored since c is not given", beta)
        if options.inplace and c is None:
            raise InvalidOptionError("options.inplace must be False when c is not given, got "
                                     "True")
        if options.inplace and not adapter(ops[2].package).writable:
            raise InvalidOperandError(f"c must be writable for an in-place product, got a "
                                      f"{ops[2].package} array")
        quals = parse_qualifiers(qualifiers, c is not None)
        self.plan = plan_matmul(*ops, *([None] if c is None else []), quals,
                                inplace=options.inplace,
                                dense=False if self.on_cpu else
                                {"dense": True, "native": False}.get(options.structured,
                                                                     "batch"))
        self.dtype = first.dtype
        self.alpha = _scalar(alpha, 1, self.dtype, "alpha")
        self.beta = _scalar(beta, 0, self.dtype, "beta") if c is not None else 0
        self.ops = ops
        self.signatures = [_signature(o) for o in ops]
        self.package, self.device_id = first.package, first.device_id
        self.roots = {}
        for role, mat in zip(self.plan.user_order, (self.plan.first, self.plan.second)):
            self.roots[role] = _root(mat)
        if self.plan.c is not None:
            self.roots[2] = _root(self.plan.c)
        if self.staged and options.inplace and not ops[2].is_dense():
            raise UnsupportedLayoutError("c must be a dense array (no gaps, positive strides) "
                                         "for an in-place product of "
                                         "host operands on the GPU, got strides "
                                         f"{ops[2].strides}")
        logger.info("matmul: %s on %s, frame %s, %s x %s x %s, batch %s", self.plan.kind,
                    self.execution.name, "T" if self.plan.frame_t else "F", self.plan.m,
                    self.plan.n, self.plan.k, self.plan.batch_shape)

    # ---- operands ----------------------------------------------------------------------
    def _promoted(self, i, x):
        """``x`` (user operand ``i``'s array) shaped as the plan reads it."""
        plan = self.plan
        full = plan.batch_shape + ((self.plan.m, self.plan.n) if not plan.frame_t
                                   else (self.plan.n, self.plan.m))
        if i == 2:
            return x.reshape(full) if plan.squeezed else x
        if self.roots[i].vector or x.ndim != 1:
            return x
        return x[None, :] if i == 0 else x[:, None]

    def _host_base(self, i, be, host=None):
        """Where operand ``i``'s first form lives for the backend: the host array (CPU; a
        device operand's host copy ``host``), or its upload (host operands on the GPU: the
        bytes its elements span, same strides)."""
        op = self.ops[i]
        if host is not None:  # a device operand fetched for the CPU
            if self.roots[i].preps[:1] == ("dense",):
                host = np.ascontiguousarray(self._promoted(i, host))
                be.keep.append(host)
            return host.ctypes.data
        if self.roots[i].preps[:1] == ("dense",):
            arr = np.ascontiguousarray(self._promoted(i, op.host_array()))
            if self.staged:
                from ._cuda import upload

                return upload(be, arr)
            be.keep.append(arr)
            return arr.ctypes.data
        if self.staged:
            from ._cuda import upload

            lo, hi = op.span()
            return upload(be, _bytes_at(op.ptr + lo * op.itemsize,
                                        (hi - lo) * op.itemsize)) - lo * op.itemsize
        return op.ptr

    def _device_base(self, i, be, stream):
        op = self.ops[i]
        if self.roots[i].preps[:1] != ("dense",):
            return op.ptr
        ad = adapter(op.package)
        if not ad.can_copy:
            raise UnsupportedLayoutError(
                f"{'abc'[i]} needs a dense copy (no unit stride in its last two dimensions), "
                f"which needs torch or CuPy for {op.package} operands; pass a contiguous array")
        obj = self._promoted(i, op.obj)
        copy = ad.dense_copy(obj, tuple(obj.shape), "C", stream, self.device_id)
        be.keep.append(copy)
        return wrap_operand(copy, "copy").ptr

    # ---- running -------------------------------------------------------------------------
    def run(self, stream=None):
        plan = self.plan
        perm = _squeezed_perm(plan.result_perm, plan.squeezed)
        c_op = self.ops[2] if len(self.ops) == 3 else None
        if self.on_cpu and self.fetched:
            return self._run_fetched(stream, perm, c_op)
        if self.on_cpu:
            from ._cpu import CpuBackend

            be = CpuBackend(self.dtype, self.execution.num_threads)
            bases = [self._host_base(i, be) if i in self.roots else None for i in range(3)]
            if plan.inplace:
                out, r = c_op.obj, c_op.ptr
            else:
                res = empty(self.ops[0], plan.result_shape, self.dtype, perm=perm)
                out, r = res.obj, res.ptr
            self._execute(be, bases, r)
            return out
        from ._cuda import CudaBackend, download

        s = resolve_stream(stream, package=None if self.staged else self.package,
                           device_id=self.execution.device_id)
        be = CudaBackend(self.dtype, self.execution.device_id, s.ptr,
                         package=None if self.staged else self.package,
                         allocator=self.options.allocator)
        try:
            if self.staged:
                bases = [self._host_base(i, be) if i in self.roots else None for i in range(3)]
                host = (c_op.host_array() if plan.inplace else
                        empty(self.ops[0], plan.result_shape, self.dtype, perm=perm).obj)
                r = be.alloc(host.size) if not plan.inplace else bases[2]
                self._execute(be, bases, r)
                download(be, r, host)
                return host
            bases = [self._device_base(i, be, s.ptr) if i in self.roots else None
                     for i in range(3)]
            if plan.inplace:
                out, r = c_op.obj, c_op.ptr
            else:
                res = empty(self.ops[0], plan.result_shape, self.dtype, perm=perm,
                            device_id=self.device_id, stream=s.ptr)
                out, r = res.obj, res.ptr
            self._execute(be, bases, r)
            if self.options.blocking is True:
                cuda.synchronize(s.ptr)
            return out
        except BaseException:
            cuda.settle(s.ptr)
            raise

    def _run_fetched(self, stream, perm, c_op):
        """Device operands with ``execution="cpu"`` (as nvmath-python): their elements are
        copied to the host, the product runs on the CPU, the result goes back to the device
        (a new array of the operands' package, or ``c`` in place)."""
        from ._cpu import CpuBackend

        plan = self.plan
        s = resolve_stream(stream, package=self.package, device_id=self.device_id).ptr
        hosts = {i: _fetch(self.ops[i], s) for i in self.roots}
        be = CpuBackend(self.dtype, self.execution.num_threads)
        bases = [self._host_base(i, be, hosts[i]) if i in self.roots else None
                 for i in range(3)]
        if plan.inplace:
            host_r = hosts[2]
        else:
            host_r = empty(wrap_operand(np.empty(0, self.dtype)), plan.result_shape, self.dtype,
                           perm=perm).obj
        self._execute(be, bases, host_r.ctypes.data)
        if plan.inplace:
            lo, hi = c_op.span()
            cuda.memcpy_async(c_op.ptr + lo * c_op.itemsize, host_r.ctypes.data +
                              lo * c_op.itemsize, (hi - lo) * c_op.itemsize, s)
            out = c_op.obj
        else:
            res = empty(self.ops[0], plan.result_shape, self.dtype, perm=perm,
                        device_id=self.device_id, stream=s)
            cuda.memcpy_async(res.ptr, host_r.ctypes.data, host_r.nbytes, s)
            out = res.obj
        cuda.synchronize(s)  # the host copies are read until the stream gets there
        return out

    def _execute(self, be, bases, r):
        plan = self.plan
        i_first, i_second = plan.user_order
        execute(plan, be, bases[i_first], bases[i_second], bases[2], r, self.alpha,
                self.beta)

    # ---- resetting -------------------------------------------------------------------------
    def reset(self, values: dict, alpha, beta, checked: bool) -> None:
        if alpha is not None:
            self.alpha = _scalar(alpha, 1, self.dtype, "alpha")
        if beta is not None:
            if len(self.ops) == 2:
                self.logger.warning("Matmul: beta=%r is ignored since c is not given", beta)
            else:
                self.beta = _scalar(beta, 0, self.dtype, "beta")
        new = {}
        for i, x in values.items():
            op = wrap_operand(x, "abc"[i])
            if checked:
                _check_same(op, self.signatures[i], "abc"[i])
            new[i] = op
        for i, op in new.items():
            self.ops[i] = op

    def release(self) -> None:
        self.ops = [None] * len(self.ops)


def _fetch(op, stream: int) -> np.ndarray:
    """A host copy of the device operand ``op``: the bytes its elements span, viewed with its
    shape and strides (element 0 where ``op.ptr`` points)."""
    from ..._internal.dtypes import numpy_dtype

    lo, hi = op.span()
    isz = op.itemsize
    buf = np.empty(max((hi - lo) * isz, 1), np.uint8)
    cuda.memcpy_async(buf.ctypes.data, op.ptr + lo * isz, (hi - lo) * isz, stream)
    cuda.synchronize(stream)
    return np.ndarray(op.shape, numpy_dtype(op.dtype), buffer=buf, offset=-lo * isz,
                      strides=tuple(st * isz for st in op.strides))


def _bytes_at(addr: int, nbytes: int) -> np.ndarray:
    """``nbytes`` of host memory at ``addr`` as a flat uint8 array (no copy)."""
    import ctypes

    buf = (ctypes.c_char * max(nbytes, 1)).from_address(addr)
    return np.frombuffer(buf, np.uint8, count=nbytes)


_FIELDS = ("package", "dtype", "shape", "strides", "memory space", "device", "conjugation")


def _check_same(op, signature, name) -> None:
    got = _signature(op)
    for field, want, have in zip(_FIELDS, signature, got):
        if want != have:
            err = _PackageTypeError if field == "package" else InvalidOperandError
            raise err(f"{name} must match the planned operand's {field} {want!r}, got {have!r}")


def _is_batch(x) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, str | bytes)


class Matmul(StatefulObject):
    """A planned ``alpha * qa(a) @ qb(b) + beta * c`` (``qa``, ``qb``: the qualifiers'
    structures: general, diagonal, symmetric, Hermitian, triangular).

    Parameters
    ----------
    a, b : array or sequence of arrays
        NumPy, CuPy or torch arrays (any DLPack/CAI producer on the GPU); float32, float64,
        complex64 or complex128. Leading axes are batches (``a`` and ``b`` broadcast); a
        sequence is an explicit batch (one product per entry).
    c : array or sequence of arrays, optional
        The addend, of the result's shape.
    alpha, beta : number or sequence of numbers, optional
        The factors of the product (default 1) and of ``c`` (default 0); a sequence gives one
        per entry of an explicit batch.
    qualifiers : numpy.ndarray of :data:`matrix_qualifiers_dtype`, optional
        Two or three records for ``a``, ``b`` (and ``c``). At most one of ``a``, ``b`` is
        structured; a diagonal operand is given as its 1-D diagonal; symmetric, Hermitian and
        triangular operands are square and only their ``uplo`` triangle is read.
    options : MatmulOptions or dict, optional
        Options of the product (``inplace``: write the result into ``c``; ``blocking``;
        ``logger``...).
    execution : "cuda", "cpu", ExecutionCUDA, ExecutionCPU or dict, optional
        Default: where the operands live (host operands: the CPU, as nvmath-python).
    stream : optional
        A CUDA stream (handle, ``__cuda_stream__`` object, torch or CuPy stream).

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.linalg import Matmul, TriangularMatrixQualifier, GeneralMatrixQualifier
    >>> from cuweave.linalg import matrix_qualifiers_dtype
    >>> q = np.array([TriangularMatrixQualifier.create(), GeneralMatrixQualifier.create()],
    ...              dtype=matrix_qualifiers_dtype)
    >>> a = np.array([[1.0, 9.0], [2.0, 3.0]]); b = np.eye(2)
    >>> with Matmul(a, b, qualifiers=q, execution="cpu") as mm:
    ...     mm.plan()
    ...     mm.execute().tolist()
    [[1.0, 0.0], [2.0, 3.0]]
    """

    def __init__(self, a, b, /, c=None, *, alpha=None, beta=None, qualifiers=None,
                 options=None, execution=None, stream=None):
        for value, name in ((options, "options"), (stream, "stream")):
            if _is_batch(value):
                raise InvalidOptionError(f"{name} must be a single value, got a sequence")
        if _is_batch(execution):
            raise InvalidOptionError("execution must be a single value, got a sequence")
        self.options = coerce_options(options, MatmulOptions, "options")
        self.logger = self.options.logger or _log
        explicit = _is_batch(a) and _is_batch(b) and (c is None or _is_batch(c)) and (
            qualifiers is None or isinstance(qualifiers, list | tuple))
        if not explicit and any(_is_batch(x) for x in (a, b, c)):
            raise InvalidOperandError(
                "a, b and c must be all arrays (implicit batches) or all sequences of arrays "
                f"(explicit batches), got types {[type(x).__name__ for x in (a, b, c)]}")
        self._explicit = explicit
        if explicit:
            groups = _zip_broadcast(a=a, b=b, c=c, qualifiers=qualifiers, alpha=alpha,
                                    beta=beta)
            if self.options.inplace and not _is_batch(c) or (
                    self.options.inplace and len(c) == 1 and len(groups) > 1):
                raise InvalidOptionError("options.inplace must be False when c is broadcast "
                                         "over an explicit batch, got True")
            self._lengths = {k: (len(v) if _is_batch(v) else None if v is None else 1)
                             for k, v in dict(a=a, b=b, c=c, alpha=alpha, beta=beta).items()}
        else:
            groups = [dict(a=a, b=b, c=c, qualifiers=qualifiers, alpha=alpha, beta=beta)]
        self._products = [_Product(g["a"], g["b"], g["c"], g["alpha"], g["beta"],
                                   g["qualifiers"], self.options, execution, self.logger)
                          for g in groups]
        p0 = self._products[0]
        for i, p in enumerate(self._products[1:], 1):
            if (p.package, p.device_id, p.dtype) != (p0.package, p0.device_id, p0.dtype):
                raise InvalidOperandError(
                    f"every explicit batch must have batch 0's package, device and dtype "
                    f"({p0.package}, {p0.device_id}, {p0.dtype}), got batch {i}'s "
                    f"({p.package}, {p.device_id}, {p.dtype})")
        self.execution = p0.execution
        self._stream = stream
        self._released = False

    # ---- lifecycle -------------------------------------------------------------------------
    def _require_valid(self, method: str) -> None:
        if self._freed:
            raise InvalidMatmulState(f"Matmul.{method}() cannot be called after free()")

    def plan(self, *, stream=None) -> None:
        """Choose the BLAS routine (done at construction; kept for nvmath's surface).

        Parameters
        ----------
        stream : int or stream object, optional
            The CUDA stream to run on: a ``cudaStream_t`` handle, an object with
            ``__cuda_stream__``, a :class:`cupy.cuda.Stream` or a :class:`torch.cuda.Stream`
            (default: the one given to the constructor, else the package's current stream).
            Unused on the CPU.
        """
        self._require_valid("plan")
        self._mark_planned()

    def execute(self, *, stream=None):
        """Run the product.

        Parameters
        ----------
        stream : int or stream object, optional
            The CUDA stream to run on: a ``cudaStream_t`` handle, an object with
            ``__cuda_stream__``, a :class:`cupy.cuda.Stream` or a :class:`torch.cuda.Stream`
            (default: the one given to the constructor, else the package's current stream).
            Unused on the CPU.

        Returns
        -------
        array or list of arrays
            The result (a list for explicit batches) in the operands' package, on their
            device (``c`` itself with ``options.inplace``).
        """
        self._require_planned("execute")
        if self._released:
            raise InvalidOperandError("operands must be set with reset_operands() after "
                                      "release_operands(), got released operands")
        return self.execute_unchecked(stream=stream)

    def execute_unchecked(self, *, stream=None):
        """:meth:`execute` without the state checks (a planned object with operands).

        Parameters
        ----------
        stream : int or stream object, optional
            The CUDA stream to run on: a ``cudaStream_t`` handle, an object with
            ``__cuda_stream__``, a :class:`cupy.cuda.Stream` or a :class:`torch.cuda.Stream`
            (default: the one given to the constructor, else the package's current stream).
            Unused on the CPU.

        Returns
        -------
        array or list of arrays
            As :meth:`execute`.
        """
        stream = self._stream if stream is None else stream
        out = [p.run(stream) for p in self._products]
        return out if self._explicit else out[0]

    def reset_operands(self, a=None, b=None, c=None, *, alpha=None, beta=None, stream=None):
        """Replace operands (same package, device, dtype, shape, strides) and scalars; after
        :meth:`release_operands` every operand must be given.

        Parameters
        ----------
        a, b : array or sequence of arrays, optional
            New operands (an explicit batch: sequences of the length it was created with).
        c : array or sequence of arrays, optional
            A new addend (only if the product was created with ``c``).
        alpha, beta : number or sequence of numbers, optional
            New factors of the product and of ``c``.
        stream : int or stream object, optional
            The CUDA stream the new operands are ordered on (accepted for nvmath's surface;
            each :meth:`execute` takes its own).
        """
        self._require_valid("reset_operands")
        self._reset(a, b, c, alpha, beta, checked=True)

    def reset_operands_unchecked(self, a=None, b=None, c=None, *, alpha=None, beta=None,
                                 stream=None):
        """:meth:`reset_operands` without the checks (the caller guarantees them).

        Parameters
        ----------
        a, b : array or sequence of arrays, optional
            New operands (an explicit batch: sequences of the length it was created with).
        c : array or sequence of arrays, optional
            A new addend (only if the product was created with ``c``).
        alpha, beta : number or sequence of numbers, optional
            New factors of the product and of ``c``.
        stream : int or stream object, optional
            The CUDA stream the new operands are ordered on (accepted for nvmath's surface;
            each :meth:`execute` takes its own).
        """
        self._reset(a, b, c, alpha, beta, checked=False)

    def _reset(self, a, b, c, alpha, beta, checked):
        nops = len(self._products[0].ops)
        if c is not None and nops == 2:
            raise InvalidOperandError("c cannot be reset: the product was specified without c")
        if checked:
            if self._released and (a is None or b is None or (nops == 3 and c is None)):
                raise InvalidOperandError("reset_operands() must be given every operand ("
                                          f"{'a, b, c' if nops == 3 else 'a, b'}) after "
                                          "release_operands()")
            if all(x is None for x in (a, b, c, alpha, beta)):
                raise InvalidOperandError("reset_operands() must be given at least one "
                                          "operand, got none")
        if self._explicit:
            values = dict(a=a, b=b, c=c, alpha=alpha, beta=beta)
            for k, v in values.items():
                if v is not None and checked:
                    n = len(v) if _is_batch(v) else 1
                    if n != self._lengths[k]:
                        raise InvalidOperandError(
                            f"{k} must have the explicit batch length it was created with "
                            f"({self._lengths[k]}), got {n}")
            groups = _zip_broadcast(**values, count=len(self._products))
        else:
            groups = [dict(a=a, b=b, c=c, alpha=alpha, beta=beta)]
        for p, g in zip(self._products, groups):
            vals = {i: g[k] for i, k in enumerate("abc") if g[k] is not None}
            p.reset(vals, g["alpha"], g["beta"], checked)
        self._released = False

    def release_operands(self) -> None:
        """Drop the references to the operands (set new ones with :meth:`reset_operands`)."""
        self._require_valid("release_operands")
        for p in self._products:
            p.release()
        self._released = True

    def _release(self) -> None:
        self._products = []


def _zip_broadcast(count=None, **values) -> list[dict]:
    """Explicit batches: sequences of one length (or 1) zipped, single values broadcast."""
    lengths = {k: len(v) for k, v in values.items() if _is_batch(v)}
    n = count if count is not None else max(lengths.values(), default=1)
    for k, ln in lengths.items():
        if ln == 0:
            raise InvalidOperandError(f"{k} must be a non-empty sequence, got an empty one")
        if ln not in (1, n):
            raise InvalidOperandError(
                f"{k} must have length 1 or {n} (the explicit batch's length), got {ln}")
    return [{k: (v[i if len(v) > 1 else 0] if _is_batch(v) else v)
             for k, v in values.items()} for i in range(n)]


plan_cache = PlanCache(maxsize=32)


def matmul(a, b, /, c=None, *, alpha=None, beta=None, qualifiers=None, options=None,
           execution=None, stream=None):
    """``alpha * qa(a) @ qb(b) + beta * c`` (see :class:`Matmul`); planned products are
    cached by the operands' metadata, so repeating a problem costs no planning.

    Parameters
    ----------
    a, b : array or sequence of arrays
        The operands: NumPy, CuPy or torch arrays (float32, float64, complex64 or
        complex128); leading axes are batches; sequences are explicit batches.
    c : array or sequence of arrays, optional
        The addend, of the result's shape.
    alpha, beta : number or sequence of numbers, optional
        The factors of the product (default 1) and of ``c`` (default 0).
    qualifiers : numpy.ndarray of :data:`matrix_qualifiers_dtype`, optional
        The structure of ``a``, ``b`` (and ``c``): general, diagonal, symmetric, Hermitian
        or triangular (at most one of ``a``, ``b`` structured).
    options : MatmulOptions or dict, optional
        Options of the product.
    execution : "cuda", "cpu", ExecutionCUDA, ExecutionCPU or dict, optional
        Where to run (default: where the operands live; host operands on the CPU).
    stream : int or stream object, optional
        The CUDA stream to run on (default: the package's current stream).

    Returns
    -------
    array or list of arrays
        The result in the operands' package, on their device (a list for explicit batches).

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.linalg import matmul, SymmetricMatrixQualifier, GeneralMatrixQualifier
    >>> from cuweave.linalg import matrix_qualifiers_dtype, FillMode
    >>> q = np.array([SymmetricMatrixQualifier.create(uplo=FillMode.UPPER),
    ...               GeneralMatrixQualifier.create()], dtype=matrix_qualifiers_dtype)
    >>> a = np.array([[1.0, 2.0], [-7.0, 3.0]])   # the upper triangle is read: [[1, 2], [2, 3]]
    >>> matmul(a, np.eye(2), qualifiers=q, execution="cpu").tolist()
    [[1.0, 2.0], [2.0, 3.0]]
    """
    if any(_is_batch(x) for x in (a, b, c)):
        with Matmul(a, b, c, alpha=alpha, beta=beta, qualifiers=qualifiers, options=options,
                    execution=execution, stream=stream) as mm:
            mm.plan()
            return mm.execute()
    key = _key(a, b, c, alpha, beta, qualifiers, options, execution)
    mm = plan_cache.pop(key) if key is not None else None
    if mm is None:
        mm = Matmul(a, b, c, alpha=alpha, beta=beta, qualifiers=qualifiers, options=options,
                    execution=execution)
        mm.plan()
    else:  # alpha's default is 1, not the cached product's last alpha
        mm.reset_operands_unchecked(a, b, c, alpha=1 if alpha is None else alpha, beta=beta)
    try:
        return mm.execute(stream=stream)
    finally:
        mm.release_operands()
        if key is not None:
            plan_cache.put(key, mm)
        else:
            mm.free()


def _key(a, b, c, alpha, beta, qualifiers, options, execution):
    """The plan-cache key of a function-form call, or None when it cannot be keyed."""
    try:
        sig = tuple(_signature(wrap_operand(x, n)) for x, n in ((a, "a"), (b, "b"), (c, "c"))
                    if x is not None)
    except Exception:  # an invalid operand: the constructor reports it
        return None
    q = None if qualifiers is None else (qualifiers.tobytes() if isinstance(
        qualifiers, np.ndarray) else None)
    if qualifiers is not None and q is None:
        return None
    if not isinstance(options, dict | type(None)) and not isinstance(options, MatmulOptions):
        return None
    opts = options if not isinstance(options, dict) else tuple(sorted(
        (k, id(v)) for k, v in options.items()))
    if isinstance(opts, MatmulOptions):
        opts = (opts.inplace, id(opts.logger), opts.blocking, id(opts.allocator),
                opts.structured)
    exe = execution if not isinstance(execution, dict) else tuple(sorted(execution.items()))
    try:
        hash(exe)
    except TypeError:
        return None
    if logging.getLogger("cuweave").isEnabledFor(logging.DEBUG):
        _log.debug("matmul key %s", sig)
    return (sig, q, c is not None, beta is not None, opts, exe)
