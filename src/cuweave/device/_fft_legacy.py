"""nvmath-python's earlier ways of building a device FFT, kept for kernels written for them:
the ``fft(...)`` factory (deprecated there since 0.7, still in 1.0) and ``FFTOptions``, a
partial description with ``valid()`` and ``create()``.

``cuweave.device.fft`` is both the module holding :class:`~cuweave.device.FFT` and this
factory (calling the module calls :func:`fft`), as ``from nvmath.device import fft`` gives a
function there.
"""

from __future__ import annotations

import sys
import types

from .._internal.errors import InvalidOptionError
from .fft import FFT

__all__ = ["fft", "FFTOptions"]

_EXECUTE_APIS = (None, "register_memory", "shared_memory")


def _sm_of(code_type):
    """The SM value of nvmath's ``CodeType`` (or anything with ``cc``, or an SM value)."""
    cc = getattr(code_type, "cc", code_type)
    if isinstance(cc, tuple) and len(cc) >= 2:
        return int(cc[0]) * 10 + int(cc[1])
    return cc


def fft(*, compiler=None, code_type=None, execute_api=None, **knobs):
    """Build an :class:`~cuweave.device.FFT` (nvmath-python's deprecated factory).

    Parameters
    ----------
    compiler : None or 'numba'
        Accepted for compatibility; the FFT is usable in numba kernels either way.
    code_type : CodeType, optional
        Its compute capability sets ``sm`` when ``sm`` is not given.
    execute_api : None, 'register_memory' or 'shared_memory'
        Validated only: ``execute(thread_data, shared_memory)`` and ``execute(shared_data)``
        both work on every Block FFT.
    **knobs
        The :class:`~cuweave.device.FFT` knobs (``fft_type``, ``size``, ``precision``, ...).
    """
    if compiler not in (None, "numba"):
        raise InvalidOptionError(f"compiler must be None or 'numba', got {compiler!r}")
    if execute_api not in _EXECUTE_APIS:
        raise InvalidOptionError(f"execute_api must be one of {_EXECUTE_APIS}, "
                                 f"got {execute_api!r}")
    if code_type is not None and knobs.get("sm") is None:
        knobs["sm"] = _sm_of(code_type)
    return FFT(**knobs)


class FFTOptions:
    """A device FFT description whose ``elements_per_thread`` / ``ffts_per_block`` may still
    be open (nvmath-python's ``FFTOptions``): query :meth:`valid` values, then :meth:`create`.

    Parameters
    ----------
    size, precision, fft_type, code_type, execution
        As for :func:`fft` (``code_type`` may be None: the current device's).
    direction, ffts_per_block, elements_per_thread, real_fft_options : optional
        As for :class:`~cuweave.device.FFT`.
    """

    def __init__(self, size, precision, fft_type, code_type, execution, *, direction=None,
                 ffts_per_block=None, elements_per_thread=None, real_fft_options=None):
        self._knobs = dict(size=size, precision=precision, fft_type=fft_type,
                           execution=execution, direction=direction,
                           ffts_per_block=ffts_per_block, elements_per_thread=elements_per_thread,
                           real_fft_options=real_fft_options)
        if code_type is not None:
            self._knobs["sm"] = _sm_of(code_type)
        self._code_type = code_type
        self._base = fft(**self._knobs)  # validates every knob now

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._base, name)  # size, precision, fft_type, traits, ...

    @property
    def code_type(self):
        """The ``code_type`` given (``None``: the current device's)."""
        return self._code_type

    def valid(self, *knobs):
        """Valid values of the open knobs, as an iterator of tuples (one value per knob).

        Parameters
        ----------
        *knobs : str
            ``'elements_per_thread'`` and/or ``'ffts_per_block'``.
        """
        return self._base.valid(*knobs)

    def create(self, **changes):
        """The :class:`~cuweave.device.FFT` of this description with changes applied.

        Parameters
        ----------
        **changes
            Knobs to set or replace (``elements_per_thread=8``, ...); ``compiler``,
            ``code_type`` and ``execute_api`` as for :func:`fft`.

        Returns
        -------
        cuweave.device.FFT
        """
        knobs = {**self._knobs, **changes}
        if "code_type" in changes and "sm" not in changes:
            knobs.pop("sm", None)  # the new code_type decides
        return fft(**knobs)


class _FFTModule(types.ModuleType):
    """``cuweave.device.fft`` is that module and nvmath-python's ``fft(...)`` factory at once
    (``from nvmath.device import fft`` gives the factory there)."""

    def __call__(self, *args, **knobs):
        return fft(*args, **knobs)


# the package imports this module with the FFT's: from then on the module is callable
sys.modules[FFT.__module__].__class__ = _FFTModule
