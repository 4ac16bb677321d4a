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


def main():
    rng = np.random.default_rng(0)
    m, n, k = 300, 200, 150
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)

    bias_m = rng.standard_normal(m, dtype=np.float32)
    d = matmul(a, b, epilog="relu_bias", epilog_inputs={"bias": bias_m})
    print("RELU_BIAS, bias along M:", f"{rel(d, np.maximum(a64 @ b64 + bias_m[:, None], 0)):.1e}")

    bias_n = rng.standard_normal(n, dtype=np.float32)
    d, aux = matmul(a, b, epilog="gelu_aux_bias", epilog_inputs={"bias": bias_n})
    print("GELU_AUX_BIAS, bias along N:", f"{rel(d, gelu(a64 @ b64 + bias_n)):.1e}",
          "aux:", {k: (v.shape, v.dtype.name) for k, v in aux.items()})

    with Matmul(a, b, c=np.ones((m, 1), np.float32), beta=0.5) as mm:
        mm.plan(epilog=MatmulEpilog.RELU)
        first = mm.execute()
        a2 = rng.standard_normal((m, k), dtype=np.float32)
        mm.reset_operands(a=a2)
        second = mm.execute()
        print(f"planned Matmul on {mm.execution_space}:",
              f"{rel(first, np.maximum(a64 @ b64 + 0.5, 0)):.1e}",
              f"{rel(second, np.maximum(a2.astype(np.float64) @ b64 + 0.5, 0)):.1e}")
    print("OK")


if __name__ == "__main__":
    main()
