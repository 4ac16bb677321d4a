"""Train a small MLP built from cuweave's fused layers next to the same MLP in plain torch.

    cuweave:  FusedMLP(16, 128, 16, activation="gelu") → FusedLinear(16, 1)
    torch:    Linear → GELU(tanh) → Linear → Linear

Both start from the same weights and see the same batches; the losses of the two runs are
printed side by side and must follow the same curve. Runs on the GPU when there is one (the
fused epilogs of cuBLASLt: GELU_AUX_BIAS forward, DGELU and BGRADB backward), else on
the CPU (cuweave's CPU backend, same aux formats).
"""

import torch

from cuweave.torch import FusedLinear, FusedMLP


def make_models(dev):
    fused = torch.nn.Sequential(FusedMLP(16, 128, 16, activation="gelu", device=dev),
                                FusedLinear(16, 1, device=dev))
    plain = torch.nn.Sequential(torch.nn.Linear(16, 128, device=dev),
                                torch.nn.GELU(approximate="tanh"),
                                torch.nn.Linear(128, 16, device=dev),
                                torch.nn.Linear(16, 1, device=dev))
    # same initial weights: plain's state_dict keys are 0.*, 2.*, 3.*
    state = fused.state_dict()
    plain.load_state_dict({"0.weight": state["0.fc1.weight"], "0.bias": state["0.fc1.bias"],
                           "2.weight": state["0.fc2.weight"], "2.bias": state["0.fc2.bias"],
                           "3.weight": state["1.weight"], "3.bias": state["1.bias"]})
    return fused, plain


def main(steps=200, batch=128):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    fused, plain = make_models(dev)
    target = torch.randn(16, device=dev)
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (fused, plain)]
    curves = ([], [])
    for step in range(steps):
        x = torch.randn(batch, 16, device=dev)
        y = torch.sin(x @ target / 4)[:, None]  # a smooth nonlinear target
        for model, opt, curve in zip((fused, plain), opts, curves):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            curve.append(loss.item())
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss cuweave {curves[0][-1]:.6f}  torch {curves[1][-1]:.6f}")
    worst = max(abs(a - b) / b for a, b in zip(*curves))
    print(f"{dev}: largest relative difference of the loss curves {worst:.1e}; "
          f"loss {curves[0][0]:.4f} -> {curves[0][-1]:.4f}")
    assert worst < 1e-3, worst
    assert curves[0][-1] < 0.2 * curves[0][0], "the MLP did not train"
    print("OK")


if __name__ == "__main__":
    main()
