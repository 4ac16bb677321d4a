"""cuweave.device solvers (cuSOLVERDx inside numba kernels) side by side with batched cuSOLVER
through torch, and with nvmath-python's own device solvers running the same kernel.

Cases:

* 100,000 Cholesky factorizations and solves of 32x32 fp32 SPD systems (one right-hand side)
  in one kernel (examples/device/solver_cholesky_batched.py: each block loads its problems,
  ``factorize`` + ``solve`` in shared memory, writes x and info) against
  ``torch.linalg.cholesky_ex`` + ``torch.cholesky_solve``. Target: cuweave >= 2x torch, and
  >= 1.0x nvmath-python's ``nvmath.device.CholeskySolver`` in the same kernel. torch also
  writes the factor; a cuweave kernel that writes it too is reported beside.
* LU with partial pivoting and a solve of 64x64 fp64 systems (examples/device/solver_lu_pivot.py,
  writing x, pivots and info) against ``torch.linalg.lu_factor`` + ``torch.linalg.lu_solve``.
  Target: cuweave >= 1.5x torch. Again a kernel writing the factors too is reported.
* Compile time: a configuration new to the disk cache (``CholeskySolver`` 27x27 fp32: traits,
  both functions' LTO-IR, the fatbin) in a fresh process, and the same configuration in a
  second process (loaded from the cache). Targets: <= 5 s and < 1 s. The first launch of the
  example's kernel (numba's own compilation and the link) is reported beside.

Each kernel is tried over batches per block and block sizes; every variant is reported, and
the fastest (``cuweave``) is timed again round-robin with torch and nvmath
(``harness.gpu_times_interleaved``). nvmath-python runs in this process when its device API
imports and builds here (it pins libmathdx < 0.4; cuweave needs 0.4.2); otherwise the reason
is recorded. Metric: solves per second (systems factorized and solved per second).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from harness import gpu_times_interleaved, peer

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples", "device")
CHOL_N, CHOL_BATCH = 32, 100_000
LU_N, LU_BATCH = 64, 50_000
CHOL_VARIANTS = [(bpb, bd) for bpb in (1, 2, 4, 8) for bd in (None, (64,), (128,))]
LU_VARIANTS = [(1, bd) for bd in (None, (128,), (512,))]


def run(results, quick: bool) -> None:
    iters = 5 if quick else 20
    _cholesky(results, CHOL_BATCH // 5 if quick else CHOL_BATCH, iters)
    _lu(results, LU_BATCH // 5 if quick else LU_BATCH, iters)
    _compile_times(results)


def _example(name):
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    import importlib

    return importlib.import_module(name)


def _nvmath_class(name):
    """nvmath-python's device solver class, or the reason it cannot run here."""
    try:
        import nvmath.device as nd

        return getattr(nd, name), None
    except Exception as e:  # not installed, or its libmathdx/driver pins fail
        return None, f"{type(e).__name__}: {e}"


