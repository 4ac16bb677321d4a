"""The cuweave error hierarchy.

Every error cuweave raises on purpose derives from :class:`CuweaveError`. User mistakes also
derive from the matching builtin (``ValueError``/``TypeError``) so ``except ValueError`` keeps
working for code written against NumPy or nvmath-python.
"""

from __future__ import annotations

__all__ = [
    "CuweaveError",
    "InvalidOperandError",
    "InvalidOptionError",
    "UnsupportedLayoutError",
    "InvalidStateError",
    "LibraryNotFoundError",
    "CudaUnavailableError",
    "LibraryError",
    "CublasLtError",
    "CufftError",
    "NvrtcError",
    "CudaDriverError",
    "NcclError",
]


class CuweaveError(Exception):
    """Base class of every error raised by cuweave."""


class InvalidOperandError(CuweaveError, ValueError):
    """An operand has an unsupported type, dtype, shape, layout or location."""


class InvalidOptionError(CuweaveError, ValueError):
    """An option, enum value or keyword argument is invalid."""


class ResultTooLargeError(InvalidOperandError, MemoryError):
    """A result (or a buffer the computation needs) does not fit in memory: raised instead of
    the allocator's plain ``MemoryError`` (still a ``MemoryError``)."""


def too_large(what: str, shape, dtype, err: BaseException | None = None) -> ResultTooLargeError:
    """The :class:`ResultTooLargeError` of ``what`` (shape and dtype named, the size shown)."""
    import math

    try:
        import numpy as np

        nbytes = math.prod(int(n) for n in shape) * np.dtype(dtype).itemsize
        size = f" ({nbytes / 2**30:,.1f} GiB)"
    except Exception:  # noqa: BLE001 - a dtype NumPy does not know: no size shown
        size = ""
    detail = f": {err}" if err is not None else ""
    return ResultTooLargeError(
        f"{what} must fit in memory, got shape {tuple(shape)} of {dtype}{size} that could not "
        f"be allocated{detail}; use smaller operands")


class UnsupportedLayoutError(CuweaveError, ValueError):
    """A memory layout the library cannot express.

    Also a ``ValueError``. Raised, for example, by :mod:`cuweave.fft` when the operand's
    strides cannot be described to cuFFT as one batched transform.

    Parameters
    ----------
    message : str
        The error message: what layout was given and why it is not supported.
    permutation : tuple of int or None, optional
        An axis order for which the operand would be supported after a copy
        (``x.transpose(permutation).copy()``), or ``None`` (the default) when no such order
        is known. Kept as the ``permutation`` attribute.

    Examples
    --------
    >>> from cuweave import UnsupportedLayoutError
    >>> e = UnsupportedLayoutError("the batch strides overlap", permutation=(1, 0))
    >>> e.permutation, isinstance(e, ValueError)
    ((1, 0), True)
    """

    def __init__(self, message: str, permutation: tuple[int, ...] | None = None):
        super().__init__(message)
        self.permutation = permutation


class InvalidStateError(CuweaveError, RuntimeError):
    """A method was called in the wrong lifecycle phase (e.g. execute before plan, after free)."""


class LibraryNotFoundError(CuweaveError, ImportError):
    """A native library or Python package is missing; the message names the pip extra.

    Also an ``ImportError``.

    Parameters
    ----------
    library : str
        The library or package that could not be found (kept as the ``library`` attribute).
    extra : str
        The cuweave extra whose install provides it, named in the message as
        ``pip install 'cuweave[<extra>]'`` (kept as the ``extra`` attribute).
    detail : str, optional
        More about the failure (for instance the loader's own message), added to the message
        in parentheses when not empty.

    Examples
    --------
    >>> from cuweave import LibraryNotFoundError
    >>> print(LibraryNotFoundError("libcufft", "cu13"))
    libcufft could not be found; install it with `pip install 'cuweave[cu13]'`
    """

    def __init__(self, library: str, extra: str, detail: str = ""):
        self.library = library
        self.extra = extra
        msg = (
            f"{library} could not be found; install it with "
            f"`pip install 'cuweave[{extra}]'`"
        )
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


class CudaUnavailableError(CuweaveError, RuntimeError):
    """CUDA execution was requested but no usable CUDA device/driver exists."""


