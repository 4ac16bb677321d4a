"""A warning where autograd would be lost without notice.

The engines' own forms (``cuweave.linalg.advanced.matmul``/``Matmul`` and the ``cuweave.fft``
functions and ``FFT``) take torch tensors, but autograd does not record them: their results
are new tensors without a ``grad_fn``. A caller who passes tensors that require gradients,
with gradients being recorded, would otherwise find out only when ``backward()`` gives them
none. :func:`warn_if_autograd_is_lost` says so once per call and points to
:mod:`cuweave.torch`, whose layers and functions autograd does record.

Meant to be called by the function forms and constructors with their operands, before any
work (it costs a dictionary lookup when torch is not imported).
"""

from __future__ import annotations

import sys
import warnings

__all__ = ["AutogradWarning", "warn_if_autograd_is_lost"]


class AutogradWarning(UserWarning):
    """Torch tensors requiring gradients went into a cuweave call autograd does not record.

    The result is detached: no gradient flows back to those tensors. Use :mod:`cuweave.torch`
    (``fused_linear``, ``FusedLinear``, ``FusedMLP``) for differentiable products; pass
    ``tensor.detach()`` or call under ``torch.no_grad()`` to say that no gradient is wanted.
    """


def warn_if_autograd_is_lost(api: str, operands: dict, stacklevel: int = 3) -> None:
    """Warn (:class:`AutogradWarning`) when an operand is a torch tensor that requires
    gradients while torch records them.

    Parameters
    ----------
    api : str
        The call's public name, for the message (``"cuweave.linalg.advanced.matmul"``).
    operands : dict
        Parameter name -> the object passed (``None`` and non-torch objects are ignored).
    stacklevel : int
        As for :func:`warnings.warn`: 3 points at the caller of the function that calls this.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return
    tensor = torch.Tensor
    for name, x in operands.items():
        if isinstance(x, tensor) and x.requires_grad:
            warnings.warn(
                f"{name} requires grad, but {api} is not recorded by autograd: its result is "
                f"detached and no gradient flows back to {name}. For differentiable products "
                f"use cuweave.torch (fused_linear, FusedLinear, FusedMLP); pass {name}.detach() "
                "or call under torch.no_grad() if no gradient is wanted.",
                AutogradWarning, stacklevel=stacklevel)
            return
