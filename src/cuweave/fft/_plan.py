"""A planned FFT (:class:`Plan`) and one execution of it (:class:`Call`).

``plan.run(call, direction=None)`` is the only way a transform is executed: :class:`~.fft.FFT`
holds one plan and its current call, the function forms take a cached plan and run a fresh
call. A plan is made once from a :class:`~._spec.Spec`, the planned direction, ``norm`` and
the callbacks: the cuFFT plan (or the CPU plan), the buffers its runs share and the run
itself. Nothing in it changes after, except the cuFFT stream and buffers a run orders, which
is why one plan serves one caller at a time.
"""

from __future__ import annotations

from .._internal.arrays import Operand
from .._internal.errors import InvalidOptionError, UnsupportedLayoutError
from .._internal.packages import adapter
from .._internal.resources import StreamResources
from ._cpu import CpuPlan
from ._cuda_plan import CudaPlan
from ._layout import result_perm
from ._options import norm_scale
from ._run import allocate_buffers, build_run

__all__ = ["Plan", "Call", "cpu_perm", "new_call"]


class Call:
    """The operand and stream of one execution of a :class:`Plan`.

    ``obj`` is the operand as given, ``ptr`` its data pointer; ``op`` its record (``None`` for
    a function-form call of a plain torch/CuPy device array whose plan needs no record:
    ``plan.needs_record``); ``stream`` a resolved handle given for this execution (``None``:
    the package's current stream) and ``stored`` the handle of the stream given at
    construction, used where the package has no current stream of its own.
    """

    __slots__ = ("obj", "ptr", "op", "stream", "stored")

    def __init__(self, obj, ptr, op=None, stream=None, stored=None):
        self.obj = obj
        self.ptr = ptr
        self.op = op
        self.stream = stream
        self.stored = stored

    @classmethod
    def of(cls, op, stream=None, stored=None) -> Call:
        """A call on the operand record ``op``."""
        return cls(op.obj, op.ptr, op, stream, stored)

    def copy(self, **changes) -> Call:
        """This call with ``changes`` (field -> value)."""
        new = Call(self.obj, self.ptr, self.op, self.stream, self.stored)
        for k, v in changes.items():
            setattr(new, k, v)
        return new


def new_call(spec, op, stream) -> Call:
    """The function forms' call of ``op`` on ``stream`` (given for this call on CUDA, the
    stream of the round trip for a device operand on the CPU; validated otherwise)."""
    if stream is None:
        return Call.of(op)
    s = spec.stream(stream).ptr
    return Call.of(op, s if spec.cuda else None, s if spec.to_host else None)


def cpu_perm(spec) -> tuple[int, ...]:
    """The axis order of a CPU execution's result in memory (nvmath-python's strides)."""
    return result_perm(spec.shape, spec.strides, spec.axes, spec.fft_type,
                       spec.options.result_layout)


def check_writable(op, inplace: bool) -> None:
    """An in-place result must be writable back into the device operand ``op`` when it is
    transformed on the CPU (checked at plan time)."""
    if inplace and not op.is_dense() and not adapter(op.package).can_broadcast:
        raise UnsupportedLayoutError(
            f"operand must be dense to be transformed in place with CPU execution ({op.package} "
            f"device arrays are written back as one copy), got strides {op.strides!r}; "
            "pass a dense copy or use execution='cuda'")


class Plan:
    """An FFT planned for one :class:`~._spec.Spec` (see the module docstring).

    Made by ``Plan(spec, direction, norm, prolog, epilog, logger, call)``; ``call`` is the
    first call (its stream orders the buffers allocated now, its operand is checked).
    """

    def __init__(self, spec, direction, norm, prolog, epilog, logger, call):
        self.spec = spec
        self.direction = direction
        self.norm = norm
        self.adapter = adapter(spec.package)
        #: a template of the operand's package and memory space (results are made like it)
        self.ref = Operand(None, spec.package, 0, (), (), spec.dtype, spec.device,
                           spec.device_id if spec.device == "cuda" else None)
        self.cuda_plan = self.cpu_plan = self.bufs = None
        #: ``[stream]`` last set on the cuFFT plan (``[None]``: order again)
        self.stream_state = [None]
        if not spec.cuda:
            if prolog is not None or epilog is not None:
                raise InvalidOptionError(
                    "prolog and epilog must be None with CPU execution, got a callback")
            self.cpu_plan = _cpu_plan(spec)
            if spec.to_host and call is not None:
                check_writable(call.op, spec.inplace)
        else:
            scale = norm_scale(norm, direction, spec.n_points)
            self.bufs = StreamResources(spec.device_id, spec.package, spec.options.allocator)
            try:
                self.cuda_plan = CudaPlan(spec, prolog=prolog, epilog=epilog, scale=scale,
                                          logger=logger)
            except BaseException:
                self.bufs.close()
                raise
        #: a call must carry the operand's record (else its object and pointer do)
        self.needs_record = not spec.cuda or spec.staged
        #: the cuFFT work area's bytes (what the plan cache counts)
        self.workspace_size = self.cuda_plan.workspace_size if self.cuda_plan is not None else 0
        try:
            self.run = build_run(self)
            if spec.cuda:
                allocate_buffers(self, call)  # no lazy work left for a first run (graphs)
        except BaseException:
            self.free()
            raise

    def respecified(self, spec) -> Plan:
        """This plan for ``spec``, an operand layout the same library plan runs (batch axes
        rearranged): the same cuFFT plan and buffers, a run of the new layout."""
        new = object.__new__(Plan)
        new.__dict__.update(self.__dict__)
        new.spec = spec
        new.ref = Operand(None, spec.package, 0, (), (), spec.dtype, spec.device,
                          spec.device_id if spec.device == "cuda" else None)
        if new.cpu_plan is not None and cpu_perm(spec) != cpu_perm(self.spec):
            new.cpu_plan = _cpu_plan(spec)
        new.run = build_run(new)
        return new

    def release_workspace(self) -> None:
        """Return the work area to the pool (reallocated by the next run)."""
        if self.bufs is not None and self.bufs.has("work"):
            self.bufs.release("work")

    def free(self) -> None:
        """Destroy the cuFFT plan and return the buffers."""
        self.run = None
        self.workspace_size = 0
        plan, self.cuda_plan = self.cuda_plan, None
        self.cpu_plan = None
        if plan is not None:
            plan.destroy()
        bufs, self.bufs = self.bufs, None
        if bufs is not None:
            bufs.close()


def _cpu_plan(spec) -> CpuPlan:
    out_lengths = [spec.out_shape[a] for a in spec.axes]
    perm = None if spec.inplace else cpu_perm(spec)
    return CpuPlan(spec.fft_type, spec.axes, out_lengths, spec.space.threads, spec.dtype,
                   perm=perm)
