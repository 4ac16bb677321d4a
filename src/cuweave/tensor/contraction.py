"""Stateful tensor contractions: :class:`BinaryContraction` and :class:`TernaryContraction`.

``out = alpha * a ⊗ b + beta * c`` (binary) and ``out = alpha * a ⊗ b ⊗ c + beta * d``
(ternary) in Einstein notation, on cuTENSOR (GPU) or on the CPU path (:mod:`._cpu`). An object
is a :class:`Problem` (everything the operands' metadata, the expression and the options fix,
checked in the constructor before any work) plus the operands of the current call; ``plan()``
builds the engine's plan and its one run (:mod:`._run`), which ``execute()`` calls.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._internal.dtypes import is_complex
from .._internal.errors import InvalidOperandError, InvalidOptionError, UnsupportedLayoutError
from .._internal.lifecycle import StatefulObject
from .._internal.logging import get_logger
from .._internal.options import ExecutionCPU, coerce_options, resolve_execution
from .._internal.overlap import check_inplace_target
from .._internal.packages import adapter, resolve_stream, wrap_operand
from ._layout import check_writable, operand_view, overlaps, perm_of, perm_strides, result_perm
from ._options import COMPUTE_TYPES, ContractionOptions, Operator, check_operator
from ._parse import bind, parse
from ._preference import ContractionPlanPreference

__all__ = ["BinaryContraction", "TernaryContraction", "Problem"]

_log = get_logger("tensor")
_DTYPES = tuple(COMPUTE_TYPES)
_INPUTS = ("a", "b", "c")


def _qualifiers(qualifiers, n: int) -> tuple:
    """The operators of the inputs (the addend's must be the identity)."""
    if qualifiers is None:
        return (Operator.OP_IDENTITY,) * n
    try:
        q = np.asarray(qualifiers)
    except Exception as e:  # noqa: BLE001 - anything NumPy cannot read
        raise InvalidOptionError(f"qualifiers must be an array of Operator values, got "
                                 f"{qualifiers!r}") from e
    if q.ndim != 1 or q.size != n + 1 or not np.issubdtype(q.dtype, np.integer):
        names = ", ".join(_INPUTS[:n]) + ", addend"
        raise InvalidOptionError(
            f"qualifiers must be {n + 1} Operator values (one per operand: {names}), as an array "
            f"of dtype tensor_qualifiers_dtype, got {qualifiers!r}")
    ops = tuple(check_operator(v, f"qualifiers[{i}]") for i, v in enumerate(q))
    if ops[n] != Operator.OP_IDENTITY:
        raise InvalidOptionError(f"qualifiers[{n}] (the addend's) must be Operator.OP_IDENTITY, "
                                 f"got {ops[n]!r}")
    for i, op in enumerate(ops[:n]):
        if op not in (Operator.OP_IDENTITY, Operator.OP_CONJ):
            raise InvalidOptionError(
                f"qualifiers[{i}] (operand {_INPUTS[i]!r}) must be Operator.OP_IDENTITY or "
                f"Operator.OP_CONJ (the operators cuTENSOR contractions take), got {op!r}")
    return ops[:n]


def scalar(value, name: str, complex_ok: bool):
    """``value`` as a Python number (a complex one only for complex data)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise InvalidOptionError(f"{name} must be a real or complex number, got {value!r}")
    if isinstance(value, numbers.Real):
        return float(value)
    if not complex_ok and complex(value).imag != 0:
        raise InvalidOptionError(f"{name} must be real for real operands, got {value!r}")
    return complex(value) if complex_ok else complex(value).real


class Problem:
    """What one contraction's operands, expression and options fix (immutable once made).

    ``views[i]`` is input ``i``'s :func:`~._layout.operand_view`; ``perm`` the memory order of
    new results; ``signature[name]`` the ``(dtype, shape, strides)`` a reset operand must match.

    Parameters
    ----------
    **kw
        The problem's fields, set as attributes (made by the contractions' constructors).
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)


