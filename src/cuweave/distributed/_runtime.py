"""The distributed runtime: MPI processes (mpi4py), the context, collective validation.

MPI is imported only when :func:`initialize` is called: ``import cuweave.distributed`` works
without mpi4py. The communicator is used for setup, for the agreement on every operation's
inputs (so that a bad input raises on every process instead of deadlocking) and, on CPU ranks,
for the data exchanges themselves.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._internal.errors import (
    CuweaveError,
    InvalidOperandError,
    InvalidOptionError,
    InvalidStateError,
    LibraryNotFoundError,
)
from .._internal.logging import get_logger
from ._errors import CollectiveError

__all__ = ["DistributedContext", "ProcessGroup", "MPIProcessGroup", "initialize", "finalize",
           "get_context", "require_context", "agree"]

_log = get_logger("distributed")
_lock = threading.Lock()
_ctx: DistributedContext | None = None
_atexit_registered = False
VALID_BACKENDS = ("nvshmem", "nccl")


class ProcessGroup:
    """The processes taking part in distributed operations (nvmath-python's ``ProcessGroup``).

    Subclasses provide ``rank``, ``nranks`` and the collectives cuweave uses:
    ``allgather_object``, ``broadcast_object``, ``alltoallv_bytes`` and (a cuweave extension, for
    the bias gradients of the distributed matmul on host operands) ``allreduce_sum``.
    """

    rank: int
    nranks: int

    def allgather_object(self, obj) -> list:  # pragma: no cover - interface
        """Every process's ``obj``, in rank order (a collective: all processes call it).

        Parameters
        ----------
        obj : picklable object
            This process's contribution.

        Returns
        -------
        list
        """
        raise NotImplementedError

    def broadcast_object(self, obj, root: int = 0):  # pragma: no cover - interface
        """``root``'s ``obj`` on every process (a collective).

        Parameters
        ----------
        obj : picklable object
            What ``root`` sends (ignored elsewhere).
        root : int
            The sending process.

        Returns
        -------
        object
        """
        raise NotImplementedError

    def alltoallv_bytes(self, send, send_counts, recv, recv_counts):  # pragma: no cover
        """Exchange raw bytes between all processes (a collective).

        Parameters
        ----------
        send : numpy.ndarray
            Contiguous uint8: the bytes for process 0, then for process 1, ...
        send_counts : sequence of int
            Bytes for each process.
        recv : numpy.ndarray
            Contiguous uint8, filled with the bytes from process 0, then 1, ...
        recv_counts : sequence of int
            Bytes from each process.
        """
        raise NotImplementedError

    def allreduce_sum(self, array) -> None:  # pragma: no cover - interface
        """Sum an array over the processes, in place (a collective).

        Parameters
        ----------
        array : numpy.ndarray
            Contiguous float32 or float64; every process's holds the sum afterwards.
        """
        raise NotImplementedError


class MPIProcessGroup(ProcessGroup):
    """A :class:`ProcessGroup` over an mpi4py communicator.

    Parameters
    ----------
    communicator : mpi4py.MPI.Comm
        The processes taking part.

    Examples
    --------
    >>> from mpi4py import MPI  # doctest: +SKIP
    >>> group = MPIProcessGroup(MPI.COMM_WORLD)  # doctest: +SKIP
    """

    def __init__(self, communicator):
        from mpi4py import MPI  # noqa: F401 - imported for its side effect of initializing MPI

        self.communicator = communicator
        self.rank = communicator.Get_rank()
        self.nranks = communicator.Get_size()

    def allgather_object(self, obj) -> list:
        """Every process's ``obj``, in rank order (a collective: all processes call it).

        Parameters
        ----------
        obj : picklable object
            This process's contribution.

        Returns
        -------
        list
        """
        return self.communicator.allgather(obj)

    def broadcast_object(self, obj, root: int = 0):
        """``root``'s ``obj`` on every process (a collective).

        Parameters
        ----------
        obj : picklable object
            What ``root`` sends (ignored elsewhere).
        root : int
            The sending process.

        Returns
        -------
        object
        """
        return self.communicator.bcast(obj, root=root)

    def alltoallv_bytes(self, send, send_counts, recv, recv_counts):
        """Exchange raw bytes between all processes (a collective).

        Parameters
        ----------
        send : numpy.ndarray
            Contiguous uint8: the bytes for process 0, then for process 1, ...
        send_counts : sequence of int
            Bytes for each process.
        recv : numpy.ndarray
            Contiguous uint8, filled with the bytes from process 0, then 1, ...
        recv_counts : sequence of int
            Bytes from each process.
        """
        from mpi4py import MPI

        sdispl = _displacements(send_counts)
        rdispl = _displacements(recv_counts)
        self.communicator.Alltoallv([send, (send_counts, sdispl), MPI.BYTE],
                                    [recv, (recv_counts, rdispl), MPI.BYTE])

    def allreduce_sum(self, array) -> None:
        """Sum an array over the processes, in place (a collective).

        Parameters
        ----------
        array : numpy.ndarray
            Contiguous float32 or float64; every process's holds the sum afterwards.
        """
        from mpi4py import MPI

        self.communicator.Allreduce(MPI.IN_PLACE, array, op=MPI.SUM)


def _displacements(counts):
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out


@dataclass(frozen=True)
class DistributedContext:
    """The initialized runtime of this process (nvmath-python's ``DistributedContext``).

    Attributes
    ----------
    device_id : int or None
        The CUDA device of this process; ``None`` on a CPU-only rank (a cuweave extension).
    process_group : ProcessGroup
        The participating processes.
    communicator : mpi4py.MPI.Comm
        Their MPI communicator.
    nvshmem_available : bool
        ``False``: the GPU data plane is NCCL's (see docs/DESIGN.md), NVSHMEM is never started.
    nccl_comm : int or None
        The address of this process's NCCL communicator (``ncclComm_t``) once made: at
        :func:`initialize` with ``backends`` naming ``'nccl'`` on a GPU process, else at the
        first exchange between GPU operands; ``None`` before and on CPU-only ranks.
    backends : tuple of str
        The backends asked for at :func:`initialize`.
    """

    device_id: int | None
    process_group: ProcessGroup
    communicator: Any
    nvshmem_available: bool
    backends: tuple[str, ...] = ()
    _gpu: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def nccl_comm(self) -> int | None:
        """The address of this process's NCCL communicator, or ``None`` (see above)."""
        comm = self._gpu.get("nccl")
        return comm.ptr if comm is not None and comm.ptr else None

    @property
    def rank(self) -> int:
        """This process's rank."""
        return self.process_group.rank

    @property
    def nranks(self) -> int:
        """The number of processes."""
        return self.process_group.nranks


def _check_backends(backends) -> tuple[str, ...]:
    if backends is None:
        return ()
    if isinstance(backends, str) or not isinstance(backends, Sequence):
        raise InvalidOptionError(
            f"backends must be a sequence of names among {VALID_BACKENDS} or None, "
            f"got {backends!r}")
    for b in backends:
        if b not in VALID_BACKENDS:
            raise InvalidOptionError(f"backends must hold names among {VALID_BACKENDS}, got {b!r}")
    return tuple(backends)


def _as_process_group(communicator) -> ProcessGroup:
    if isinstance(communicator, ProcessGroup):
        return communicator
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise LibraryNotFoundError("mpi4py", "distributed", str(exc)) from None
    if communicator is None:
        communicator = MPI.COMM_WORLD
    if not isinstance(communicator, MPI.Comm):
        raise InvalidOperandError(
            "communicator must be an mpi4py.MPI.Comm, a cuweave.distributed.ProcessGroup or "
            f"None, got {communicator!r}")
    return MPIProcessGroup(communicator)


def initialize(device_id, communicator=None, backends=None) -> None:
    """Start the distributed runtime on this process (collective: every process calls it).

    Parameters
    ----------
    device_id : int or None
        The CUDA device of this process (one process per GPU, as NCCL requires); GPU operands
        must live there. A cuweave extension: ``None`` declares a CPU-only rank (host operands
        only). Without ``backends=['nccl']`` no CUDA call is made until a GPU operand is used.
    communicator : mpi4py.MPI.Comm or ProcessGroup, optional
        The participating processes (default ``MPI.COMM_WORLD``).
    backends : sequence of {'nvshmem', 'nccl'}, optional
        GPU communication backends. With ``'nccl'`` and a GPU on every process the NCCL
        communicator is made here; otherwise at the first exchange between GPU operands.
        ``'nvshmem'`` is accepted and not started (the GPU data plane is NCCL's). Host
        operands need none.

    Raises
    ------
    InvalidStateError
        When the runtime is already initialized (call :func:`finalize` first).

    Examples
    --------
    >>> import cuweave.distributed as dist  # doctest: +SKIP
    >>> from mpi4py import MPI  # doctest: +SKIP
    >>> dist.initialize(None, MPI.COMM_WORLD)  # doctest: +SKIP
    >>> dist.get_context().nranks  # doctest: +SKIP
    4
    """
    global _ctx, _atexit_registered
    if device_id is not None and (not isinstance(device_id, int) or isinstance(device_id, bool)
                                  or device_id < 0):
        raise InvalidOptionError(f"device_id must be a non-negative int or None, got {device_id!r}")
    backends = _check_backends(backends)
    group = _as_process_group(communicator)
    with _lock:
        if _ctx is not None:
            raise InvalidStateError("cuweave.distributed is already initialized; call "
                                    "cuweave.distributed.finalize() first")
        if not _atexit_registered:
            atexit.register(finalize)
            _atexit_registered = True
        _ctx = DistributedContext(device_id=device_id, process_group=group,
                                  communicator=getattr(group, "communicator", None),
                                  nvshmem_available=False, backends=backends)
        ctx = _ctx
    _log.info("initialized: rank %d of %d, device %s, backends %s", group.rank, group.nranks,
              device_id, backends)
    if "nccl" in backends and group.nranks > 1:
        _start_nccl(ctx)


def _gpu_ready(device_id) -> bool:
    if device_id is None:
        return False
    try:
        from .._internal import cuda

        return cuda.is_available() and device_id < cuda.device_count()
    except Exception:  # no cuda-bindings, no driver: NCCL starts lazily or never
        return False


def _start_nccl(ctx: DistributedContext) -> None:
    """Make the NCCL communicator now when every process has a usable GPU (collective)."""
    ready = agree(ctx.process_group, _gpu_ready, ctx.device_id)
    if not all(ready):
        _log.info("backends name 'nccl' but not every process has a GPU: NCCL starts at the "
                  "first exchange between GPU operands")
        return
    try:
        communicator(ctx)
    except BaseException:
        finalize()
        raise


def finalize() -> None:
    """Stop the distributed runtime (called at exit when still initialized); releases the NCCL
    communicator (collective when there is one)."""
    global _ctx
    with _lock:
        ctx, _ctx = _ctx, None
    comm = None if ctx is None else ctx._gpu.pop("nccl", None)
    if comm is not None:
        comm.close()


def get_context() -> DistributedContext | None:
    """The runtime's :class:`DistributedContext`, or ``None`` when not initialized."""
    return _ctx


def require_context() -> DistributedContext:
    ctx = _ctx
    if ctx is None:
        raise InvalidStateError("cuweave.distributed is not initialized: call "
                                "cuweave.distributed.initialize(device_id, communicator) first")
    return ctx


def agree(group: ProcessGroup, fn, *args):
    """Run ``fn(*args)`` on every process and gather its results, or raise everywhere.

    When ``fn`` raises on any process, every process raises: the failing one its own error, the
    others an error of the same class (a cuweave error) or a :class:`CollectiveError`, whose
    message names the failing process. Returns the list of every process's result.
    """
    try:
        mine, err = fn(*args), None
    except Exception as exc:  # any failure: the other processes must hear of it, not wait
        mine, err = None, exc
    packed = None if err is None else (type(err), str(err))
    gathered = group.allgather_object((mine, packed))
    if err is not None:
        raise err
    for rank, (_, failure) in enumerate(gathered):
        if failure is not None:
            cls, msg = failure
            text = f"process {rank} rejected the inputs: {msg}"
            error = None
            if isinstance(cls, type) and issubclass(cls, CuweaveError):
                try:
                    error = cls(text)
                except TypeError:
                    error = None
            if error is None:
                error = CollectiveError(text, rank, getattr(cls, "__name__", str(cls)))
            raise error
    return [value for value, _ in gathered]


_nccl_lock = threading.Lock()


def communicator(ctx: DistributedContext):
    """This process's NCCL communicator, made at the first call (collective)."""
    from .._bindings import nccl

    comm = ctx._gpu.get("nccl")
    if comm is not None:
        return comm
    with _nccl_lock:
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
