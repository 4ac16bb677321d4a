"""A batched contraction planned once and executed on new operands: ``out[b,i,k] = alpha *
sum_j conj(a[b,j,i]) * x[b,j,k] + beta * c[b,i,k]``.

:class:`BinaryContraction` plans once (on cuTENSOR: the kernel choice, optionally autotuned);
each step gives new operands of the same layout with ``reset_operands`` and executes with its
own ``alpha``/``beta``. The conjugate transpose of ``a`` is read through its strides and a
qualifier: nothing is copied. NumPy arrays run on the GPU when one is usable, else on the CPU.
"""

import numpy as np

from cuweave.tensor import BinaryContraction, Operator


def main():
    rng = np.random.default_rng(1)
    batch, m, n, k = 16, 48, 32, 40

    def cplx(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(
            np.complex64)

    a, x, c = cplx(batch, k, m), cplx(batch, k, n), cplx(batch, m, n)
    q = np.array([Operator.OP_CONJ, Operator.OP_IDENTITY, Operator.OP_IDENTITY], np.int32)
    with BinaryContraction("bji,bjk->bik", a, x, c=c, qualifiers=q) as contraction:
        contraction.autotune(iterations=3)  # cuTENSOR's incremental autotuning (CPU: plans)
        for step in range(3):
            alpha, beta = 1.0 / (step + 1), 0.5
            out = contraction.execute(alpha=alpha, beta=beta)
            want = alpha * np.conj(a).transpose(0, 2, 1) @ x + beta * c
            err = np.linalg.norm(out - want) / np.linalg.norm(want)
            print(f"step {step}: {out.shape} {out.dtype}, relative error {err:.1e}")
            if not err < 1e-5:
                raise SystemExit("the batched contraction is wrong")
            a, x, c = cplx(batch, k, m), cplx(batch, k, n), cplx(batch, m, n)
            contraction.reset_operands(a=a, b=x, c=c)
    print("OK")


if __name__ == "__main__":
    main()
