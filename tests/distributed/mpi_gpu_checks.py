"""The GPU groups of ``mpi_worker.py`` (``gpu_fft``, ``gpu_redistribute``, ``gpu_matmul``,
``gpu_errors``): the host checks' cases on CUDA torch tensors and CuPy arrays.

Each process uses GPU ``rank % device count`` (:func:`start`); every check builds the global
data on the host from one seed, hands this process its block on its GPU, runs the distributed
call and compares the result (which must be an array of the same package on the same device)
with the same block of a single-process NumPy computation on the gathered data. Importing this
module needs neither torch nor CuPy: they are imported by :func:`start`.
"""

from __future__ import annotations

import numpy as np
from _mpi_common import (
    BGRAD_SHAPES,
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

import cuweave.distributed as dist
from cuweave import InvalidOperandError
from cuweave.distributed import UnsupportedMemorySpaceError
from cuweave.distributed.distribution import (
    BlockCyclic,
    BlockNonCyclic,
    Redistribute,
    Slab,
    redistribute,
)
from cuweave.distributed.linalg.advanced import Matmul, matmul, matrix_qualifiers_dtype

STATE = {"device": None, "count": 0, "packages": []}
SHAPES = [(13,), (16,), (8, 12), (9, 7), (3, 5, 4), (6, 5, 4), (9, 8, 7)]


def start() -> int:
    """Find the GPU packages and this process's device (``rank % device count``)."""
    packages, count = [], 0
    try:
        import torch

        if torch.cuda.is_available():
            packages.append("torch")
            count = torch.cuda.device_count()
    except ImportError:
        pass
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        if n:
            packages.append("cupy")
            count = count or n
    except Exception:  # not installed, or no driver
        pass
    if not packages:
        raise RuntimeError("the gpu_* groups need torch with CUDA or CuPy, and a GPU")
    STATE.update(device=RANK % count, count=count, packages=packages)
    return RANK % count


def packages():
    return STATE["packages"]


def to_gpu(x, pkg, device=None):
    device = STATE["device"] if device is None else device
    if pkg == "torch":
        import torch

        return torch.from_numpy(np.ascontiguousarray(x)).to(f"cuda:{device}")
    import cupy

    with cupy.cuda.Device(device):
        return cupy.asarray(x)


def to_host(y, pkg):
    """The result on the host, after checking its package and device."""
    if pkg == "torch":
        import torch

        assert isinstance(y, torch.Tensor), type(y)
        assert y.device == torch.device("cuda", STATE["device"]), y.device
        return (y.float() if y.dtype == torch.bfloat16 else y).cpu().numpy()
    import cupy

    assert isinstance(y, cupy.ndarray), type(y)
    assert y.device.id == STATE["device"], y.device
    return cupy.asnumpy(y)


def dtype_of(y, pkg):
    return np.dtype(str(y.dtype).rsplit(".", 1)[-1]) if pkg == "torch" else y.dtype


# ---- FFT -----------------------------------------------------------------------------------
@check("gpu_fft")
def gpu_c2c_every_slab_dtype_and_dimension():
    for pkg in packages():
        for shape in SHAPES:
            for dtype in (np.complex64, np.complex128):
                x = rand(shape, dtype, 1)
                fwd, inv = np.fft.fftn(x), np.fft.ifftn(x) * x.size
                for d in ((Slab.X,) if len(shape) == 1 else (Slab.X, Slab.Y)):
                    for red in (True, False):
                        out = d if red or len(shape) == 1 else Slab(1 - d.partition_dim)
                        a = to_gpu(block(x, d), pkg)
                        opts = {"redistribute": red}
                        y = dist.fft.fft(a, distribution=d, options=opts)
                        assert dtype_of(y, pkg) == dtype
                        close(to_host(y, pkg), block(fwd, out), dtype, f"{pkg} fft {shape} {d}")
                        z = dist.fft.ifft(a, distribution=d, options=opts)
                        close(to_host(z, pkg), block(inv, out), dtype, f"{pkg} ifft {shape} {d}")


@check("gpu_fft")
def gpu_r2c_c2r_every_slab_dtype_and_dimension():
    for pkg in packages():
        for shape in SHAPES:
            for dtype, cdtype in ((np.float32, np.complex64), (np.float64, np.complex128)):
                x = rand(shape, dtype, 3)
                parity = "odd" if shape[-1] % 2 else "even"
                ref = np.fft.rfftn(x)
                for d in ((Slab.X,) if len(shape) == 1 else (Slab.X, Slab.Y)):
                    y = dist.fft.rfft(to_gpu(block(x, d), pkg), distribution=d)
                    close(to_host(y, pkg), block(ref, d), cdtype, f"{pkg} rfft {shape} {d}")
                    z = dist.fft.irfft(y, distribution=d, options={"last_axis_parity": parity})
                    assert dtype_of(z, pkg) == dtype
                    close(to_host(z, pkg), block(x * x.size, d), dtype, f"{pkg} irfft {shape}")
        x = rand((10, 9, 6), np.float64, 4)
        y = dist.fft.rfft(to_gpu(block(x, Slab.X), pkg), distribution=Slab.X,
                          options={"redistribute": False})
        close(to_host(y, pkg), block(np.fft.rfftn(x), Slab.Y), np.complex128, "rfft to Slab.Y")
        z = dist.fft.irfft(y, distribution=Slab.Y, options={"redistribute": False})
        close(to_host(z, pkg), block(x * x.size, Slab.X), np.float64, "irfft back to Slab.X")


@check("gpu_fft")
def gpu_random_box_tilings_in_and_out():
    for pkg in packages():
        for seed, shape in enumerate([(11,), (7, 9), (6, 5, 4), (8, 3, 5), (12, 10)]):
            for dtype in (np.complex64, np.float64, np.complex128, np.float32):
                x = rand(shape, dtype, 30 + seed)
                ins = random_tiling(shape, 100 + seed)
                real = np.dtype(dtype).kind == "f"
                fwd = np.fft.rfftn(x) if real else np.fft.fftn(x)
                outs = random_tiling(fwd.shape, 200 + seed)
                a = to_gpu(block(x, ins[RANK]._index_sets(RANK, P, shape)), pkg)
                fn = dist.fft.rfft if real else dist.fft.fft
                y = fn(a, distribution=[ins[RANK], outs[RANK]])
                want = block(fwd, outs[RANK]._index_sets(RANK, P, fwd.shape))
                close(to_host(y, pkg), want, dtype, f"{pkg} boxes {shape} {dtype.__name__}")


@check("gpu_fft")
def gpu_stateful_fft_and_symmetric_memory():
    for pkg in packages():
        module = __import__(pkg)
        x = rand((12, 10, 6), np.complex128, 7)
        shape = Slab.X.shape(RANK, x.shape)
        a = dist.allocate_symmetric_memory(shape, module, dtype=module.complex128)
        a[...] = to_gpu(block(x, Slab.X), pkg)
        with dist.fft.FFT(a, distribution=Slab.X, options={"redistribute": False}) as f:
            f.plan()
            y = f.execute()
            close(to_host(y, pkg), block(np.fft.fftn(x), Slab.Y), np.complex128, "stateful")
            f.reset_operand(y, distribution=Slab.Y)
            z = f.execute(direction=dist.fft.FFTDirection.INVERSE)
            close(to_host(z, pkg), block(x * x.size, Slab.X), np.complex128, "stateful inv")
            x2 = rand((12, 10, 6), np.complex128, 8)
            f.reset_operand(to_gpu(block(x2, Slab.X), pkg), distribution=Slab.X)
            close(to_host(f.execute(), pkg), block(np.fft.fftn(x2), Slab.Y), np.complex128,
                  "stateful reset")
        dist.free_symmetric_memory(a)
        assert (dist.get_context().nccl_comm is not None) == (P > 1)


# ---- redistribute / reshape ----------------------------------------------------------------
@check("gpu_redistribute")
def gpu_redistribute_between_distributions():
    grid = grids()[0]
    cases = [((11, 7), Slab.X, Slab.Y), ((5, 9, 4), Slab.Y, Slab.Z), ((10,), Slab.X, Slab.X),
             ((10, 9), BlockCyclic(grid, (2, 3)), Slab.X),
             ((10, 9), Slab.Y, BlockCyclic(grid, (3, 2), first_process=(grid.shape[0] - 1, 0))),
             ((8, 6), Slab.X, BlockNonCyclic(grid))]
    for pkg in packages():
        for shape, din, dout in cases:
            for dtype in (np.float32, np.complex128, np.int16):
                x = (rand(shape, np.float64, 10) * 100).astype(dtype)
                y = redistribute(to_gpu(block(x, din), pkg), din, dout)
                assert np.array_equal(to_host(y, pkg), block(x, dout)), (pkg, shape, din, dout)
        for seed, shape in enumerate([(7, 9), (6, 5, 4)]):
            x = rand(shape, np.float64, 50 + seed)
            ins, outs = random_tiling(shape, 500 + seed), random_tiling(shape, 600 + seed)
            a = to_gpu(block(x, ins[RANK]._index_sets(RANK, P, shape)), pkg)
            y = dist.reshape.reshape(a, [ins[RANK].lower, ins[RANK].upper],
                                     [outs[RANK].lower, outs[RANK].upper])
            assert np.array_equal(to_host(y, pkg), block(x, outs[RANK]._index_sets(RANK, P, shape)))
            with Redistribute(a, ins[RANK], Slab.X) as r:
                r.plan()
                assert np.array_equal(to_host(r.execute(), pkg), block(x, Slab.X))
                r.reset_operand(a * 2)
                assert np.array_equal(to_host(r.execute(), pkg), block(2 * x, Slab.X))


# ---- matmul --------------------------------------------------------------------------------
def f_ordered(y, pkg) -> bool:
    return y.mT.is_contiguous() if pkg == "torch" else y.flags.f_contiguous


@check("gpu_matmul")
def gpu_matmul_every_distribution_and_dtype():
    m, n, k = 10, 7, 9
    for pkg in packages():
        for dtype in (np.float32, np.float64, np.complex64, np.complex128):
            a, b, c = rand((m, k), dtype, 12), rand((k, n), dtype, 13), rand((m, n), dtype, 14)
            cases = [(Slab.X, Slab.Y, Slab.X), (Slab.Y, Slab.X, Slab.Y)]
            for g in grids():
                bc = BlockCyclic(g, (2, 3))
                cases += [(bc, bc, bc), (Slab.Y, bc, BlockNonCyclic(g))]
            for da, db, dc in cases:
                ga, gb = to_gpu(block(a, da), pkg), to_gpu(block(b, db), pkg)
                d = matmul(ga, gb, to_gpu(block(c, dc), pkg), distributions=[da, db, dc],
                           alpha=2.0, beta=0.5)
                close(to_host(d, pkg), block(2 * a @ b + 0.5 * c, dc), dtype,
                      f"{pkg} matmul {da} {db} {dc}")
                d = matmul(ga, gb, distributions=[da, db, dc])
                close(to_host(d, pkg), block(a @ b, dc), dtype, f"{pkg} matmul without c")
                assert f_ordered(d, pkg), "results are Fortran-ordered, as on CPU ranks"


@check("gpu_matmul")
def gpu_matmul_bfloat16_torch():
    if "torch" not in packages():
        return
    import torch

    m, n, k = 24, 16, 64
    a, b = rand((m, k), np.float32, 24), rand((k, n), np.float32, 25)
    ab = torch.from_numpy(a).to(torch.bfloat16).float().numpy()  # the values bf16 holds
    bb = torch.from_numpy(b).to(torch.bfloat16).float().numpy()
    da = to_gpu(block(a, Slab.X), "torch").to(torch.bfloat16)
    db = to_gpu(block(b, Slab.Y), "torch").to(torch.bfloat16)
    d = matmul(da, db, distributions=[Slab.X, Slab.Y, Slab.X])
    assert d.dtype == torch.bfloat16
    got, want = to_host(d, "torch"), block(ab @ bb, Slab.X)
    assert np.abs(got - want).max() <= 2e-2 * max(1.0, np.abs(want).max()), "bf16 matmul"


@check("gpu_matmul")
def gpu_matmul_qualifiers_inplace_stateful_and_epilogs():
    for pkg in packages():
        m, n, k = 8, 12, 6
        a, b = rand((k, m), np.complex128, 15), rand((n, k), np.complex128, 16)
        q = np.zeros(3, dtype=matrix_qualifiers_dtype)
        q[0]["is_transpose"] = q[1]["is_transpose"] = 1
        q[0]["is_conjugate"] = 1
        d = matmul(to_gpu(block(a, Slab.Y), pkg), to_gpu(block(b, Slab.X), pkg),
                   distributions=[Slab.Y, Slab.X, Slab.X], qualifiers=q)
        close(to_host(d, pkg), block(a.conj().T @ b.T, Slab.X), np.complex128, "conj transpose")
        c0 = block(rand((m, n), np.complex128, 17), Slab.X)
        c = to_gpu(c0, pkg)
        ax, bx = to_gpu(block(a.T.copy(), Slab.X), pkg), to_gpu(block(b.T.copy(), Slab.Y), pkg)
        r = matmul(ax, bx, c, beta=1.0, distributions=[Slab.X, Slab.Y, Slab.X])
        assert r is c
        close(to_host(c, pkg), block(a.T @ b.T, Slab.X) + c0, np.complex128, "in-place c")
        with Matmul(ax, bx, distributions=[Slab.X, Slab.Y, Slab.X]) as mm:
            mm.plan()
            close(to_host(mm.execute(), pkg), block(a.T @ b.T, Slab.X), np.complex128, "stateful")
            mm.reset_operands(a=ax * 2)
            close(to_host(mm.execute(), pkg), block(2 * a.T @ b.T, Slab.X), np.complex128,
                  "reset_operands")
        m, n, k = 12, 8, 5
        a, b = rand((m, k), np.float32, 18), rand((k, n), np.float32, 19)
        bias = rand((m, 1), np.float32, 20)
        d = matmul(to_gpu(block(a, Slab.X), pkg), to_gpu(block(b, Slab.Y), pkg),
                   distributions=[Slab.X, Slab.Y, Slab.X], epilog="relu_bias",
                   epilog_inputs={"bias": to_gpu(block(bias, Slab.X), pkg)})
        close(to_host(d, pkg), block(np.maximum(a @ b + bias, 0), Slab.X), np.float32,
              "relu_bias")


# ---- matmul: bias gradients, summed over the processes with NCCL -----------------------------
#: GPU vs the CPU engine: cuBLASLt's GELU uses a fast tanh (float64 relative error ~1e-10)
GPU_TOL = {np.float16: 2e-2, np.float32: 1e-3, np.float64: 1e-8}


def near(got, want, dtype, what):
    """``close`` with the GPU-vs-CPU tolerance of ``dtype``."""
    tol = GPU_TOL[np.dtype(dtype).type]
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    err = float(np.abs(got.astype(np.float64) - want).max()) / scale if want.size else 0.0
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol}"


