"""The layers' operators, registered with ``torch.library`` (namespace ``cuweave``).

``cuweave::linear`` / ``cuweave::mlp`` are the differentiable forward operators; their
backward passes call ``cuweave::linear_wgrad`` (BGRADB: weight and bias gradients in one
product) and ``cuweave::linear_dgrad_act`` (DRELU_BGRAD / DGELU_BGRAD: the activation's
gradient and the bias gradient fused into the input-gradient product). Every operator has a
fake (meta) implementation, so ``torch.compile(fullgraph=True)`` traces through them.

Eager calls skip the ``torch.library`` machinery (its dispatch, ``register_autograd``
wrapper and ``torch._disable_dynamo`` frames cost more host time than a small product's GPU
time): :func:`linear_call` and :func:`mlp_call`, the layers' entry points, run the same
implementation and backward functions through a :class:`torch.autograd.Function` (or, when no
gradient is recorded, directly) where :func:`eager` holds: not compiling or tracing, no
functorch transform, no torch dispatch or function mode, plain tensors. Everywhere else they
call the registered operators, so ``torch.compile``, ``make_fx``, ``torch.export``, fake tensors,
``vmap`` and tensor subclasses see ``cuweave::linear`` / ``cuweave::mlp`` as before; the backward
functions pick the backward operators or their implementations by the same test.

Shapes: ``x`` is 2-D ``(tokens, in_features)``; ``weight`` is ``(out_features, in_features)``
(torch ``Linear``). The auxiliary tensor of an activation is cuBLASLt's, in the "lt frame"
(see ``docs/DESIGN.md``): for ReLU a ``uint8`` bitmask of shape ``(roundup(out, 128) // 8,
tokens)``, for GELU the pre-activation of shape ``(roundup(out, 8), tokens)``, both with
strides ``(1, rows)`` (the transpose of a row-major ``(tokens, rows)``).
"""

# no ``from __future__ import annotations``: torch.library reads the annotations as types


import torch

from . import _engine

__all__ = ["linear", "mlp", "linear_wgrad", "linear_dgrad_act", "aux_layout", "eager",
           "linear_call", "mlp_call"]

_FORWARD = {(None, False): "default", (None, True): "bias",
            ("relu", False): "relu_aux", ("relu", True): "relu_aux_bias",
            ("gelu", False): "gelu_aux", ("gelu", True): "gelu_aux_bias"}
_BACKWARD = {("relu", False): "drelu", ("relu", True): "drelu_bgrad",
             ("gelu", False): "dgelu", ("gelu", True): "dgelu_bgrad"}
_AUX = {"relu": "relu_aux", "gelu": "gelu_aux"}


#: tensor types the eager route takes (subclasses, fake and functional tensors do not)
_PLAIN = frozenset((torch.Tensor, torch.nn.Parameter))
#: torch's private probes of transforms, modes and tracing (no public API tells all of them);
#: a torch lacking one never takes the eager route
_PROBES = tuple(getattr(torch._C, name, None) for name in (
    "_are_functorch_transforms_active", "_len_torch_dispatch_stack",
    "_is_torch_function_mode_enabled", "_is_tracing"))
_PROBED = all(_PROBES)
if _PROBED:
    _transforms, _dispatch_modes, _function_modes, _tracing = _PROBES


def eager(*tensors) -> bool:
    """Whether a call on ``tensors`` (``None`` allowed) is plain eager execution: not under
    ``torch.compile``/``torch.export`` (:func:`torch.compiler.is_compiling`, tested first:
    Dynamo folds it to True and traces nothing after it), no functorch transform (``vmap``,
    ``grad``, ``functionalize``), no torch dispatch mode (fake tensors, ``make_fx``'s proxy
    mode, functionalization, user modes), no torch function mode (``torch.device``
    contexts included), not ``torch.jit.trace``, and every tensor exactly a ``torch.Tensor`` or
    ``nn.Parameter``. Only then may the registered operators be bypassed."""
    return _route(tensors) != _OPERATORS


#: :func:`_route`'s answers
_OPERATORS, _IMPL, _FUNCTION = 0, 1, 2


def _route(tensors) -> int:
    """How a call on ``tensors`` runs, in one pass: ``_OPERATORS`` where :func:`eager` does
    not hold, else ``_FUNCTION`` where autograd records it (grad mode and a tensor requiring
    a gradient), else ``_IMPL``."""
    if (torch.compiler.is_compiling() or not _PROBED or _transforms() or _dispatch_modes()
            or _function_modes() or _tracing()):
        return _OPERATORS
    route = _IMPL
    grad = torch.is_grad_enabled()
    for t in tensors:
        if t is not None:
            if type(t) not in _PLAIN:
                return _OPERATORS
            if grad and t.requires_grad:
                route = _FUNCTION
    return route


