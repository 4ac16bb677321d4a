"""A ternary contraction ``E = alpha * A . B . C + beta * D`` in one call, against two binary
contractions.

cuTENSOR contracts the three operands in one operation (``cutensorContractTrinary``), with no
intermediate the caller has to hold; the CPU path contracts the cheapest pair first. Here a
three-site operator applied to a state: ``out[i, l] = sum_{j,k} A[i, j] B[j, k, x] C[k, x, l]``.
"""

import numpy as np

from cuweave.tensor import binary_contraction, ternary_contraction


def main():
    rng = np.random.default_rng(2)
    i, j, k, x, l = 64, 96, 80, 8, 72
    a = rng.standard_normal((i, j)).astype(np.float32)
    b = rng.standard_normal((j, k, x)).astype(np.float32)
    c = rng.standard_normal((k, x, l)).astype(np.float32)
    d = rng.standard_normal((i, l)).astype(np.float32)

    e = ternary_contraction("ij,jkx,kxl->il", a, b, c, d=d, alpha=0.5, beta=2.0)
    ab = binary_contraction("ij,jkx->ikx", a, b)
    e2 = binary_contraction("ikx,kxl->il", ab, c, c=d, alpha=0.5, beta=2.0)
    want = 0.5 * np.einsum("ij,jkx,kxl->il", *(t.astype(np.float64) for t in (a, b, c))) + 2 * d
    for name, got in (("ternary", e), ("two binary", e2)):
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        print(f"{name}: {got.shape} {got.dtype}, relative error {err:.1e}")
        if not err < 1e-5:
            raise SystemExit(f"{name} is wrong")
    print("OK")


if __name__ == "__main__":
    main()