def _variants(build, variants, launch_args, solver_class=None, **kw):
    """Build every (batches_per_block, block_dim) variant; the working ones as
    ``{label: (solver, kernel launcher)}`` and the failures as ``{label: error}``."""
    made, failed = {}, {}
    for bpb, bd in variants:
        label = f"{bpb}/block, {'suggested' if bd is None else bd[0]} threads"
        try:
            extra = {} if solver_class is None else {"solver_class": solver_class}
            solver, kernel = build(batches_per_block=bpb, block_dim=bd, **extra, **kw)
            blocks = -(-launch_args["problems"] // solver.batches_per_block)
            args = launch_args["make"](blocks * solver.batches_per_block)
            launch = kernel[blocks, solver.block_dim]
            launch(*args)
            made[label] = (solver, (lambda launch=launch, args=args: launch(*args)), args)
        except Exception as e:
            failed[label] = f"{type(e).__name__}: {e}"
    return made, failed


def _check(name, ok: bool, results, case):
    if not ok:
        results.add(case=case, impl=f"{name} WRONG RESULT", metric="check", value=0, unit="")
    return ok


def _cholesky(results, batch, iters) -> None:
    from numba import cuda

    torch = peer("torch")
    ex = _example("solver_cholesky_batched")
    rng = np.random.default_rng(0)
    a = ex.spd_batch(batch, CHOL_N, np.float32, rng)
    b = rng.uniform(-1, 1, (batch, CHOL_N)).astype(np.float32)
    ref = np.linalg.solve(a[:256].astype(np.float64), b[:256, :, None].astype(np.float64))[..., 0]
    d_a, d_b = cuda.to_device(a.ravel()), cuda.to_device(b.ravel())
    d_x, d_l = cuda.device_array(batch * CHOL_N, np.float32), cuda.device_array_like(d_a)
    case = f"{batch} Cholesky solves {CHOL_N}x{CHOL_N} fp32"

    def launch_args(store):
        def make(padded):
            info = cuda.device_array(padded, np.int32)
            return (d_a, d_b, d_x, info, d_l if store else d_a[:1])
        return {"problems": batch, "make": make}

    def correct() -> bool:
        x = d_x.copy_to_host().reshape(batch, CHOL_N)[:256]
        return float(np.max(np.abs(x - ref)) / np.max(np.abs(ref))) < 1e-4

    impls = {}
    made, failed = _variants(ex.build, CHOL_VARIANTS, launch_args(False))
    for label, err in failed.items():
        print(f"  cuweave {label}: {err}")
    timed = gpu_times_interleaved({k: v[1] for k, v in made.items()}, iters=iters, rounds=3)
    for label, ms in timed.items():
        results.add(case=case, impl=f"cuweave {label}", metric="solves/s", value=batch / ms * 1e3,
                    unit="1/s", ms=ms)
    best = min(timed, key=timed.get)
    bpb, bd = CHOL_VARIANTS[[f"{p}/block, {'suggested' if d is None else d[0]} threads"
                             for p, d in CHOL_VARIANTS].index(best)]
    made[best][1]()
    if not _check("cuweave", correct(), results, case):
        return
    impls["cuweave"] = made[best][1]
    store, _ = _variants(ex.build, [(bpb, bd)], launch_args(True), store_factor=True)
    if store:
        impls["cuweave (writes the factor)"] = next(iter(store.values()))[1]
    cls, why = _nvmath_class("CholeskySolver")
    if cls is not None:  # the same launch, given (nvmath leaves potrf's and potrs's apart)
        same = (made[best][0].batches_per_block, tuple(made[best][0].block_dim))
        nv, failed = _variants(ex.build, [same], launch_args(False), solver_class=cls)
        if nv:
            d_x.copy_to_device(np.zeros(d_x.shape, d_x.dtype))
            next(iter(nv.values()))[1]()
            if _check("nvmath.device", correct(), results, case):
                impls["nvmath.device"] = next(iter(nv.values()))[1]
        else:
            why = next(iter(failed.values()))
    if why:
        print(f"  nvmath.device.CholeskySolver unavailable: {why}")
        results.add(case=case, impl="nvmath.device unavailable", metric="note", value=0,
                    unit="", reason=why[:300])
    if torch is not None:
        ta = torch.as_tensor(a, device="cuda")
        tb = torch.as_tensor(b, device="cuda")[..., None]

        def torch_solve():
            factor, _ = torch.linalg.cholesky_ex(ta)
            return torch.cholesky_solve(tb, factor)

        impls["torch"] = torch_solve
    times = gpu_times_interleaved(impls, iters=iters, rounds=7)
    for name, ms in times.items():
        results.add(case=case, impl=name, metric="solves/s", value=batch / ms * 1e3, unit="1/s",
                    ms=ms, **({"variant": best} if name.startswith("cuweave") else {}))
    results.add_ratio(case=case, metric="solves/s", num="cuweave", den="torch",
                      higher_is_better=True, target=2.0)
    results.add_ratio(case=case, metric="solves/s", num="cuweave", den="nvmath.device",
                      higher_is_better=True, target=1.0)


def _lu(results, batch, iters) -> None:
    from numba import cuda

    torch = peer("torch")
    ex = _example("solver_lu_pivot")
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (batch, LU_N, LU_N))
    b = rng.uniform(-1, 1, (batch, LU_N))
    ref = np.linalg.solve(a[:64], b[:64, :, None])[..., 0]
    d_a, d_b = cuda.to_device(a.ravel()), cuda.to_device(b.ravel())
    d_x = cuda.device_array(batch * LU_N, np.float64)
    d_p = cuda.device_array(batch * LU_N, np.int32)
    d_lu = cuda.device_array_like(d_a)
    case = f"{batch} LU (partial pivoting) solves {LU_N}x{LU_N} fp64"

    def launch_args(store):
        def make(padded):
            info = cuda.device_array(padded, np.int32)
            return (d_a, d_b, d_x, d_p, info, d_lu if store else d_a[:1])
        return {"problems": batch, "make": make}

    def correct() -> bool:
        x = d_x.copy_to_host().reshape(batch, LU_N)[:64]
        return float(np.max(np.abs(x - ref)) / np.max(np.abs(ref))) < 1e-9

    made, failed = _variants(ex.build, LU_VARIANTS, launch_args(False))
    for label, err in failed.items():
        print(f"  cuweave {label}: {err}")
    timed = gpu_times_interleaved({k: v[1] for k, v in made.items()}, iters=iters, rounds=3)
    for label, ms in timed.items():
        results.add(case=case, impl=f"cuweave {label}", metric="solves/s", value=batch / ms * 1e3,
                    unit="1/s", ms=ms)
    best = min(timed, key=timed.get)
    bd = LU_VARIANTS[[f"1/block, {'suggested' if d is None else d[0]} threads"
                      for _, d in LU_VARIANTS].index(best)][1]
    made[best][1]()
    if not _check("cuweave", correct(), results, case):
        return
    impls = {"cuweave": made[best][1]}
    store, _ = _variants(ex.build, [(1, bd)], launch_args(True), store_factors=True)
    if store:
        impls["cuweave (writes the factors)"] = next(iter(store.values()))[1]
    cls, why = _nvmath_class("LUPivotSolver")
    if cls is not None:
        same = (1, tuple(made[best][0].block_dim))
        nv, failed = _variants(ex.build, [same], launch_args(False), solver_class=cls)
        if nv:
            d_x.copy_to_device(np.zeros(d_x.shape, d_x.dtype))
            next(iter(nv.values()))[1]()
            if _check("nvmath.device", correct(), results, case):
                impls["nvmath.device"] = next(iter(nv.values()))[1]
        else:
            why = next(iter(failed.values()))
    if why:
        results.add(case=case, impl="nvmath.device unavailable", metric="note", value=0,
                    unit="", reason=why[:300])
    if torch is not None:
        ta = torch.as_tensor(a, device="cuda")
        tb = torch.as_tensor(b, device="cuda")[..., None]

        def torch_solve():
            lu, piv = torch.linalg.lu_factor(ta)
            return torch.linalg.lu_solve(lu, piv, tb)

        impls["torch"] = torch_solve
    times = gpu_times_interleaved(impls, iters=iters, rounds=7)
    for name, ms in times.items():
        results.add(case=case, impl=name, metric="solves/s", value=batch / ms * 1e3, unit="1/s",
                    ms=ms, **({"variant": best} if name.startswith("cuweave") else {}))
    results.add_ratio(case=case, metric="solves/s", num="cuweave", den="torch",
                      higher_is_better=True, target=1.5)
    results.add_ratio(case=case, metric="solves/s", num="cuweave", den="nvmath.device",
                      higher_is_better=True, target=1.0)


