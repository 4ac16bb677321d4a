"""NumPy arrays in, NumPy arrays out: fused epilogs on the GPU when one is usable, else on the CPU.

Shows the function form with bias along M (a column vector) and along N (torch ``Linear``
convention), GELU with its aux output, and a planned :class:`Matmul` reused with
``reset_operands``.
"""

import numpy as np

from cuweave.linalg.advanced import Matmul, MatmulEpilog, matmul


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def rel(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def check(what, err, bound=1e-4):
    """Print the relative error of ``what`` and stop the example when it is out of bounds."""
    print(f"{what}: relative error {err:.1e}")
    if not err < bound:
        raise SystemExit(f"{what}: relative error {err:.1e} exceeds {bound:.0e}")


def main():
    rng = np.random.default_rng(0)
    m, n, k = 300, 200, 150
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)

    bias_m = rng.standard_normal(m, dtype=np.float32)
    d = matmul(a, b, epilog="relu_bias", epilog_inputs={"bias": bias_m})
    check("RELU_BIAS, bias along M", rel(d, np.maximum(a64 @ b64 + bias_m[:, None], 0)))

    bias_n = rng.standard_normal((1, n), dtype=np.float32)  # along N: spelled (1, N)
    d, aux = matmul(a, b, epilog="gelu_aux_bias", epilog_inputs={"bias": bias_n})
    check("GELU_AUX_BIAS, bias along N", rel(d, gelu(a64 @ b64 + bias_n)))
    print("aux:", {k: (v.shape, v.dtype.name) for k, v in aux.items()})
    if sorted(aux) != ["gelu_aux"] or aux["gelu_aux"].dtype != np.float32:
        raise SystemExit(f"GELU_AUX_BIAS: unexpected aux outputs {aux!r}")

    with Matmul(a, b, c=np.ones((m, 1), np.float32), beta=0.5) as mm:
        mm.plan(epilog=MatmulEpilog.RELU)
        first = mm.execute()
        a2 = rng.standard_normal((m, k), dtype=np.float32)
        mm.reset_operands(a=a2)
        second = mm.execute()
        check(f"planned Matmul on {mm.execution_space}",
              rel(first, np.maximum(a64 @ b64 + 0.5, 0)))
        check("after reset_operands", rel(second, np.maximum(a2.astype(np.float64) @ b64 + 0.5,
                                                             0)))
    print("OK")


if __name__ == "__main__":
    main()