def aux_layout(activation: str, tokens: int, out_features: int, dtype):
    """``(shape, strides, dtype)`` of the auxiliary tensor ``cuweave::linear`` returns."""
    if activation == "relu":
        rows = -(-out_features // 128) * 16
        return (rows, tokens), (1, rows), torch.uint8
    if activation == "gelu":
        rows = -(-out_features // 8) * 8
        return (rows, tokens), (1, rows), dtype
    return (0,), (1,), dtype


# ------------------------------------------------------------------ forward: one layer
def _row_bias(bias):
    """``epilog_inputs`` with the bias as ``(1, out)``: added to every row even where
    ``tokens == out_features`` (a ``(n,)`` bias of a square product is nvmath's length-M)."""
    return {"bias": bias.reshape(1, -1)}


def _linear_impl(x, weight, bias, activation):
    if activation == "none":
        return _linear_plain(x, weight, bias), x.new_empty(0)
    epilog = _FORWARD[activation, bias is not None]
    if bias is None:  # y.T = weight @ x.T: the aux frame of the bias case, a row-major y
        yt, aux = _engine.run(weight, x.t(), epilog)
        return yt.t(), aux[_AUX[activation]]
    y, aux = _engine.run(x, weight.t(), epilog, _row_bias(bias))
    return y, aux[_AUX[activation]]


def _linear_plain(x, weight, bias):
    """``x @ weight.T + bias`` (no activation: no aux output)."""
    if bias is None:
        return _engine.run(x, weight.t(), _FORWARD[None, False])
    return _engine.run(x, weight.t(), _FORWARD[None, True], _row_bias(bias))


@torch.library.custom_op("cuweave::linear", mutates_args=())
def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           activation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(activation(x @ weight.T + bias), aux)`` in one cuBLASLt product."""
    return _linear_impl(x, weight, bias, activation)


@linear.register_fake
def _(x, weight, bias, activation):
    shape, strides, dtype = aux_layout(activation, x.shape[0], weight.shape[0], x.dtype)
    return (x.new_empty((x.shape[0], weight.shape[0])),
            x.new_empty_strided(shape, strides, dtype=dtype))


def _linear_setup(ctx, inputs, output):
    x, weight, bias, activation = inputs
    y, aux = output
    ctx.set_materialize_grads(False)
    ctx.mark_non_differentiable(aux)
    ctx.activation, ctx.has_bias = activation, bias is not None
    ctx.save_for_backward(x, weight, y if activation == "relu" else None,
                          aux if activation == "gelu" else None)


def _act_grad(activation, dy, y, aux, out_features):
    """The gradient of the pre-activation where no product is left to fuse it into."""
    if activation == "relu":
        return torch.ops.aten.threshold_backward(dy, y, 0)
    if activation == "gelu":
        z = aux[:out_features].t()
        return torch.ops.aten.gelu_backward(dy, z, approximate="tanh")
    return dy


def _backward_ops(dy):
    """``(linear_wgrad, linear_dgrad_act)``: the registered operators, or in an eager backward
    pass that records no graph (``create_graph=False``: with it, the operators keep their "no
    autograd formula" error for double backward) their implementations, which return ``None``
    for a bias gradient not asked for (the operators: an empty tensor)."""
    if not torch.is_grad_enabled() and eager(dy):
        return _wgrad, _dgrad_act
    return linear_wgrad, linear_dgrad_act


def _linear_backward(ctx, dy, _daux):
    x, weight, y, aux = ctx.saved_tensors
    if dy is None:
        return None, None, None, None
    dz = _act_grad(ctx.activation, dy.contiguous(), y, aux, weight.shape[0])
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    dx = dz @ weight if need_x else None
    dw = db = None
    if need_w or need_b:
        wgrad, _ = _backward_ops(dy)
        dw, db = wgrad(x, dz, ctx.has_bias and need_b)
        if not (ctx.has_bias and need_b):
            db = None
    return dx, dw if need_w else None, db, None


linear.register_autograd(_linear_backward, setup_context=_linear_setup)


# ------------------------------------------------------------------ backward operators
@torch.library.custom_op("cuweave::linear_wgrad", mutates_args=())
def linear_wgrad(x: torch.Tensor, dz: torch.Tensor,
                 bias: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dz.T @ x, dz.sum(0))``: the weight gradient (contiguous, ``(out, in)``) and, with
    ``bias``, the bias gradient from the same product (epilog BGRADB); else an empty tensor."""
    return _linear_wgrad_impl(x, dz, bias)


def _linear_wgrad_impl(x, dz, bias):
    dw, db = _wgrad(x, dz, bias)
    return dw, db if db is not None else dz.new_empty(0)


def _wgrad(x, dz, bias):
    """``(dW, db or None)``."""
    if not bias:
        return dz.t() @ x, None
    # (x.T @ dz) is (in, out) column-major: its transpose is the contiguous (out, in) dW
    dwt, aux = _engine.run(x.t(), dz, "bgradb")
    return dwt.t(), aux["bgradb"]


@linear_wgrad.register_fake
def _(x, dz, bias):
    return (dz.new_empty((dz.shape[1], x.shape[1])),
            dz.new_empty((dz.shape[1],) if bias else (0,)))


@torch.library.custom_op("cuweave::linear_dgrad_act", mutates_args=())
def linear_dgrad_act(dy: torch.Tensor, weight: torch.Tensor, aux: torch.Tensor,
                     activation: str, bias: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``dz = (dy @ weight) * activation'(z)`` from the forward's ``aux`` and, with ``bias``,
    ``dz.sum(0)`` in one product (DRELU_BGRAD / DGELU_BGRAD); else an empty tensor."""
    return _linear_dgrad_act_impl(dy, weight, aux, activation, bias)


def _linear_dgrad_act_impl(dy, weight, aux, activation, bias):
    dz, db = _dgrad_act(dy, weight, aux, activation, bias)
    return dz, db if db is not None else dz.new_empty(0)


def _dgrad_act(dy, weight, aux, activation, bias):
    """``(dz, db or None)``."""
    epilog = _BACKWARD[activation, bias]
    if not bias:  # no aux output
        return _engine.run(dy, weight, epilog, {_AUX[activation]: aux}), None
    dz, grads = _engine.run(dy, weight, epilog, {_AUX[activation]: aux})
    return dz, grads[epilog].reshape(-1)


@linear_dgrad_act.register_fake
def _(dy, weight, aux, activation, bias):
    return (dy.new_empty((dy.shape[0], weight.shape[1])),
            dy.new_empty((weight.shape[1],) if bias else (0,)))


# ------------------------------------------------------------------ forward: Linear-act-Linear
@torch.library.custom_op("cuweave::mlp", mutates_args=())
def mlp(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, w2: torch.Tensor,
        b2: torch.Tensor | None, activation: str
        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(y, h, aux)`` with ``h = activation(x @ w1.T + b1)`` and ``y = h @ w2.T + b2``."""
    return _mlp_impl(x, w1, b1, w2, b2, activation)


def _mlp_impl(x, w1, b1, w2, b2, activation):
    h, aux = _linear_impl(x, w1, b1, activation)
    return _linear_plain(h, w2, b2), h, aux


@mlp.register_fake
def _(x, w1, b1, w2, b2, activation):
    tokens, hidden = x.shape[0], w1.shape[0]
    shape, strides, dtype = aux_layout(activation, tokens, hidden, x.dtype)
    return (x.new_empty((tokens, w2.shape[0])), x.new_empty((tokens, hidden)),
            x.new_empty_strided(shape, strides, dtype=dtype))


def _mlp_setup(ctx, inputs, output):
    x, w1, b1, w2, b2, activation = inputs
    _, h, aux = output
    ctx.set_materialize_grads(False)
    ctx.mark_non_differentiable(h, aux)
    ctx.activation, ctx.has_b1, ctx.has_b2 = activation, b1 is not None, b2 is not None
    ctx.save_for_backward(x, w1, w2, h, aux)


#: where the first layer's bias gradient is reduced in the backward pass: ``"wgrad"`` (BGRADB
#: in the weight-gradient product, after DGELU/DRELU in the hidden-gradient product: cuBLASLt's
#: DGELU_BGRAD/DRELU_BGRAD kernels are slower) or ``"dgrad"`` (the *_BGRAD epilog)
FIRST_BIAS_GRAD = "wgrad"


def _mlp_backward(ctx, dy, _dh, _daux):
    x, w1, w2, h, aux = ctx.saved_tensors
    if dy is None:
        return (None,) * 6
    dy = dy.contiguous()
    need_x, need_w1, need_b1, need_w2, need_b2 = ctx.needs_input_grad[:5]
    need_b1 = ctx.has_b1 and need_b1
    dw2 = db2 = dw1 = db1 = dx = None
    wgrad, dgrad_act = _backward_ops(dy)
    if need_w2 or need_b2:
        dw2, db2 = wgrad(h, dy, ctx.has_b2 and need_b2)
    if need_x or need_w1 or need_b1:
        dz, db1 = _hidden_grad(ctx.activation, dy, x, w1, w2, h, aux,
                               need_b1 and (FIRST_BIAS_GRAD == "dgrad" or not need_w1),
                               dgrad_act)
        if need_w1:
            dw1, db = wgrad(x, dz, need_b1 and db1 is None)
            db1 = db if db1 is None and need_b1 else db1
        if need_x:
            dx = dz @ w1
    return (dx, dw1 if need_w1 else None, db1 if need_b1 else None,
            dw2 if need_w2 else None, db2 if ctx.has_b2 and need_b2 else None, None)


def _hidden_grad(activation, dy, x, w1, w2, h, aux, bias_grad: bool, dgrad_act):
    """``(dz, db1 or None)``: the gradient of the first product's output, with the first bias
    gradient when ``bias_grad``."""
    if activation == "none" or x.shape[0] == w1.shape[0]:
        # tokens == hidden: the aux matrix's shape fits both frames, and cuweave tells
        # them apart only by a bounded registry of recent forward outputs; unfused here
        dz = _act_grad(activation, dy @ w2, h, aux, w1.shape[0])
        return dz, dz.sum(0) if bias_grad else None
    dz, db1 = dgrad_act(dy, w2, aux, activation, bias_grad)
    return dz, db1 if bias_grad else None


mlp.register_autograd(_mlp_backward, setup_context=_mlp_setup)


# ------------------------------------------------------------------ the eager route
class _Linear(torch.autograd.Function):
    """``cuweave::linear``'s implementation, context setup and backward as a plain
    ``autograd.Function`` (``forward`` takes ``ctx``: ``Function.apply`` binds the arguments
    with ``inspect.signature`` on every call when ``setup_context`` is separate)."""

    @staticmethod
    def forward(ctx, x, weight, bias, activation):
        out = _linear_impl(x, weight, bias, activation)
        _linear_setup(ctx, (x, weight, bias, activation), out)
        return out

    backward = staticmethod(_linear_backward)


class _Mlp(torch.autograd.Function):
    """``cuweave::mlp``'s implementation, context setup and backward (see :class:`_Linear`)."""

    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2, activation):
        out = _mlp_impl(x, w1, b1, w2, b2, activation)
        _mlp_setup(ctx, (x, w1, b1, w2, b2, activation), out)
        return out

    backward = staticmethod(_mlp_backward)


#: ``Function.apply`` less its Python layer (the ``setup_context`` probe, the functorch test
#: :func:`eager` has made): torch's base ``apply`` on the arguments with dead functorch
#: wrappers unwrapped, as ``Function.apply`` unwraps them; ``None`` where torch lacks a part
_BASE_APPLY = getattr(torch._C, "_FunctionBase", type).__dict__.get("apply")
_unwrap_if_dead = getattr(getattr(torch._C, "_functorch", None), "unwrap_if_dead", None)


def _applier(cls):
    """``cls.apply`` for the eager route (see :data:`_BASE_APPLY`)."""
    if _BASE_APPLY is None or _unwrap_if_dead is None:
        return cls.apply
    base, unwrap = _BASE_APPLY.__get__(None, cls), _unwrap_if_dead

    def apply(x, *args):  # the last argument is the activation's name
        return base(unwrap(x), *[t if t is None or type(t) is str else unwrap(t)
                                 for t in args])

    return apply


_linear_apply, _mlp_apply = _applier(_Linear), _applier(_Mlp)


def _records(*tensors) -> bool:
    """Whether autograd records a call on ``tensors`` (grad mode and an input needing it)."""
    if not torch.is_grad_enabled():
        return False
    for t in tensors:
        if t is not None and t.requires_grad:
            return True
    return False


def linear_call(x, weight, bias, activation):
    """``cuweave::linear(x, weight, bias, activation)``, through the eager route where
    :func:`eager` allows it (same results, gradients and autocast behaviour)."""
    route = _route((x, weight, bias))
    if route == _OPERATORS:
        return linear(x, weight, bias, activation)
    if route == _FUNCTION:
        return _linear_apply(x, weight, bias, activation)
    return _linear_impl(x, weight, bias, activation)


def mlp_call(x, w1, b1, w2, b2, activation):
    """``cuweave::mlp(x, w1, b1, w2, b2, activation)``, through the eager route where
    :func:`eager` allows it."""
    route = _route((x, w1, b1, w2, b2))
    if route == _OPERATORS:
        return mlp(x, w1, b1, w2, b2, activation)
    if route == _FUNCTION:
        return _mlp_apply(x, w1, b1, w2, b2, activation)
    return _mlp_impl(x, w1, b1, w2, b2, activation)