class _Contraction(StatefulObject):
    """The base of :class:`BinaryContraction` and :class:`TernaryContraction`."""

    _n = 2
    _addend = "c"
    #: the function form's operand records (probed hits rebind them), or None
    _spare = None
    #: a ternary contraction's pairwise route (:mod:`._pairwise`) when autotuning chose it
    _route = None

    def __init__(self, expr, inputs, addend=None, out=None, qualifiers=None, stream=None,
                 options=None, execution=None):
        self._engine = self._run = None
        parsed = parse(expr, self._n)
        self.options = coerce_options(options, ContractionOptions)
        self.logger = self.options.logger or _log
        ops = _qualifiers(qualifiers, self._n)
        names = _INPUTS[:self._n]
        wrapped = {k: wrap_operand(x, k) for k, x in zip(names, inputs)}
        if addend is not None:
            wrapped[self._addend] = wrap_operand(addend, self._addend)
        if out is not None:
            wrapped["out"] = wrap_operand(out, "out")
        first = wrapped["a"]
        space = resolve_execution(execution, operand_device=first.device,
                                  operand_device_id=first.device_id, host_default="cuda")
        self._check_operands(wrapped, first)
        bound = bind(parsed, [wrapped[k].shape for k in names], names)
        dtype = first.dtype
        user_ops = ops
        ops = tuple(Operator.OP_CONJ if (o == Operator.OP_CONJ) != wrapped[k].conj
                    else Operator.OP_IDENTITY for k, o in zip(names, ops))
        for k, o in zip(names, ops):
            if o == Operator.OP_CONJ and not is_complex(dtype):
                raise InvalidOptionError(f"qualifiers must not conjugate the real operand {k!r} "
                                         f"(dtype {dtype!r}): Operator.OP_CONJ needs complex data")
        default, allowed = COMPUTE_TYPES[dtype]
        compute = self.options.compute_type or default
        if compute not in allowed:
            raise InvalidOptionError(
                f"options.compute_type must be one of {sorted(m.name for m in allowed)} for "
                f"{dtype} operands (cuTENSOR's contraction table), got {compute.name}")
        if stream is not None:  # checked now; each method takes its own stream, as nvmath's
            resolve_stream(stream, package=first.package,
                           device_id=getattr(space, "device_id", 0) or 0)
        self._problem = self._specify(wrapped, bound, dtype, compute, ops, space)
        self._problem.user_ops = user_ops
        self._ops = wrapped
        self._released = False
        self._plan_preference = ContractionPlanPreference(self)
        if not isinstance(space, ExecutionCPU):
            from ._cuda import CudaEngine

            p = self._problem
            self._engine = CudaEngine(self._n, p.layouts, dtype, compute, ops,
                                      p.device_id, first.package, p.host, self.options)
        if self.logger.isEnabledFor(20):
            self.logger.info("%s %r: %s operands on %s, dtype %s, compute %s, operators %s",
                             type(self).__name__, expr, first.package,
                             "the CPU" if self._engine is None else f"GPU {p.device_id}",
                             dtype, compute.name, [o.name for o in ops])

    # ------------------------------------------------------------------ checks
    def _check_operands(self, wrapped, first) -> None:
        for k, op in wrapped.items():
            if op.package != first.package:
                raise InvalidOperandError(
                    f"{k} must come from the same package as a ({first.package}), got "
                    f"{op.package}")
            if op.place != first.place:
                raise InvalidOperandError(
                    f"{k} must be in the same memory space as a ({first.device}:"
                    f"{first.device_id}), got {op.device}:{op.device_id}")
            if op.dtype not in _DTYPES:
                raise InvalidOperandError(f"{k} dtype must be one of {_DTYPES}, got "
                                          f"{op.dtype!r}")
            if op.dtype != first.dtype:
                raise InvalidOperandError(
                    f"{k} must have the dtype of a ({first.dtype}): cuTENSOR contracts "
                    f"operands of one dtype, got {op.dtype}")
        for k in ("out", self._addend):
            if k in wrapped and wrapped[k].conj:
                raise InvalidOperandError(f"{k} must not be a lazily conjugated tensor, got one "
                                          "(call resolve_conj() first)")

    def _specify(self, wrapped, bound, dtype, compute, ops, space) -> Problem:
        names = _INPUTS[:self._n]
        out_shape = bound.out_shape
        addend = wrapped.get(self._addend)
        out = wrapped.get("out")
        if addend is not None:
            try:
                np.broadcast_shapes(addend.shape, out_shape)
                ok = len(addend.shape) <= len(out_shape)
            except ValueError:
                ok = False
            if not ok or np.broadcast_shapes(addend.shape, out_shape) != out_shape:
                raise InvalidOperandError(
                    f"{self._addend} must have the result's shape {out_shape} (or one that "
                    f"broadcasts to it), got {addend.shape}")
        if out is not None:
            self._check_out(out, out_shape, dtype, wrapped, names, addend)
        layout = self.options.result_layout
        if layout == "optimized" and (self._n == 3 or addend is not None):
            raise InvalidOptionError(
                "options.result_layout must not be 'optimized' for ternary contractions or with "
                f"an addend, got {layout!r}")
        if layout == "auto":
            layout = ("natural" if addend is not None else
                      "optimized" if self._n == 2 else "C")
        perm = result_perm(layout, bound, addend)
        resolved = layout
        views = [operand_view(t, wrapped[k].shape, wrapped[k].strides)
                 for t, k in zip(bound.terms, names)]
        host = wrapped["a"].device == "cpu"
        # a summed mode that no view holds (stride 0, a broadcast, in every input that has
        # it) is left out of both engines' operands: the sum over it adds its extent's
        # worth of equal terms, so the product is scaled by that extent (cuTENSOR takes no
        # zero strides: cutensorCreateTensorDescriptor asks to omit such modes)
        held = {m for v in views for m, _, _ in v} | set(bound.out)
        sum_scale = math.prod(n for m, n in bound.extents.items() if m not in held)
        p = Problem(n=self._n, names=names, addend=self._addend, bound=bound, dtype=dtype,
                    compute=compute, ops=ops, views=views, perm=perm, out_shape=out_shape,
                    has_addend=addend is not None, has_out=out is not None,
                    package=wrapped["a"].package, device=wrapped["a"].device,
                    device_id=getattr(space, "device_id", None), cpu=isinstance(space,
                                                                                ExecutionCPU),
                    host=host, signature={k: (o.dtype, o.shape, o.strides)
                                                for k, o in wrapped.items()},
                    conj_bits={k: o.conj for k, o in wrapped.items()},
                    space=space, layout=resolved, sum_scale=sum_scale)
        if not p.cpu:
            self._gpu_layouts(p, wrapped, host)
        return p

    def _check_out(self, out, out_shape, dtype, wrapped, names, addend) -> None:
        if out.shape != out_shape:
            raise InvalidOperandError(f"out must have the result's shape {out_shape}, got "
                                      f"{out.shape}")
        check_writable(out, "out")  # its own wording for a layout that reaches twice
        # the package, the producer's read-only flags (NumPy's, DLPack's, the CUDA array
        # interface's): one check for every in-place target
        check_inplace_target(out, "out")
        for k in names:
            if overlaps(out, wrapped[k]):
                raise InvalidOperandError(
                    f"out must not overlap the input {k!r} (cuTENSOR reads inputs while it "
                    "writes the result), got overlapping memory")
        if addend is not None and overlaps(out, addend) and (
                out.ptr, out.shape, out.strides) != (addend.ptr, addend.shape, addend.strides):
            raise InvalidOperandError(
                f"out must be {self._addend} itself or not overlap it, got partly "
                "overlapping memory")

    def _gpu_layouts(self, p, wrapped, host) -> None:
        """cuTENSOR's ``(modes, extents, strides, alignment)`` per tensor, the result's layout
        on the device and how the addend reaches C."""
        empty = sorted(p.bound.labels[m] for m, n in p.bound.extents.items() if n == 0)
        if empty:
            raise InvalidOperandError(
                f"operands must have non-zero extents for cuTENSOR (execution='cpu' takes empty "
                f"ones), got extent 0 along mode(s) {empty}")
        layouts, staged = {}, {}
        for k, view in zip(p.names, p.views):
            if host:  # uploaded dense: its own order when C/F-contiguous, else C order
                shape = tuple(n for _, n, _ in view)
                strides = tuple(s for _, _, s in view)
                order = ("F" if len(shape) > 1 and strides == perm_strides(
                    shape, tuple(reversed(range(len(shape))))) else "C")
                dense = perm_strides(shape, tuple(range(len(shape))) if order == "C"
                                     else tuple(reversed(range(len(shape)))))
                view = tuple((m, n, s) for (m, n, _), s in zip(view, dense))
                staged[k] = order
                align = 256
            else:
                align = wrapped[k].ptr & -wrapped[k].ptr if wrapped[k].ptr else 256
                if any(s < 0 for _, _, s in view):
                    raise UnsupportedLayoutError(
                        f"{k} must have non-negative strides for cuTENSOR, got "
                        f"{wrapped[k].strides} (pass a copy)")
            layouts[k] = (tuple(m for m, _, _ in view), tuple(n for _, n, _ in view),
                          tuple(s for _, _, s in view), min(align, 256))
        out = wrapped.get("out")
        d_perm = p.perm
        if out is not None:
            d_perm = perm_of(out.shape, out.strides) if host else None
            if host and d_perm is None:
                d_perm = tuple(range(len(out.shape)))
        if d_perm is not None:
            d_strides = perm_strides(p.out_shape, d_perm)
            d_align = 256
        else:  # the user's device out as it is
            d_strides, d_align = out.strides, min(out.ptr & -out.ptr if out.ptr else 256, 256)
            if any(s < 0 for s, n in zip(d_strides, out.shape) if n > 1):
                raise UnsupportedLayoutError(f"out must have non-negative strides for "
                                             f"cuTENSOR, got {out.strides}")
        d_view = operand_view(p.bound.out, p.out_shape, d_strides)
        layouts["d"] = (tuple(m for m, _, _ in d_view), tuple(n for _, n, _ in d_view),
                        tuple(s for _, _, s in d_view), d_align)
        addend = wrapped.get(p.addend)
        direct = False
        if addend is not None and not host:
            direct = (addend.shape == p.out_shape and operand_view(
                p.bound.out, addend.shape, addend.strides) == d_view)
            if not direct and not adapter(addend.package).can_broadcast:
                raise UnsupportedLayoutError(
                    f"{p.addend} must have the result's layout for {addend.package} operands "
                    "(copying it into the result needs torch or CuPy), got shape "
                    f"{addend.shape} strides {addend.strides}")
            if direct:
                a_align = addend.ptr & -addend.ptr if addend.ptr else 256
                layouts["d"] = layouts["d"][:3] + (min(layouts["d"][3], a_align, 256),)
        p.layouts, p.staged, p.d_perm, p.addend_direct = layouts, staged, d_perm, direct

    # ------------------------------------------------------------------ lifecycle
    @property
    def plan_preference(self) -> ContractionPlanPreference:
        """The :class:`ContractionPlanPreference` the next :meth:`plan` follows."""
        self._require_valid("plan_preference")
        return self._plan_preference

    def plan(self, *, stream=None):
        """Plan the contraction (cuTENSOR's plan under :attr:`plan_preference`; the CPU path's
        mode orders and pair order).

        Parameters
        ----------
        stream : int or stream object, optional
            The CUDA stream of the planning work: a ``cudaStream_t`` handle, a
            :class:`cupy.cuda.Stream` or a :class:`torch.cuda.Stream` (default: the operands'
            package's current stream). Unused on the CPU.
        """
        self._require_valid("plan")
        from ._run import build_run

        self._drop_route()
        if self._engine is not None:
            prefs = self._plan_preference.values()
            self._engine.plan(prefs)
            if self.logger.isEnabledFor(20):
                self.logger.info("planned: workspace %d bytes, preferences %s",
                                 self._engine.workspace_size, prefs)
        self._run = build_run(self)
        self._mark_planned()

    def execute(self, *, alpha=1.0, beta=None, release_workspace=False, stream=None):
        """Run the planned contraction: ``alpha * product + beta * addend``.

        Returns the result in the operands' package (``out`` itself when it was given). The
        call returns without waiting for the GPU for device operands unless
        ``options.blocking`` is True; host operands always wait.

        Parameters
        ----------
        alpha : float or complex, optional
            The factor of the contraction term (default 1.0); complex only for complex data.
        beta : float or complex, optional
            The factor of the addend: required when the contraction has an addend, refused
            without one.
        release_workspace : bool, optional
            True returns the workspace memory to the package's pool when the call returns
            (less memory held between calls, at the cost of allocating it again on the next
            one); False (the default) keeps it.
        stream : int or stream object, optional
            The CUDA stream to run on (default: the operands' package's current stream).

        Returns
        -------
        array
            The result, in the operands' package and memory space.
        """
        self._require_planned("execute")
        if self._released:
            raise InvalidOperandError("execute() needs operands: call reset_operands() after "
                                      "release_operands()")
        p = self._problem
        if beta is None and p.has_addend:
            raise InvalidOptionError(f"beta must be given when {p.addend} is specified, got None")
        if beta is not None and not p.has_addend:
            raise InvalidOptionError(f"beta must be None without {p.addend} (there is nothing to "
                                     f"scale), got {beta!r}")
        if type(alpha) is not float or (beta is not None and type(beta) is not float):
            cplx = is_complex(p.dtype)
            alpha = scalar(alpha, "alpha", cplx)
            beta = None if beta is None else scalar(beta, "beta", cplx)
        if beta is None:
            beta = 0.0
        s = None if stream is None else self._resolve_stream(stream)
        result = self._run(self, alpha, beta, s)
        if release_workspace and self._engine is not None:
            self._engine.res.mark()
            self._engine.release_workspace()
        return result

    def autotune(self, *, iterations=None, stream=None):
        """EXT: try cuTENSOR's candidate kernels and keep the fastest (incremental autotuning
        through cuTENSOR's plan cache), then plan with it.

        ``iterations`` kernels are timed (default: the plan preference's
        ``incremental_count``, else 4), each run writing a scratch result (the operands and
        ``out`` are not changed). A ternary contraction of device operands (32/64-bit data,
        no ``out``) then also times two binary contractions against the fused one and keeps
        the faster. On the CPU there is nothing to tune: the call only plans.

        Parameters
        ----------
        iterations : int, optional
            How many candidate kernels to time (a positive int; default: the plan
            preference's ``incremental_count``, else 4).
        stream : int or stream object, optional
            The CUDA stream the timed runs use (default: the operands' package's current
            stream).
        """
        self._require_valid("autotune")
        pref = self._plan_preference
        if iterations is None:
            iterations = pref.incremental_count or 4
        if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
            raise InvalidOptionError(f"iterations must be a positive int, got {iterations!r}")
        if self._engine is None:
            self.plan(stream=stream)
            return
        if self._released:
            raise InvalidOperandError("autotune() needs operands: call reset_operands() after "
                                      "release_operands()")
        from ._run import tune

        s = None if stream is None else self._resolve_stream(stream)
        self._drop_route()
        tune(self, iterations, s)
        if self._n == 3:
            from ._pairwise import choose

            self._route = choose(self, s)
            if self._route is not None:
                self._run = self._route.run

    def _drop_route(self) -> None:
        route, self._route = self._route, None
        if route is not None:
            route.free()

    def _resolve_stream(self, stream) -> int:
        return resolve_stream(stream, package=self._problem.package,
                              device_id=self._problem.device_id or 0).handle

    # ------------------------------------------------------------------ operands
    def _reset(self, given: dict, stream) -> None:
        self._require_valid("reset_operands")
        p = self._problem
        for k in given:
            if k not in p.signature:
                raise InvalidOperandError(
                    f"{k} was not given when this {type(self).__name__} was made, so it cannot "
                    "be reset")
        if self._released:
            missing = sorted(set(p.signature) - set(given))
            if missing:
                raise InvalidOperandError(f"reset_operands() after release_operands() needs "
                                          f"every operand, missing {missing}")
        elif not given:
            raise InvalidOperandError("reset_operands() needs at least one operand")
        if stream is not None:  # checked; host operands are uploaded by each execute()
            self._resolve_stream(stream)
        new = dict(self._ops or {})
        for k, x in given.items():
            op = wrap_operand(x, k)
            old_pkg = p.package
            if op.package != old_pkg or op.device != p.device or (
                    op.device == "cuda" and op.device_id != p.device_id):
                raise InvalidOperandError(f"{k} must be a {old_pkg} array on {p.device}, as "
                                          f"planned, got {op.package} on {op.device}")
            sig = (op.dtype, op.shape, op.strides)
            want = p.signature[k]
            for field, got, exp in zip(("dtype", "shape", "strides"), sig, want):
                if got != exp:
                    raise InvalidOperandError(f"{k} must match the planned operand's {field} "
                                              f"{exp!r}, got {got!r}")
            if op.conj != p.conj_bits[k]:
                raise InvalidOperandError(
                    f"{k} must be lazily conjugated as the planned operand "
                    f"({p.conj_bits[k]}), got is_conj() {op.conj}")
            layouts = getattr(p, "layouts", None) or {}
            direct = k == "out" or (k == p.addend and getattr(p, "addend_direct", False))
            layout = layouts.get("d" if direct else k)
            if layout is not None and not p.host and op.ptr % layout[3]:
                raise InvalidOperandError(
                    f"{k} must be aligned to {layout[3]} bytes as the planned operand, got a "
                    f"pointer aligned to {op.ptr & -op.ptr}")
            new[k] = op
        if "out" in new:
            tmp = dict(new)
            self._check_out(tmp["out"], p.out_shape, p.dtype, tmp, p.names, tmp.get(p.addend))
        self._ops = new
        self._released = False
        if self._route is not None:
            self._route.rebind(new)

    def release_operands(self):
        """Drop this object's references to the operands (reset them before executing)."""
        self._require_valid("release_operands")
        if self._engine is not None:
            self._engine.res.mark()
        self._released = True
        self._ops = None
        if self._route is not None:
            self._route.release()

    def _unchecked(self, given: dict) -> None:
        new = dict(self._ops or {})
        for k, x in given.items():
            if x is not None:
                new[k] = wrap_operand(x, k)
        self._ops = new
        self._released = False
        if self._route is not None:
            self._route.rebind(new)

    def _release(self) -> None:
        self._drop_route()
        eng, self._engine, self._run, self._ops = self._engine, None, None, None
        if eng is not None:
            eng.free()


