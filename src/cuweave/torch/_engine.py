"""Running the layers' matrix products: planned :class:`~cuweave.linalg.advanced.Matmul`
objects per problem, on torch's current stream, capturable in CUDA graphs.

CPU tensors go through the function form :func:`~cuweave.linalg.advanced.matmul` with
``execution="cpu"``. CUDA tensors use planned ``Matmul`` objects keyed by everything that
shapes a plan (epilog, compute type or fp8 result type, device, and for each operand and epilog
input its dtype, shape, strides and pointer alignment), held in a plain dict of idle entries: a
call pops its entry (so two threads never share a ``Matmul``) and puts it back, which also
keeps the dict in least-recently-used order; the count bound (``_MAX_PLANS``) is enforced only
when a new plan is made. An entry remembers the stream of its last run:

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

import threading

import torch

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
#: the layers' idle planned products, key -> _Entry, least recently used first (a run pops
#: its entry and puts it back at the end). Count-bounded only, and only when a plan is made
#: (never during a CUDA graph capture, where freeing could synchronize).
_idle: dict = {}
#: entries put back while their key already had an idle one (two threads, one problem)
_spare: list = []
_count = 0  # plans held: idle, spare and running
_lock = threading.Lock()
_TF32 = MatmulComputeType.COMPUTE_32F_FAST_TF32
_OPTIONS: dict = {}
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
#: a pointer's alignment (up to 256 bytes) from its low byte: ``_ALIGN[ptr & 255]``
_ALIGN = tuple(256 if v == 0 else v & -v for v in range(256))


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
           a.dtype, a.shape, a.stride(), _ALIGN[a.data_ptr() & 255],
           b.dtype, b.shape, b.stride(), _ALIGN[b.data_ptr() & 255])
    if inputs:
        for name, t in inputs.items():
            key += (name, t.dtype, t.shape, t.stride(), _ALIGN[t.data_ptr() & 255])
    return key


def _current_stream(device_index: int) -> int:
    if _raw_stream is not None:
        return _raw_stream(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


def plan_count() -> int:
    """Number of planned CUDA products held by the layers."""
    return _count


def clear_plans() -> None:
    """Free every planned product (not while a CUDA graph is being captured; products running
    in other threads meanwhile are kept)."""
    global _idle, _spare, _count
    with _lock:
        idle, spare, _idle, _spare = _idle, _spare, {}, []
        victims = [*idle.values(), *spare]
        _count -= len(victims)
    for entry in victims:
        entry.free()


def run(a: torch.Tensor, b: torch.Tensor, epilog: str, inputs: dict | None = None,
        scales: dict | None = None, out_dtype=None):
    """``epilog(a @ b)`` with the epilog's inputs; returns the result, or ``(result, aux)``
    for epilogs with auxiliary outputs (see :func:`cuweave.linalg.advanced.matmul`).

    fp8 operands take ``scales`` (``{"a": ..., "b": ...}``, float32 tensors of one element)
    and ``out_dtype`` (the result's torch dtype)."""
    kind = _compute_kind(a, out_dtype)
    if not a.is_cuda:
        return matmul(a, b, epilog=epilog, epilog_inputs=inputs, execution="cpu",
                      quantization_scales=scales, options=_options(kind))
    device = a.get_device()
    key = _key(epilog, kind, device, a, b, inputs)
    stream = _current_stream(device)
    entry = _idle.pop(key, None)
    if entry is None:
        entry = _new_entry(a, b, epilog, inputs, scales, kind, stream)
    else:
        try:
            entry.mm.reset_operands_unchecked(a, b, epilog_inputs=inputs,
                                              quantization_scales=scales)
        except BaseException:
            _put(key, entry)
            raise
    try:
        if entry.stream != stream and torch.cuda.is_current_stream_capturing():
            out = _forked(entry, a.device, stream)
        else:
            out = entry.mm.execute()
            entry.stream = stream
    finally:
        if _idle.setdefault(key, entry) is not entry:  # _put, inlined
            _spare.append(entry)
    return out


def _put(key, entry) -> None:
    """Give ``entry`` back (most recently used); a second idle entry of ``key`` is a spare."""
    if _idle.setdefault(key, entry) is not entry:
        _spare.append(entry)


def _new_entry(a, b, epilog, inputs, scales, kind, stream) -> _Entry:
    """A new planned product (refused during a capture), counted; the least recently used
    idle products beyond ``_MAX_PLANS`` are freed (spares first)."""
    global _count
    if torch.cuda.is_current_stream_capturing():
        raise InvalidStateError(
            "cuweave.torch layers must run once outside CUDA graph capture with the "
            f"shapes and dtypes being captured (a warm-up step); got a new problem "
            f"{tuple(a.shape)} @ {tuple(b.shape)} ({a.dtype}, {epilog}) during capture")
    entry = _Entry(_planned(a, b, epilog, inputs, scales, kind), stream)
    victims = []
    with _lock:
        _count += 1
        while _count > _MAX_PLANS:
            victim = _spare.pop() if _spare else None
            for old in () if victim is not None else list(_idle):
                victim = _idle.pop(old, None)
                if victim is not None:
                    break
            if victim is None:  # every other plan is running
                break
            victims.append(victim)
            _count -= 1
    for victim in victims:
        victim.free()
    return entry


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

