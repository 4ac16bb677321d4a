"""FP8 forward Linear: :func:`fused_linear_fp8` (operator ``cuweave::linear_fp8``) and
:func:`quantize_fp8`.

cuBLASLt multiplies e4m3 operands with per-tensor float32 scales and writes a 16-bit result
with the bias and the activation fused (``BIAS``, ``RELU_BIAS``, ``GELU_BIAS``), on compute
capability 8.9 (Ada) and 9.0 (Hopper) and later. CPU tensors run on cuweave's CPU backend,
which emulates the fp8 product (the operands decoded to float32) with the same results up to
the accumulation order. Forward only: backpropagating through it raises torch's "no autograd
formula" error (as ``torch._scaled_mm``).
"""

# no ``from __future__ import annotations``: torch.library reads the annotations as types

import torch

from .._internal.errors import InvalidOperandError, InvalidOptionError
from . import _engine, _ops

__all__ = ["fused_linear_fp8", "quantize_fp8", "linear_fp8", "FP8_DTYPES", "FP8_OUT_DTYPES"]

#: accepted fp8 operand dtypes and their largest finite value
FP8_DTYPES = {torch.float8_e4m3fn: 448.0}
#: accepted result dtypes (the bias has the result's dtype)
FP8_OUT_DTYPES = (torch.bfloat16, torch.float16)
_EPILOGS = {("none", False): "default", ("none", True): "bias",
            ("relu", False): "relu", ("relu", True): "relu_bias",
            ("gelu", False): "gelu", ("gelu", True): "gelu_bias"}


def quantize_fp8(t, dtype=torch.float8_e4m3fn):
    """``(q, scale)`` with ``t ≈ q.float() * scale``: a per-tensor scale from ``t``'s
    largest magnitude (``amax / 448`` for e4m3), ``q`` saturated into the fp8 range.

    Parameters
    ----------
    t : torch.Tensor
        Floating-point values (any shape, any device).
    dtype : torch.dtype
        ``torch.float8_e4m3fn``.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        ``q`` of ``dtype`` and ``t``'s shape; ``scale``, a float32 0-d tensor on ``t``'s
        device (the dequantization scale :func:`fused_linear_fp8` takes).

    Examples
    --------
    >>> import torch
    >>> from cuweave.torch import quantize_fp8
    >>> q, scale = quantize_fp8(torch.tensor([1.0, -896.0]))
    >>> q.dtype, float(scale), (q.float() * scale).tolist()
    (torch.float8_e4m3fn, 2.0, [1.0, -896.0])
    """
    if dtype not in FP8_DTYPES:
        raise InvalidOptionError(f"dtype must be torch.float8_e4m3fn, got {dtype!r}")
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise InvalidOperandError(f"t must be a floating-point torch.Tensor, got {t!r}")
    top = FP8_DTYPES[dtype]
    t = t.detach().float()
    amax = t.abs().amax() if t.numel() else t.new_zeros(())
    scale = torch.where(amax > 0, amax / top, torch.ones_like(amax))
    return (t / scale).clamp(-top, top).to(dtype), scale