class BinaryContraction(_Contraction):
    """``out = alpha * contract(expr, a, b) + beta * c``, planned once, executed many times.

    Parameters
    ----------
    expr : str
        Einstein notation with two inputs: ``"ij,jk->ik"``, ``"bij,bjk->bik"``, implicit
        ``"ij,jk"``, ``"...ij,...jk->...ik"``.
    a, b : arrays
        NumPy, CuPy or torch arrays (or DLPack/CAI producers) of one dtype: float16,
        bfloat16, float32, float64, complex64 or complex128. Any strides.
    c : array, optional
        The addend (``beta`` then required at execution), of the result's shape or one that
        broadcasts to it.
    out : array, optional
        Where to write the result (in place); writable, must not overlap ``a`` or ``b``.
    qualifiers : array of Operator, optional
        One per input and one for the addend (``Operator.OP_CONJ`` conjugates a complex input).
    stream, options, execution
        A stream; :class:`ContractionOptions` or dict; ``"cuda"``, ``"cpu"``,
        :class:`ExecutionCUDA`, :class:`ExecutionCPU` or a dict (default: where the operands
        live; host operands run on the GPU when there is one, else on the CPU).

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.tensor import BinaryContraction
    >>> a = np.arange(6.0).reshape(2, 3)
    >>> b = np.ones((3, 2))
    >>> with BinaryContraction("ij,jk->ik", a, b, execution="cpu") as c:
    ...     c.plan()
    ...     c.execute(alpha=2.0)
    array([[ 6.,  6.],
           [24., 24.]])
    """

    _n, _addend = 2, "c"

    def __init__(self, expr, a, b, *, c=None, out=None, qualifiers=None, stream=None,
                 options=None, execution=None):
        super().__init__(expr, (a, b), c, out, qualifiers, stream, options, execution)

    def reset_operands(self, *, a=None, b=None, c=None, out=None, stream=None):
        """Give new operands of the planned dtypes, shapes, strides, package and device (at
        least one; all of them after :meth:`release_operands`).

        Each new operand is checked against the one it replaces: the same package, memory
        space, device, dtype, shape and strides, and a pointer aligned at least as well; a new
        ``out`` is checked as in the constructor (writable, no overlap with the inputs). The
        arrays are referenced, not copied.

        Parameters
        ----------
        a, b : array, optional
            New inputs.
        c : array, optional
            A new addend (only if the contraction was made with one).
        out : array, optional
            A new result target (only if the contraction was made with one).
        stream : int or stream object, optional
            The CUDA stream the new operands are ordered on (default: the package's current
            one).
        """
        given = {k: v for k, v in (("a", a), ("b", b), ("c", c), ("out", out)) if v is not None}
        self._reset(given, stream)

    def reset_operands_unchecked(self, *, a=None, b=None, c=None, out=None, stream=None):
        """:meth:`reset_operands` without the checks (the caller guarantees they hold).

        Parameters
        ----------
        a, b : array, optional
            New inputs.
        c : array, optional
            A new addend (only if the contraction was made with one).
        out : array, optional
            A new result target (only if the contraction was made with one).
        stream : int or stream object, optional
            The CUDA stream the new operands are ordered on (default: the package's current
            one).
        """
        self._unchecked({"a": a, "b": b, "c": c, "out": out})


