"""Many small independent systems solved in one call (an explicit batch).

Each of 256 systems has its own size (16 to 64 unknowns), matrix and right-hand side - as in
per-element or per-cell solves. cuDSS factorizes and solves the whole batch at once; the
answer is a tuple of arrays of the right-hand sides' package. Checked against NumPy's dense
solve.

    python examples/sparse/batched_small.py
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from _common import on_gpu

from cuweave.sparse.advanced import direct_solver


def main(count: int = 256) -> float:
    rng = np.random.default_rng(0)
    mats, rhss = [], []
    for _ in range(count):
        n = int(rng.integers(16, 65))
        a = sp.random(n, n, density=0.15, random_state=rng, format="csr")
        a = (a + sp.diags(np.full(n, 4.0))).tocsr()
        a.sort_indices()
        mats.append(a)
        rhss.append(rng.standard_normal(n))
    xs = direct_solver(mats, rhss, execution=None if on_gpu() else "cpu")
    worst = max(np.linalg.norm(np.asarray(x) - np.linalg.solve(a.toarray(), b))
                / np.linalg.norm(np.linalg.solve(a.toarray(), b))
                for a, b, x in zip(mats, rhss, xs))
    print(f"{count} systems of 16..64 unknowns: worst relative error {worst:.2e}")
    assert worst < 1e-10
    return worst


if __name__ == "__main__":
    main()