def _describe(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"{t.dtype} of shape {tuple(t.shape)} on {t.device}"
    return repr(t)


def _check_scale(name: str, s, x) -> None:
    if (not isinstance(s, torch.Tensor) or s.numel() != 1 or s.dtype != torch.float32
            or s.device != x.device):
        raise InvalidOperandError(f"{name} must be a float32 torch.Tensor of one element on "
                                  f"{x.device} (a per-tensor dequantization scale), got "
                                  f"{_describe(s)}")


def _check_fp8(x, weight, x_scale, weight_scale, bias, out_dtype) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim < 1 or x.dtype not in FP8_DTYPES:
        raise InvalidOperandError("x must be a torch.float8_e4m3fn tensor of shape (..., "
                                  f"in_features), got {_describe(x)}")
    if (not isinstance(weight, torch.Tensor) or weight.ndim != 2
            or weight.dtype not in FP8_DTYPES or weight.device != x.device):
        raise InvalidOperandError(
            "weight must be a 2-D torch.float8_e4m3fn tensor (out_features, in_features) on "
            f"{x.device}, got {_describe(weight)}")
    if weight.shape[1] != x.shape[-1]:
        raise InvalidOperandError(f"weight must have {x.shape[-1]} columns (the input's last "
                                  f"dimension), got shape {tuple(weight.shape)}")
    _check_scale("x_scale", x_scale, x)
    _check_scale("weight_scale", weight_scale, x)
    if out_dtype not in FP8_OUT_DTYPES:
        raise InvalidOptionError(f"out_dtype must be torch.bfloat16 or torch.float16, got "
                                 f"{out_dtype!r}")
    if bias is not None and (not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (
            weight.shape[0],) or bias.dtype != out_dtype or bias.device != x.device):
        raise InvalidOperandError(f"bias must be None or a {out_dtype} tensor of shape "
                                  f"({weight.shape[0]},) on {x.device}, got {_describe(bias)}")


def fused_linear_fp8(x, weight, x_scale, weight_scale, bias=None, activation=None,
                     out_dtype=torch.bfloat16):
    """``activation((x_scale * x) @ (weight_scale * weight).T + bias)`` from fp8 operands:
    one cuBLASLt fp8 product with the bias and the activation fused, a 16-bit result.

    Parameters
    ----------
    x : torch.Tensor
        ``(..., in_features)``, ``torch.float8_e4m3fn``.
    weight : torch.Tensor
        ``(out_features, in_features)``, ``torch.float8_e4m3fn`` (torch ``Linear``'s layout).
    x_scale, weight_scale : torch.Tensor
        Per-tensor dequantization scales: float32, one element, on ``x``'s device (e.g. from
        :func:`quantize_fp8`). Read when the product runs (CUDA-graph friendly).
    bias : torch.Tensor, optional
        ``(out_features,)`` of ``out_dtype``.
    activation : None, "relu" or "gelu" (tanh approximation)
    out_dtype : torch.bfloat16 or torch.float16

    Returns
    -------
    torch.Tensor
        ``(..., out_features)`` of ``out_dtype``. No gradients (a forward operator).

    Notes
    -----
    On the GPU cuBLASLt needs compute capability 8.9 or later and 16-byte aligned rows
    (``in_features`` and ``out_features`` multiples of 16); its errors are raised as they
    come. CPU tensors run on cuweave's CPU backend (the fp8 values decoded exactly, products
    accumulated in float32).

    Examples
    --------
    >>> import torch
    >>> from cuweave.torch import fused_linear_fp8, quantize_fp8
    >>> x, w = torch.randn(4, 32), torch.randn(16, 32)
    >>> (xq, sx), (wq, sw) = quantize_fp8(x), quantize_fp8(w)
    >>> y = fused_linear_fp8(xq, wq, sx, sw, torch.zeros(16, dtype=torch.bfloat16), "relu")
    >>> ref = torch.relu((xq.float() * sx) @ (wq.float() * sw).T)
    >>> y.dtype, bool(torch.allclose(y.float(), ref, rtol=1e-2, atol=1e-2))
    (torch.bfloat16, True)
    """
    from ._layers import _activation

    act = _activation(activation)
    _check_fp8(x, weight, x_scale, weight_scale, bias, out_dtype)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    x2 = x2 if x2.is_contiguous() else x2.contiguous()
    w = weight if weight.is_contiguous() else weight.contiguous()
    args = (x2, w, x_scale, weight_scale, bias, act, out_dtype)
    # eager calls that record no gradient skip torch.library (see cuweave.torch._ops); the
    # others keep the operator (compile/tracing, and torch's "no autograd formula" error)
    eager = _ops.eager(x2, w, x_scale, weight_scale, bias) and not _ops._records(
        x2, w, x_scale, weight_scale, bias)
    y = _linear_fp8_impl(*args) if eager else linear_fp8(*args)
    return y.reshape(*lead, weight.shape[0])


def _emulated(x, weight, x_scale, weight_scale, bias, activation, out_dtype):
    """The product in float32 from decoded operands, for shapes cuBLASLt cannot frame (a
    dimension of 0 or 1)."""
    from ._layers import _reference_activation

    y = (x.float() * x_scale.float()) @ (weight.float() * weight_scale.float()).t()
    if bias is not None:
        y = y + bias.float()
    return _reference_activation(y, activation).to(out_dtype)


@torch.library.custom_op("cuweave::linear_fp8", mutates_args=())
def linear_fp8(x: torch.Tensor, weight: torch.Tensor, x_scale: torch.Tensor,
               weight_scale: torch.Tensor, bias: torch.Tensor | None, activation: str,
               out_dtype: torch.dtype) -> torch.Tensor:
    """``activation((x_scale * x) @ (weight_scale * weight).T + bias)`` (2-D ``x``)."""
    return _linear_fp8_impl(x, weight, x_scale, weight_scale, bias, activation, out_dtype)


def _linear_fp8_impl(x, weight, x_scale, weight_scale, bias, activation, out_dtype):
    if min(*x.shape, weight.shape[0]) < 2:
        return _emulated(x, weight, x_scale, weight_scale, bias, activation, out_dtype)
    inputs = None if bias is None else {"bias": bias.reshape(1, -1)}
    return _engine.run(x, weight.t(), _EPILOGS[activation, bias is not None], inputs,
                       scales={"a": x_scale, "b": weight_scale}, out_dtype=out_dtype)


@linear_fp8.register_fake
def _(x, weight, x_scale, weight_scale, bias, activation, out_dtype):
    return x.new_empty((x.shape[0], weight.shape[0]), dtype=out_dtype)
