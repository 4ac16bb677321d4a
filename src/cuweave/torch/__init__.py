"""``cuweave.torch``: fused Linear layers for PyTorch on cuBLASLt epilogs.

:class:`FusedLinear`, :class:`FusedMLP` and their functional forms :func:`fused_linear`,
:func:`fused_mlp` run the activation and the bias inside the matrix products, forward and
backward (``*_AUX_BIAS`` forward, ``DRELU``/``DGELU`` and ``BGRADB`` backward). They are
``torch.library`` custom operators (namespace ``cuweave``) with fake implementations, so
``torch.compile(fullgraph=True)`` traces through them; plain eager calls run the same
implementation through a ``torch.autograd.Function`` instead (the operator machinery costs
more host time than a small layer's GPU time). They queue no host synchronization, so they
can be captured in ``torch.cuda.graph`` after one eager warm-up step.
CPU tensors run on cuweave's CPU backend with the same results. Under ``torch.autocast`` the
layers cast as ``torch.nn.functional.linear`` does. :func:`fused_linear_fp8` is an FP8 forward
Linear (e4m3 operands with per-tensor scales, a 16-bit result; :func:`quantize_fp8` makes the
operands).

Imported only when used: ``import cuweave`` does not import torch.

Autograd: these layers and functions are the ones autograd records. The engines' own forms
(:func:`cuweave.linalg.advanced.matmul`, :class:`~cuweave.linalg.advanced.Matmul`,
:func:`cuweave.fft.fft` and the rest) take torch tensors too, but they are not differentiable:
their results are new tensors with no ``grad_fn`` (detached), whatever ``requires_grad`` the
operands have, so no gradient flows back through them. Use :func:`fused_linear` (or
:class:`FusedLinear`) where a product needs gradients.

Notes
-----
CUDA products are planned once per shape, dtype and layout (large ones autotuned) and kept in
a cache of 64 plans; a plan keeps a reference to the operands of its last call until its next
call (:func:`clear_plans` frees everything). Shapes with a dimension of 0 or 1 run torch's
unfused layer. GELU is the tanh approximation (what cuBLASLt fuses).

Examples
--------
>>> import torch
>>> from cuweave.torch import FusedMLP
>>> block = FusedMLP(32, 128, activation="gelu", dtype=torch.float64)
>>> x = torch.randn(4, 32, dtype=torch.float64)
>>> tuple(block(x).shape)
(4, 32)
"""

from ._engine import clear_plans, plan_count
from ._fp8 import fused_linear_fp8, quantize_fp8
from ._layers import ACTIVATIONS, FusedLinear, FusedMLP, fused_linear, fused_mlp

__all__ = ["FusedLinear", "FusedMLP", "fused_linear", "fused_mlp", "fused_linear_fp8",
           "quantize_fp8", "ACTIVATIONS", "clear_plans", "plan_count"]
