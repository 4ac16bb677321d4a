"""The backward pass of a distributed linear layer with ReLU: DRELU_BGRAD and BGRADB epilogs.

Forward: ``Z = relu(W @ X + b)`` with RELU_AUX_BIAS, which keeps this rank's ReLU mask. Backward,
for an upstream gradient ``G`` (``dL/dZ``): ``dY = G * relu'(Y)`` and ``db = dY.sum(axis=1)``
in one product with DRELU_BGRAD, and ``dX = W.T @ dY`` with BGRADB, whose aux output
``bgradb`` is ``dY.sum(axis=0)``. The bias gradients are summed over the ranks; each rank gets
``db`` for its rows of the result and all of ``bgradb``. Checked against NumPy on the gathered
matrices.

    mpiexec -n 4 python examples/distributed/matmul_bias_gradients.py
"""

import numpy as np
from mpi4py import MPI

import cuweave.distributed
from cuweave.distributed.distribution import Slab
from cuweave.distributed.linalg.advanced import MatmulEpilog, matmul, matrix_qualifiers_dtype

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
cuweave.distributed.initialize(None, comm)

m, n, k = 48, 40, 32  # W: m x k, X: k x n (n samples)
rng = np.random.default_rng(11)  # the same global matrices on every rank, for the check
W, X, b = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, 1))
G, F = rng.standard_normal((m, 16)), rng.standard_normal((16, n))  # G @ F: the upstream gradient


def local(x, distribution):
    """This rank's block of the global ``x``."""
    return x[np.ix_(*distribution.global_indices(rank, x.shape))].copy()


rows = Slab.X.global_indices(rank, (m, n))[0]  # this rank's rows of every m x n result
z, aux = matmul(local(W, Slab.X), local(X, Slab.Y), distributions=[Slab.X, Slab.Y, Slab.X],
                epilog=MatmulEpilog.RELU_AUX_BIAS, epilog_inputs={"bias": local(b, Slab.X)})
dy, grads = matmul(local(G, Slab.X), local(F, Slab.Y), distributions=[Slab.X, Slab.Y, Slab.X],
                   epilog=MatmulEpilog.DRELU_BGRAD, epilog_inputs={"relu_aux": aux["relu_aux"]})
db = grads["drelu_bgrad"]  # this rank's rows of dL/db, summed over the ranks

# dX = W.T @ dY: W's rows are dY's rows (split on m), so op(W) = W.T is k x m
q = np.zeros(3, dtype=matrix_qualifiers_dtype)
q[0]["is_transpose"] = True
dx, grads = matmul(local(W, Slab.X), np.asfortranarray(dy), distributions=[Slab.X, Slab.X, Slab.X],
                   qualifiers=q, epilog=MatmulEpilog.BGRADB)

y = W @ X + b
dy_ref = (G @ F) * (y > 0)
assert np.allclose(db, dy_ref.sum(axis=1)[rows]), "drelu_bgrad"
assert np.allclose(grads["bgradb"], dy_ref.sum(axis=0)), "bgradb (the same on every rank)"
pieces = comm.gather((z, dy, dx), root=0)
if rank == 0:
    z_all, dy_all, dx_all = (np.concatenate(p, axis=0) for p in zip(*pieces))
    assert np.allclose(z_all, np.maximum(y, 0)) and np.allclose(dy_all, dy_ref)
    assert np.allclose(dx_all, (W.T @ dy_ref))
    print(f"db rows {db.shape} on rank 0, bgradb {grads['bgradb'].shape}; max error of dX "
          f"{np.abs(dx_all - W.T @ dy_ref).max():.2e}")
    print("OK")
