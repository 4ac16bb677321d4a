"""ctypes declarations of the NCCL entry points ``cuweave.distributed`` uses (NCCL 2.x).

Only what the GPU data plane needs: the version, a unique id and one communicator per process
(``ncclCommInitRank``, ``ncclCommFinalize``/``ncclCommDestroy``), grouped point-to-point
transfers (``ncclGroupStart``/``ncclGroupEnd`` around ``ncclSend``/``ncclRecv`` of bytes), the
sum ``ncclAllReduce`` (the distributed matmul's bias gradients) and the error strings.
``libnccl.so.2`` is loaded on the first call, looked up in this order: the copy already in the
process (torch's CUDA build loads one), cuda-pathfinder (``load_nvidia_dynamic_lib("nccl")``,
when that version knows NCCL), an ``nvidia/nccl/lib`` folder under a ``sys.path`` entry (the
nvidia-nccl wheel, which torch's and CuPy's CUDA builds install), then the system's dynamic
loader (``libnccl.so.2``, e.g. the libnccl2 package). A failure raises
:class:`~cuweave._internal.errors.LibraryNotFoundError`; every failing call raises
:class:`~cuweave._internal.errors.NcclError` naming the function, the status and a hint.

Examples
--------
>>> from cuweave._bindings import nccl  # doctest: +SKIP
>>> nccl.get_version()  # doctest: +SKIP
22803
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from enum import IntEnum

from .._internal.errors import InvalidOperandError, LibraryNotFoundError, NcclError

__all__ = ["UNIQUE_ID_BYTES", "UniqueId", "DataType", "RedOp", "DATA_TYPES", "Result",
           "SIGNATURES", "library", "library_path", "check", "get_version", "get_unique_id",
           "comm_init_rank", "comm_finalize", "comm_destroy", "comm_get_async_error",
           "group_start", "group_end", "send", "recv", "all_reduce", "error_string",
           "last_error", "Communicator"]

SONAME = "libnccl.so.2"
UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES


class UniqueId(ctypes.Structure):
    """``ncclUniqueId``: 128 opaque bytes, passed by value to ``ncclCommInitRank``."""

    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class DataType(IntEnum):
    """``ncclDataType_t`` (send/recv count bytes: ``UINT8``)."""

    INT8 = 0  # ncclInt8 == ncclChar
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9


class RedOp(IntEnum):
    """The ``ncclRedOp_t`` cuweave uses."""

    SUM = 0


#: canonical dtype name -> ``ncclDataType_t`` of the reductions cuweave runs
DATA_TYPES = {"float16": DataType.FLOAT16, "bfloat16": DataType.BFLOAT16,
              "float32": DataType.FLOAT32, "float64": DataType.FLOAT64}


class Result(IntEnum):
    """``ncclResult_t``."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7


_c = ctypes
_comm = _c.c_void_p  # ncclComm_t
_stream = _c.c_void_p  # cudaStream_t

#: name -> (restype, argtypes)
SIGNATURES: dict[str, tuple] = {
    "ncclGetVersion": (_c.c_int, (_c.POINTER(_c.c_int),)),
    "ncclGetUniqueId": (_c.c_int, (_c.POINTER(UniqueId),)),
    "ncclCommInitRank": (_c.c_int, (_c.POINTER(_comm), _c.c_int, UniqueId, _c.c_int)),
    "ncclCommFinalize": (_c.c_int, (_comm,)),
    "ncclCommDestroy": (_c.c_int, (_comm,)),
    "ncclCommGetAsyncError": (_c.c_int, (_comm, _c.POINTER(_c.c_int))),
    "ncclGroupStart": (_c.c_int, ()),
    "ncclGroupEnd": (_c.c_int, ()),
    "ncclSend": (_c.c_int, (_c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int, _comm, _stream)),
    "ncclRecv": (_c.c_int, (_c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int, _comm, _stream)),
    "ncclAllReduce": (_c.c_int, (_c.c_void_p, _c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int,
                                 _comm, _stream)),
    "ncclGetErrorString": (_c.c_char_p, (_c.c_int,)),
    "ncclGetLastError": (_c.c_char_p, (_comm,)),
}

_lock = threading.Lock()
_state: dict[str, object] = {}

_HOW_TO_GET = ("NCCL ships with torch's and CuPy's CUDA builds (the nvidia-nccl-cu13 wheel: "
               "`pip install nvidia-nccl-cu13`) and as the system package libnccl2; "
               "cuweave.distributed needs it for GPU operands")