class LibraryError(CuweaveError, RuntimeError):
    """A native library call returned an error status.

    Also a ``RuntimeError``. The message names the library, the function, the status (by name
    and number) and, when one is known, a hint on what to do.

    Parameters
    ----------
    status : int
        The status code the library returned (kept as ``status``; its name, or
        ``UNKNOWN_STATUS_<n>``, as ``status_name``).
    function : str, optional
        The name of the library function that failed (kept as ``function``).
    hint : str or None, optional
        What the user may do about it. ``None`` (the default) uses the hint the subclass
        knows for this status, if any.
    """

    library = "library"
    _names: dict[int, str] = {}
    _hints: dict[str, str] = {}

    def __init__(self, status: int, function: str = "", hint: str | None = None):
        self.status = int(status)
        self.status_name = self._names.get(self.status, f"UNKNOWN_STATUS_{self.status}")
        self.function = function
        where = f"{function} " if function else ""
        msg = f"{self.library} {where}failed with {self.status_name} ({self.status})"
        hint = hint if hint is not None else self._hints.get(self.status_name)
        if hint:
            msg += f": {hint}"
        super().__init__(msg)


class CublasLtError(LibraryError):
    """A cuBLASLt call returned a status other than ``CUBLAS_STATUS_SUCCESS``.

    Raised by :mod:`cuweave.linalg.advanced` on the GPU; also a ``RuntimeError``.

    Parameters
    ----------
    status : int
        The ``cublasStatus_t`` value returned (kept as ``status``; its name as
        ``status_name``).
    function : str, optional
        The name of the cuBLASLt function that failed (kept as ``function``).
    hint : str or None, optional
        What the user may do about it; ``None`` (the default) uses cuweave's hint for this
        status, if it has one.

    Examples
    --------
    >>> from cuweave import CublasLtError
    >>> e = CublasLtError(3, "cublasLtMatmul")
    >>> e.status_name
    'CUBLAS_STATUS_ALLOC_FAILED'
    >>> print(e)  # doctest: +ELLIPSIS
    cuBLASLt cublasLtMatmul failed with CUBLAS_STATUS_ALLOC_FAILED (3): the GPU is out of ...
    """

    library = "cuBLASLt"
    _names = {
        0: "CUBLAS_STATUS_SUCCESS",
        1: "CUBLAS_STATUS_NOT_INITIALIZED",
        3: "CUBLAS_STATUS_ALLOC_FAILED",
        7: "CUBLAS_STATUS_INVALID_VALUE",
        8: "CUBLAS_STATUS_ARCH_MISMATCH",
        11: "CUBLAS_STATUS_MAPPING_ERROR",
        13: "CUBLAS_STATUS_EXECUTION_FAILED",
        14: "CUBLAS_STATUS_INTERNAL_ERROR",
        15: "CUBLAS_STATUS_NOT_SUPPORTED",
        16: "CUBLAS_STATUS_LICENSE_ERROR",
    }
    _hints = {
        "CUBLAS_STATUS_NOT_INITIALIZED": "the CUDA driver or context is not usable; check "
        "`python -m cuweave info`",
        "CUBLAS_STATUS_ALLOC_FAILED": "the GPU is out of memory; free memory or lower "
        "options.memory_limit",
        "CUBLAS_STATUS_INVALID_VALUE": "a parameter combination is invalid for this operation "
        "(dtype/compute type/epilog/layout); see the cuBLASLt documentation",
        "CUBLAS_STATUS_ARCH_MISMATCH": "this GPU architecture does not support the requested "
        "feature (e.g. fp8 needs compute capability >= 8.9)",
        "CUBLAS_STATUS_EXECUTION_FAILED": "the GPU kernel failed to launch or run",
        "CUBLAS_STATUS_NOT_SUPPORTED": "no algorithm supports this combination of dtypes, "
        "compute type, epilog and layouts; try another compute type or epilog",
    }