def gradient(aux, name, pkg, dtype, what):
    """The bias gradient ``name`` on the host, after checking it is the only aux output, an
    array of ``pkg`` on this process's GPU, of the operands' dtype."""
    assert list(aux) == [name], f"{what}: aux keys {list(aux)}"
    assert dtype_of(aux[name], pkg) == dtype, f"{what}: {aux[name].dtype}"
    return to_host(aux[name], pkg)


@check("gpu_matmul")
def gpu_matmul_bgrada_bgradb_every_distribution():
    for pkg in packages():
        for seed, (m, n, k) in enumerate(BGRAD_SHAPES):
            for dtype in (np.float32, np.float64, np.float16):
                a, b = rand((m, k), dtype, 60 + seed), rand((k, n), dtype, 70 + seed)
                for epilog in ("bgrada", "bgradb"):
                    want_d, want = one_process(a, b, epilog)
                    for da, db, dc in bgrad_cases():
                        what = f"{pkg} {epilog} {dtype.__name__} {(m, n, k)} {da} {db} {dc}"
                        d, aux = matmul(to_gpu(block(a, da), pkg), to_gpu(block(b, db), pkg),
                                        distributions=[da, db, dc], epilog=epilog)
                        near(to_host(d, pkg), block(want_d, dc), dtype, what)
                        near(gradient(aux, epilog, pkg, dtype, what),
                             bgrad_share(want[epilog], epilog, dc, (m, n)), dtype, what)


