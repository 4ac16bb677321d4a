"""Bias gradients of the distributed matmul: BGRADA, BGRADB, DRELU_BGRAD and DGELU_BGRAD.

A bias gradient sums a matrix over one of its dimensions, and that dimension spans processes.
Each process's local GEMM (the single-process engine, with the same epilog: its epilog table
says what each one reduces, ``EpilogSpec.bgrad_source``) gives the sum over what it holds; the
processes then add their vectors with one allreduce (MPI on CPU ranks, NCCL between GPUs):

- ``drelu_bgrad`` / ``dgelu_bgrad``: the sum of the final ``D`` over its columns. Each process
  holds a block of ``D`` (rows x columns): its local sum is a partial sum over its columns, and
  the processes sharing rows add theirs.
- ``bgrada``: the sum of ``op(A)`` over ``k``. Each process has gathered whole rows of
  ``op(A)`` (all of ``k``) for its rows of ``D``, so its local sum is already complete; processes
  sharing rows hold the same values, so one of them (the lowest rank holding some columns of
  those rows) adds them.
- ``bgradb``: the sum of ``op(B)`` over ``k``, likewise complete per column of ``D``; one process
  per column adds it.

As in nvmath-python (cuBLASMp), every process gets the gradient of its own rows of ``D``
(shape ``(rows,)``) for the first three, and all of ``bgradb`` (shape ``(N,)``, the same on every
process). Processes whose block of ``D`` is empty take part in the allreduce too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._exchange import axis_indices

__all__ = ["BiasGradientPlan", "plan_bias_gradient", "reduce_bias_gradient"]


@dataclass(frozen=True)
class BiasGradientPlan:
    """What one process adds to, and takes from, the summed bias-gradient vector.

    Attributes
    ----------
    name : str
        The aux output (``'bgrada'``, ``'bgradb'``, ``'drelu_bgrad'``, ``'dgelu_bgrad'``).
    length : int
        The global vector's length (``M``, or ``N`` for ``bgradb``).
    src, dst : numpy.ndarray
        Positions in this process's local gradient that it adds, and where they go globally.
    out : numpy.ndarray or None
        The global positions this process returns (its rows of ``D``), ``None`` for all.
    """

    name: str
    length: int
    src: np.ndarray
    dst: np.ndarray
    out: np.ndarray | None


def plan_bias_gradient(spec, layout, rank: int) -> BiasGradientPlan | None:
    """The plan of ``spec``'s bias gradient (``None`` when it has none) for process ``rank``
    of the result's ``layout`` (every process's global rows and columns of ``D``)."""
    if spec.bgrad_output is None:
        return None
    rows, cols = [s[0] for s in layout.sets], [s[1] for s in layout.sets]
    per_column = spec.bgrad_source == "b"
    mine, other = (cols, rows) if per_column else (rows, cols)
    length = layout.global_shape[1 if per_column else 0]
    nranks = len(mine)
    if spec.bgrad_source == "d":  # partial sums: every non-empty block adds its own
        src = np.arange(len(mine[rank]) if len(other[rank]) else 0, dtype=np.int64)
    else:  # complete sums, held by several processes: the lowest rank with a block adds them
        owner = np.full(length, nranks, dtype=np.int64)
        for p in range(nranks - 1, -1, -1):
            if len(other[p]):
                owner[mine[p]] = p
        src = np.flatnonzero(owner[mine[rank]] == rank).astype(np.int64)
    return BiasGradientPlan(spec.bgrad_output, int(length), src, mine[rank][src],
                            None if per_column else mine[rank])


def reduce_bias_gradient(backend, group, plan: BiasGradientPlan, partial, like):
    """This process's bias gradient: ``plan``'s share of ``partial`` (the local GEMM's gradient,
    ``None`` when this process's block of ``D`` is empty) summed over the processes (collective).
    ``like`` is an operand of the product (its dtype is the gradient's)."""
    with backend.scope(like):
        ops = backend.ops_for(like)
        full = ops.new_block(like, (plan.length,), zeros=True)
        if len(plan.src):
            block = ops.take(partial, ops.block_index(axis_indices([plan.src]), partial))
            ops.put(full, ops.block_index(axis_indices([plan.dst]), full), block)
        backend.allreduce_sum(group, full)
        if plan.out is None:
            return full
        return ops.take(full, ops.block_index(axis_indices([plan.out]), full))
