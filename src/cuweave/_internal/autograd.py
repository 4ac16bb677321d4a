"""A warning where autograd would be lost without notice.

The engines' own forms (``cuweave.linalg.advanced.matmul``/``Matmul`` and the ``cuweave.fft``
functions and ``FFT``) take torch tensors, but autograd does not record them: their results
are new tensors without a ``grad_fn``. A caller who passes tensors that require gradients,
with gradients being recorded, would otherwise find out only when ``backward()`` gives them
none. :func:`warn_autograd_lost` says so and points to :mod:`cuweave.torch`, whose layers
and functions autograd does record. torch's adapter calls it when it wraps a tensor that
requires gradients (the probes of the function forms' fast paths leave such tensors to the
wrapping path), so every engine warns alike at no cost for other tensors.
"""

from __future__ import annotations

import sys
import warnings

__all__ = ["AutogradWarning", "warn_autograd_lost"]


class AutogradWarning(UserWarning):
    """Torch tensors requiring gradients went into a cuweave call autograd does not record.

    The result is detached: no gradient flows back to those tensors. Use :mod:`cuweave.torch`
    (``fused_linear``, ``FusedLinear``, ``FusedMLP``) for differentiable products; pass
    ``tensor.detach()`` or call under ``torch.no_grad()`` to say that no gradient is wanted.
    """


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside cuweave (the caller's own line)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("cuweave."):
        frame, level = frame.f_back, level + 1
    return level


def warn_autograd_lost(name: str) -> None:
    """Warn (:class:`AutogradWarning`) that the torch tensor passed as ``name``, which
    requires gradients, goes into a call autograd does not record (only while torch records
    gradients; inside cuweave.torch's autograd functions it does not). The package adapter
    calls this when it wraps such a tensor: one lookup of an attribute it reads anyway."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return
    warnings.warn(
        f"{name} requires grad, but this cuweave call is not recorded by autograd: its result "
        f"is detached and no gradient flows back to {name}. For differentiable products use "
        f"cuweave.torch (fused_linear, FusedLinear, FusedMLP); pass {name}.detach() or call "
        "under torch.no_grad() if no gradient is wanted.",
        AutogradWarning, stacklevel=_user_stacklevel())