@check("gpu_matmul")
def gpu_matmul_drelu_dgelu_bgrad_after_the_forward_pass():
    for pkg in packages():
        for seed, (m, n, k) in enumerate(BGRAD_SHAPES[:2]):
            for dtype in (np.float32, np.float64):
                a, b = rand((m, k), dtype, 80 + seed), rand((k, n), dtype, 81 + seed)
                g, h = rand((m, k), dtype, 82 + seed), rand((k, n), dtype, 83 + seed)
                c = rand((m, n), dtype, 84 + seed)
                for act in ("relu", "gelu"):
                    key, name = f"{act}_aux", f"d{act}_bgrad"
                    fwd = one_process(a, b, key)[1][key]
                    want_d, want = one_process(g, h, name, c=c, beta=0.5,
                                               epilog_inputs={key: fwd})
                    for da, db, dc in bgrad_cases():
                        what = f"{pkg} {name} {dtype.__name__} {(m, n, k)} {da} {db} {dc}"
                        dists = [da, db, dc]
                        _, local = matmul(to_gpu(block(a, da), pkg), to_gpu(block(b, db), pkg),
                                          distributions=dists, epilog=key)
                        d, aux = matmul(to_gpu(block(g, da), pkg), to_gpu(block(h, db), pkg),
                                        to_gpu(block(c, dc), pkg), beta=0.5, distributions=dists,
                                        epilog=name, epilog_inputs={key: local[key]})
                        near(to_host(d, pkg), block(want_d, dc), dtype, what)
                        near(gradient(aux, name, pkg, dtype, what),
                             bgrad_share(want[name], name, dc, (m, n)), dtype, what)


