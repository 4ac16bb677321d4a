"""The GPU data plane: CuPy arrays and CUDA torch tensors, moved by NCCL, computed by cuweave.

Same methods as :class:`~cuweave.distributed._backend.HostBackend`. Exchanges run the same
:class:`~cuweave.distributed._backend.ExchangePlan` as CPU ranks, with the package's own array
operations (:class:`TorchOps`, :class:`CupyOps`: each peer's block is packed into one contiguous
device buffer, or sent straight from the operand when it already is one; a block received into
a contiguous region of the result lands there directly) and NCCL as the transport: every send
and receive of one exchange in one ``ncclGroupStart``/``ncclGroupEnd``, on the package's current
stream, in bytes. The local transforms and products are cuweave's own engines on the device
operands (:func:`cuweave.fft.fft` and friends on cuFFT, :func:`cuweave.linalg.advanced.matmul`
on cuBLASLt), on that same stream, so nothing synchronizes the host.

The NCCL communicator is made once per :func:`~cuweave.distributed.initialize` (process 0's
unique id reaches the others through the process group), on the ``device_id`` given there, at
the first exchange between GPU operands (or at ``initialize`` with ``backends=["nccl"]``), and
released by :func:`~cuweave.distributed.finalize`. One process alone needs no NCCL.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np

from .._bindings import nccl
from .._internal.errors import CudaUnavailableError, InvalidOperandError, InvalidOptionError
from .._internal.logging import get_logger
from ._backend import ExchangePlan, axis_indices
from ._errors import UnsupportedMemorySpaceError
from ._runtime import DistributedContext, agree, require_context

__all__ = ["GpuBackend", "GPU", "TorchOps", "CupyOps", "ops_for", "nccl_transport",
           "communicator", "package_of"]

_log = get_logger("distributed")
_lock = threading.Lock()


def package_of(x) -> str:
    """``'torch'`` or ``'cupy'`` for a GPU array those packages own; raises for any other."""
    module = type(x).__module__.split(".")[0]
    if module in ("torch", "cupy") and module in sys.modules:
        return module
    raise UnsupportedMemorySpaceError(
        f"GPU operands must be CuPy arrays or CUDA torch tensors in cuweave.distributed, got "
        f"{type(x).__module__}.{type(x).__name__} (wrap it with cupy.asarray or "
        "torch.as_tensor, which share its memory)")


def _all_slices(idx) -> bool:
    return all(isinstance(i, slice) for i in idx)


def _slices_then_full(idx):
    """The basic-slicing part of ``idx``: its slices, ``slice(None)`` for index arrays."""
    return tuple(i if isinstance(i, slice) else slice(None) for i in idx)


class TorchOps:
    """:class:`~cuweave.distributed._backend.NumpyOps`' operations on CUDA torch tensors."""

    name = "torch"

    def __init__(self):
        self.torch = sys.modules["torch"]

    def key(self, like) -> tuple:
        return ("torch", like.device.index)

    def device_index(self, x) -> int:
        return x.device.index

    def device_count(self) -> int:
        return self.torch.cuda.device_count() if self.torch.cuda.is_available() else 0

    def device_scope(self, x):
        return self.torch.cuda.device(x.device)

    def stream(self, like) -> int:
        return self.torch.cuda.current_stream(like.device).cuda_stream

    def index(self, positions, like):
        return tuple(i if isinstance(i, slice) else self.torch.as_tensor(i, device=like.device)
                     for i in axis_indices(positions))

    def empty(self, like, shape):
        return self.torch.empty(shape, dtype=like.dtype, device=like.device)

    def zeros(self, like, shape, dtype):
        return self.torch.zeros(shape, dtype=self.dtype(dtype), device=like.device)

    def dtype(self, np_dtype):
        return getattr(self.torch, np.dtype(np_dtype).name)

    def take(self, x, idx):
        y = x[_slices_then_full(idx)]
        for axis, i in enumerate(idx):
            if not isinstance(i, slice):
                y = y.index_select(axis, i)
        return y.contiguous()

    def view(self, out, idx):
        if not _all_slices(idx):
            return None
        v = out[idx]
        return v if v.is_contiguous() else None

    def put(self, out, idx, block) -> None:
        if _all_slices(idx):
            out[idx].copy_(block)
            return
        n = len(idx)
        grid = []
        for axis, i in enumerate(idx):
            t = self.torch.arange(i.start, i.stop, device=out.device) if isinstance(i, slice) \
                else i
            grid.append(t.reshape([-1 if a == axis else 1 for a in range(n)]))
        out[tuple(grid)] = block

    def copy(self, out, out_idx, x, x_idx) -> None:
        if _all_slices(out_idx) and _all_slices(x_idx):
            out[out_idx].copy_(x[x_idx])
        else:
            self.put(out, out_idx, self.take(x, x_idx))

    def contiguous(self, x):
        return x.contiguous()

    def numel(self, x) -> int:
        return x.numel()

    def pointer(self, x) -> int:
        return x.data_ptr()

    def nbytes(self, x) -> int:
        return x.numel() * x.element_size()

    def dtype_str(self, x) -> str:
        name = str(x.dtype).rsplit(".", 1)[-1]
        try:
            dtype = np.dtype(name)
        except TypeError:
            return name  # bfloat16 and the fp8 types: no NumPy dtype
        # ml_dtypes, once imported, names its bfloat16/fp8 types for NumPy as raw 'V' bytes
        return name if dtype.kind == "V" else dtype.str

    def op(self, x, transpose: bool, conjugate: bool):
        if not transpose:
            return x
        return x.mT.conj().resolve_conj() if conjugate else x.mT

    def zeros_like_result(self, a, b, shape):
        dtype = self.torch.promote_types(a.dtype, b.dtype)
        return self.torch.zeros(tuple(shape)[::-1], dtype=dtype, device=a.device).mT

    def fortran(self, x):
        return x if x.mT.is_contiguous() else x.mT.contiguous().mT

    def allocate(self, shape, dtype, axis_order: str, device_id: int):
        t = self.torch.empty(tuple(shape)[::-1] if axis_order == "F" else tuple(shape),
                             dtype=dtype or self.torch.float64, device=f"cuda:{device_id}")
        return t.permute(*range(t.ndim - 1, -1, -1)) if axis_order == "F" else t


