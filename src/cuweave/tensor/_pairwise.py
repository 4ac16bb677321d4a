"""A ternary contraction as two binary ones, for :meth:`TernaryContraction.autotune` to time
against cuTENSOR's fused ``cutensorContractTrinary`` and keep where it is faster.

The pair contracted first is the cheapest (the CPU path's choice, :class:`~._cpu.CpuPlan`):
``t = a_i . a_j`` into an intermediate of the data type that the route owns (C order), then
``out = alpha * t . a_o + beta * addend``. Each step is a planned
:class:`~.contraction.BinaryContraction` on the user's arrays (their diagonals and qualifiers
as given), so nothing of the problem is rewritten here. Half-precision data is never routed
this way: its intermediate would be rounded to half precision, which the fused contraction does
not do.
"""

from __future__ import annotations

from .._internal.packages import adapter, empty
from ._cpu import CpuPlan
from ._options import Operator

__all__ = ["PairwiseRoute", "eligible", "choose", "time_ms"]


def _label(mode: int) -> str:
    """A one-character label for mode id ``mode`` (letters, then CJK ideographs)."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return letters[mode] if mode < len(letters) else chr(0x4E00 + mode)


def eligible(p) -> bool:
    """Whether problem ``p`` may be routed pairwise (device operands of 32/64-bit data)."""
    return p.n == 3 and not p.cpu and not p.host and p.dtype not in ("float16", "bfloat16")


class PairwiseRoute:
    """Two planned binary contractions standing for the ternary contraction ``obj``."""

    def __init__(self, obj):
        from .contraction import BinaryContraction

        p = obj._problem
        b = p.bound
        plan = CpuPlan(p.views, b.out, b.extents, p.dtype, p.compute,
                       tuple(o == Operator.OP_CONJ for o in p.ops))
        i, j, o = plan.order
        inner = plan.steps[0].modes  # the intermediate's modes, in the product's order
        term = ["".join(_label(m) for m in t) for t in b.terms]
        t_term, out_term = "".join(_label(m) for m in inner), "".join(_label(m) for m in b.out)
        names = p.names
        self.first_names, self.last_name = (names[i], names[j]), names[o]
        ops, q = obj._ops, p.user_ops
        shape = tuple(b.extents[m] for m in inner)
        self.inter = empty(ops[names[i]], shape, p.dtype).obj  # the operands' package, C order
        options = {"compute_type": p.compute, "blocking": "auto",
                   "memory_limit": obj.options.memory_limit, "allocator": obj.options.allocator,
                   "handle": obj.options.handle, "logger": obj.options.logger,
                   "result_layout": "auto" if p.has_addend else p.layout}
        first_opts = dict(options, result_layout="auto")
        ident = int(Operator.OP_IDENTITY)
        self.first = BinaryContraction(
            f"{term[i]},{term[j]}->{t_term}", ops[names[i]].obj, ops[names[j]].obj,
            out=self.inter, qualifiers=[int(q[i]), int(q[j]), ident], options=first_opts)
        addend = ops.get(p.addend)
        out = ops.get("out")
        self.second = BinaryContraction(
            f"{t_term},{term[o]}->{out_term}", self.inter, ops[names[o]].obj,
            c=None if addend is None else addend.obj, out=None if out is None else out.obj,
            qualifiers=[ident, int(q[o]), ident], options=options)
        self.blocking = obj.options.blocking is True
        self.first.plan()
        self.second.plan()
        self.addend_name = p.addend

    def run(self, obj, alpha, beta, stream):
        """``execute()`` of the ternary contraction through the two steps."""
        self.first.execute(stream=stream)
        has_addend = self.second._problem.has_addend
        r = self.second.execute(alpha=alpha, beta=beta if has_addend else None, stream=stream)
        if self.blocking:
            from .._internal import cuda

            cuda.synchronize(stream if stream is not None else
                             adapter(obj._problem.package).stream_getter(
                                 obj._problem.device_id)())
        return r

    def rebind(self, ops) -> None:
        """The ternary contraction's operands ``ops`` (name -> Operand) given to the steps."""
        a, b = self.first_names
        self.first.reset_operands_unchecked(a=ops[a].obj, b=ops[b].obj, out=self.inter)
        addend = ops.get(self.addend_name)
        out = ops.get("out")
        self.second.reset_operands_unchecked(
            a=self.inter, b=ops[self.last_name].obj, c=None if addend is None else addend.obj,
            out=None if out is None else out.obj)

    def release(self) -> None:
        self.first.release_operands()
        self.second.release_operands()

    def free(self) -> None:
        self.first.free()
        self.second.free()
        self.inter = None


def time_ms(fn, stream: int, iters: int = 5) -> float:
    """Milliseconds per call of ``fn`` queued ``iters`` times on ``stream`` (after one call)."""
    from .._internal import cuda

    fn()
    start, end = cuda.Event(), cuda.Event()
    start.record(stream)
    for _ in range(iters):
        fn()
    end.record(stream)
    end.synchronize()
    return start.elapsed_ms(end) / iters


def choose(obj, stream):
    """The pairwise route of the ternary contraction ``obj`` when it measures faster than the
    fused one, else None. Only where running both is free of side effects: new results (no
    ``out``), device operands, 32/64-bit data."""
    p = obj._problem
    if not eligible(p) or p.has_out:
        return None
    s = adapter(p.package).stream_getter(p.device_id)() if stream is None else stream
    route = PairwiseRoute(obj)
    beta = 1.0 if p.has_addend else 0.0
    try:
        fused = time_ms(lambda: obj._run(obj, 1.0, beta, stream), s)
        pairwise = time_ms(lambda: route.run(obj, 1.0, beta, stream), s)
    except BaseException:
        route.free()
        raise
    if obj.logger.isEnabledFor(20):
        obj.logger.info("ternary contraction: fused %.4f ms, pairwise %.4f ms per run", fused,
                        pairwise)
    if pairwise < fused:
        return route
    route.free()
    return None