@check("gpu_matmul")
def gpu_matmul_bgrad_bfloat16_torch_stateful_and_errors():
    if "torch" in packages():
        import torch

        m, n, k = 24, 16, 64
        a, b = rand((m, k), np.float32, 24), rand((k, n), np.float32, 25)
        ab = torch.from_numpy(a).to(torch.bfloat16).float().numpy()  # the values bf16 holds
        bb = torch.from_numpy(b).to(torch.bfloat16).float().numpy()
        da = to_gpu(block(a, Slab.X), "torch").to(torch.bfloat16)
        db = to_gpu(block(b, Slab.Y), "torch").to(torch.bfloat16)
        with Matmul(da, db, distributions=[Slab.X, Slab.Y, Slab.X]) as mm:
            mm.plan(epilog="bgradb")
            for scale in (1.0, 2.0):
                if scale != 1.0:
                    mm.reset_operands(b=db * 2)
                _, aux = mm.execute()
                assert aux["bgradb"].dtype == torch.bfloat16
                got, want = to_host(aux["bgradb"], "torch"), scale * bb.sum(0)
                assert np.abs(got - want).max() <= 2e-2 * max(1.0, np.abs(want).max()), "bf16"
        _, aux = matmul(da, db, distributions=[Slab.X, Slab.Y, Slab.X], epilog="bgrada")
        got, want = to_host(aux["bgrada"], "torch"), block(ab.sum(1), (Slab.X._index_sets(
            RANK, P, (m, n))[0],))
        assert np.abs(got - want).max() <= 2e-2 * max(1.0, np.abs(want).max()), "bf16 bgrada"
    for pkg in packages():  # typed errors on every process, before any work
        x = rand((8, 1), np.float32, 26)
        y = rand((1, 6), np.float32, 27)
        dists = [Slab.X, Slab.Y, Slab.X]
        gx, gy = to_gpu(block(x, Slab.X), pkg), to_gpu(block(y, Slab.Y), pkg)
        e = expect(InvalidOperandError, matmul, gx, gy, distributions=dists,
                   epilog="drelu_bgrad", epilog_inputs={"relu_aux": gx})
        assert str(e).startswith("k must be >= 2 for epilog DRELU_BGRAD"), str(e)
        z = rand((8, 8), np.complex64, 28)
        e = expect(InvalidOperandError, matmul, to_gpu(block(z, Slab.X), pkg),
                   to_gpu(block(z, Slab.Y), pkg), distributions=dists, epilog="bgrada")
        assert str(e).startswith("dtype must be real for epilog BGRADA"), str(e)


