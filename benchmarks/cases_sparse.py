"""The sparse direct solver on the GPU (cuDSS) vs SciPy's spsolve, CuPy's spsolve, and
cuweave's CPU path, on Poisson systems (one run, side by side).

Cases: 2-D Poisson with 1M and 4M unknowns, 3-D Poisson with 1M (--quick: 2-D 250k, 3-D 64k;
SPARSE_CASES="2:1000,3:100" picks others). cuweave's operands are CuPy arrays on the GPU
(cupyx CSR, declared SPD), timed by the wall clock around synchronized phases: specify (the
checks of a and b, cuDSS's objects), plan (reordering + symbolic factorization), factorize,
solve; their sum is the first solve, compared with the peers (and factorize + solve alone,
the plan being reused by refactorizations). The re-solve: ``reset_operands(b=...)`` +
``solve``, median of 10. Peak device memory: cuDSS's own estimate
(``plan_info.memory_estimates``) and the measured drop of free device memory (sampled every
millisecond during the first solve). The peers run in child processes under a time cap
(SPARSE_PEER_CAP_S, default 45 s): SciPy's SuperLU and CuPy's QR-based spsolve need far
longer on the larger systems; those rows are lower bounds. nvmath-python 1.0 is tried
in-process (it needs cuDSS 0.8; with 1.0 it refuses). cuDSS's host phases (reordering) use
several threads only with its threading layer (CUDSS_THREADING_LIB=.../
libcudss_mtlayer_gomp.so.1; recorded in the results' meta).
"""

from __future__ import annotations

import os
import statistics
import threading
import time

from harness import peer
from sparse_common import add_child_result, case_name, poisson, timed_child

CAP_S = float(os.environ.get("SPARSE_PEER_CAP_S", "45"))


def _cases(quick: bool) -> list:
    """``SPARSE_CASES="2:1000,3:100"`` (dimensions:grid points per side) picks the cases."""
    chosen = os.environ.get("SPARSE_CASES", "").strip()
    if chosen:
        return [tuple(int(v) for v in c.split(":")) for c in chosen.split(",") if c.strip()]
    return [(2, 500), (3, 40)] if quick else [(2, 1000), (2, 2000), (3, 100)]


class _PeakSampler:
    """The lowest free device memory seen while a block runs (cudaMemGetInfo, every 1 ms)."""

    def __init__(self, cp):
        self.cp, self.low, self._stop = cp, None, threading.Event()

    def __enter__(self):
        self.start_free = self.cp.cuda.runtime.memGetInfo()[0]
        self.low = self.start_free
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.low = min(self.low, self.cp.cuda.runtime.memGetInfo()[0])
            time.sleep(0.001)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.low = min(self.low, self.cp.cuda.runtime.memGetInfo()[0])

    @property
    def peak_bytes(self) -> int:
        return self.start_free - self.low


def _cuweave_gpu(cp, csp, a, b, results, case):
    from cuweave.sparse.advanced import DirectSolver

    ad = csp.csr_matrix(a)
    bd = cp.asarray(b)
    sync = cp.cuda.Device().synchronize
    opts = {"sparse_system_type": "SPD"}
    phases = {"specify": [], "plan": [], "factorize": [], "solve": []}
    resolve = []
    peak = est = 0
    for attempt in range(2):  # the second run is the one without first-use costs
        mempool = cp.get_default_memory_pool()
        mempool.free_all_blocks()
        with _PeakSampler(cp) as sampler:
            t = time.perf_counter()  # the checks of a and b, cuDSS's objects
            s = DirectSolver(ad, bd, options=opts)
            sync()
            phases["specify"].append(time.perf_counter() - t)
            for name, fn in (("plan", s.plan), ("factorize", s.factorize),
                             ("solve", s.solve)):
                t = time.perf_counter()
                x = fn()
                sync()
                phases[name].append(time.perf_counter() - t)
        peak = max(peak, sampler.peak_bytes)
        est = int(s.plan_info.memory_estimates.peak_device_memory)
        res = float(cp.linalg.norm(csp.csr_matrix(a) @ x - bd) / cp.linalg.norm(bd))
        b2 = cp.asarray(b[::-1].copy())
        for _ in range(10 if attempt else 2):
            t = time.perf_counter()
            s.reset_operands(b=b2)
            s.solve()
            sync()
            resolve.append(time.perf_counter() - t)
        s.free()
    spec, plan, fact, solve = (phases[k][-1] * 1e3
                               for k in ("specify", "plan", "factorize", "solve"))
    label = "cuweave gpu (cuDSS)"
    for metric, value in (("specify", spec), ("plan", plan), ("factorize", fact),
                          ("solve", solve), ("factorize+solve", fact + solve)):
        results.add(case=case, impl=label, metric=metric, value=value, unit="ms")
    results.add(case=case, impl=label, metric="time", value=spec + plan + fact + solve,
                unit="ms", residual=res)
    results.add(case=case, impl=label, metric="re-solve",
                value=statistics.median(resolve[2:]) * 1e3, unit="ms")
    results.add(case=case, impl=label, metric="peak device memory (measured)",
                value=peak / 2**20, unit="MiB")
    results.add(case=case, impl=label, metric="peak device memory (cuDSS estimate)",
                value=est / 2**20, unit="MiB")
    first = spec + plan + fact + solve
    results.add(case=case, impl=f"{label} first solve vs re-solve", metric="speedup",
                value=first / (statistics.median(resolve[2:]) * 1e3), unit="x", target=50.0)


