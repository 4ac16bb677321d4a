"""What every process of the MPI checks shares: the registry, data helpers and comparisons.

``mpi_worker.py`` (host operands) and ``mpi_gpu_checks.py`` (GPU operands) register their checks
here with :func:`check`; ``mpi_worker.main`` runs the requested groups.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from cuweave.distributed.distribution import BlockCyclic, BlockNonCyclic, Box, ProcessGrid, Slab

COMM = MPI.COMM_WORLD
RANK, P = COMM.Get_rank(), COMM.Get_size()
CHECKS: dict[str, list] = {}


def check(group):
    def deco(fn):
        CHECKS.setdefault(group, []).append(fn)
        return fn
    return deco


def block(x, dist_or_sets, rank=RANK):
    sets = dist_or_sets if isinstance(dist_or_sets, tuple) else \
        dist_or_sets._index_sets(rank, P, x.shape)
    return np.ascontiguousarray(x[np.ix_(*sets)])


def rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def close(got, want, dtype, what):
    tol = {np.float16: 1e-2, np.float32: 2e-4, np.complex64: 2e-4}.get(np.dtype(dtype).type,
                                                                        1e-10)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    err = float(np.abs(got - want).max()) / scale if want.size else 0.0
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol}"


def expect(exc_type, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {exc_type.__name__}")


def random_tiling(shape, seed):
    """Every process's Box of a random grid tiling of ``shape`` with random uneven cuts."""
    rng = np.random.default_rng(seed)
    grid = [1] * len(shape)
    left = P
    for f in (2, 2, 3, 5, 7):  # spread P's small prime factors over random axes
        while left % f == 0:
            grid[int(rng.integers(len(shape)))] *= f
            left //= f
    grid[int(rng.integers(len(shape)))] *= left
    cuts = [np.sort(np.concatenate(([0, n], rng.integers(0, n + 1, g - 1))))
            for n, g in zip(shape, grid)]
    boxes = []
    for r in range(P):
        pos = np.unravel_index(r, grid)
        boxes.append(Box([int(c[i]) for c, i in zip(cuts, pos)],
                         [int(c[i + 1]) for c, i in zip(cuts, pos)]))
    return boxes


def grids():
    if P == 4:
        return [ProcessGrid(shape=(2, 2), layout=ProcessGrid.Layout.COL_MAJOR),
                ProcessGrid(shape=(2, 2), layout=ProcessGrid.Layout.ROW_MAJOR)]
    return [ProcessGrid(shape=(P, 1))]


# ---- bias gradients of the distributed matmul ------------------------------------------------
#: (m, n, k): uneven splits on 3 and 4 processes, and blocks of D with no columns / no rows
BGRAD_SHAPES = [(11, 7, 5), (9, 2, 4), (2, 9, 3)]


def bgrad_cases():
    """(a, b, result) distributions: D split on rows, on columns, and on a 2-D grid (processes
    sharing rows and columns), block-cyclic and not."""
    cases = [(Slab.X, Slab.Y, Slab.X), (Slab.Y, Slab.X, Slab.Y), (Slab.X, Slab.X, Slab.Y)]
    for g in grids():
        bc = BlockCyclic(g, (2, 3))
        cases += [(bc, bc, bc), (Slab.Y, bc, BlockNonCyclic(g))]
    return cases


def one_process(a, b, epilog, **kwargs):
    """The single-process product with the same epilog on the gathered data (CPU engine)."""
    from cuweave.linalg.advanced import matmul

    return matmul(a, b, epilog=epilog, execution="cpu", **kwargs)


def bgrad_share(want, name, dist_d, shape):
    """What a process gets of the one-process gradient ``want``: all of ``bgradb``, its rows of
    D of the others."""
    return want if name == "bgradb" else want[dist_d._index_sets(RANK, P, shape)[0]]
