"""cuweave.distributed without MPI: imports, validation, distributions' shapes, and one-process
runs through a ProcessGroup of one (the suite's in-process half; the MPI half is test_mpi.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import cuweave.distributed as dist
from cuweave import InvalidOptionError, InvalidStateError
from cuweave.distributed.distribution import BlockCyclic, Box, ProcessGrid, Slab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class OneProcess(dist.ProcessGroup):
    """A group of ``nranks`` where this is process ``rank``; only usable alone for exchanges."""

    def __init__(self, rank=0, nranks=1):
        self.rank, self.nranks = rank, nranks

    def allgather_object(self, obj):
        assert self.nranks == 1
        return [obj]


@pytest.fixture
def group():
    def start(rank=0, nranks=1):
        dist.initialize(None, OneProcess(rank, nranks))
    yield start
    dist.finalize()


def test_import_needs_no_mpi4py():
    code = "import sys, cuweave.distributed.fft, cuweave.distributed.linalg.advanced; " \
           "print('mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")), check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("kwargs, match", [
    ({"device_id": -1}, "device_id"), ({"device_id": "0"}, "device_id"),
    ({"device_id": 0, "backends": ["mpi"]}, "backends"),
    ({"device_id": 0, "backends": "nccl"}, "backends"),
])
def test_initialize_rejects_bad_arguments(kwargs, match):
    with pytest.raises(InvalidOptionError, match=match):
        dist.initialize(communicator=OneProcess(), **kwargs)
    assert dist.get_context() is None


def test_context_lifecycle(group):
    group()
    ctx = dist.get_context()
    assert (ctx.rank, ctx.nranks, ctx.device_id, ctx.nccl_comm) == (0, 1, None, None)
    with pytest.raises(InvalidStateError, match="already initialized"):
        dist.initialize(None, OneProcess())
    dist.finalize()
    assert dist.get_context() is None
    with pytest.raises(InvalidStateError, match="not initialized"):
        dist.fft.fft(np.ones((2, 2), complex), distribution=Slab.X)


@pytest.mark.parametrize("extent, nranks, want", [(35, 4, [9, 9, 9, 8]), (3, 4, [1, 1, 1, 0]),
                                                  (8, 4, [2, 2, 2, 2])])
def test_slab_shapes_split_unevenly_first_processes_get_more(group, extent, nranks, want):
    group(0, nranks)
    assert [Slab.X.shape(r, (extent, 5))[0] for r in range(nranks)] == want
    assert [Slab.Y.shape(r, (5, extent))[1] for r in range(nranks)] == want


def test_block_cyclic_shapes_follow_numroc(group):
    group(0, 4)
    grid = ProcessGrid(shape=(2, 2), layout=ProcessGrid.Layout.COL_MAJOR)
    d = BlockCyclic(grid, (2, 3))
    assert [d.shape(r, (7, 10)) for r in range(4)] == [(4, 6), (3, 6), (4, 4), (3, 4)]
    assert grid.coordinates(1) == (1, 0)
    assert d.global_indices(2, (7, 10))[1].tolist() == [3, 4, 5, 9]
    with pytest.raises(InvalidOptionError, match="layout"):
        ProcessGrid(shape=(2, 2))
    with pytest.raises(InvalidOptionError, match="shape"):
        ProcessGrid(shape=(3, 1))
    with pytest.raises(InvalidOptionError, match="block_sizes"):
        BlockCyclic(grid, (2,))


def test_distribution_arguments_are_checked(group):
    group()
    with pytest.raises(InvalidOptionError, match="partition_dim"):
        Slab(-1)
    with pytest.raises(InvalidOptionError, match="upper"):
        Box((0, 2), (4, 1))
    assert Box((0, 2), (4, 4)).box_shape == (4, 2)
    assert Slab.X.to(Slab, ndim=3).ndim == 3


@pytest.mark.parametrize("shape", [(12,), (6, 10), (4, 6, 5)])
def test_one_process_fft_matches_numpy(group, shape):
    group()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    np.testing.assert_allclose(dist.fft.fft(x, distribution=Slab.X), np.fft.fftn(x), atol=1e-9)
    with dist.fft.FFT(x, Slab.X) as f:  # nvmath-python 0.x passed the distribution positionally
        f.plan()
        np.testing.assert_allclose(f.execute(direction="inverse"), np.fft.ifftn(x) * x.size,
                                   atol=1e-9)
    r = rng.standard_normal(shape)
    y = dist.fft.rfft(r, distribution=Slab.X)
    np.testing.assert_allclose(y, np.fft.rfftn(r), atol=1e-9)
    parity = "odd" if shape[-1] % 2 else "even"
    z = dist.fft.irfft(y, distribution=Slab.X, options={"last_axis_parity": parity})
    np.testing.assert_allclose(z, r * r.size, atol=1e-8)


def test_one_process_matmul_and_redistribute(group):
    group()
    a, b = np.arange(12.0).reshape(3, 4), np.arange(8.0).reshape(4, 2)
    d = dist.linalg.advanced.matmul(a, b, distributions=[Slab.X, Slab.Y, Slab.X])
    np.testing.assert_allclose(d, a @ b)
    np.testing.assert_array_equal(
        dist.distribution.redistribute(a, Slab.X, Box((0, 0), (3, 4))), a)


def test_fft_options_are_validated():
    with pytest.raises(InvalidOptionError, match="fft_type"):
        dist.fft.FFTOptions(fft_type="R2R")
    with pytest.raises(InvalidOptionError, match="redistribute"):
        dist.fft.FFTOptions(redistribute="yes")
    assert dist.fft.FFTOptions(reshape=False).redistribute is False


def test_docstring_examples_of_the_distributions_run():
    import doctest

    from cuweave.distributed import _distributions

    res = doctest.testmod(_distributions, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0


def test_bias_gradient_plans_add_each_sum_once():
    """Who adds what to the summed bias-gradient vector, on a 2 x 2 grid of 5 x 4 blocks: D's
    partial column sums from every block; op(A)'s and op(B)'s complete sums from the lowest
    rank holding them (a block with no columns adds no row sums)."""
    from cuweave.distributed._distributions import Layout
    from cuweave.distributed.linalg.advanced._bgrad import plan_bias_gradient
    from cuweave.linalg.advanced._epilogs import epilog_spec

    r, c = (np.arange(0, 3), np.arange(3, 5)), (np.arange(0, 2), np.arange(2, 4))
    layout = Layout((5, 4), [(r[0], c[0]), (r[1], c[0]), (r[0], c[1]), (r[1], c[1])])
    assert plan_bias_gradient(epilog_spec("relu_aux"), layout, 0) is None
    for rank in range(4):
        d = plan_bias_gradient(epilog_spec("drelu_bgrad"), layout, rank)
        assert (d.name, d.length) == ("drelu_bgrad", 5)
        assert list(d.src) == list(range(len(r[rank % 2])))
        assert list(d.dst) == list(d.out) == list(r[rank % 2])
        a = plan_bias_gradient(epilog_spec("bgrada"), layout, rank)
        assert list(a.dst) == (list(r[rank]) if rank < 2 else [])
        assert list(a.out) == list(r[rank % 2])
        b = plan_bias_gradient(epilog_spec("bgradb"), layout, rank)
        assert b.length == 4 and b.out is None
        assert list(b.dst) == (list(c[rank // 2]) if rank in (0, 2) else [])
    no_columns = Layout((5, 4), [(r[0], np.arange(0, 4)), (r[1], np.arange(0, 4)),
                                 (r[0], np.arange(0, 0)), (r[1], np.arange(0, 0))])
    for rank in range(4):
        a = plan_bias_gradient(epilog_spec("bgrada"), no_columns, rank)
        d = plan_bias_gradient(epilog_spec("dgelu_bgrad"), no_columns, rank)
        assert len(a.src) == len(d.src) == (len(r[rank]) if rank < 2 else 0)
        assert list(a.out) == list(r[rank % 2])  # an empty block still gets its rows' sums