class CupyOps(TorchOps):
    """The same operations on CuPy arrays."""

    name = "cupy"

    def __init__(self):
        self.cupy = sys.modules["cupy"]

    def key(self, like) -> tuple:
        return ("cupy", like.device.id)

    def device_index(self, x) -> int:
        return x.device.id

    def device_count(self) -> int:
        try:
            return self.cupy.cuda.runtime.getDeviceCount()
        except Exception:  # CUDARuntimeError without a driver or device
            return 0

    def device_scope(self, x):
        return self.cupy.cuda.Device(x.device.id)

    def stream(self, like) -> int:
        return self.cupy.cuda.get_current_stream().ptr

    def index(self, positions, like):
        with like.device:
            return tuple(i if isinstance(i, slice) else self.cupy.asarray(i)
                         for i in axis_indices(positions))

    def empty(self, like, shape):
        return self.cupy.empty(shape, dtype=like.dtype)

    def zeros(self, like, shape, dtype):
        return self.cupy.zeros(shape, dtype=dtype)

    def take(self, x, idx):
        y = x[_slices_then_full(idx)]
        for axis, i in enumerate(idx):
            if not isinstance(i, slice):
                y = self.cupy.take(y, i, axis=axis)
        return self.cupy.ascontiguousarray(y)

    def view(self, out, idx):
        if not _all_slices(idx):
            return None
        v = out[idx]
        return v if v.flags.c_contiguous else None

    def put(self, out, idx, block) -> None:
        if _all_slices(idx):
            out[idx] = block
            return
        arrays = [self.cupy.arange(i.start, i.stop) if isinstance(i, slice) else i for i in idx]
        out[self.cupy.ix_(*arrays)] = block

    def copy(self, out, out_idx, x, x_idx) -> None:
        if _all_slices(out_idx) and _all_slices(x_idx):
            out[out_idx] = x[x_idx]
        else:
            self.put(out, out_idx, self.take(x, x_idx))

    def contiguous(self, x):
        return self.cupy.ascontiguousarray(x)

    def numel(self, x) -> int:
        return x.size

    def pointer(self, x) -> int:
        return x.data.ptr

    def nbytes(self, x) -> int:
        return x.nbytes

    def dtype_str(self, x) -> str:
        return x.dtype.str

    def op(self, x, transpose: bool, conjugate: bool):
        if not transpose:
            return x
        return x.T.conj() if conjugate else x.T

    def zeros_like_result(self, a, b, shape):
        return self.cupy.zeros(shape, self.cupy.result_type(a, b), order="F")

    def fortran(self, x):
        return self.cupy.asfortranarray(x)

    def allocate(self, shape, dtype, axis_order: str, device_id: int):
        with self.cupy.cuda.Device(device_id):
            return self.cupy.empty(tuple(shape), dtype=dtype or np.float64, order=axis_order)


_OPS: dict[str, TorchOps] = {}


def ops_for(package: str) -> TorchOps:
    """The (cached) array operations of ``package`` (``'torch'`` or ``'cupy'``)."""
    ops = _OPS.get(package)
    if ops is None:
        ops = _OPS[package] = CupyOps() if package == "cupy" else TorchOps()
    return ops


def nccl_transport(comm: nccl.Communicator, stream: int, ops, api=nccl):
    """The NCCL transport of :meth:`ExchangePlan.execute`: every block of one exchange in one
    group of ``ncclSend``/``ncclRecv`` calls (bytes) on ``stream``. ``api`` is the binding
    (tests pass a recorder)."""

    def transport(group, sends, recvs) -> None:
        moves = [(api.send, peer, b) for peer, b in sends] + \
                [(api.recv, peer, b) for peer, b in recvs]
        moves = [(fn, peer, b, ops.nbytes(b)) for fn, peer, b in moves]
        moves = [m for m in moves if m[3]]
        if not moves:
            return
        api.group_start()
        try:
            for fn, peer, block, nbytes in moves:
                fn(ops.pointer(block), nbytes, peer, comm.ptr, stream)
        finally:
            api.group_end(comm.ptr)

    return transport


