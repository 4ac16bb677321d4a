"""Running the layers' matrix products: planned :class:`~cuweave.linalg.advanced.Matmul`
objects per problem, on torch's current stream, capturable in CUDA graphs.

CPU tensors go through the function form :func:`~cuweave.linalg.advanced.matmul` with
``execution="cpu"``. CUDA tensors use planned ``Matmul`` objects keyed by everything that
shapes a plan (epilog, compute type or fp8 result type, device, and for each operand and epilog
input its dtype, shape, strides and pointer alignment), held in the project's
:class:`~cuweave._internal.cache.PlanCache` (bounded by count only): a call pops its entry (so
two threads never share a ``Matmul``) and puts it back, one lock-free dict operation each; the
bound (``_MAX_PLANS``) is enforced when a new plan is put the first time, which never happens
during a CUDA graph capture. An entry remembers the stream of its last run:

* outside a CUDA graph capture a run simply uses torch's current stream (the ``Matmul`` orders
  itself after its previous stream when it changes);
* inside a capture a planned ``Matmul`` must not be made to wait on work recorded outside the
  capture (CUDA rejects that: ``cudaErrorStreamCaptureIsolation``). When the capturing stream
  is not the entry's last stream, the entry's stream is forked into the capture (it waits on
  the capturing stream), the product is queued there, and the capturing stream joins it
  again: a fork/join the graph records as two dependencies, with no host synchronization.
  (Whether a capture is under way is asked only when the stream changed or a plan is missing:
  a run on its entry's last stream is the same inside and outside a capture.)

Large products (``AUTOTUNE_FLOPS``) are autotuned when planned, over the heuristics' first
``AUTOTUNE_CANDIDATES`` algorithms. Plans are made only outside a
capture (a plan allocates a workspace and selects algorithms):
run a layer once eagerly (the usual warm-up before ``torch.cuda.graph``) with the shapes you
capture.
"""

from __future__ import annotations

import torch

from .._internal.arrays import ALIGNMENT
from .._internal.cache import PlanCache
from .._internal.errors import InvalidStateError
from ..linalg.advanced import (
    Matmul,
    MatmulComputeType,
    MatmulOptions,
    MatmulPlanPreferences,
    matmul,
)

__all__ = ["run", "plan_count", "clear_plans"]

_MAX_PLANS = 64
#: products of at least this many flops are autotuned when planned (first call)
AUTOTUNE_FLOPS = 2.0 ** 33
AUTOTUNE_ITERATIONS = 3
#: candidates the heuristics return for a product that is autotuned (others: the first of 8)
AUTOTUNE_CANDIDATES = 16
#: the layers' planned products (count-bounded only: a plan is put the first time, and may
#: evict others, only outside a CUDA graph capture, where freeing could synchronize)
_plans = PlanCache(maxsize=_MAX_PLANS, max_workspace_bytes=1 << 62)
_TF32 = MatmulComputeType.COMPUTE_32F_FAST_TF32
_OPTIONS: dict = {}
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_F32 = torch.float32


class _Entry:
    """A planned product and the stream of its last run."""

    __slots__ = ("mm", "stream")

    def __init__(self, mm, stream):
        self.mm, self.stream = mm, stream

    def free(self) -> None:
        self.mm.free()


def _compute_kind(t: torch.Tensor, out_dtype):
    """``"tf32"`` where torch itself would run a float32 product on tensor cores; the result
    dtype's name for fp8 operands; else None."""
    if out_dtype is not None:
        return str(out_dtype).rpartition(".")[2]
    if t.dtype is torch.float32 and torch.get_float32_matmul_precision() != "highest":
        return "tf32"
    return None


def _options(kind) -> MatmulOptions:
    opts = _OPTIONS.get(kind)
    if opts is None:
        opts = _OPTIONS[kind] = (MatmulOptions() if kind is None else
                                 MatmulOptions(compute_type=_TF32) if kind == "tf32" else
                                 MatmulOptions(result_type=kind))
    return opts