def _not_found(detail: str) -> LibraryNotFoundError:
    err = LibraryNotFoundError("NCCL", "distributed", detail)
    message = f"NCCL ({SONAME}) could not be found: {detail}. {_HOW_TO_GET}"
    err.args, err.msg = (message,), message  # ImportError prints .msg; no cuweave extra has NCCL
    return err


def _candidates() -> list[str]:
    """Paths of ``libnccl.so.2`` under ``nvidia/nccl/lib`` of the ``sys.path`` entries."""
    out = []
    for entry in sys.path:
        path = os.path.join(entry or ".", "nvidia", "nccl", "lib", SONAME)
        if os.path.isfile(path) and path not in out:
            out.append(path)
    return out


def _open() -> tuple[ctypes.CDLL, str]:
    try:  # already in the process (torch's CUDA build loads its own): use that one, not a second
        return ctypes.CDLL(SONAME, mode=os.RTLD_NOLOAD), "<already loaded by the process>"
    except (OSError, AttributeError):
        pass
    tried = []
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        found = load_nvidia_dynamic_lib("nccl")
        path = found.abs_path
        lib = ctypes.CDLL(path) if path else ctypes.CDLL(None, handle=found._handle_uint)
        return lib, path or "<loaded by the process>"
    except Exception as exc:  # pathfinder missing, too old to know NCCL, or NCCL not there
        tried.append(f"cuda.pathfinder: {str(exc).splitlines()[0] if str(exc) else type(exc)}")
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as exc:
            tried.append(f"{path}: {exc}")
    try:
        return ctypes.CDLL(SONAME), SONAME
    except OSError as exc:
        tried.append(f"{SONAME}: {exc}")
    raise _not_found("; ".join(tried))


def library() -> dict[str, object]:
    """Load NCCL once per process and declare every signature; returns the function table."""
    table = _state.get("functions")
    if table is not None:
        return table
    with _lock:
        table = _state.get("functions")
        if table is not None:
            return table
        lib, path = _open()
        table = {}
        for name, (restype, argtypes) in SIGNATURES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                if name in ("ncclCommFinalize", "ncclGetLastError"):  # newer than NCCL 2.0
                    continue
                raise _not_found(f"{path} does not export {name} (NCCL older than 2.x?)") \
                    from None
            fn.restype, fn.argtypes = restype, list(argtypes)
            table[name] = fn
        _state["path"] = path
        _state["functions"] = table
        return table


def library_path() -> str | None:
    """Where NCCL was loaded from, or ``None`` before it is loaded."""
    return _state.get("path")


def error_string(status: int) -> str:
    """NCCL's own text for a ``ncclResult_t`` (``''`` when it cannot tell)."""
    try:
        text = library()["ncclGetErrorString"](int(status))
    except Exception:  # the text is a courtesy; the status name is in the error already
        return ""
    return text.decode(errors="replace") if isinstance(text, bytes) else ""


def last_error(comm: int | None) -> str:
    """NCCL's description of its last error on ``comm`` (``''`` when unavailable)."""
    try:
        fn = library().get("ncclGetLastError")
        text = None if fn is None else fn(comm)
    except Exception:  # a courtesy, like error_string
        return ""
    return text.decode(errors="replace") if isinstance(text, bytes) else ""


def check(status: int, function: str, comm: int | None = None) -> None:
    """Raise :class:`NcclError` unless ``status`` is ``ncclSuccess``."""
    if status == 0:
        return
    name = NcclError._names.get(int(status), "")
    hint = NcclError._hints.get(name, "")
    detail = last_error(comm) if comm is not None else ""
    if not detail:
        detail = error_string(status)
    if detail:
        hint = f"{hint} (NCCL: {detail})" if hint else f"NCCL: {detail}"
    raise NcclError(status, function, hint or None)


def _call(name: str, *args, comm=None):
    check(library()[name](*args), name, comm)


def get_version() -> int:
    """``ncclGetVersion``: e.g. 22803 for NCCL 2.28.3."""
    v = ctypes.c_int(0)
    _call("ncclGetVersion", ctypes.byref(v))
    return v.value


def get_unique_id() -> bytes:
    """``ncclGetUniqueId``: the 128 bytes process 0 hands to every process."""
    uid = UniqueId()
    _call("ncclGetUniqueId", ctypes.byref(uid))
    return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)


