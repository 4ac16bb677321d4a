"""Running the layers' matrix products: planned :class:`~cuweave.linalg.advanced.Matmul`
objects per problem, on torch's current stream, capturable in CUDA graphs.

CPU tensors go through the function form :func:`~cuweave.linalg.advanced.matmul` with
``execution="cpu"``. CUDA tensors use a small cache of planned ``Matmul`` objects keyed by
everything that shapes a plan (epilog, shapes, strides, dtypes, device, pointer alignment,
compute type). An entry remembers the stream of its last run:

* outside a CUDA graph capture a run simply uses torch's current stream (the ``Matmul`` orders
  itself after its previous stream when it changes);
* inside a capture a planned ``Matmul`` must not be made to wait on work recorded outside the
  capture (CUDA rejects that: ``cudaErrorStreamCaptureIsolation``). When the capturing stream
  is not the entry's last stream, the entry's stream is forked into the capture (it waits on
  the capturing stream), the product is queued there, and the capturing stream joins it
  again: a fork/join the graph records as two dependencies, with no host synchronization.

Large products (``AUTOTUNE_FLOPS``) are autotuned when planned. Plans are made only outside a
capture (a plan allocates a workspace and selects algorithms):
run a layer once eagerly (the usual warm-up before ``torch.cuda.graph``) with the shapes you
capture.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import torch

from .._internal.errors import InvalidStateError
from ..linalg.advanced import Matmul, MatmulComputeType, MatmulOptions, matmul

__all__ = ["run", "plan_count", "clear_plans"]

_MAX_PLANS = 64
#: products of at least this many flops are autotuned when planned (first call)
AUTOTUNE_FLOPS = 2.0 ** 33
AUTOTUNE_ITERATIONS = 3
_plans: OrderedDict = OrderedDict()
_lock = threading.Lock()
_OPTIONS = {None: MatmulOptions(),
            "tf32": MatmulOptions(compute_type=MatmulComputeType.COMPUTE_32F_FAST_TF32)}
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


class _Entry:
    __slots__ = ("mm", "stream")

    def __init__(self, mm, stream):
        self.mm, self.stream = mm, stream


def _align(ptr: int) -> int:
    return min(256, ptr & -ptr) if ptr else 256


def _compute_kind(t: torch.Tensor):
    """``"tf32"`` where torch itself would run a float32 product on tensor cores."""
    if t.dtype == torch.float32 and torch.get_float32_matmul_precision() != "highest":
        return "tf32"
    return None


def _sig(t: torch.Tensor) -> tuple:
    return (t.shape, t.stride(), t.dtype, _align(t.data_ptr()))


def _current_stream(device_index: int) -> int:
    if _raw_stream is not None:
        return _raw_stream(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


def plan_count() -> int:
    """Number of planned CUDA products held by the layers."""
    return len(_plans)


def clear_plans() -> None:
    """Free every planned product (not while a CUDA graph is being captured)."""
    with _lock:
        entries = list(_plans.values())
        _plans.clear()
    for e in entries:
        e.mm.free()


def run(a: torch.Tensor, b: torch.Tensor, epilog: str, inputs: dict | None = None):
    """``epilog(a @ b)`` with the epilog's inputs; returns the result, or ``(result, aux)``
    for epilogs with auxiliary outputs (see :func:`cuweave.linalg.advanced.matmul`)."""
    kind = _compute_kind(a)
    if a.device.type != "cuda":
        return matmul(a, b, epilog=epilog, epilog_inputs=inputs, execution="cpu",
                      options=_OPTIONS[kind])
    key = (epilog, kind, a.device.index, _sig(a), _sig(b),
           None if not inputs else tuple((k, _sig(v)) for k, v in inputs.items()))
    with _lock:
        entry = _plans.pop(key, None)
    capturing = torch.cuda.is_current_stream_capturing()
    stream = _current_stream(a.device.index)
    try:
        if entry is None:
            if capturing:
                raise InvalidStateError(
                    "cuweave.torch layers must run once outside CUDA graph capture with the "
                    f"shapes and dtypes being captured (a warm-up step); got a new problem "
                    f"{tuple(a.shape)} @ {tuple(b.shape)} ({a.dtype}, {epilog}) during capture")
            mm = Matmul(a, b, options=_OPTIONS[kind])
            mm.plan(epilog=epilog, epilog_inputs=inputs)
            if 2.0 * a.shape[0] * a.shape[1] * b.shape[1] >= AUTOTUNE_FLOPS:
                mm.autotune(iterations=AUTOTUNE_ITERATIONS)
            entry = _Entry(mm, stream)
        else:
            entry.mm.reset_operands_unchecked(a, b, epilog_inputs=inputs)
        if capturing and entry.stream != stream:
            out = _forked(entry, a.device, stream)
        else:
            out = entry.mm.execute()
            entry.stream = stream
    except BaseException:
        if entry is not None and key is not None:
            _put(key, entry, capturing)
        raise
    _put(key, entry, capturing)
    return out


def _forked(entry: _Entry, device, stream: int):
    """Run ``entry`` inside a capture on its own last stream, forked from and joined to the
    capturing stream (see the module documentation)."""
    cur = torch.cuda.ExternalStream(stream, device=device)
    side = torch.cuda.ExternalStream(entry.stream, device=device)
    side.wait_stream(cur)
    with torch.cuda.stream(side):
        out = entry.mm.execute()
    cur.wait_stream(side)
    return out


def _put(key, entry: _Entry, capturing: bool) -> None:
    evicted = []
    with _lock:
        _plans[key] = entry
        while not capturing and len(_plans) > _MAX_PLANS:  # freeing may synchronize
            evicted.append(_plans.popitem(last=False)[1])
    for e in evicted:
        e.mm.free()