def _nvmath(a, b, cp, csp, results, case):
    nvmath = peer("nvmath")
    if nvmath is None:
        print("   nvmath-python is not installed")
        return
    try:
        ad, bd = csp.csr_matrix(a), cp.asarray(b)
        t = time.perf_counter()
        spd = nvmath.sparse.advanced.DirectSolverMatrixType.SPD
        nvmath.sparse.advanced.direct_solver(ad, bd, options={"sparse_system_type": spd})
        cp.cuda.Device().synchronize()
        results.add(case=case, impl="nvmath-python", metric="time",
                    value=(time.perf_counter() - t) * 1e3, unit="ms")
    except Exception as e:  # cuDSS version mismatch and friends
        print(f"   nvmath-python failed: {type(e).__name__}: {str(e)[:160]}")


def _factorize_solve_ratio(results, case: str, den: str, target) -> None:
    """The peer's whole solve vs cuweave's factorize + solve (the plan - reordering and
    symbolic factorization, reused by every refactorization - left out)."""
    rows = {(r["impl"], r["metric"]): r["value"] for r in results.rows if r["case"] == case}
    ours = rows.get(("cuweave gpu (cuDSS)", "factorize+solve"))
    theirs = rows.get((den, "time"))
    if ours and theirs:
        results.add(case=case, impl=f"cuweave gpu factorize+solve vs {den}", metric="speedup",
                    value=theirs / ours, unit="x", target=target)


def run(results, quick: bool) -> None:
    cp = peer("cupy")
    if cp is None:
        print("   CuPy is needed for the GPU sparse benchmark")
        return
    import cupyx.scipy.sparse as csp

    results.meta["cudss_threading_lib"] = os.environ.get("CUDSS_THREADING_LIB")
    warm_a, warm_b = poisson(2, 32)  # cuDSS's first use (handle, kernels) outside the timings
    from cuweave.sparse.advanced import direct_solver

    direct_solver(csp.csr_matrix(warm_a), cp.asarray(warm_b))
    for dims, m in _cases(quick):
        case = case_name(dims, m)
        a, b = poisson(dims, m)
        _cuweave_gpu(cp, csp, a, b, results, case)
        _nvmath(a, b, cp, csp, results, case)
        del a, b
        cp.get_default_memory_pool().free_all_blocks()
        add_child_result(results, case, "scipy spsolve", timed_child("scipy", dims, m, CAP_S))
        add_child_result(results, case, "cupyx spsolve", timed_child("cupyx", dims, m, CAP_S))
        add_child_result(results, case, "cuweave cpu (SPD)",
                         timed_child("cuweave-cpu:auto:SPD", dims, m, CAP_S))
        for den, target in (("scipy spsolve", 10.0), ("cupyx spsolve", 3.0),
                            ("nvmath-python", None)):
            results.add_ratio(case=case, metric="time", num="cuweave gpu (cuDSS)", den=den,
                              higher_is_better=False, target=target)
            _factorize_solve_ratio(results, case, den, target)
        results.add_ratio(case=case, metric="time", num="cuweave cpu (SPD)",
                          den="scipy spsolve", higher_is_better=False, target=3.0)
