"""A circuit-like unsymmetric system: modified nodal analysis of a random resistor network.

Nodes are joined by resistors (a symmetric conductance matrix, grounded at node 0) and driven by
voltage sources and voltage-controlled current sources; the sources' rows and columns and the
controlled sources' entries make the matrix unsymmetric with zeros on part of the diagonal,
so pivoting matters (as in SPICE-like simulators). Solved as a GENERAL matrix, with two steps
of iterative refinement, and checked by its residual and against SciPy.

    python examples/sparse/circuit_unsymmetric.py [nodes, default 20000]
"""

from __future__ import annotations

import sys

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla
from _common import on_gpu, residual

from cuweave.sparse.advanced import DirectSolver


def mna_matrix(nodes: int, sources: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    # resistors: a chain (connected) plus random local links (as a placed circuit has: wires
    # join nearby nodes); conductances 1e-3 .. 1e3 S
    far = rng.integers(0, nodes, 3 * nodes)
    i = np.concatenate([np.arange(nodes - 1), far])
    j = np.concatenate([np.arange(1, nodes), np.minimum(far + rng.integers(2, 40, far.size),
                                                         nodes - 1)])
    keep = i != j
    i, j = i[keep], j[keep]
    g = 10.0 ** rng.uniform(-3, 3, i.size)
    lap = sp.coo_matrix((np.concatenate([g, g, -g, -g]),
                         (np.concatenate([i, j, i, j]), np.concatenate([i, j, j, i]))),
                        shape=(nodes, nodes)).tocsr()
    lap = lap + sp.diags(np.full(nodes, 1e-3))        # every node leaks a little to ground
    # voltage sources between node pairs: extra unknowns (their currents)
    src_p = rng.choice(nodes, sources, replace=False)
    inc = sp.coo_matrix((np.ones(sources), (src_p, np.arange(sources))),
                        shape=(nodes, sources)).tocsr()
    # voltage-controlled current sources: unsymmetric transconductances
    rows = rng.integers(0, nodes - 40, nodes // 10)
    ctrl = sp.coo_matrix((rng.uniform(1e-3, 1e-2, rows.size), (rows, rows + 7)),
                         shape=(nodes, nodes))
    a = sp.bmat([[lap + ctrl, inc], [inc.T, None]], format="csr")
    a.sum_duplicates()
    a.sort_indices()
    b = np.concatenate([rng.standard_normal(nodes) * 1e-3, rng.uniform(1, 5, sources)])
    return a, b


def main(nodes: int = 20000) -> float:
    a, b = mna_matrix(nodes, nodes // 50)
    with DirectSolver(a, b, execution=None if on_gpu() else "cpu") as solver:
        solver.solution_config.ir_num_steps = 2
        solver.plan()
        solver.factorize()
        x = solver.solve()
        space = solver.execution_space
    res = residual(a, x, b)
    ref = sla.spsolve(a.tocsc(), b)
    diff = np.linalg.norm(x - ref) / np.linalg.norm(ref)
    print(f"MNA circuit: {a.shape[0]} unknowns, {a.nnz} nonzeros ({space}): residual {res:.2e}, "
          f"difference to SciPy {diff:.2e}")
    assert res < 1e-9 and diff < 1e-6
    return res


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
