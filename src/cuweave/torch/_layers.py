"""Fused Linear layers for PyTorch: :func:`fused_linear`, :func:`fused_mlp`,
:class:`FusedLinear` and :class:`FusedMLP`."""

from __future__ import annotations

import math

import torch

from .._internal.errors import InvalidOperandError, InvalidOptionError
from . import _ops

__all__ = ["fused_linear", "fused_mlp", "FusedLinear", "FusedMLP", "ACTIVATIONS"]

#: accepted ``activation`` values
ACTIVATIONS = (None, "relu", "gelu")
_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


#: the operators' spelling of the usual ``activation`` values (one dict lookup)
_NAMES = {None: "none", "none": "none", "relu": "relu", "gelu": "gelu"}


def _activation(value) -> str:
    """The operators' spelling of ``activation`` (``"none"``, ``"relu"``, ``"gelu"``)."""
    if value is None or type(value) is str:
        name = _NAMES.get(value)
        if name is not None:
            return name
    name = value.lower() if isinstance(value, str) else value
    if name not in ACTIVATIONS and name != "none":
        raise InvalidOptionError(f"activation must be one of {list(ACTIVATIONS)}, got {value!r}")
    return name or "none"


def _check_weight(name: str, weight, x, in_features: int) -> None:
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        raise InvalidOperandError(
            f"{name} must be a 2-D torch.Tensor (out_features, in_features), got {weight!r}")
    if weight.shape[1] != in_features:
        raise InvalidOperandError(
            f"{name} must have {in_features} columns (the input's last dimension), got shape "
            f"{tuple(weight.shape)}")
    if weight.dtype != x.dtype or weight.device != x.device:
        raise InvalidOperandError(f"{name} must have the input's dtype and device ({x.dtype}, "
                                  f"{x.device}), got {weight.dtype} on {weight.device}")


def _check_bias(name: str, bias, x, out_features: int) -> None:
    if bias is None:
        return
    if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (out_features,):
        raise InvalidOperandError(
            f"{name} must be None or a torch.Tensor of shape ({out_features},), got "
            f"{bias if not isinstance(bias, torch.Tensor) else tuple(bias.shape)!r}")
    if bias.dtype != x.dtype or bias.device != x.device:
        raise InvalidOperandError(f"{name} must have the input's dtype and device ({x.dtype}, "
                                  f"{x.device}), got {bias.dtype} on {bias.device}")


def _check_input(x, in_features_of=None) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim < 1:
        raise InvalidOperandError(f"x must be a torch.Tensor of shape (..., in_features), got "
                                  f"{x!r}")
    if x.dtype not in _DTYPES:
        raise InvalidOperandError(f"x must have dtype float16, bfloat16, float32 or float64, "
                                  f"got {x.dtype}")


def _fits(weight, bias, in_features: int, dtype, device) -> bool:
    """Whether ``weight`` and ``bias`` fit an input of ``in_features``, ``dtype`` and
    ``device`` (the common case in one pass; else :func:`_check_weight` and
    :func:`_check_bias` raise with the details). Dtypes compare by identity first (torch's
    dtypes are singletons)."""
    return (isinstance(weight, torch.Tensor) and weight.ndim == 2
            and weight.shape[1] == in_features and weight.dtype is dtype
            and weight.device == device
            and (bias is None or (isinstance(bias, torch.Tensor) and bias.ndim == 1
                                  and bias.shape[0] == weight.shape[0]
                                  and bias.dtype is dtype and bias.device == device)))


def _autocast(x, *params) -> tuple:
    """``(x, *params)`` cast as ``torch.nn.functional.linear`` casts them under an enabled
    ``torch.autocast`` of ``x``'s device type: floating-point tensors other than float64 to
    the autocast dtype (differentiably: float32 parameters get float32 gradients)."""
    device_type = "cuda" if x.is_cuda else x.device.type
    if not torch.is_autocast_enabled(device_type):
        return (x, *params)
    dtype = torch.get_autocast_dtype(device_type)
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point()
                 and t.dtype != torch.float64 and t.device.type == device_type else t
                 for t in (x, *params))


def _rows(x: torch.Tensor) -> torch.Tensor:
    x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
    return x2 if x2.is_contiguous() else x2.contiguous()


def _dense(t):
    return t if t is None or t.is_contiguous() else t.contiguous()


