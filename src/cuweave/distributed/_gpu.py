"""The GPU data plane: CuPy arrays and CUDA torch tensors, moved by NCCL, computed by cuweave.

Same methods as :class:`~cuweave.distributed._backend.HostBackend`. Exchanges run the same
:class:`~cuweave.distributed._exchange.ExchangePlan` as CPU ranks, with the operands' package
adapter as the array operations (``cuweave._internal.packages``, torch's or CuPy's: each peer's
block is packed into one contiguous device buffer, or sent straight from the operand when it
already is one; a block received into a contiguous region of the result lands there directly)
and NCCL as the transport: every send and receive of one exchange in one
``ncclGroupStart``/``ncclGroupEnd``, on the adapter's current stream, in bytes. Bias gradients
are summed over the processes with one ``ncclAllReduce`` on that stream. The local transforms
and products are cuweave's own engines on the device operands (:func:`cuweave.fft.fft` and
friends on cuFFT, :func:`cuweave.linalg.advanced.matmul` on cuBLASLt), on that same stream, so
nothing synchronizes the host.

The NCCL communicator is made once per :func:`~cuweave.distributed.initialize` (process 0's
unique id reaches the others through the process group), on the ``device_id`` given there, at
the first exchange between GPU operands (or at ``initialize`` with ``backends=["nccl"]``), and
released by :func:`~cuweave.distributed.finalize`. One process alone needs no NCCL.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from .._bindings import nccl
from .._internal.errors import CudaUnavailableError, InvalidOperandError, InvalidOptionError
from .._internal.logging import get_logger
from .._internal.packages import adapter, adapter_of
from ._errors import UnsupportedMemorySpaceError
from ._exchange import ExchangePlan
from ._runtime import communicator, require_context

__all__ = ["GpuBackend", "GPU", "nccl_transport", "package_of", "dtype_str"]

_log = get_logger("distributed")


def package_of(x) -> str:
    """The package of a GPU array whose adapter has the block operations (torch's or CuPy's);
    raises for any other."""
    ad = adapter_of(x)
    if ad.block_ops:
        return ad.name
    raise UnsupportedMemorySpaceError(
        f"GPU operands must be CuPy arrays or CUDA torch tensors in cuweave.distributed, got "
        f"{type(x).__module__}.{type(x).__name__} (wrap it with cupy.asarray or "
        "torch.as_tensor, which share its memory)")


def _adapter(x):
    """The package adapter of the GPU array ``x`` (torch's or CuPy's)."""
    return adapter(package_of(x))


def dtype_str(x) -> str:
    """``x``'s dtype as NumPy's ``dtype.str`` (what processes compare), or its name where
    NumPy has none: bfloat16, fp8 (which ml_dtypes, once imported, registers as raw 'V')."""
    name = str(x.dtype).rsplit(".", 1)[-1]
    try:
        dtype = np.dtype(name)
    except TypeError:
        return name
    return name if dtype.kind == "V" else dtype.str


def nccl_transport(comm: nccl.Communicator, stream: int, ops, api=nccl):
    """The NCCL transport of :meth:`ExchangePlan.execute`: every block of one exchange in one
    group of ``ncclSend``/``ncclRecv`` calls (bytes) on ``stream``. ``api`` is the binding
    (tests pass a recorder)."""

    def transport(group, sends, recvs) -> None:
        moves = ([(api.send, peer, b) for peer, b in sends]
                 + [(api.recv, peer, b) for peer, b in recvs])
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


class GpuBackend:
    """GPU operands: CuPy arrays and CUDA torch tensors on this process's device.

    Every array operation is the operands' package adapter's (``cuweave._internal.packages``:
    block packing, new arrays, dense copies, the current stream), run with the operands'
    device current."""

    name = "cuda"

    @staticmethod
    def unwrap(x, name: str = "operand"):
        """``(array, package)`` after checking that ``x`` is on the context's device."""
        package = package_of(x)
        ctx = require_context()
        device = adapter(package).device_of(x)
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
        return dtype_str(x)

    @staticmethod
    def wrap(array, package: str):
        return array

    @staticmethod
    def ops_for(x):
        """The block operations on ``x`` (its package's adapter, see ``ExchangePlan``)."""
        return _adapter(x)

    @staticmethod
    def scope(x):
        """A context making ``x``'s device current (CuPy allocates and runs there)."""
        ad = _adapter(x)
        return ad.device_scope(ad.device_of(x))

    @staticmethod
    def exchange(group, plan: ExchangePlan, local):
        ad = _adapter(local)
        device = ad.device_of(local)
        with ad.device_scope(device):
            transport = None
            if group.nranks > 1:
                comm = communicator(require_context())
                transport = nccl_transport(comm, ad.current_stream(device).ptr, ad)
            return plan.execute(group, local, ad, transport)

    @staticmethod
    def allreduce_sum(group, x) -> None:
        """Sum the contiguous vector ``x`` over the processes, in place (collective): one
        ``ncclAllReduce`` on the package's current stream (no host synchronization)."""
        if group.nranks == 1:
            return
        ad = _adapter(x)
        device = ad.device_of(x)
        comm = communicator(require_context())
        with ad.device_scope(device):
            ptr = ad.pointer(x)
            nccl.all_reduce(ptr, ptr, math.prod(x.shape), str(x.dtype).rsplit(".", 1)[-1],
                            comm.ptr, ad.current_stream(device).ptr)

    @staticmethod
    def fft_local(kind: str, x, axes, out_shape, out_dtype, last_axis_parity="even"):
        """One process's share of a distributed transform, on cuFFT through cuweave.fft."""
        ad = _adapter(x)
        device = ad.device_of(x)
        with ad.device_scope(device):
            if math.prod(x.shape) == 0 or math.prod(out_shape) == 0:
                return ad.new_block(x, out_shape, out_dtype, zeros=True)
            from .. import fft as _fft

            x = ad.dense_copy(x, tuple(x.shape), "C", ad.current_stream(device).ptr, device)
            axes = list(axes)
            if kind == "irfft":
                return _fft.irfft(x, axes=axes, options={"last_axis_parity": last_axis_parity})
            return getattr(_fft, kind)(x, axes=axes)

    @staticmethod
    def matmul_local(a, b, c, *, alpha, beta, epilog, epilog_inputs):
        from ..linalg.advanced import matmul

        with GpuBackend.scope(a):
            return matmul(a, b, c=c, alpha=alpha, beta=beta, epilog=epilog,
                          epilog_inputs=epilog_inputs)

    @staticmethod
    def op(x, transpose: bool, conjugate: bool):
        return _adapter(x).matrix_op(x, transpose, conjugate)

    @staticmethod
    def zeros(like, shape, dtype=None, order: str = "C"):
        """A zero array of ``shape`` on ``like``'s device, of ``like``'s dtype unless
        ``dtype`` (NumPy's) is given."""
        with GpuBackend.scope(like):
            return _adapter(like).new_block(like, shape, dtype, order=order, zeros=True)

    @staticmethod
    def zeros_like_result(a, b, shape):
        """A Fortran-ordered zero block of ``shape`` in ``a``'s dtype (``b``'s: they match)."""
        return GpuBackend.zeros(a, shape, order="F")

    @staticmethod
    def fortran(x):
        ad = _adapter(x)
        device = ad.device_of(x)
        with ad.device_scope(device):
            return ad.dense_copy(x, tuple(x.shape), "F", ad.current_stream(device).ptr, device)

    @staticmethod
    def empty(shape, package: str, dtype, axis_order: str, device_id: int):
        """An uninitialized device array of ``package`` on ``device_id`` (the symmetric-memory
        allocation of the NCCL plane: each process's own memory)."""
        if package not in sys.modules:
            raise InvalidOptionError(f"package must be an imported module, got {package!r}")
        ad = adapter(package)
        count = ad.device_count()
        if device_id >= count:
            raise CudaUnavailableError(
                f"device_id must be a CUDA device of this process's {package} (0..{count - 1}), "
                f"got {device_id!r}" if count else
                f"device_id must name a CUDA device, got {device_id!r}: {package} sees none")
        return ad.new_array(shape, np.float64 if dtype is None else dtype, device_id,
                            order=axis_order)


GPU = GpuBackend()