class TernaryContraction(_Contraction):
    """``out = alpha * contract(expr, a, b, c) + beta * d``, planned once, executed many times.

    As :class:`BinaryContraction`, with three inputs (``"ij,jk,kl->il"``) and the addend
    ``d``. cuTENSOR contracts the three at once (``cutensorContractTrinary``); the CPU path
    contracts the cheapest pair first.

    Parameters
    ----------
    expr : str
        Einstein notation with three inputs: ``"ij,jk,kl->il"``, ``"abi,ibc,cd->ad"``.
    a, b, c : arrays
        The three inputs: NumPy, CuPy or torch arrays (or DLPack/CAI producers) of one
        package, memory space and dtype. Any strides.
    d : array, optional
        The addend (``beta`` then required at execution), of the result's shape or one that
        broadcasts to it.
    out : array, optional
        Where to write the result (in place); writable, must not overlap an input.
    qualifiers : array of Operator, optional
        Four values: one per input and the addend's (``Operator.OP_IDENTITY``).
    stream : int or stream object, optional
        The CUDA stream of the constructor's work (default: the package's current one).
    options : ContractionOptions or dict, optional
        Options of the contraction.
    execution : str, ExecutionCUDA, ExecutionCPU or dict, optional
        Where to run (default: where the operands live; host operands run on the GPU when
        there is one, else on the CPU).

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.tensor import TernaryContraction
    >>> a, b, c = np.eye(2), np.full((2, 2), 2.0), np.eye(2)
    >>> with TernaryContraction("ij,jk,kl->il", a, b, c, execution="cpu") as t:
    ...     t.plan()
    ...     t.execute()
    array([[2., 2.],
           [2., 2.]])
    """

    _n, _addend = 3, "d"

    def __init__(self, expr, a, b, c, *, d=None, out=None, qualifiers=None, stream=None,
                 options=None, execution=None):
        super().__init__(expr, (a, b, c), d, out, qualifiers, stream, options, execution)

    def reset_operands(self, *, a=None, b=None, c=None, d=None, out=None, stream=None):
        """As :meth:`BinaryContraction.reset_operands` (``d`` is the addend).

        Parameters
        ----------
        a, b, c : array, optional
            New inputs.
        d : array, optional
            A new addend (only if the contraction was made with one).
        out : array, optional
            A new result target (only if the contraction was made with one).
        stream : int or stream object, optional
            The CUDA stream the new operands are ordered on (default: the package's current
            one).
        """
        given = {k: v for k, v in (("a", a), ("b", b), ("c", c), ("d", d), ("out", out))
                 if v is not None}
        self._reset(given, stream)

    def reset_operands_unchecked(self, *, a=None, b=None, c=None, d=None, out=None,
                                 stream=None):
        """:meth:`reset_operands` without the checks (the caller guarantees they hold).

        Parameters
        ----------
        a, b, c : array, optional
            New inputs.
        d : array, optional
            A new addend (only if the contraction was made with one).
        out : array, optional
            A new result target (only if the contraction was made with one).
        stream : int or stream object, optional
            The CUDA stream the new operands are ordered on (default: the package's current
            one).
        """
        self._unchecked({"a": a, "b": b, "c": c, "d": d, "out": out})
