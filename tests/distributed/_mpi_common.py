"""What every process of the MPI checks shares: the registry, data helpers and comparisons.

``mpi_worker.py`` (host operands) and ``mpi_gpu_checks.py`` (GPU operands) register their checks
here with :func:`check`; ``mpi_worker.main`` runs the requested groups.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from cuweave.distributed.distribution import Box, ProcessGrid

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
    tol = 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10
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
