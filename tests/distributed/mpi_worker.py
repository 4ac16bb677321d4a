"""Checks run on every process under ``mpiexec -n P python tests/distributed/mpi_worker.py GROUP``.

Each check builds the global data from one seed on every process, hands each process its local
block, runs the distributed call and compares this process's result with the same block of a
single-process NumPy computation on the global data. The script prints one line per failure
and, on process 0, a closing ``N passed, M failed`` line; it exits non-zero on any failure.
"""

from __future__ import annotations

import ctypes
import os
import sys
import traceback
from types import SimpleNamespace

import _fake_cupy
import mpi_gpu_checks  # noqa: F401 - registers the GPU groups (gpu_*)
import numpy as np
from _mpi_common import (  # tests/distributed: the script's folder, first on sys.path
    BGRAD_SHAPES,
    CHECKS,
    COMM,
    RANK,
    P,
    bgrad_cases,
    bgrad_share,
    block,
    check,
    close,
    expect,
    grids,
    one_process,
    rand,
    random_tiling,
)
from mpi4py import MPI

import cuweave.distributed as dist
from cuweave import InvalidOperandError, InvalidOptionError, InvalidStateError
from cuweave._internal import packages
from cuweave._internal.packages import NumpyAdapter
from cuweave.distributed import UnsupportedMemorySpaceError
from cuweave.distributed._backend import HOST, ExchangePlan
from cuweave.distributed._distributions import Layout
from cuweave.distributed._gpu import nccl_transport
from cuweave.distributed.distribution import (
    BindDistributionError,
    BlockCyclic,
    BlockNonCyclic,
    Box,
    ProcessGrid,
    Redistribute,
    Slab,
    redistribute,
)
from cuweave.distributed.linalg.advanced import Matmul, matmul, matrix_qualifiers_dtype

SHAPES = [(13,), (16,), (8, 12), (9, 7), (3, 5, 4), (6, 5, 4), (9, 8, 7)]


# ---- FFT -----------------------------------------------------------------------------------
@check("fft_c2c")
def c2c_every_slab_dtype_and_dimension():
    for shape in SHAPES:
        for dtype in (np.complex64, np.complex128):
            x = rand(shape, dtype, 1)
            dists = (Slab.X,) if len(shape) == 1 else (Slab.X, Slab.Y)
            for d in dists:
                for red in (True, False):
                    out = d if red or len(shape) == 1 else Slab(1 - d.partition_dim)
                    opts = {"redistribute": red}
                    y = dist.fft.fft(block(x, d), distribution=d, options=opts)
                    close(y, block(np.fft.fftn(x), out), dtype, f"fft {shape} {d} {red}")
                    assert y.dtype == dtype
                    z = dist.fft.ifft(block(x, d), distribution=d, options=opts)
                    close(z, block(np.fft.ifftn(x) * x.size, out), dtype, f"ifft {shape} {d}")


@check("fft_c2c")
def c2c_legacy_reshape_option_and_direction_argument():
    x = rand((8, 6, 5), np.complex128, 2)
    y = dist.fft.fft(block(x, Slab.X), distribution=Slab.X, options={"reshape": False})
    close(y, block(np.fft.fftn(x), Slab.Y), np.complex128, "reshape=False")
    y = dist.fft.fft(block(x, Slab.Y), distribution=Slab.Y, direction="inverse")
    close(y, block(np.fft.ifftn(x) * x.size, Slab.Y), np.complex128, "direction=inverse")


@check("fft_r2c")
def r2c_c2r_every_slab_dtype_and_dimension():
    for shape in SHAPES:
        for dtype, cdtype in ((np.float32, np.complex64), (np.float64, np.complex128)):
            x = rand(shape, dtype, 3)
            parity = "odd" if shape[-1] % 2 else "even"
            ref = np.fft.rfftn(x)
            for d in ((Slab.X,) if len(shape) == 1 else (Slab.X, Slab.Y)):
                y = dist.fft.rfft(block(x, d), distribution=d)
                close(y, block(ref, d), cdtype, f"rfft {shape} {d}")
                z = dist.fft.irfft(y, distribution=d, options={"last_axis_parity": parity})
                assert z.dtype == dtype
                close(z, block(x * x.size, d), dtype, f"irfft {shape} {d}")