_COMPILE = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import cuweave.device as dx
t1 = time.perf_counter()
dx.warm_cache([dict(solver="CholeskySolver", size=(27, 27, 1), precision=np.float32,
                    execution="Block", fill_mode="lower", batches_per_block=3)], max_workers=1)
t2 = time.perf_counter()
sys.path.insert(0, EXAMPLES_DIR)
import solver_cholesky_batched as ex
from numba import cuda
solver, kernel = ex.build(27, batches_per_block=3)
a = cuda.to_device(ex.spd_batch(300, 27, np.float32, np.random.default_rng(0)).ravel())
b, x = cuda.to_device(np.ones(300 * 27, np.float32)), cuda.device_array(300 * 27, np.float32)
kernel[100, solver.block_dim](a, b, x, cuda.device_array(300, np.int32), a[:1])
cuda.synchronize()
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "ready_s": t2 - t1, "kernel_s": t3 - t2,
                  "total_s": t3 - t0}))
""".replace("EXAMPLES_DIR", repr(EXAMPLES))


def _compile_times(results) -> None:
    case = "CholeskySolver 27x27 fp32, 3/block"
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "CUWEAVE_CACHE_DIR": cache}
        for impl, target in (("new configuration", 5.0), ("second process (cached)", 1.0)):
            out = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True,
                                 text=True, env=env, timeout=300)
            if out.returncode != 0:
                print(out.stderr[-2000:])
                continue
            t = json.loads(out.stdout.strip().splitlines()[-1])
            results.add(case=case, impl=f"cuweave {impl}", metric="seconds",
                        value=t["ready_s"], unit="s", target_max=target,
                        import_s=t["import_s"], total_s=t["total_s"])
            # the user's kernel (numba's compilation, the link, one launch), for the record
            results.add(case=case, impl=f"numba kernel, {impl}", metric="seconds",
                        value=t["kernel_s"], unit="s")