def fused_linear(x, weight, bias=None, activation=None):
    """``activation(x @ weight.T + bias)`` as one cuBLASLt product with a fused epilog.

    The forward pass uses the ``*_AUX_BIAS`` epilog (the activation's cuBLASLt aux output is
    kept for the backward pass: a 1-bit mask for ReLU, the pre-activation for GELU); the
    backward pass computes the weight and bias gradients in one product (``BGRADB``). GELU
    is the tanh approximation (``torch.nn.GELU(approximate="tanh")``), which cuBLASLt fuses.

    Parameters
    ----------
    x : torch.Tensor
        ``(..., in_features)``, float16, bfloat16, float32 (TF32 when torch's
        ``float32_matmul_precision`` allows it) or float64; CUDA or CPU (CPU tensors run on
        cuweave's CPU backend). Under an enabled ``torch.autocast`` of ``x``'s device type,
        ``x``, ``weight`` and ``bias`` are first cast as :func:`torch.nn.functional.linear`
        casts them (floating-point tensors but float64 to the autocast dtype).
    weight : torch.Tensor
        ``(out_features, in_features)`` (torch ``Linear``'s layout), same dtype and device.
    bias : torch.Tensor, optional
        ``(out_features,)``.
    activation : None, "relu" or "gelu"

    Returns
    -------
    torch.Tensor
        ``(..., out_features)``.

    Examples
    --------
    >>> import torch
    >>> from cuweave.torch import fused_linear
    >>> x = torch.randn(8, 16, dtype=torch.float64, requires_grad=True)
    >>> w = torch.randn(4, 16, dtype=torch.float64, requires_grad=True)
    >>> b = torch.randn(4, dtype=torch.float64, requires_grad=True)
    >>> y = fused_linear(x, w, b, activation="relu")
    >>> bool(torch.allclose(y, torch.relu(x @ w.T + b)))
    True
    >>> y.sum().backward()
    >>> bool(torch.allclose(b.grad, (x @ w.T + b > 0).double().sum(0)))
    True
    """
    act = _activation(activation)
    _check_input(x)
    x, weight, bias = _autocast(x, weight, bias)
    if not _fits(weight, bias, x.shape[-1], x.dtype, x.device):
        _check_weight("weight", weight, x, x.shape[-1])
        _check_bias("bias", bias, x, weight.shape[0])
    x2 = _rows(x)
    if min(*x2.shape, weight.shape[0]) < 2:
        y = torch.nn.functional.linear(x2, weight, bias)
        return _reference_activation(y, act).reshape(*x.shape[:-1], weight.shape[0])
    y, _ = _ops.linear_call(x2, _dense(weight), _dense(bias), act)
    return y if x.ndim == 2 else y.reshape(*x.shape[:-1], weight.shape[0])


def fused_mlp(x, w1, b1, w2, b2, activation="gelu"):
    """``activation(x @ w1.T + b1) @ w2.T + b2`` (a transformer block's MLP), fused.

    Forward: two products, the first with the ``*_AUX_BIAS`` epilog. Backward: the second
    layer's weight and bias gradients in one product (``BGRADB``), the hidden gradient with the
    activation's derivative fused into its product (``DRELU`` / ``DGELU``), the first layer's
    weight and bias gradients in one product (``BGRADB``) and the input gradient: no separate
    activation, activation-gradient or bias-gradient kernels. (cuBLASLt's
    ``DGELU_BGRAD``, which would reduce the first bias gradient in the hidden-gradient product,
    measured 1.45x the time of ``DGELU`` on an H200 at 8192 x 4096 x 16384.)

    Parameters
    ----------
    x : torch.Tensor
        ``(..., in_features)``; as for :func:`fused_linear` (``torch.autocast`` included).
    w1, b1 : torch.Tensor, torch.Tensor or None
        ``(hidden, in_features)``, ``(hidden,)``.
    w2, b2 : torch.Tensor, torch.Tensor or None
        ``(out_features, hidden)``, ``(out_features,)``.
    activation : None, "relu" or "gelu" (tanh approximation)

    Examples
    --------
    >>> import torch
    >>> from cuweave.torch import fused_mlp
    >>> x = torch.randn(2, 3, 8, dtype=torch.float64)
    >>> w1, b1 = torch.randn(32, 8, dtype=torch.float64), torch.randn(32, dtype=torch.float64)
    >>> w2, b2 = torch.randn(8, 32, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    >>> y = fused_mlp(x, w1, b1, w2, b2, activation="relu")
    >>> ref = torch.relu(x @ w1.T + b1) @ w2.T + b2
    >>> tuple(y.shape), bool(torch.allclose(y, ref))
    ((2, 3, 8), True)
    """
    act = _activation(activation)
    _check_input(x)
    if torch.is_autocast_enabled("cuda" if x.is_cuda else x.device.type):
        x, w1, b1, w2, b2 = _autocast(x, w1, b1, w2, b2)
    dtype, device = x.dtype, x.device
    if not (_fits(w1, b1, x.shape[-1], dtype, device) and
            _fits(w2, b2, w1.shape[0], dtype, device)):
        _check_weight("w1", w1, x, x.shape[-1])
        _check_bias("b1", b1, x, w1.shape[0])
        _check_weight("w2", w2, x, w1.shape[0])
        _check_bias("b2", b2, x, w2.shape[0])
    x2 = _rows(x)
    if min(*x2.shape, w1.shape[0], w2.shape[0]) < 2:
        h = _reference_activation(torch.nn.functional.linear(x2, w1, b1), act)
        return torch.nn.functional.linear(h, w2, b2).reshape(*x.shape[:-1], w2.shape[0])
    y, _, _ = _ops.mlp_call(x2, _dense(w1), _dense(b1), _dense(w2), _dense(b2), act)
    return y if x.ndim == 2 else y.reshape(*x.shape[:-1], w2.shape[0])


