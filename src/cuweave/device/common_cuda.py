"""CUDA helpers for device kernels: compute capabilities and launch dimensions.

Pure Python (no numba, no CUDA library is imported until :func:`current_device_sm` is called).

Examples
--------
>>> from cuweave.device.common_cuda import ComputeCapability, Dim3
>>> cc = ComputeCapability(9, 0)
>>> cc.integer, str(cc)
(900, '9.0')
>>> Dim3(128)
Dim3(x=128, y=1, z=1)
"""

from __future__ import annotations

from collections import namedtuple
from typing import NamedTuple

__all__ = ["ComputeCapability", "Dim3", "CodeType", "current_device_sm", "get_current_device_cc",
           "current_device_lto", "MIN_SUPPORTED_CC", "MAX_SUPPORTED_CC"]


class ComputeCapability(NamedTuple):
    """A compute capability ``(major, minor)``, with an optional architecture suffix ``arch``
    (``''``, ``'a'`` for architecture-specific or ``'f'`` for family-specific code)."""

    major: int
    minor: int
    arch: str = ""

    @property
    def integer(self) -> int:
        """The capability as one integer (``900`` for 9.0), as cuFFTDx's ``SM<>`` takes it."""
        return self.major * 100 + self.minor * 10

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.arch}"


class Dim3(namedtuple("Dim3", ("x", "y", "z"), defaults=(1, 1, 1))):
    """Grid or block dimensions ``(x, y, z)``; ``y`` and ``z`` default to 1.

    A ``Dim3`` is a tuple, so it can be given directly as a numba launch dimension.
    """

    __slots__ = ()


class CodeType(NamedTuple):
    """Kind of device code and target capability (nvmath-python's ``CodeType``): device
    objects take its ``cc`` as their ``sm``."""

    kind: str
    cc: ComputeCapability


MIN_SUPPORTED_CC = ComputeCapability(7, 0)
MAX_SUPPORTED_CC = ComputeCapability(12, 1)


def current_device_sm() -> ComputeCapability:
    """The compute capability of the calling thread's current CUDA device (device 0 if none is
    current); raises :class:`~cuweave.CudaUnavailableError` without a usable device."""
    from .._internal import cuda
    from .._internal.errors import CudaUnavailableError

    if not cuda.is_available():
        raise CudaUnavailableError(f"no CUDA device: {cuda.unavailable_reason()}")
    device = cuda.current_device()
    major, minor = cuda.compute_capability(0 if device is None else device)
    return ComputeCapability(int(major), int(minor))


def get_current_device_cc() -> ComputeCapability:
    """nvmath-python's name of :func:`current_device_sm`."""
    return current_device_sm()


def current_device_lto() -> CodeType:
    """``CodeType('lto', <current device's capability>)`` (nvmath-python's helper)."""
    return CodeType("lto", current_device_sm())
