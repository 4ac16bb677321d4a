"""Shared by the sparse benchmarks (cases_sparse.py on the GPU, cases_sparse_cpu.py): the
Poisson systems, and peers timed in a child process under a time cap (SciPy's SuperLU needs
hours and tens of GB on a 3-D Poisson problem of a million unknowns: a peer that runs out of
time is reported as a lower bound, "> cap")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def poisson(dims: int, m: int):
    """The ``dims``-D Poisson matrix (5- or 7-point Laplacian) on m^dims points, sorted CSR, and
    a right-hand side of ones plus noise (seeded)."""
    import scipy.sparse as sp

    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m), format="csr")
    i = sp.identity(m, format="csr")
    if dims == 2:
        a = sp.kron(i, t) + sp.kron(t, i)
    else:
        a = sp.kron(sp.kron(i, i), t) + sp.kron(sp.kron(i, t), i) + sp.kron(sp.kron(t, i), i)
    a = sp.csr_matrix(a)
    a.sort_indices()
    a.indptr = a.indptr.astype(np.int32)
    a.indices = a.indices.astype(np.int32)
    b = 1.0 + 0.1 * np.random.default_rng(dims * 1000 + m).standard_normal(a.shape[0])
    return a, b


def case_name(dims: int, m: int) -> str:
    n = m**dims
    size = f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}k"
    return f"{dims}-D Poisson {'x'.join([str(m)] * dims)} ({size} unknowns)"


_CHILD = r"""
import json, sys, time
sys.path.insert(0, {here!r}); sys.path.insert(0, {src!r})
import numpy as np
from sparse_common import poisson
a, b = poisson({dims}, {m})
kind = {kind!r}
if kind == "scipy":
    import scipy.sparse.linalg as sla
    t = time.perf_counter(); x = sla.spsolve(a, b); dt = time.perf_counter() - t
elif kind == "cupyx":
    import cupy as cp, cupyx.scipy.sparse as csp, cupyx.scipy.sparse.linalg as cla
    ad, bd = csp.csr_matrix(a), cp.asarray(b)
    cla.spsolve(csp.csr_matrix(poisson(2, 8)[0]), cp.ones(64)); cp.cuda.Device().synchronize()
    t = time.perf_counter(); x = cla.spsolve(ad, bd); cp.cuda.Device().synchronize()
    dt = time.perf_counter() - t; x = cp.asnumpy(x)
else:  # cuweave on the CPU: kind = "cuweave-cpu:<backend>:<matrix type>"
    import os
    _, backend, mtype = kind.split(":")
    if backend != "auto":
        os.environ["CUWEAVE_CPU_SPARSE"] = backend
    from cuweave.sparse.advanced import DirectSolver
    t = time.perf_counter()
    with DirectSolver(a, b, execution="cpu", options={{"sparse_system_type": mtype}}) as s:
        s.plan(); s.factorize(); x = s.solve()
        dt = time.perf_counter() - t
        b2 = b[::-1].copy(); t2 = time.perf_counter(); s.reset_operands(b=b2); s.solve()
        resolve = time.perf_counter() - t2
        backend = s._engine.backend_name
    print(json.dumps({{"resolve_s": resolve, "backend": backend}}))
res = float(np.linalg.norm(a @ x - b) / np.linalg.norm(b))
print(json.dumps({{"seconds": dt, "residual": res}}))
"""


def timed_child(kind: str, dims: int, m: int, cap_s: float) -> dict:
    """Time ``kind`` (``"scipy"``, ``"cupyx"``, ``"cuweave-cpu:<backend>:<type>"``) on the
    Poisson system in a child process; ``{"seconds": ..., "residual": ...}``, or
    ``{"timeout": cap_s}`` / ``{"error": text}``."""
    code = _CHILD.format(here=HERE, src=os.path.join(HERE, "..", "src"), dims=dims, m=m,
                         kind=kind)
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=cap_s)
    except subprocess.TimeoutExpired:
        return {"timeout": cap_s}
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1][:200]}
    found: dict = {}
    for line in out.stdout.strip().splitlines():
        if line.startswith("{"):
            found.update(json.loads(line))
    return found


def add_child_result(results, case: str, impl: str, got: dict, **meta) -> None:
    """A child's time as a row (a timeout: the cap as a lower bound, marked)."""
    if "seconds" in got:
        results.add(case=case, impl=impl, metric="time", value=got["seconds"] * 1e3, unit="ms",
                    residual=got.get("residual"), **meta)
        if "resolve_s" in got:
            results.add(case=case, impl=impl, metric="re-solve", value=got["resolve_s"] * 1e3,
                        unit="ms", backend=got.get("backend"))
    elif "timeout" in got:
        results.add(case=case, impl=impl, metric="time", value=got["timeout"] * 1e3, unit="ms",
                    lower_bound=True, note=f"did not finish within {got['timeout']:.0f} s")
        print(f"   {impl}: timed out after {got['timeout']:.0f} s (the row is a lower bound)")
    else:
        print(f"   {impl} failed: {got.get('error')}")


def timed_rounds(kinds: dict, dims: int, m: int, cap_s: float, rounds: int,
                 repeat_below_s: float = 60.0) -> dict:
    """:func:`timed_child` of every ``label -> kind`` in interleaved rounds (reversed on odd
    rounds: none always runs after the same one); an implementation that timed out, failed or
    took longer than ``repeat_below_s`` is not repeated. ``label -> [result dicts]``."""
    samples: dict = {label: [] for label in kinds}
    order = list(kinds.items())
    for r in range(rounds):
        for label, kind in (order if r % 2 == 0 else order[::-1]):
            done = samples[label]
            if done and ("seconds" not in done[-1] or done[-1]["seconds"] > repeat_below_s):
                continue
            done.append(timed_child(kind, dims, m, cap_s))
    return samples


def add_samples(results, case: str, impl: str, got: list) -> None:
    """The median of an implementation's samples as its row (all samples kept in the row)."""
    ok = [g for g in got if "seconds" in g]
    if not ok:
        add_child_result(results, case, impl, got[0] if got else {"error": "not run"})
        return
    secs = sorted(g["seconds"] for g in ok)
    median = secs[len(secs) // 2] if len(secs) % 2 else 0.5 * (secs[len(secs) // 2 - 1]
                                                                + secs[len(secs) // 2])
    results.add(case=case, impl=impl, metric="time", value=median * 1e3, unit="ms",
                samples_ms=[round(v * 1e3, 1) for v in secs],
                residual=max(g.get("residual", 0.0) for g in ok))
    resolves = sorted(g["resolve_s"] for g in ok if "resolve_s" in g)
    if resolves:
        results.add(case=case, impl=impl, metric="re-solve",
                    value=resolves[len(resolves) // 2] * 1e3, unit="ms",
                    backend=ok[0].get("backend"))