def communicator(ctx: DistributedContext) -> nccl.Communicator:
    """This process's NCCL communicator, made at the first call (collective)."""
    comm = ctx._gpu.get("nccl")
    if comm is not None:
        return comm
    with _lock:
        comm = ctx._gpu.get("nccl")
        if comm is not None:
            return comm
        group = ctx.process_group
        if ctx.device_id is None:  # unreachable through the operations (unwrap checks it)
            raise InvalidOptionError("device_id must be an int to use NCCL, got None")

        def load_and_id():
            nccl.get_version()  # loads NCCL (or raises LibraryNotFoundError) on every process
            return nccl.get_unique_id() if group.rank == 0 else None

        uid = agree(group, load_and_id)[0]
        from .._internal import cuda

        before = cuda.current_device()
        cuda.set_device(ctx.device_id)
        try:
            ptr = nccl.comm_init_rank(group.nranks, uid, group.rank)
        finally:
            if before is not None and before != ctx.device_id:
                cuda.set_device(before)
        comm = nccl.Communicator(ptr, group.rank, group.nranks, ctx.device_id)
        ctx._gpu["nccl"] = comm
        _log.info("NCCL %d communicator of %d processes on device %d (NCCL %s from %s)",
                  group.rank, group.nranks, ctx.device_id, nccl.get_version(),
                  nccl.library_path())
        return comm


class GpuBackend:
    """GPU operands: CuPy arrays and CUDA torch tensors on this process's device."""

    name = "cuda"

    @staticmethod
    def unwrap(x, name: str = "operand"):
        """``(array, package)`` after checking that ``x`` is on the context's device."""
        package = package_of(x)
        ops = ops_for(package)
        ctx = require_context()
        device = ops.device_index(x)
        if ctx.device_id is None:
            raise InvalidOperandError(
                f"{name} must be a host array on a CPU-only process (initialize(device_id="
                f"None)), got a {package} array on device {device}; pass this process's GPU "
                "to cuweave.distributed.initialize(device_id, ...)")
        if device != ctx.device_id:
            raise InvalidOperandError(
                f"{name} must be on device {ctx.device_id} (the device_id given to "
                f"initialize), got device {device!r}")
        return x, package

    @staticmethod
    def dtype_str(x) -> str:
        return ops_for(package_of(x)).dtype_str(x)

    @staticmethod
    def wrap(array, package: str):
        return array

    @staticmethod
    def exchange(group, plan: ExchangePlan, local):
        ops = ops_for(package_of(local))
        with ops.device_scope(local):
            transport = None
            if group.nranks > 1:
                comm = communicator(require_context())
                transport = nccl_transport(comm, ops.stream(local), ops)
            return plan.execute(group, local, ops, transport)

    @staticmethod
    def fft_local(kind: str, x, axes, out_shape, out_dtype, last_axis_parity="even"):
        """One process's share of a distributed transform, on cuFFT through cuweave.fft."""
        ops = ops_for(package_of(x))
        with ops.device_scope(x):
            if ops.numel(x) == 0 or math.prod(out_shape) == 0:
                return ops.zeros(x, out_shape, out_dtype)
            from .. import fft as _fft

            x, axes = ops.contiguous(x), list(axes)
            if kind == "irfft":
                return _fft.irfft(x, axes=axes, options={"last_axis_parity": last_axis_parity})
            return getattr(_fft, kind)(x, axes=axes)

    @staticmethod
    def matmul_local(a, b, c, *, alpha, beta, epilog, epilog_inputs):
        from ..linalg.advanced import matmul

        with ops_for(package_of(a)).device_scope(a):
            return matmul(a, b, c=c, alpha=alpha, beta=beta, epilog=epilog,
                          epilog_inputs=epilog_inputs)

    @staticmethod
    def op(x, transpose: bool, conjugate: bool):
        return ops_for(package_of(x)).op(x, transpose, conjugate)

    @staticmethod
    def zeros_like_result(a, b, shape):
        ops = ops_for(package_of(a))
        with ops.device_scope(a):
            return ops.zeros_like_result(a, b, shape)

    @staticmethod
    def fortran(x):
        ops = ops_for(package_of(x))
        with ops.device_scope(x):
            return ops.fortran(x)

    @staticmethod
    def empty(shape, package: str, dtype, axis_order: str, device_id: int):
        """An uninitialized device array of ``package`` on ``device_id`` (the symmetric-memory
        allocation of the NCCL plane: each process's own memory)."""
        if package not in sys.modules:
            raise InvalidOptionError(f"package must be an imported module, got {package!r}")
        ops = ops_for(package)
        count = ops.device_count()
        if device_id >= count:
            raise CudaUnavailableError(
                f"device_id must be a CUDA device of this process's {package} (0..{count - 1}), "
                f"got {device_id!r}" if count else
                f"device_id must name a CUDA device, got {device_id!r}: {package} sees none")
        return ops.allocate(shape, dtype, axis_order, device_id)


GPU = GpuBackend()