def _reference_activation(y, act: str):
    """torch's unfused layer, for degenerate shapes: a dimension of 0 or 1 (cuBLASLt's
    gradient epilogs need ``k >= 2``, and a vector's layout does not pin the product's frame)."""
    if act == "relu":
        return torch.relu(y)
    if act == "gelu":
        return torch.nn.functional.gelu(y, approximate="tanh")
    return y


def _param(module, name: str):
    """``getattr(module, name)`` of a registered parameter, read from the module's parameter
    dict (``nn.Module.__getattr__`` is a Python call); a name not there (e.g. a
    parametrization's property) is read as an attribute."""
    params = module._parameters
    return params[name] if name in params else getattr(module, name)


def _init_linear(weight, bias) -> None:
    """torch ``Linear``'s initialization: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias."""
    torch.nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        bound = 1 / math.sqrt(weight.shape[1]) if weight.shape[1] > 0 else 0
        torch.nn.init.uniform_(bias, -bound, bound)


class FusedLinear(torch.nn.Module):
    """``activation(x @ weight.T + bias)`` with the activation fused into the product.

    Same parameters, initialization and ``state_dict`` keys as :class:`torch.nn.Linear`.
    See :func:`fused_linear` for what runs.

    Parameters
    ----------
    in_features, out_features : int
    bias : bool
    activation : None, "relu" or "gelu" (tanh approximation)
    device, dtype : optional
        As for :class:`torch.nn.Linear`.

    Examples
    --------
    >>> import torch
    >>> from cuweave.torch import FusedLinear
    >>> layer = FusedLinear(16, 4, activation="gelu", dtype=torch.float64)
    >>> x = torch.randn(3, 16, dtype=torch.float64)
    >>> ref = torch.nn.functional.gelu(x @ layer.weight.T + layer.bias, approximate="tanh")
    >>> bool(torch.allclose(layer(x), ref))
    True
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 activation=None, device=None, dtype=None):
        super().__init__()
        self.activation = _activation(activation) if activation is not None else None
        self.in_features, self.out_features = int(in_features), int(out_features)
        kw = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty(self.out_features, self.in_features, **kw))
        self.register_parameter(
            "bias", torch.nn.Parameter(torch.empty(self.out_features, **kw)) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialize ``weight`` and ``bias`` as :class:`torch.nn.Linear` does (uniform in
        ``±1/sqrt(in_features)``), in place."""
        _init_linear(self.weight, self.bias)

    def forward(self, x):
        """``activation(x @ weight.T + bias)``, recorded by autograd.

        Parameters
        ----------
        x : torch.Tensor
            ``(..., in_features)``, of the layer's dtype and device.

        Returns
        -------
        torch.Tensor
            ``(..., out_features)``.
        """
        return fused_linear(x, _param(self, "weight"), _param(self, "bias"), self.activation)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, activation={self.activation!r}")


class FusedMLP(torch.nn.Module):
    """A transformer block's MLP: ``fc2(activation(fc1(x)))``, fused forward and backward.

    ``fc1`` and ``fc2`` are :class:`FusedLinear` submodules (``state_dict`` keys
    ``fc1.weight``, ``fc1.bias``, ``fc2.weight``, ``fc2.bias``); the forward pass runs
    :func:`fused_mlp` on their parameters.

    Parameters
    ----------
    in_features, hidden_features : int
    out_features : int, optional
        Defaults to ``in_features``.
    bias : bool
    activation : None, "relu" or "gelu" (tanh approximation; the default)
    device, dtype : optional

    Examples
    --------
    >>> import torch
    >>> from cuweave.torch import FusedMLP
    >>> block = FusedMLP(16, 64, dtype=torch.float64)
    >>> x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)
    >>> block(x).square().mean().backward()
    >>> tuple(x.grad.shape), tuple(block.fc1.weight.grad.shape)
    ((2, 5, 16), (64, 16))
    """

    def __init__(self, in_features: int, hidden_features: int, out_features: int | None = None,
                 bias: bool = True, activation="gelu", device=None, dtype=None):
        super().__init__()
        self.activation = _activation(activation) if activation is not None else None
        out_features = in_features if out_features is None else out_features
        self.fc1 = FusedLinear(in_features, hidden_features, bias, self.activation, device,
                               dtype)
        self.fc2 = FusedLinear(hidden_features, out_features, bias, None, device, dtype)

    def forward(self, x):
        """``fc2(activation(fc1(x)))``, recorded by autograd.

        Parameters
        ----------
        x : torch.Tensor
            ``(..., in_features)``, of the block's dtype and device.

        Returns
        -------
        torch.Tensor
            ``(..., out_features)``.
        """
        mods = self._modules  # not nn.Module.__getattr__ (a Python call per submodule)
        fc1, fc2 = mods["fc1"], mods["fc2"]
        return fused_mlp(x, _param(fc1, "weight"), _param(fc1, "bias"), _param(fc2, "weight"),
                         _param(fc2, "bias"), self.activation)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"