def unique_id_from_bytes(data: bytes) -> UniqueId:
    """The :class:`UniqueId` of 128 bytes (from :func:`get_unique_id` on process 0)."""
    if not isinstance(data, (bytes, bytearray)) or len(data) != UNIQUE_ID_BYTES:
        got = f"{len(data)} bytes" if isinstance(data, (bytes, bytearray)) else repr(data)
        raise InvalidOperandError(f"unique_id must be {UNIQUE_ID_BYTES} bytes, got {got}")
    uid = UniqueId()
    ctypes.memmove(ctypes.addressof(uid), bytes(data), UNIQUE_ID_BYTES)
    return uid


def comm_init_rank(nranks: int, unique_id: bytes, rank: int) -> int:
    """``ncclCommInitRank`` on the calling thread's current CUDA device (collective)."""
    comm = ctypes.c_void_p(None)
    _call("ncclCommInitRank", ctypes.byref(comm), int(nranks), unique_id_from_bytes(unique_id),
          int(rank))
    return int(comm.value or 0)


def comm_finalize(comm: int) -> None:
    """``ncclCommFinalize`` (a no-op with NCCL versions that lack it)."""
    fn = library().get("ncclCommFinalize")
    if fn is not None:
        check(fn(comm), "ncclCommFinalize", comm)


def comm_destroy(comm: int) -> None:
    """``ncclCommDestroy``."""
    _call("ncclCommDestroy", comm)


def comm_get_async_error(comm: int) -> int:
    """``ncclCommGetAsyncError``: the communicator's pending asynchronous status."""
    status = ctypes.c_int(0)
    _call("ncclCommGetAsyncError", comm, ctypes.byref(status), comm=comm)
    return status.value


def group_start() -> None:
    """``ncclGroupStart``."""
    _call("ncclGroupStart")


def group_end(comm: int | None = None) -> None:
    """``ncclGroupEnd``; ``comm`` only improves the error message."""
    _call("ncclGroupEnd", comm=comm)


def send(ptr: int, nbytes: int, peer: int, comm: int, stream: int) -> None:
    """``ncclSend`` of ``nbytes`` bytes (``ncclUint8``) at device address ``ptr`` to ``peer``."""
    _call("ncclSend", ptr, nbytes, int(DataType.UINT8), peer, comm, stream, comm=comm)


def recv(ptr: int, nbytes: int, peer: int, comm: int, stream: int) -> None:
    """``ncclRecv`` of ``nbytes`` bytes (``ncclUint8``) into device address ``ptr``."""
    _call("ncclRecv", ptr, nbytes, int(DataType.UINT8), peer, comm, stream, comm=comm)


def all_reduce(sendbuff: int, recvbuff: int, count: int, dtype, comm: int,
               stream: int) -> None:
    """``ncclAllReduce`` with ``ncclSum`` of ``count`` elements of ``dtype`` (a name among
    :data:`DATA_TYPES` or a :class:`DataType`) from device address ``sendbuff`` into
    ``recvbuff`` (the same address: in place), on ``stream`` (collective)."""
    code = dtype if isinstance(dtype, DataType) else \
        DATA_TYPES.get(dtype) if isinstance(dtype, str) else None
    if code is None:
        raise InvalidOperandError(
            f"dtype must be one of {sorted(DATA_TYPES)} for ncclAllReduce, got {dtype!r}")
    _call("ncclAllReduce", sendbuff, recvbuff, count, int(code), int(RedOp.SUM), comm, stream,
          comm=comm)


class Communicator:
    """One NCCL communicator (``ncclComm_t``) of this process; :meth:`close` releases it.

    Attributes
    ----------
    ptr : int
        The ``ncclComm_t`` address (``0`` once closed).
    rank, nranks, device_id : int
    """

    def __init__(self, ptr: int, rank: int, nranks: int, device_id: int):
        self.ptr, self.rank, self.nranks, self.device_id = ptr, rank, nranks, device_id

    def close(self) -> None:
        """Finalize and destroy the communicator (collective over its processes)."""
        ptr, self.ptr = self.ptr, 0
        if ptr:
            try:
                comm_finalize(ptr)
            finally:
                comm_destroy(ptr)

    def __repr__(self) -> str:
        return (f"Communicator(rank={self.rank}, nranks={self.nranks}, "
                f"device_id={self.device_id}, ptr={self.ptr:#x})")
