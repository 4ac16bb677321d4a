"""CPU execution of FFTs: MKL's DFTI where the ``cpu-fft`` extra is installed, else SciPy's
pocketfft (both multithreaded through ``workers``, per call).

A :class:`CpuPlan` is built once per :class:`~cuweave.fft.FFT` object. It holds the MKL plan
(:class:`~cuweave.fft._cpu_backends.MklPlan`) when MKL is there, and the bound pocketfft call
that runs everything MKL leaves (:mod:`cuweave.fft._cpu_backends` says what) or everything
when MKL is absent. Both keep caches of committed plans that repeated executions reuse.
"""

from __future__ import annotations

import numpy as np

from .._internal.errors import InvalidOperandError
from ._cpu_backends import MklPlan, mkl_library
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
    """One transform type over fixed axes on the host: MKL's DFTI, else a bound pocketfft call.

    Parameters
    ----------
    fft_type : {'C2C', 'R2C', 'C2R'}
    axes : tuple of int
    out_lengths : tuple of int
        Output lengths along ``axes`` (used by C2R for the real output size).
    workers : int
        Most threads one execution may use (``workers`` of pocketfft, ``DFTI_THREAD_LIMIT``
        of MKL; no process-wide setting changes).
    dtype : str
        Canonical dtype of the operand.
    perm : tuple of int or None
        The result's axis order in memory, outermost first (``None``: C order). The operand is
        viewed in that order, transformed into a C-ordered array and viewed back, so the
        result has nvmath-python's strides without a copy.
    """

    __slots__ = ("_forward", "_inverse", "_kwargs", "_mkl", "fft_type", "_perm", "_inv")

    def __init__(self, fft_type: str, axes, out_lengths, workers: int, dtype: str,
                 perm=None):
        sfft = _pocketfft()
        self._perm = self._inv = None
        if perm is not None and tuple(perm) != tuple(range(len(perm))):
            self._perm = tuple(perm)
            self._inv = tuple(np.argsort(perm).tolist())
            axes = tuple(self._perm.index(a) for a in axes)

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
        dfti = mkl_library()
        self._mkl = None if dfti is None else MklPlan(dfti, fft_type, axes, out_lengths, workers)

    @property
    def perm(self):
        """The result's axis order in memory (outermost first), or ``None`` for C order."""
        return self._perm

    @property
    def backend(self) -> str:
        """``'mkl'`` or ``'pocketfft'``: the library this plan runs on (MKL still hands the
        layouts it cannot take to pocketfft)."""
        return "pocketfft" if self._mkl is None else "mkl"

    def run(self, x: np.ndarray, direction: FFTDirection, norm: str | None) -> np.ndarray:
        """Transform the host array ``x`` (never modified); returns a new dense array with its
        axes in ``perm`` order in memory."""
        if self._perm is not None:
            return self._run(x.transpose(self._perm), direction, norm).transpose(self._inv)
        return self._run(x, direction, norm)

    def _run(self, x: np.ndarray, direction: FFTDirection, norm: str | None) -> np.ndarray:
        if self._mkl is not None:
            res = self._mkl.run(x, direction, norm)
            if res is not None:
                return res
        fn = self._forward if direction == FFTDirection.FORWARD else self._inverse
        return fn(x, norm=scipy_norm(direction, norm), **self._kwargs)
