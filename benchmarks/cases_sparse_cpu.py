"""The sparse direct solver on the CPU vs SciPy's spsolve (SuperLU), Poisson systems.

cuweave runs its public ``DirectSolver(..., execution="cpu")`` (plan + factorize + solve, the
matrix declared SPD, as a user who knows it would; and as GENERAL, nvmath-python's default)
with the backend chosen automatically, and with each installed backend forced (PARDISO through
MKL, CHOLMOD through scikit-sparse, SciPy's SuperLU) - the measurement behind the automatic
choice. Every implementation runs in its own child process under a time cap (a timeout is
reported as a lower bound; SPARSE_CPU_CAP_S, default 300 s), in SPARSE_CPU_ROUNDS (3)
interleaved rounds: the row is the median (the samples are in the JSON; one taking over a
minute is not repeated). The machine is shared: the spread between samples shows its load.
Cases: 2-D Poisson 250k and 1M unknowns, 3-D Poisson 64k and 125k (--quick: 2-D 250k and 3-D
64k). Also the re-solve time with a new right-hand side.
"""

from __future__ import annotations

import os

from sparse_common import add_samples, case_name, timed_rounds

CAP_S = float(os.environ.get("SPARSE_CPU_CAP_S", "300"))
ROUNDS = int(os.environ.get("SPARSE_CPU_ROUNDS", "3"))


def run(results, quick: bool) -> None:
    from cuweave.sparse.advanced import _cpu_backends

    cases = [(2, 500), (3, 40)] if quick else [(2, 500), (2, 1000), (3, 40), (3, 50)]
    rounds = 1 if quick else ROUNDS
    backends = _cpu_backends.available()
    for dims, m in cases:
        case = case_name(dims, m)
        kinds = {"scipy spsolve": "scipy", "cuweave cpu (SPD)": "cuweave-cpu:auto:SPD",
                 "cuweave cpu (GENERAL)": "cuweave-cpu:auto:GENERAL"}
        kinds.update({f"cuweave cpu {b} (SPD)": f"cuweave-cpu:{b}:SPD" for b in backends})
        samples = timed_rounds(kinds, dims, m, CAP_S, rounds)
        for label, got in samples.items():
            add_samples(results, case, label, got)
        for label in kinds:
            if label != "scipy spsolve":
                results.add_ratio(case=case, metric="time", num=label, den="scipy spsolve",
                                  higher_is_better=False,
                                  target=3.0 if label == "cuweave cpu (SPD)" else None)
