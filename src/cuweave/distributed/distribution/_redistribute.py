"""Redistribution of a distributed array between two distributions (nvmath-python's
``Redistribute``/``redistribute``, formerly ``reshape``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..._internal.errors import InvalidOperandError, InvalidOptionError, InvalidStateError
from ..._internal.logging import get_logger
from .._distributions import Box
from .._exchange import ExchangePlan
from .._runtime import agree, require_context
from .._spec import (
    check_same,
    check_same_space,
    coerce_distribution,
    coerce_options,
    local_operand,
    resolve_layout,
)

__all__ = ["RedistributeOptions", "Redistribute", "redistribute"]

_log = get_logger("distributed.redistribute")


@dataclass
class RedistributeOptions:
    """Options of :class:`Redistribute` and :func:`redistribute`.

    Attributes
    ----------
    logger : logging.Logger or None
        Logger (default ``cuweave.distributed.redistribute``).
    blocking : {True, 'auto'}
        Host operands always block; GPU results are ordered on the package's current stream.
    """

    logger: object = None
    blocking: Literal[True, "auto"] = "auto"

    def __post_init__(self):
        if self.blocking not in (True, "auto"):
            raise InvalidOptionError(f"blocking must be True or 'auto', got {self.blocking!r}")


class Redistribute:
    """Move a distributed array from ``input_distribution`` to ``output_distribution``.

    Collective: every process constructs, plans, executes and frees it together. Inputs are
    checked on every process before any data moves (a bad input anywhere raises everywhere).

    Parameters
    ----------
    operand : array
        This process's local array (host: NumPy or CPU torch; GPU: CuPy or CUDA torch).
    input_distribution, output_distribution : Distribution or (lower, upper)
        How the global array is split before and after.
    options : RedistributeOptions or dict, optional
    stream : optional
        Accepted for compatibility (GPU work runs on the package's current stream).

    Examples
    --------
    >>> # under mpiexec -n 2: rows -> columns of a 4 x 4 matrix  # doctest: +SKIP
    >>> r = Redistribute(a, Slab.X, Slab.Y)  # doctest: +SKIP
    >>> r.plan(); b = r.execute(); r.free()  # doctest: +SKIP
    """

    def __init__(self, operand, /, input_distribution, output_distribution, *, options=None,
                 stream=None):
        ctx = require_context()
        self._group = ctx.process_group
        self.options = coerce_options(options, RedistributeOptions)
        self._log = self.options.logger or _log
        self._plan = None
        self._freed = False
        self._setup(operand, input_distribution, output_distribution)

    def _describe(self, operand, din, dout):
        op = local_operand(operand, "operand", "redistribute")
        din = coerce_distribution(din, "input_distribution")
        dout = coerce_distribution(dout, "output_distribution")
        if len(op.shape) == 0:
            raise InvalidOperandError("operand must have at least one dimension, got a 0-D array")
        for name, d in (("input_distribution", din), ("output_distribution", dout)):
            if d.ndim is not None and d.ndim != len(op.shape):
                raise InvalidOptionError(
                    f"{name} must apply to {len(op.shape)}-D arrays, got {d!r}")
        self._local = op
        return (op.describe(), din, dout)

    def _setup(self, operand, din, dout):
        group = self._group
        gathered = agree(group, self._describe, operand, din, dout)
        agree(group, self._resolve, gathered)

    def _resolve(self, gathered):
        descs = [g[0] for g in gathered]
        check_same(descs, 1, "operand dtype")
        check_same(descs, 2, "operand package")
        check_same_space(descs)
        ndims = {len(d[0]) for d in descs}
        if len(ndims) != 1:
            raise InvalidOperandError(f"operand must have one dimensionality on every process, "
                                      f"got {sorted(ndims)}")
        n = self._group.nranks
        self._src = resolve_layout("input_distribution", [g[1] for g in gathered],
                                   [d[0] for d in descs], n)
        douts = [g[2] for g in gathered]
        out_shapes = [d.box_shape for d in douts] if isinstance(douts[0], Box) else None
        self._dst = resolve_layout("output_distribution", douts, out_shapes, n,
                                   global_shape=self._src.global_shape)
        self.global_shape = self._src.global_shape

    @property
    def result_shape(self) -> tuple[int, ...]:
        """The local shape of the result on this process (a cuweave extension)."""
        return self._dst.local_shape(self._group.rank)

    def _check_live(self):
        if self._freed:
            raise InvalidStateError("this Redistribute was freed; create a new one")

    def plan(self, stream=None):
        """Compute what this process sends to and receives from every other.

        Parameters
        ----------
        stream : optional
            Accepted for compatibility: GPU work runs on the package's current stream.
        """
        self._check_live()
        self._plan = ExchangePlan(self._src, self._dst, self._group.rank)
        self._log.info("redistribute planned: global shape %s, local %s -> %s",
                       self.global_shape, self._local.shape, self.result_shape)

    def reset_operand(self, operand, *, stream=None):
        """Point at a new operand of the same local shape, dtype and package (collective).

        Parameters
        ----------
        operand : array
            This process's new local array.
        stream : optional
            Accepted for compatibility: GPU work runs on the package's current stream.
        """
        self._check_live()

        def check(x):
            op = local_operand(x, "operand", "redistribute")
            if op.describe() != self._local.describe():
                raise InvalidOperandError(
                    f"operand must match the planned one (shape, dtype, package) "
                    f"{self._local.describe()}, got {op.describe()}")
            return op

        self._local = agree(self._group, check, operand)[self._group.rank]

    def execute(self, stream=None, release_workspace=False, sync_symmetric_memory=True):
        """Run the exchange; returns this process's new local array (a new array).

        Parameters
        ----------
        stream : optional
            Accepted for compatibility: GPU work runs on the package's current stream.
        release_workspace : bool
            Accepted for compatibility (the exchanges keep no workspace between calls).
        sync_symmetric_memory : bool
            Accepted for compatibility (no symmetric heap is involved: exchanges are MPI's or
            NCCL's).

        Returns
        -------
        array
        """
        self._check_live()
        if self._plan is None:
            raise InvalidStateError("execute() needs plan() first")
        op = self._local
        result = op.backend.exchange(self._group, self._plan, op.array)
        return op.backend.wrap(result, op.package)

    def free(self):
        """Release the plan; the object cannot be used afterwards."""
        self._plan = None
        self._freed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()


def redistribute(operand, /, input_distribution, output_distribution, *,
                 sync_symmetric_memory=True, options=None, stream=None):
    """Redistribute ``operand`` from ``input_distribution`` to ``output_distribution``.

    Collective. Returns this process's local array of the result (same package, a new array).

    Parameters
    ----------
    operand : array
        This process's local array (host: NumPy or CPU torch; GPU: CuPy or CUDA torch).
    input_distribution, output_distribution : Distribution or (lower, upper)
        How the global array is split before and after.
    sync_symmetric_memory : bool
        Accepted for compatibility (no symmetric heap is involved: exchanges are MPI's or
        NCCL's).
    options : RedistributeOptions or dict, optional
        See :class:`RedistributeOptions`.
    stream : optional
        Accepted for compatibility: GPU work runs on the package's current stream.

    Returns
    -------
    array

    Examples
    --------
    >>> # mpiexec -n 4: a (global 8 x 6) split on rows becomes split on columns  # doctest: +SKIP
    >>> b = redistribute(a, Slab.X, Slab.Y)  # doctest: +SKIP
    """
    with Redistribute(operand, input_distribution, output_distribution, options=options,
                      stream=stream) as r:
        r.plan(stream=stream)
        return r.execute(stream=stream, sync_symmetric_memory=sync_symmetric_memory)
