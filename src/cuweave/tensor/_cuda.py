"""The cuTENSOR engine of :mod:`cuweave.tensor`: descriptors, plan, workspace and the call.

One :class:`CudaEngine` per planned contraction. Tensor descriptors take each operand's view
(:func:`~._layout.operand_view`: diagonals as strided modes, broadcast and unit modes left out,
which cuTENSOR broadcasts); the addend (C of cuTENSOR) always shares D's descriptor, as
cuTENSOR requires: an addend of another layout is copied into the result first and the run
passes D as C. ``cutensorContract``/``cutensorContractTrinary`` are called without ``argtypes``
on ctypes objects built once at plan time: a run patches the pointers it changes.

Handles are made once per device for the process (``options.handle`` overrides). Plans follow
the plan preference (:class:`~._preference.ContractionPlanPreference`): algorithm, JIT, the
kernel rank, and autotuning through cuTENSOR's incremental mode and plan cache.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from .._bindings import cutensor as ct
from .._bindings.library_types import DATA_TYPE
from .._internal import cuda
from .._internal.memory import parse_memory_limit
from .._internal.resources import StreamResources
from .._internal.staging import shared_stager

__all__ = ["CudaEngine", "handle_for"]

_handles: dict = {}
_lock = threading.Lock()


def handle_for(device_id: int) -> int:
    """One cuTENSOR handle per device for the process (made on first use)."""
    h = _handles.get(device_id)
    if h is None:
        with _lock:
            h = _handles.get(device_id)
            if h is None:
                cuda.set_device(device_id)
                h = _handles[device_id] = ct.create()
    return h


class CudaEngine:
    """Descriptors, plan and buffers of one contraction on one device.

    Parameters
    ----------
    layouts : dict
        Tensor name (``"a"``, ``"b"``, ``"c"`` of ternary ones, ``"d"`` the result) -> the
        ``(modes, extents, strides)`` cuTENSOR sees, and its pointer alignment in bytes under
        ``"align"``.
    """

    def __init__(self, n_inputs, layouts, dtype, compute, ops, device_id, package, host,
                 options):
        self.n, self.layouts, self.dtype, self.compute, self.ops = (n_inputs, layouts, dtype,
                                                                     compute, ops)
        self.device_id, self.host = device_id, host
        cuda.set_device(device_id)
        self.handle = options.handle or handle_for(device_id)
        self.limit = parse_memory_limit(options.memory_limit or "80%",
                                        cuda.total_memory(device_id))
        self.res = StreamResources(device_id, None if host else package, options.allocator)
        self.stager = shared_stager() if host else None
        self._descs: list = []
        self.op_desc = self.plan_ptr = None
        self.workspace_size = 0
        self.workspace_ptr = 0
        self.plan_count = 0
        scalar = {"float16": np.float32, "bfloat16": np.float32, "float32": np.float32,
                  "float64": np.float64, "complex64": np.complex64,
                  "complex128": np.complex128}[dtype]
        self.alpha = np.zeros(1, scalar)
        self.beta = np.zeros(1, scalar)
        vp = ctypes.c_void_p
        # handle, plan, alpha, A, B, [C3], beta, C, D, workspace, size, stream
        self._ptrs = [vp() for _ in range(9 + (self.n == 3))] + [ctypes.c_uint64(), vp()]
        self.args = None
        self._fn = ct.bare("cutensorContract" if self.n == 2 else "cutensorContractTrinary")
        self.multi_device = cuda.device_count() > 1

    # ------------------------------------------------------------------ planning
    def _descriptors(self) -> None:
        if self.op_desc is not None:
            return
        dt = int(DATA_TYPE[self.dtype])
        descs, modes = {}, {}
        for name, (m, ext, strides, align) in self.layouts.items():
            descs[name] = ct.create_tensor_descriptor(self.handle, ext, strides, dt, align)
            self._descs.append(descs[name])
            modes[name] = m
        compute = ct.compute_descriptor(self.compute.c_name)
        ops = [int(o) for o in self.ops]
        ident = int(ct.Operator.OP_IDENTITY)
        if self.n == 2:
            self.op_desc = ct.create_contraction(
                self.handle, descs["a"], modes["a"], ops[0], descs["b"], modes["b"], ops[1],
                descs["d"], modes["d"], ident, descs["d"], modes["d"], compute)
        else:
            self.op_desc = ct.create_contraction_trinary(
                self.handle, descs["a"], modes["a"], ops[0], descs["b"], modes["b"], ops[1],
                descs["c"], modes["c"], ops[2], descs["d"], modes["d"], ident, descs["d"],
                modes["d"], compute)

    def plan(self, prefs: dict) -> None:
        """Make (or remake) the plan under the preference values ``prefs`` (attribute ->
        value, those given by the user; ``algo`` and ``jit`` always)."""
        if self.multi_device:
            cuda.set_device(self.device_id)
        self._descriptors()
        pref = ct.create_plan_preference(self.handle, prefs.get("algo", ct.Algo.DEFAULT),
                                         prefs.get("jit", ct.JitMode.NONE))
        try:
            for name, attr in _PREF_ATTRS.items():
                if name in prefs:
                    ct.plan_preference_set_attribute(self.handle, pref, attr, prefs[name])
            plan = ct.create_plan(self.handle, self.op_desc, pref, self.limit)
        finally:
            ct.destroy_plan_preference(pref)
        self._destroy_plan()
        self.plan_ptr = plan
        self.plan_count += 1
        self.workspace_size = ct.plan_get_attribute(self.handle, plan,
                                                    ct.PlanAttribute.REQUIRED_WORKSPACE)
        if self.workspace_size > self.res.size("work"):
            self.workspace_ptr = 0  # (re)allocated by the next run's enter()
        else:
            self._ptrs[-2].value = self.workspace_size
        self._build_args()

    def _build_args(self) -> None:
        p = self._ptrs
        p[0].value, p[1].value = self.handle, self.plan_ptr
        p[2].value = self.alpha.ctypes.data
        p[5 if self.n == 2 else 6].value = self.beta.ctypes.data
        self.args = tuple(p)

    # ------------------------------------------------------------------ buffers
    def enter(self, stream: int) -> None:
        """A run on ``stream``: the device current (several devices), ordered after the
        previous run's stream, and the workspace there."""
        if self.multi_device:
            cuda.set_device(self.device_id)
        if stream != self.res.last:
            self.res.enter(stream)
        if self.workspace_ptr == 0 and self.workspace_size:
            self.ensure_workspace(stream)

    def ensure_workspace(self, stream: int) -> None:
        self.workspace_ptr = self.res.get("work", self.workspace_size, stream)
        self._ptrs[-3].value = self.workspace_ptr
        self._ptrs[-2].value = self.workspace_size

    def release_workspace(self) -> None:
        self.res.release("work")
        self.workspace_ptr = 0
        self._ptrs[-3].value = None
        self._ptrs[-2].value = 0

    def device_buffer(self, name: str, nbytes: int, stream: int) -> int:
        return self.res.get(name, nbytes, stream)

    def upload(self, items, stream: int) -> list:
        """``[(name, host array), ...]`` copied into the named device buffers (one pipelined
        transfer); their pointers."""
        ptrs = [self.res.get(name, max(host.nbytes, 1), stream) for name, host in items]
        self.stager.upload_many([(h, p) for (_, h), p in zip(items, ptrs)], stream, direct=True)
        return ptrs

    def download(self, ptr: int, host: np.ndarray, stream: int) -> None:
        self.stager.download(ptr, host, stream)

    # ------------------------------------------------------------------ the call
    def make_call(self):
        """``call(pointers, stream)``: one contraction; ``pointers`` are A, B, (C3,) C, D."""
        ptrs, eng, fn = self._ptrs, self, self._fn
        slots = [ptrs[3], ptrs[4]] + ([ptrs[5]] if self.n == 3 else []) + ptrs[-5:-3]
        ps = ptrs[-1]
        name = "cutensorContract" if self.n == 2 else "cutensorContractTrinary"

        def call(pointers, stream) -> None:
            for slot, value in zip(slots, pointers):
                slot.value = value
            ps.value = stream
            status = fn(*eng.args)
            if status:
                raise ct.CutensorError(status, name)

        return call

    # ------------------------------------------------------------------ release
    def _destroy_plan(self) -> None:
        if self.plan_ptr is not None:
            ct.destroy_plan(self.plan_ptr)
            self.plan_ptr = None

    def free(self) -> None:
        try:
            self.res.close()
        finally:
            self._destroy_plan()
            if self.op_desc is not None:
                ct.destroy_operation_descriptor(self.op_desc)
                self.op_desc = None
            for d in self._descs:
                ct.destroy_tensor_descriptor(d)
            self._descs = []


_PREF_ATTRS = {
    "autotune_mode": ct.PlanPreferenceAttribute.AUTOTUNE_MODE,
    "cache_mode": ct.PlanPreferenceAttribute.CACHE_MODE,
    "incremental_count": ct.PlanPreferenceAttribute.INCREMENTAL_COUNT,
    "kernel_rank": ct.PlanPreferenceAttribute.KERNEL_RANK,
    "gpu_arch": ct.PlanPreferenceAttribute.GPU_ARCH,
}
