"""CPU execution of FFTs with SciPy's pocketfft (multithreaded through ``workers``).

A :class:`CpuPlan` is built once per :class:`~cuweave.fft.FFT` object: it binds the scipy
function and its keyword arguments, so an execution is a single call. scipy keeps its own
cache of twiddle-factor plans, which repeated executions reuse.
"""

from __future__ import annotations

import numpy as np

from .._internal.errors import InvalidOperandError
from ._options import FFTDirection

__all__ = ["CpuPlan", "scipy_norm", "CPU_DTYPES"]

#: dtypes the CPU path transforms without changing precision
CPU_DTYPES = frozenset(["float32", "float64", "complex64", "complex128"])


def scipy_norm(direction: FFTDirection, norm: str | None) -> str:
    """scipy's ``norm`` giving cuweave's scaling (``None``: no scaling in either direction)."""
    if norm is None:
        return "backward" if direction == FFTDirection.FORWARD else "forward"
    return norm


def _pocketfft():
    """SciPy's pocketfft functions themselves, not the :mod:`scipy.fft` front ends: those
    dispatch to the active ``scipy.fft`` backend (cuweave's own, CuPy's, pyFFTW's), which
    must not take over cuweave's CPU execution. About 3 µs a call cheaper, too
    (``tests/fft/test_fft_cpu.py`` checks that an active backend is not called)."""
    try:
        from scipy.fft import _pocketfft
        _pocketfft.fftn, _pocketfft.ifftn, _pocketfft.rfftn, _pocketfft.irfftn  # noqa: B018
        return _pocketfft
    except (ImportError, AttributeError):  # pragma: no cover - another SciPy layout
        import scipy.fft

        return scipy.fft


class CpuPlan:
    """A bound scipy.fft call for one transform type over fixed axes.

    Parameters
    ----------
    fft_type : {'C2C', 'R2C', 'C2R'}
    axes : tuple of int
    out_lengths : tuple of int
        Output lengths along ``axes`` (used by C2R for the real output size).
    workers : int
        Number of threads scipy may use.
    dtype : str
        Canonical dtype of the operand.
    """

    __slots__ = ("_forward", "_inverse", "_kwargs", "fft_type")

    def __init__(self, fft_type: str, axes, out_lengths, workers: int, dtype: str):
        sfft = _pocketfft()

        if dtype not in CPU_DTYPES:
            raise InvalidOperandError(
                f"operand dtype must be one of {sorted(CPU_DTYPES)} for CPU execution, got "
                f"{dtype!r} (use execution='cuda' for half precision)")
        self.fft_type = fft_type
        self._kwargs = {"axes": tuple(axes), "workers": int(workers)}
        if fft_type == "C2C":
            self._forward, self._inverse = sfft.fftn, sfft.ifftn
        elif fft_type == "R2C":
            self._forward, self._inverse = sfft.rfftn, None
        else:
            self._forward, self._inverse = None, sfft.irfftn
            self._kwargs["s"] = tuple(out_lengths)

    def run(self, x: np.ndarray, direction: FFTDirection, norm: str | None) -> np.ndarray:
        """Transform the host array ``x`` (never modified); returns a new NumPy array."""
        fn = self._forward if direction == FFTDirection.FORWARD else self._inverse
        return fn(x, norm=scipy_norm(direction, norm), **self._kwargs)