def _key(epilog: str, kind, device: int, a, b, inputs) -> tuple:
    """The plan key, one tuple: ``epilog, kind, device``, then per operand and epilog input
    (name first) ``dtype, shape, strides, alignment`` (torch's own ``Size`` and stride tuple:
    cheaper to build than unpacked integers, and exact)."""
    key = (epilog, kind, device,
           a.dtype, a.shape, a.stride(), ALIGNMENT[a.data_ptr() & 255],
           b.dtype, b.shape, b.stride(), ALIGNMENT[b.data_ptr() & 255])
    if inputs:
        for name, t in inputs.items():
            key += (name, t.dtype, t.shape, t.stride(), ALIGNMENT[t.data_ptr() & 255])
    return key


def _stream_object_handle(device_index: int) -> int:
    return torch.cuda.current_stream(device_index).cuda_stream


#: torch's current stream of a device: the raw accessor where torch has it (no Stream object)
_current_stream = _raw_stream or _stream_object_handle


def plan_count() -> int:
    """Number of planned CUDA products held by the layers."""
    return _plans.held


def clear_plans() -> None:
    """Free every planned product (not while a CUDA graph is being captured; products running
    in other threads meanwhile are kept)."""
    _plans.clear()


def run(a: torch.Tensor, b: torch.Tensor, epilog: str, inputs: dict | None = None,
        scales: dict | None = None, out_dtype=None):
    """``epilog(a @ b)`` with the epilog's inputs; returns the result, or ``(result, aux)``
    for epilogs with auxiliary outputs (see :func:`cuweave.linalg.advanced.matmul`).

    fp8 operands take ``scales`` (``{"a": ..., "b": ...}``, float32 tensors of one element)
    and ``out_dtype`` (the result's torch dtype)."""
    kind = None if out_dtype is None and a.dtype is not _F32 else _compute_kind(a, out_dtype)
    if not a.is_cuda:
        return matmul(a, b, epilog=epilog, epilog_inputs=inputs, execution="cpu",
                      quantization_scales=scales, options=_options(kind))
    device = a.get_device()
    key = _key(epilog, kind, device, a, b, inputs)
    stream = _current_stream(device)
    entry = _plans.pop(key)
    if entry is None:
        entry = _new_entry(a, b, epilog, inputs, scales, kind, stream)
    else:
        try:
            entry.mm.reset_operands_unchecked(a, b, epilog_inputs=inputs,
                                              quantization_scales=scales)
        except BaseException:
            _plans.put(key, entry)
            raise
    try:
        if entry.stream != stream and torch.cuda.is_current_stream_capturing():
            out = _forked(entry, a.device, stream)
        else:
            out = entry.mm.execute()
            entry.stream = stream
    finally:
        _plans.put(key, entry)
    return out


def _new_entry(a, b, epilog, inputs, scales, kind, stream) -> _Entry:
    """A new planned product (refused during a capture); the cache counts it, and frees the
    least recently used idle products beyond ``_MAX_PLANS``, when it is first put back."""
    if torch.cuda.is_current_stream_capturing():
        raise InvalidStateError(
            "cuweave.torch layers must run once outside CUDA graph capture with the "
            f"shapes and dtypes being captured (a warm-up step); got a new problem "
            f"{tuple(a.shape)} @ {tuple(b.shape)} ({a.dtype}, {epilog}) during capture")
    return _Entry(_planned(a, b, epilog, inputs, scales, kind), stream)


def _planned(a, b, epilog, inputs, scales, kind) -> Matmul:
    """A new planned product; large ones autotuned over ``AUTOTUNE_CANDIDATES`` algorithms."""
    mm = Matmul(a, b, quantization_scales=scales, options=_options(kind))
    try:
        tune = 2.0 * a.shape[0] * a.shape[1] * b.shape[1] >= AUTOTUNE_FLOPS
        prefs = MatmulPlanPreferences(limit=AUTOTUNE_CANDIDATES) if tune else None
        mm.plan(epilog=epilog, epilog_inputs=inputs, preferences=prefs)
        if tune:
            mm.autotune(iterations=AUTOTUNE_ITERATIONS)
    except BaseException:
        mm.free()
        raise
    return mm


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

