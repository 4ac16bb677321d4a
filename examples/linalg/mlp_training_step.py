"""A two-layer MLP training step with fused cuBLASLt epilogs, checked against torch autograd.

Forward:  h = relu(x @ W1.T + b1)    → RELU_AUX_BIAS (keeps the ReLU bitmask as aux)
          y = h @ W2.T + b2          → BIAS
Backward: dH = dY @ W2, masked by relu'(z1), and db1 = Σ rows  → DRELU_BGRAD (one kernel)
          dW1 = dZ1.T @ x, dW2 = dY.T @ h, db2 = Σ rows of dY  → plain products / BGRADB

The biases follow torch's ``Linear`` convention (one value per output feature, added to every
row), passed as ``(1, N)`` arrays;
cuweave picks the result layout that makes such a bias native to cuBLASLt. Runs on CUDA tensors
when a GPU is usable, else on CPU tensors (the same calls, the same aux formats).
"""

import torch

from cuweave.linalg.advanced import matmul


def rel(x, ref):
    x, ref = x.detach().double(), ref.detach().double()
    return float((x - ref).norm() / ref.norm())


def main():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    batch, d_in, hidden, d_out = 256, 512, 1024, 128
    x = torch.randn(batch, d_in, device=dev)
    w1 = torch.randn(hidden, d_in, device=dev) / d_in**0.5
    b1 = torch.randn(hidden, device=dev)
    w2 = torch.randn(d_out, hidden, device=dev) / hidden**0.5
    b2 = torch.randn(d_out, device=dev)
    dy = torch.randn(batch, d_out, device=dev)

    # forward, fused
    # a bias along N (one value per output feature, added to every row) is spelled (1, N); a
    # 1-D bias is nvmath-python's length-M one
    h, aux = matmul(x, w1.T, epilog="relu_aux_bias", epilog_inputs={"bias": b1[None, :]})
    y = matmul(h, w2.T, epilog="bias", epilog_inputs={"bias": b2[None, :]})
    # backward, fused: dZ1 = (dY @ W2) * relu'(z1) and db1 = Σ_rows dZ1 in one call
    dz1, grads = matmul(dy, w2, epilog="drelu_bgrad",
                        epilog_inputs={"relu_aux": aux["relu_aux"]})
    db1 = grads["drelu_bgrad"].reshape(-1)
    dw1 = matmul(dz1.T, x)
    dw2 = matmul(dy.T, h)

    # reference: torch autograd in float64
    p = [t.double().requires_grad_() for t in (w1, b1, w2, b2)]
    xr = x.double()
    hr = torch.relu(xr @ p[0].T + p[1])
    yr = hr @ p[2].T + p[3]
    yr.backward(dy.double())
    checks = {"y": rel(y, yr), "dW1": rel(dw1, p[0].grad), "db1": rel(db1, p[1].grad),
              "dW2": rel(dw2, p[2].grad)}
    print(f"MLP step on {dev}: " + ", ".join(f"{k} err {v:.1e}" for k, v in checks.items()))
    assert all(v < 1e-4 for v in checks.values()), checks
    print("OK")


if __name__ == "__main__":
    main()