@check("fft_r2c")
def r2c_to_complementary_slab_and_back():
    x = rand((10, 9, 6), np.float64, 4)
    y = dist.fft.rfft(block(x, Slab.X), distribution=Slab.X, options={"redistribute": False})
    close(y, block(np.fft.rfftn(x), Slab.Y), np.complex128, "rfft to Slab.Y")
    z = dist.fft.irfft(y, distribution=Slab.Y, options={"redistribute": False})
    close(z, block(x * x.size, Slab.X), np.float64, "irfft back to Slab.X")


def pencils(shape, axes):
    """2 x 2 pencil boxes of ``shape`` split on ``axes`` (uneven when the extents are odd)."""
    boxes = []
    for r in range(4):
        lo, hi = [0] * len(shape), list(shape)
        for axis, coord in zip(axes, (r // 2, r % 2)):
            half = (shape[axis] + 1) // 2
            lo[axis], hi[axis] = (0, half) if coord == 0 else (half, shape[axis])
        boxes.append(Box(lo, hi))
    return boxes


@check("fft_boxes")
def box_distributions():
    if P != 4:
        return
    for shape in ((9, 6, 5), (7, 10)):
        x = rand(shape, np.complex128, 5)
        ins = pencils(shape, (0, 1))
        outs = pencils(shape, (len(shape) - 2, len(shape) - 1)) if len(shape) == 3 else \
            pencils(shape, (1, 0))
        a = block(x, ins[RANK]._index_sets(RANK, P, shape))
        y = dist.fft.fft(a, distribution=[ins[RANK], outs[RANK]])
        close(y, block(np.fft.fftn(x), outs[RANK]._index_sets(RANK, P, shape)), np.complex128,
              f"box fft {shape}")
        pairs = [(b.lower, b.upper) for b in (ins[RANK], ins[RANK])]
        y = dist.fft.fft(a, distribution=pairs)
        close(y, block(np.fft.fftn(x), ins[RANK]._index_sets(RANK, P, shape)), np.complex128,
              "box fft, (lower, upper) pairs")
    xr = rand((8, 6, 6), np.float64, 6)
    ins, outs = pencils(xr.shape, (0, 1)), pencils((8, 6, 4), (1, 2))
    y = dist.fft.rfft(block(xr, ins[RANK]._index_sets(RANK, P, xr.shape)),
                      distribution=[ins[RANK], outs[RANK]])
    close(y, block(np.fft.rfftn(xr), outs[RANK]._index_sets(RANK, P, (8, 6, 4))),
          np.complex128, "box rfft")


@check("fft_boxes")
def random_box_tilings_in_and_out():
    for seed, shape in enumerate([(11,), (7, 9), (6, 5, 4), (8, 3, 5), (12, 10)]):
        for dtype in (np.complex64, np.float64):
            x = rand(shape, dtype, 30 + seed)
            ins = random_tiling(shape, 100 + seed)
            fwd = np.fft.fftn(x) if dtype == np.complex64 else np.fft.rfftn(x)
            outs = random_tiling(fwd.shape, 200 + seed)
            a = block(x, ins[RANK]._index_sets(RANK, P, shape))
            fn = dist.fft.fft if dtype == np.complex64 else dist.fft.rfft
            y = fn(a, distribution=[ins[RANK], outs[RANK]])
            want = block(fwd, outs[RANK]._index_sets(RANK, P, fwd.shape))
            close(y, want, dtype, f"random boxes {shape} {dtype.__name__} seed {seed}")
            z = redistribute(a, ins[RANK], random_tiling(shape, 300 + seed)[RANK])
            assert np.array_equal(
                z, block(x, random_tiling(shape, 300 + seed)[RANK]._index_sets(RANK, P, shape)))


@check("fft_stateful")
def stateful_fft_reset_and_inverse():
    x = rand((12, 10, 6), np.complex128, 7)
    with dist.fft.FFT(block(x, Slab.X), distribution=Slab.X,
                      options={"redistribute": False}) as f:
        f.plan()
        y = f.execute()
        close(y, block(np.fft.fftn(x), Slab.Y), np.complex128, "stateful forward")
        f.reset_operand(y, distribution=Slab.Y)
        z = f.execute(direction=dist.fft.FFTDirection.INVERSE)
        close(z, block(x * x.size, Slab.X), np.complex128, "stateful inverse")
        x2 = rand((12, 10, 6), np.complex128, 8)
        f.reset_operand(block(x2, Slab.X), distribution=Slab.X)
        close(f.execute(), block(np.fft.fftn(x2), Slab.Y), np.complex128, "stateful reset")
    expect(InvalidStateError, f.execute)


@check("fft_stateful")
def torch_cpu_operands():
    try:
        import torch
    except ImportError:
        return
    x = rand((8, 8, 4), np.complex64, 9)
    y = dist.fft.fft(torch.from_numpy(block(x, Slab.X)), distribution=Slab.X)
    assert isinstance(y, torch.Tensor)
    close(y.numpy(), block(np.fft.fftn(x), Slab.X), np.complex64, "torch fft")


# ---- redistribute --------------------------------------------------------------------------
@check("redistribute")
def redistribute_between_distributions():
    grid = ProcessGrid(shape=(2, P // 2), layout=ProcessGrid.Layout.ROW_MAJOR) if P % 2 == 0 \
        else ProcessGrid(shape=(P, 1))
    cases = [((11, 7), Slab.X, Slab.Y), ((5, 9, 4), Slab.Y, Slab.Z), ((10,), Slab.X, Slab.X),
             ((10, 9), BlockCyclic(grid, (2, 3)), Slab.X),
             ((10, 9), Slab.Y, BlockCyclic(grid, (3, 2), first_process=(1, 0))),
             ((8, 6), Slab.X, BlockNonCyclic(grid))]
    for shape, din, dout in cases:
        for dtype in (np.float32, np.complex128, np.int16):
            x = (rand(shape, np.float64, 10) * 100).astype(dtype)
            y = redistribute(block(x, din), din, dout)
            assert y.dtype == dtype and np.array_equal(y, block(x, dout)), (shape, din, dout)


@check("redistribute")
def redistribute_boxes_legacy_reshape_and_stateful():
    x = rand((6, 4 * P), np.float64, 11)
    col = Box((0, 4 * RANK), (6, 4 * RANK + 4))
    rows = Slab.X._index_sets(RANK, P, x.shape)
    row = Box((int(rows[0][0]) if len(rows[0]) else 0, 0),
              (int(rows[0][-1]) + 1 if len(rows[0]) else 0, 4 * P))
    a = block(x, col._index_sets(RANK, P, x.shape))
    y = dist.reshape.reshape(a, [col.lower, col.upper], [row.lower, row.upper])
    assert np.array_equal(y, block(x, Slab.X))
    with Redistribute(a, col, Slab.X) as r:
        r.plan()
        assert np.array_equal(r.execute(), block(x, Slab.X))
        r.reset_operand(a * 2)
        assert np.array_equal(r.execute(), block(2 * x, Slab.X))


# ---- matmul --------------------------------------------------------------------------------
@check("matmul")
def matmul_every_distribution_and_dtype():
    m, n, k = 10, 7, 9
    for dtype in (np.float32, np.float64, np.complex128):
        a, b, c = rand((m, k), dtype, 12), rand((k, n), dtype, 13), rand((m, n), dtype, 14)
        cases = [(Slab.X, Slab.Y, Slab.X), (Slab.Y, Slab.X, Slab.Y)]
        for g in grids():
            bc = BlockCyclic(g, (2, 3))
            cases += [(bc, bc, bc), (Slab.Y, bc, BlockNonCyclic(g)),
                      (BlockCyclic(g, (3, 2), first_process=(1, 0)), Slab.X, bc)]
        for da, db, dc in cases:
            d = matmul(block(a, da), block(b, db), block(c, dc), distributions=[da, db, dc],
                       alpha=2.0, beta=0.5)
            close(d, block(2 * a @ b + 0.5 * c, dc), dtype, f"matmul {da} {db} {dc}")
            d = matmul(block(a, da), block(b, db), distributions=[da, db, dc])
            close(d, block(a @ b, dc), dtype, f"matmul {da} {db} {dc} without c")
            assert d.flags.f_contiguous, "results are Fortran-ordered, as cuBLASMp's"


@check("matmul")
def matmul_qualifiers_inplace_and_stateful():
    m, n, k = 8, 12, 6
    a, b = rand((k, m), np.complex128, 15), rand((n, k), np.complex128, 16)
    q = np.zeros(3, dtype=matrix_qualifiers_dtype)
    q[0]["is_transpose"] = q[1]["is_transpose"] = 1
    q[0]["is_conjugate"] = 1
    d = matmul(block(a, Slab.Y), block(b, Slab.X), distributions=[Slab.Y, Slab.X, Slab.X],
               qualifiers=q)
    close(d, block(a.conj().T @ b.T, Slab.X), np.complex128, "conjugate transpose")
    c = block(rand((m, n), np.complex128, 17), Slab.X)
    c0 = c.copy()
    r = matmul(block(a.T.copy(), Slab.X), block(b.T.copy(), Slab.Y), c, beta=1.0,
               distributions=[Slab.X, Slab.Y, Slab.X])
    assert r is c
    close(c, block(a.T @ b.T, Slab.X) + c0, np.complex128, "in-place c")
    ax, bx = block(a.T.copy(), Slab.X), block(b.T.copy(), Slab.Y)
    with Matmul(ax, bx, distributions=[Slab.X, Slab.Y, Slab.X]) as mm:
        mm.plan()
        close(mm.execute(), block(a.T @ b.T, Slab.X), np.complex128, "stateful")
        mm.reset_operands(a=2 * ax)
        close(mm.execute(), block(2 * a.T @ b.T, Slab.X), np.complex128, "reset_operands")


@check("matmul")
def matmul_epilogs():
    m, n, k = 12, 8, 5
    a, b = rand((m, k), np.float64, 18), rand((k, n), np.float64, 19)
    bias = rand((m, 1), np.float64, 20)
    dists = [Slab.X, Slab.Y, Slab.X]
    d = matmul(block(a, Slab.X), block(b, Slab.Y), distributions=dists, epilog="relu_bias",
               epilog_inputs={"bias": block(bias, Slab.X)})
    close(d, block(np.maximum(a @ b + bias, 0), Slab.X), np.float64, "relu_bias")
    d, aux = matmul(block(a, Slab.X), block(b, Slab.Y), distributions=dists, epilog="gelu_aux")
    want = block(a @ b, Slab.X)
    # the local engine's aux format (rows padded as cuBLASLt's) holds GELU's input
    close(aux["gelu_aux"][:len(want)], want, np.float64, "gelu aux holds the input")


# ---- matmul: bias gradients, summed over the processes -------------------------------------
@check("matmul_bgrad")
def matmul_bgrada_bgradb_every_distribution():
    for seed, (m, n, k) in enumerate(BGRAD_SHAPES):
        for dtype in (np.float64, np.float32, np.float16):
            a, b = rand((m, k), dtype, 60 + seed), rand((k, n), dtype, 70 + seed)
            for epilog in ("bgrada", "bgradb"):
                want_d, want = one_process(a, b, epilog)
                for da, db, dc in bgrad_cases():
                    what = f"{epilog} {dtype.__name__} {(m, n, k)} {da} {db} {dc}"
                    d, aux = matmul(block(a, da), block(b, db), distributions=[da, db, dc],
                                    epilog=epilog)
                    close(d, block(want_d, dc), dtype, what)
                    assert list(aux) == [epilog] and aux[epilog].dtype == dtype, what
                    close(aux[epilog], bgrad_share(want[epilog], epilog, dc, (m, n)), dtype,
                          what)


@check("matmul_bgrad")
def matmul_drelu_dgelu_bgrad_after_the_forward_pass():
    for seed, (m, n, k) in enumerate(BGRAD_SHAPES[:2]):
        for dtype in (np.float64, np.float32):
            a, b = rand((m, k), dtype, 80 + seed), rand((k, n), dtype, 81 + seed)
            g, h = rand((m, k), dtype, 82 + seed), rand((k, n), dtype, 83 + seed)
            c = rand((m, n), dtype, 84 + seed)
            for act in ("relu", "gelu"):
                key, name = f"{act}_aux", f"d{act}_bgrad"
                fwd = one_process(a, b, key)[1][key]
                want_d, want = one_process(g, h, name, c=c, beta=0.5, epilog_inputs={key: fwd})
                for da, db, dc in bgrad_cases():
                    what = f"{name} {dtype.__name__} {(m, n, k)} {da} {db} {dc}"
                    dists = [da, db, dc]
                    _, local = matmul(block(a, da), block(b, db), distributions=dists,
                                      epilog=key)
                    d, aux = matmul(block(g, da), block(h, db), block(c, dc), beta=0.5,
                                    distributions=dists, epilog=name,
                                    epilog_inputs={key: local[key]})
                    close(d, block(want_d, dc), dtype, what)
                    assert list(aux) == [name], what
                    close(aux[name], bgrad_share(want[name], name, dc, (m, n)), dtype, what)


@check("matmul_bgrad")
def matmul_bgrad_stateful_qualifiers_and_torch():
    m, n, k = 10, 6, 7
    at, bt = rand((k, m), np.float64, 90), rand((n, k), np.float64, 91)  # stored transposed
    q = np.zeros(3, dtype=matrix_qualifiers_dtype)
    q[0]["is_transpose"] = q[1]["is_transpose"] = 1
    dists = [Slab.Y, Slab.X, Slab.X]
    for epilog in ("bgrada", "bgradb"):
        with Matmul(block(at, Slab.Y), block(bt, Slab.X), distributions=dists,
                    qualifiers=q) as mm:
            mm.plan(epilog=epilog)
            for scale in (1.0, 2.0):
                if scale != 1.0:
                    mm.reset_operands(a=block(scale * at, Slab.Y))
                want_d, want = one_process(scale * at.T, bt.T, epilog)
                d, aux = mm.execute()
                close(d, block(want_d, Slab.X), np.float64, f"stateful {epilog} x{scale}")
                close(aux[epilog], bgrad_share(want[epilog], epilog, Slab.X, (m, n)),
                      np.float64, f"stateful {epilog} x{scale}")
    try:
        import torch
    except ImportError:
        return
    a, b = at.T.copy(), bt.T.copy()
    ta, tb = torch.from_numpy(block(a, Slab.X)), torch.from_numpy(block(b, Slab.Y))
    dists = [Slab.X, Slab.Y, Slab.X]
    d, fwd = matmul(ta, tb, distributions=dists, epilog="relu_aux")
    assert isinstance(fwd["relu_aux"], torch.Tensor)  # aux outputs in the operands' package
    d, aux = matmul(ta, tb, distributions=dists, epilog="drelu_bgrad",
                    epilog_inputs={"relu_aux": fwd["relu_aux"]})
    ref = one_process(a, b, "relu_aux")[1]["relu_aux"]
    want_d, want = one_process(a, b, "drelu_bgrad", epilog_inputs={"relu_aux": ref})
    assert isinstance(d, torch.Tensor) and isinstance(aux["drelu_bgrad"], torch.Tensor)
    close(aux["drelu_bgrad"].numpy(), want["drelu_bgrad"][Slab.X._index_sets(RANK, P, (m, n))[0]],
          np.float64, "torch drelu_bgrad")


@check("matmul_bgrad")
def matmul_bgrad_bad_inputs_raise_on_every_process_before_any_work():
    m, n, k = 8, 6, 4
    a, b = block(rand((m, k), np.float64, 92), Slab.X), block(rand((k, n), np.float64, 93), Slab.Y)
    dists = [Slab.X, Slab.Y, Slab.X]
    e = expect(InvalidOperandError, matmul, a + 0j, b + 0j, distributions=dists, epilog="bgrada")
    assert str(e).startswith("dtype must be real for epilog BGRADA"), str(e)
    e = expect(InvalidOperandError, matmul, a, b, distributions=dists, epilog="drelu_bgrad")
    assert str(e).startswith("epilog_inputs must have the keys ['relu_aux']"), str(e)
    e = expect(InvalidOperandError, matmul, a, b, distributions=dists, epilog="bgradb",
               epilog_inputs={"bias": np.zeros(len(a))})
    assert "epilog_inputs must have the keys [] for epilog BGRADB, got ['bias']" in str(e)
    e = expect(InvalidOptionError, matmul, a, b, distributions=dists, epilog="bgradc")
    assert str(e).startswith("epilog must be one of") and "'bgradc'" in str(e), str(e)
    e = expect(InvalidOptionError, matmul, a, b, distributions=dists, epilog="bgradb",
               epilog_inputs=[1])
    assert str(e).startswith("epilog_inputs must be a dict"), str(e)
    for act, dtype in (("relu", np.int8), ("gelu", np.float32)):
        key = f"{act}_aux"
        aux = matmul(a, b, distributions=dists, epilog=key)[1][key]
        bad = aux[:-1] if RANK == P - 1 else aux  # not the forward pass's on one process
        e = expect(InvalidOperandError, matmul, a, b, distributions=dists, epilog=f"d{act}_bgrad",
                   epilog_inputs={key: bad})
        assert f"epilog_inputs['{key}']" in str(e), str(e)
        assert RANK == P - 1 or f"process {P - 1} rejected" in str(e), str(e)
        e = expect(InvalidOperandError, matmul, a, b, distributions=dists, epilog=f"d{act}_bgrad",
                   epilog_inputs={key: aux.astype(dtype)})
        assert str(e).startswith(f"epilog_inputs['{key}'] dtype must be"), str(e)
        e = expect(UnsupportedMemorySpaceError, matmul, a, b, distributions=dists,
                   epilog=f"d{act}_bgrad", epilog_inputs={key: FakeDeviceArray()})
    relu = matmul(a, b, distributions=dists, epilog="relu_aux")[1]["relu_aux"]
    with Matmul(a, b, distributions=dists) as mm:  # a plan refused anywhere changes nothing
        mm.plan(epilog="bgradb")
        expect(InvalidOperandError, mm.plan, epilog="drelu_bgrad",
               epilog_inputs={"relu_aux": relu[:-1] if RANK == P - 1 else relu})
        _, aux = mm.execute()
        assert list(aux) == ["bgradb"]
    COMM.Barrier()


# ---- errors: raised on every process, before any exchange -----------------------------------
@check("errors")
def bad_inputs_raise_on_every_process():
    x = rand((8, 6, 4), np.complex128, 21)
    a = block(x, Slab.X)
    bad = a[:, :-1] if RANK == 1 else a
    if P > 1:
        e = expect(BindDistributionError, dist.fft.fft, bad, distribution=Slab.X)
        if RANK != 1:
            assert "process 1" in str(e), str(e)
    wrong = a.astype(np.complex64) if RANK == P - 1 else a
    if P > 1:
        expect(InvalidOperandError, dist.fft.fft, wrong, distribution=Slab.X)
    expect(InvalidOperandError, dist.fft.fft, a.real.copy(), distribution=Slab.X)
    expect(InvalidOperandError, dist.fft.rfft, a, distribution=Slab.X)
    expect(InvalidOptionError, dist.fft.fft, a, distribution=Slab.Z)
    expect(InvalidOptionError, dist.fft.fft, a, distribution="x")
    expect(InvalidOptionError, dist.fft.fft, a, distribution=Slab.X, options={"nope": 1})
    expect(InvalidOptionError, dist.fft.fft, a, distribution=Slab.X, direction="sideways")
    expect(InvalidOperandError, dist.fft.fft, a[..., None], distribution=Slab.X)
    bad_dir = Slab.Y if RANK == 0 else Slab.X
    if P > 1:
        expect(InvalidOptionError, redistribute, a, bad_dir, Slab.Y)
    with dist.fft.FFT(a, distribution=Slab.X) as f:
        expect(InvalidStateError, f.execute)
    m = rand((8, 8), np.float64, 22)
    expect(InvalidOperandError, matmul, block(m, Slab.X), block(m[:5], Slab.Y),
           distributions=[Slab.X, Slab.Y, Slab.X])
    expect(InvalidOptionError, matmul, block(m, Slab.X), block(m, Slab.Y),
           distributions=[Slab.X, Slab.Y])
    COMM.Barrier()


class FakeDeviceArray:
    """Stands for a GPU array (it exposes the CUDA array interface)."""

    __cuda_array_interface__ = {"shape": (2, 2), "typestr": "<c16", "data": (0, False),
                                "version": 3}
    shape = (2, 2)


@check("errors")
def gpu_operands_raise_typed_errors():
    e = expect(UnsupportedMemorySpaceError, dist.fft.fft, FakeDeviceArray(), distribution=Slab.X)
    assert "GPU operands" in str(e)
    expect(NotImplementedError, redistribute, FakeDeviceArray(), Slab.X, Slab.Y)
    expect(UnsupportedMemorySpaceError, matmul, FakeDeviceArray(), FakeDeviceArray(),
           distributions=[Slab.X, Slab.Y, Slab.X])
    expect(InvalidOptionError, dist.allocate_symmetric_memory, (2, 2), np, memory_space="cuda")
    if P > 1:  # one process's GPU operand fails on every process, before any exchange
        x = block(rand((8, 6), np.complex128, 23), Slab.X)
        e = expect(UnsupportedMemorySpaceError, dist.fft.fft,
                   FakeDeviceArray() if RANK == 0 else x, distribution=Slab.X)
        assert RANK == 0 or "process 0" in str(e), str(e)


@check("errors")
def initialize_twice_and_context():
    ctx = dist.get_context()
    assert ctx.nranks == P and ctx.rank == RANK and ctx.communicator is COMM
    expect(InvalidStateError, dist.initialize, None, COMM)


# ---- the GPU plane's exchange logic, on host memory ----------------------------------------
class DeviceStyleOps(NumpyAdapter):
    """NumPy operations under the GPU plane's rule (receive in place only into C-contiguous
    views), with the addresses NCCL would be handed."""

    @staticmethod
    def region(out, idx):
        v = NumpyAdapter.region(out, idx)
        return v if v is not None and v.flags.c_contiguous else None

    @staticmethod
    def pointer(x):
        return x.ctypes.data

    @staticmethod
    def nbytes(x):
        return x.nbytes


class MpiAsNccl:
    """Stands for the NCCL binding: queues raw-address sends/receives between group_start and
    group_end, then runs them as MPI point-to-point transfers."""

    def __init__(self):
        self.queue, self.groups = None, []

    def group_start(self):
        assert self.queue is None, "nested group"
        self.queue = []

    def send(self, ptr, nbytes, peer, comm, stream):
        self.queue.append((True, ptr, nbytes, peer))

    def recv(self, ptr, nbytes, peer, comm, stream):
        self.queue.append((False, ptr, nbytes, peer))

    def group_end(self, comm):
        reqs = []
        for is_send, ptr, nbytes, peer in self.queue:
            buf = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))
            reqs.append(COMM.Isend(buf, dest=peer, tag=18) if is_send else
                        COMM.Irecv(buf, source=peer, tag=18))
        MPI.Request.Waitall(reqs)
        self.groups.append([(s, n, peer) for s, _, n, peer in self.queue])
        self.queue = None


def package_stand_ins():
    """``[(adapter, to_package, to_numpy)]``: the GPU plane's adapters on host stand-ins (CPU
    torch tensors for CUDA ones; NumPy arrays posing as CuPy's, see _fake_cupy)."""
    out = [(packages.CUPY, _fake_cupy.to_cupy, np.asarray)]
    try:
        import torch
    except ImportError:
        return out
    ad = packages.TorchAdapter()
    ad.device_type = "cpu"
    return out + [(ad, lambda x: torch.from_numpy(np.array(x, order="K")), lambda y: y.numpy())]


@check("planner")
def gpu_style_exchange_matches_the_host_one():
    group = dist.get_context().process_group
    grid = grids()[0]
    cases = [((11, 7), Slab.X, Slab.Y), ((5, 9, 4), Slab.Y, Slab.Z), ((9, 6, 5), Slab.X, Slab.Y),
             ((10, 9), BlockCyclic(grid, (2, 3)), Slab.X), ((3, 2), Slab.X, Slab.Y),
             ((10, 9), Slab.Y, BlockCyclic(grid, (3, 2), first_process=(grid.shape[0] - 1, 0))),
             ((7, 9), "boxes", "boxes"), ((6, 5, 4), "boxes", Slab.X)]
    with _fake_cupy.installed():
        stand_ins = package_stand_ins()
        for seed, (shape, din, dout) in enumerate(cases):
            layouts = []
            for k, d in enumerate((din, dout)):
                if d == "boxes":
                    boxes = random_tiling(shape, 400 + 2 * seed + k)
                    layouts.append(Layout.of(boxes[0], shape, P, boxes=boxes))
                else:
                    layouts.append(Layout.of(d, shape, P))
            plan = ExchangePlan(layouts[0], layouts[1], RANK)
            for dtype in (np.complex64, np.float64, np.int16):
                x = (rand(shape, np.float64, 40 + seed) * 100).astype(dtype)
                local = block(x, layouts[0].sets[RANK])
                api = MpiAsNccl()
                transport = nccl_transport(SimpleNamespace(ptr=0xC0FFEE), 0, DeviceStyleOps(), api)
                for src in (local, np.asfortranarray(local)):  # strided input: packed on send
                    got = plan.execute(group, src, DeviceStyleOps(), transport)
                    want = HOST.exchange(group, plan, src)
                    assert np.array_equal(got, want) and got.dtype == dtype, (shape, din, dout)
                    assert np.array_equal(got, block(x, layouts[1].sets[RANK])), (shape, din)
                for ad, to_pkg, to_np in stand_ins:  # the GPU plane's adapters, on the host
                    got = plan.execute(group, to_pkg(np.asfortranarray(local)), ad,
                                       nccl_transport(SimpleNamespace(ptr=1), 0, ad, api))
                    assert np.array_equal(to_np(got), want), (ad.name, shape, din, dout)
                peers = plan.peers
                for moves in api.groups:  # one group per exchange, each peer's block once
                    assert sorted(p for s, n, p in moves if s) == sorted(
                        p for p in peers if plan.sends[p] is not None)
                    assert all(n > 0 for _, n, _ in moves)


def main(groups):
    expected = int(os.environ.get("CUWEAVE_TEST_NPROCS", P))
    if P != expected:  # an mpiexec of another MPI than mpi4py's starts P singletons
        print(f"FAIL: {P} processes in COMM_WORLD, {expected} expected (mpiexec and mpi4py "
              "must come from the same MPI)", flush=True)
        return 1
    gpu = any(g.startswith("gpu") for g in groups)
    if gpu:
        device = mpi_gpu_checks.start()  # this process's GPU: rank % device count
        backends = [b for b in os.environ.get("CUWEAVE_TEST_BACKENDS", "").split(",") if b]
        dist.initialize(device, COMM, backends=backends or None)
    else:
        dist.initialize(None, COMM)
    passed = failed = 0
    for group in groups:
        for fn in CHECKS[group]:
            try:
                fn()
                passed += 1
            except Exception:
                failed += 1
                print(f"FAIL [process {RANK}] {group}.{fn.__name__}:\n{traceback.format_exc()}",
                      flush=True)
    total_failed = COMM.allreduce(failed)
    if RANK == 0:
        print(f"{passed} passed, {total_failed} failed", flush=True)
    dist.finalize()
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or [g for g in CHECKS if not g.startswith("gpu")]))
