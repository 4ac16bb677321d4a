"""Options, enums and callback descriptors of :mod:`cuweave.fft`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from .._internal.errors import InvalidOptionError
from .._internal.options import ExecutionCPU, ExecutionCUDA

__all__ = ["FFTOptions", "FFTDirection", "DeviceCallable", "ExecutionCUDA", "ExecutionCPU",
           "NORMS"]

#: Accepted ``norm=`` values (NumPy's meaning); ``None`` leaves every transform unscaled.
NORMS = (None, "backward", "ortho", "forward")

_FFT_TYPES = (None, "C2C", "R2C", "C2R")


class FFTDirection(IntEnum):
    """Transform direction; the values are cuFFT's ``CUFFT_FORWARD`` / ``CUFFT_INVERSE``."""

    FORWARD = -1
    INVERSE = 1


@dataclass
class FFTOptions:
    """Options of :class:`cuweave.fft.FFT` and the function forms.

    Attributes
    ----------
    fft_type : {None, 'C2C', 'R2C', 'C2R'}
        ``None`` infers it from the operand: complex → ``'C2C'``, real → ``'R2C'``.
    inplace : bool
        Overwrite the operand with the result (C2C only: as nvmath-python, an R2C/C2R
        transform with ``inplace=True`` is refused when the :class:`FFT` is created).
    last_axis_parity : {'even', 'odd'}
        For C2R: the output length along the last transformed axis is ``2*(m-1)`` (even)
        or ``2*(m-1)+1`` (odd), ``m`` being the input length there.
    result_layout : {'optimized', 'natural'}
        ``'natural'`` gives the result the operand's axis order in memory; ``'optimized'``
        places the transformed axes innermost, which suits cuFFT best.
    logger : logging.Logger or None
        Logger to use instead of ``cuweave.fft``.
    blocking : {True, 'auto'}
        ``'auto'`` returns as soon as the work is queued for device operands and waits for
        host operands; ``True`` always waits.
    allocator : object or None
        A :class:`cuweave.BaseCUDAMemoryManager`-like object providing workspace and staging
        memory; default: the operand package's pool.
    """

    fft_type: Literal["C2C", "R2C", "C2R"] | None = None
    inplace: bool = False
    last_axis_parity: Literal["even", "odd"] = "even"
    result_layout: Literal["optimized", "natural"] = "optimized"
    logger: object = None
    blocking: Literal[True, "auto"] = "auto"
    allocator: object = None

    def __post_init__(self):
        if isinstance(self.fft_type, str):
            self.fft_type = self.fft_type.upper()
        if self.fft_type not in _FFT_TYPES:
            raise InvalidOptionError(
                f"fft_type must be one of {_FFT_TYPES}, got {self.fft_type!r}")
        if not isinstance(self.inplace, bool):
            raise InvalidOptionError(f"inplace must be a bool, got {self.inplace!r}")
        if self.last_axis_parity not in ("even", "odd"):
            raise InvalidOptionError(
                f"last_axis_parity must be 'even' or 'odd', got {self.last_axis_parity!r}")
        if self.result_layout not in ("optimized", "natural"):
            raise InvalidOptionError(
                "The value specified for 'result_layout' must be one of ['natural', "
                f"'optimized']: result_layout must be 'optimized' or 'natural', got "
                f"{self.result_layout!r}")
        if self.blocking not in (True, "auto"):
            raise InvalidOptionError(f"blocking must be True or 'auto', got {self.blocking!r}")
        if self.logger is not None and not hasattr(self.logger, "isEnabledFor"):
            raise InvalidOptionError(f"logger must be a logging.Logger or None, got "
                                     f"{self.logger!r}")
        if self.allocator is not None and not (
                hasattr(self.allocator, "memalloc") or hasattr(self.allocator, "memalloc_async")):
            raise InvalidOptionError(
                "allocator must implement memalloc(size) or memalloc_async(size, stream), "
                f"got {self.allocator!r}")


def callback_key(ltoir, size, data, symbol) -> tuple:
    """The identity of a callback (see :meth:`DeviceCallable.key`); ``size`` defaults to
    ``len(ltoir)`` for bytes, as :class:`DeviceCallable` does."""
    if isinstance(ltoir, bytes):
        return (bytes, ltoir, len(ltoir) if size is None else size, data, symbol)
    return ("addr", ltoir, size, data, symbol)


@dataclass
class DeviceCallable:
    """A prolog/epilog callback compiled to LTO-IR (see :func:`compile_prolog`).

    Attributes
    ----------
    ltoir : bytes or int or None
        The LTO-IR, as bytes or as the address of a buffer holding it.
    size : int or None
        Size of the LTO-IR in bytes (computed from ``bytes``; required with an address).
    data : int or None
        Device pointer handed to the callback as ``user_info`` (``None``: null).
    symbol : str or None
        A cuweave extension: the callback's symbol in the LTO-IR, passed to
        ``cufftXtSetJITCallback``; ``None`` (recommended) lets cuFFT look up its default C++-mangled
        name (``cufftJITCallbackStoreComplex`` etc.), which :func:`compile_prolog` and
        :func:`compile_epilog` produce.
    """

    ltoir: bytes | int | None = None
    size: int | None = None
    data: int | None = None
    symbol: str | None = None

    def __post_init__(self):
        if isinstance(self.ltoir, bytearray):
            self.ltoir = bytes(self.ltoir)
        if self.ltoir is None:
            raise InvalidOptionError("ltoir must be bytes or an address (int), got None")
        if isinstance(self.ltoir, bytes):
            if self.size is None:
                self.size = len(self.ltoir)
            elif self.size != len(self.ltoir):
                raise InvalidOptionError(
                    f"size must equal len(ltoir) = {len(self.ltoir)}, got {self.size!r}")
        elif isinstance(self.ltoir, int) and not isinstance(self.ltoir, bool):
            if not isinstance(self.size, int) or self.size <= 0:
                raise InvalidOptionError(
                    f"size must be a positive int when ltoir is an address, got {self.size!r}")
        else:
            raise InvalidOptionError(f"ltoir must be bytes or an int address, got "
                                     f"{type(self.ltoir).__name__}")
        if self.data is not None and (not isinstance(self.data, int) or self.data < 0):
            raise InvalidOptionError(f"data must be a device pointer (int) or None, got "
                                     f"{self.data!r}")
        if self.symbol is not None and not isinstance(self.symbol, str):
            raise InvalidOptionError(f"symbol must be a str or None, got {self.symbol!r}")

    def key(self) -> tuple:
        """Hashable identity of this callable (LTO-IR content, user data, symbol): the bytes
        themselves (compared by content only on a hash match; a hit on the same object is an
        identity check), so two LTO-IRs of one hash never share a plan."""
        return callback_key(self.ltoir, self.size, self.data, self.symbol)


def norm_scale(norm: str | None, direction: FFTDirection, n: int) -> float:
    """The factor NumPy's ``norm`` applies in ``direction`` to a transform of ``n`` points."""
    if norm is None:
        return 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if (norm == "backward") == (direction == FFTDirection.INVERSE):
        return 1.0 / n
    return 1.0
