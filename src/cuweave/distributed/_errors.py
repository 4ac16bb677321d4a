"""Errors of :mod:`cuweave.distributed` (all derive from :class:`cuweave.CuweaveError`)."""

from __future__ import annotations

from .._internal.errors import CuweaveError, InvalidOperandError, InvalidOptionError

__all__ = ["UnsupportedMemorySpaceError", "NotSupportedError", "BindDistributionError",
           "ConvertDistributionError", "CollectiveError", "InvalidOperandError",
           "InvalidOptionError"]


class UnsupportedMemorySpaceError(CuweaveError, NotImplementedError):
    """The operands live in a memory space no distributed backend serves (GPU arrays other
    than CuPy arrays and CUDA torch tensors)."""


class NotSupportedError(CuweaveError, NotImplementedError):
    """A valid request this build does not serve yet (the message says what instead)."""


class BindDistributionError(CuweaveError, ValueError):
    """A local shape does not fit the distribution (nvmath-python's ``BindDistributionError``)."""


class ConvertDistributionError(CuweaveError, ValueError):
    """A distribution cannot be converted to the requested distribution type."""


class CollectiveError(CuweaveError, ValueError):
    """Another process found a bad input; raised on every process so that none deadlocks.

    Parameters
    ----------
    message : str
        What went wrong, as the failing process saw it.
    rank : int
        The first process that failed (-1: unknown).
    error_type : str
        The class name of its error.
    """

    def __init__(self, message: str, rank: int = -1, error_type: str = ""):
        super().__init__(message)
        self.rank = rank
        self.error_type = error_type