# ---- errors --------------------------------------------------------------------------------
@check("gpu_errors")
def gpu_bad_operands_raise_on_every_process():
    x = rand((8, 6, 4), np.complex64, 21)
    for pkg in packages():
        a = to_gpu(block(x, Slab.X), pkg)
        if STATE["count"] > 1:  # an operand on another device than initialize's
            other = to_gpu(block(x, Slab.X), pkg, device=(STATE["device"] + 1) % STATE["count"])
            e = expect(InvalidOperandError, dist.fft.fft, other if RANK == 0 else a,
                       distribution=Slab.X)
            assert "device" in str(e), str(e)
        if P > 1:
            host = block(x, Slab.X)
            if pkg == "torch":
                import torch

                host = torch.from_numpy(host)
            e = expect(InvalidOperandError, dist.fft.fft, host if RANK == 0 else a,
                       distribution=Slab.X)
            assert "memory space" in str(e) or "package" in str(e), str(e)
        m = rand((8, 8), np.float32, 22)
        expect(InvalidOperandError, matmul, to_gpu(block(m, Slab.X), pkg), block(m, Slab.Y),
               distributions=[Slab.X, Slab.Y, Slab.X])
    if len(packages()) == 2:
        m = rand((8, 8), np.float32, 22)
        expect(InvalidOperandError, matmul, to_gpu(block(m, Slab.X), "torch"),
               to_gpu(block(m, Slab.Y), "cupy"), distributions=[Slab.X, Slab.Y, Slab.X])

    class Foreign:  # a GPU array of no supported package
        __cuda_array_interface__ = {"shape": (2, 2), "typestr": "<c8", "data": (0, False),
                                    "version": 3}
        shape = (2, 2)

    expect(UnsupportedMemorySpaceError, dist.fft.fft, Foreign(), distribution=Slab.X)
    ctx = dist.get_context()
    assert ctx.device_id == STATE["device"]