class CufftError(LibraryError):
    """A cuFFT call returned a result other than ``CUFFT_SUCCESS``.

    Raised by :mod:`cuweave.fft` on the GPU; also a ``RuntimeError``.

    Parameters
    ----------
    status : int
        The ``cufftResult`` value returned (kept as ``status``; its name as ``status_name``).
    function : str, optional
        The name of the cuFFT function that failed (kept as ``function``).
    hint : str or None, optional
        What the user may do about it; ``None`` (the default) uses cuweave's hint for this
        result, if it has one.

    Examples
    --------
    >>> from cuweave import CufftError
    >>> e = CufftError(8, "cufftMakePlanMany64")
    >>> e.status_name
    'CUFFT_INVALID_SIZE'
    """

    library = "cuFFT"
    _names = {
        0: "CUFFT_SUCCESS",
        1: "CUFFT_INVALID_PLAN",
        2: "CUFFT_ALLOC_FAILED",
        3: "CUFFT_INVALID_TYPE",
        4: "CUFFT_INVALID_VALUE",
        5: "CUFFT_INTERNAL_ERROR",
        6: "CUFFT_EXEC_FAILED",
        7: "CUFFT_SETUP_FAILED",
        8: "CUFFT_INVALID_SIZE",
        9: "CUFFT_UNALIGNED_DATA",
        11: "CUFFT_INVALID_DEVICE",
        13: "CUFFT_NO_WORKSPACE",
        14: "CUFFT_NOT_IMPLEMENTED",
        16: "CUFFT_NOT_SUPPORTED",
        17: "CUFFT_MISSING_DEPENDENCY",
        18: "CUFFT_NVRTC_FAILURE",
        19: "CUFFT_NVJITLINK_FAILURE",
        20: "CUFFT_NVSHMEM_FAILURE",
    }
    _hints = {
        "CUFFT_ALLOC_FAILED": "the GPU is out of memory",
        "CUFFT_INVALID_SIZE": "a transform length or batch layout is not supported",
        "CUFFT_NOT_SUPPORTED": "this layout/type combination is not supported by cuFFT",
        "CUFFT_MISSING_DEPENDENCY": "callbacks need nvJitLink and NVRTC: "
        "`pip install 'cuweave[cu13]'`",
        "CUFFT_NVJITLINK_FAILURE": "linking the callback LTO-IR failed; compile it for this "
        "GPU's compute capability",
    }


class NvrtcError(LibraryError):
    """An NVRTC call failed (a compilation that merely reports errors returns its log)."""

    library = "NVRTC"
    _names = {1: "NVRTC_ERROR_OUT_OF_MEMORY", 2: "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
              3: "NVRTC_ERROR_INVALID_INPUT", 4: "NVRTC_ERROR_INVALID_PROGRAM",
              5: "NVRTC_ERROR_INVALID_OPTION", 6: "NVRTC_ERROR_COMPILATION",
              11: "NVRTC_ERROR_INTERNAL_ERROR"}


class CudaDriverError(LibraryError):
    """A CUDA driver/runtime call failed."""

    library = "CUDA"

    def __init__(self, status: int, function: str = "", hint: str | None = None, name: str = ""):
        if name:
            self._names = {int(status): name}
        super().__init__(status, function, hint)


class NcclError(LibraryError):
    """An NCCL call returned a result other than ``ncclSuccess`` (``cuweave.distributed``'s GPU
    data plane).

    Also a ``RuntimeError``.

    Parameters
    ----------
    status : int
        The ``ncclResult_t`` value returned (kept as ``status``; its name as
        ``status_name``).
    function : str, optional
        The name of the NCCL function that failed (kept as ``function``).
    hint : str or None, optional
        What the user may do about it; ``None`` (the default) uses cuweave's hint for this
        result, if it has one.

    Examples
    --------
    >>> from cuweave.distributed import NcclError
    >>> NcclError(4, "ncclAllReduce").status_name
    'ncclInvalidArgument'
    """

    library = "NCCL"
    _names = {
        0: "ncclSuccess",
        1: "ncclUnhandledCudaError",
        2: "ncclSystemError",
        3: "ncclInternalError",
        4: "ncclInvalidArgument",
        5: "ncclInvalidUsage",
        6: "ncclRemoteError",
        7: "ncclInProgress",
    }
    _hints = {
        "ncclUnhandledCudaError": "a CUDA call inside NCCL failed (out of memory, or a bad "
        "device/stream); rerun with NCCL_DEBUG=WARN for NCCL's own message",
        "ncclSystemError": "a system call failed (shared memory, sockets): check /dev/shm size "
        "and the network interfaces NCCL may use (NCCL_SOCKET_IFNAME); NCCL_DEBUG=WARN says more",
        "ncclInternalError": "NCCL hit an internal error; rerun with NCCL_DEBUG=WARN",
        "ncclInvalidArgument": "a pointer, count, peer or communicator passed to NCCL is invalid",
        "ncclInvalidUsage": "NCCL was used wrongly (e.g. two processes on one GPU, or processes "
        "that did not make the same calls); every process must call the same distributed "
        "operations with one GPU each",
        "ncclRemoteError": "another process failed or exited (a remote peer's error)",
    }
