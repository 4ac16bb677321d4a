"""A tensor-network contraction: the squared norm of a matrix product state (MPS), contracted
site by site with binary contractions.

An MPS of ``n`` sites stores a state of ``d**n`` amplitudes as ``n`` tensors ``A[l, p, r]``
(bond ``l``, physical index ``p``, bond ``r``). Its squared norm ``<psi|psi>`` is the chain
``E <- E . A . conj(A)`` over the sites: two binary contractions per site, the conjugation
given as a qualifier (no conjugated copy is made). NumPy arrays run on the GPU when one is
usable (copies hidden), else on the CPU; CuPy or torch CUDA arrays would stay on the device.
The result is checked against the dense state built explicitly.
"""

import numpy as np

from cuweave.tensor import Operator, binary_contraction


def main():
    rng = np.random.default_rng(0)
    n, d, chi = 8, 2, 16
    bonds = [1] + [chi] * (n - 1) + [1]
    mps = [(rng.standard_normal((bonds[i], d, bonds[i + 1])) +
            1j * rng.standard_normal((bonds[i], d, bonds[i + 1]))).astype(np.complex128)
           for i in range(n)]
    conj_b = np.array([Operator.OP_IDENTITY, Operator.OP_CONJ, Operator.OP_IDENTITY], np.int32)

    env = np.ones((1, 1), np.complex128)  # E[l, l'] at the left edge
    for a in mps:
        t = binary_contraction("xy,xpr->ypr", env, a)                    # E . A
        env = binary_contraction("ypr,yps->rs", t, a, qualifiers=conj_b)  # . conj(A)
    norm2 = env[0, 0]

    psi = mps[0]
    for a in mps[1:]:
        psi = np.tensordot(psi, a, axes=(-1, 0))
    want = np.vdot(psi.ravel(), psi.ravel())
    err = abs(norm2 - want) / abs(want)
    print(f"MPS of {n} sites, bond {chi}: <psi|psi> = {norm2.real:.6e} (relative error "
          f"{err:.1e})")
    if not err < 1e-10:
        raise SystemExit("the chain's norm does not match the dense state")
    print("OK")


if __name__ == "__main__":
    main()
