"""cuweave as a :mod:`scipy.fft` backend (the uarray protocol).

>>> import numpy as np, scipy.fft
>>> import cuweave.fft
>>> x = np.random.default_rng(0).standard_normal((16, 30))
>>> with scipy.fft.set_backend(cuweave.fft.scipy_backend):
...     y = scipy.fft.rfftn(x, s=(16, 32))
>>> bool(np.allclose(y, np.fft.rfftn(x, s=(16, 32), axes=(0, 1))))
True

Served: ``fft``, ``ifft``, ``rfft``, ``irfft``, ``hfft``, ``ihfft`` and their ``2``/``n``
forms, with SciPy's ``n``/``s`` (cropping, zero-padding, ``-1``), ``axis``/``axes`` (negative;
repeated ones are an error), ``norm``, ``overwrite_x`` (allowed, never needed: the input is
never overwritten) and ``workers`` (validated as SciPy does; it sets threads of SciPy's own
CPU transforms).

- **CuPy arrays** run on cuFFT through cuweave's cached plans (``norm`` fused into the
  transform); the result is a CuPy array of SciPy's dtype (float32/complex64 stay single
  precision).
- **NumPy arrays** run on the GPU when one is usable, ``workers`` is not given (an explicit
  ``workers`` asks for SciPy's CPU threads; cuweave's own CPU execution passes one too), no
  :func:`scipy.fft.set_workers` context asks for more than one thread, and the
  transform holds at least :data:`numpy_gpu_min_elements` elements (the larger of the fitted
  input and the result): below that, or against several CPU threads, the copies to the device
  and back cost more than SciPy's CPU transform. The result is a NumPy array. Otherwise
  ``NotImplemented`` lets SciPy's own implementation (pocketfft, with ``workers``) run.
- ``NotImplemented`` also for every other function (``dct``, …), input type (lists, torch
  tensors, NumPy subclasses), long double, ``plan=`` given, and, for NumPy arrays, arguments
  SciPy rejects (so SciPy raises its own error). Invalid arguments with a CuPy array raise
  cuweave's typed errors (``ValueError``/``TypeError``/``IndexError`` as SciPy's).

With ``scipy.fft.set_global_backend(cuweave.fft.scipy_backend)``, SciPy's own backend is no
longer tried after cuweave's ``NotImplemented``; call ``scipy.fft.register_backend("scipy")``
as well (as with CuPy's backend) so that SciPy still serves what cuweave does not.
"""

from __future__ import annotations

import operator
import os

from .._internal.errors import InvalidOptionError
from .._internal.packages import NamespaceArrayOps, array_adapter
from ._numpy_api import recipe

__all__ = ["__ua_domain__", "__ua_function__", "numpy_gpu_min_elements"]

__ua_domain__ = "numpy.scipy.fft"

#: NumPy arrays run on the GPU when their transform holds at least this many elements, SciPy
#: would run it on one thread (``workers`` not given) and a GPU is usable; ``None`` keeps them
#: on SciPy's CPU path.
#: Measured on an H200 host (benchmarks/results/fft_scipy.md, batches of 1024-point complex64
#: FFTs, copies over PCIe included), the GPU route against single-threaded pocketfft: 0.77x at
#: 2**16 elements, 0.81x at 2**17, 2.5x at 2**20; against 16 workers it loses at every size.
numpy_gpu_min_elements: int | None = 1 << 18

_GPU: list = []  # [bool] once known
_WHERE: dict = {}  # type(x) -> 'host', 'device' or None (what _classify says of that type)


def __ua_function__(method, args, kwargs):
    """uarray entry point: run ``method`` (a scipy.fft multimethod) or return NotImplemented.

    SciPy calls it inside :func:`scipy.fft.set_backend` (users do not call it themselves).

    Parameters
    ----------
    method : callable
        The :mod:`scipy.fft` function called (``scipy.fft.rfftn``, say); its ``__name__``
        says which transform to run.
    args : tuple
        The positional arguments it was called with (the array first).
    kwargs : dict
        Its keyword arguments (``n``/``s``, ``axis``/``axes``, ``norm``, ``overwrite_x``,
        ``workers``, ``plan``).

    Returns
    -------
    array or NotImplemented
        The transform's result (an array of the input's package), or ``NotImplemented`` for
        what this backend leaves to SciPy (see the module's description).

    Examples
    --------
    >>> import numpy as np, scipy.fft
    >>> from cuweave.fft import scipy_backend
    >>> scipy_backend.__ua_function__(scipy.fft.dct, (np.ones(4),), {})
    NotImplemented
    """
    fn = _SERVED.get(getattr(method, "__name__", None))
    if fn is None:
        return NotImplemented
    return fn(*args, **kwargs)


def _gpu_usable() -> bool:
    if not _GPU:
        import cuweave

        _GPU.append(bool(cuweave.is_available()))
    return _GPU[0]


def _where(x):
    """'host' (NumPy arrays) or 'device' (CuPy arrays) for the arrays this backend serves, else
    None (cached by type)."""
    t = type(x)
    try:
        return _WHERE[t]
    except KeyError:
        pass
    where = _classify(x)
    if len(_WHERE) < 256:
        _WHERE[t] = where
    return where


def _classify(x):
    """Arrays of NumPy's namespace (the packages SciPy dispatches): device arrays, or plain
    host arrays (not a subclass such as a masked array); by their package's adapter."""
    ad = array_adapter(x)
    if not isinstance(ad, NamespaceArrayOps):
        return None
    if ad.device_memory:
        return "device"
    return "host" if type(x) is ad.xp.ndarray else None


def check_workers(workers) -> None:
    """SciPy's checks of ``workers`` (the GPU does not use it)."""
    if workers is None:
        return
    if isinstance(workers, bool):
        raise InvalidOptionError(f"workers must be an int or None, got {workers!r}")
    try:
        w = operator.index(workers)
    except TypeError:
        raise InvalidOptionError(f"workers must be an int or None, got {workers!r}") from None
    if w == 0:
        raise InvalidOptionError("workers must not be zero, got 0")
    cpus = os.cpu_count() or 1
    if w < -cpus:
        raise InvalidOptionError(
            f"workers must not be less than -os.cpu_count() = {-cpus}, got {w}")


def _default_threads() -> int:
    """The threads SciPy uses when ``workers`` is not given (:func:`scipy.fft.set_workers`)."""
    import scipy.fft

    return scipy.fft.get_workers()


def _serve(kind, x, s, axes, norm, workers, plan, one_d):
    if plan is not None:
        return NotImplemented
    where = _where(x)
    if where is None:
        return NotImplemented
    if where == "device":
        if workers is not None:
            check_workers(workers)
        return recipe(kind, x, s, axes, norm, one_d=one_d).run(x)
    threshold = numpy_gpu_min_elements
    if threshold is None or not _gpu_usable():
        return NotImplemented
    try:
        check_workers(workers)
        if workers is not None or _default_threads() != 1:
            return NotImplemented  # an explicit CPU request, or SciPy's threads beat the copies
        r = recipe(kind, x, s, axes, norm, one_d=one_d)
    except (ValueError, TypeError, IndexError):
        return NotImplemented  # SciPy reports its own error (or computes what we cannot)
    if r.elements < threshold:
        return NotImplemented
    return r.run(x, execution="cuda")


def _one_d(kind):
    def fn(x, n=None, axis=-1, norm=None, overwrite_x=False, workers=None, *, plan=None):
        return _serve(kind, x, None if n is None else (n,), (axis,), norm, workers, plan, True)

    fn.__name__ = kind
    return fn


def _n_d(kind, default_axes):
    def fn(x, s=None, axes=default_axes, norm=None, overwrite_x=False, workers=None, *,
           plan=None):
        return _serve(kind, x, s, axes, norm, workers, plan, False)

    return fn


_SERVED = {}
for _k in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    _SERVED[_k] = _one_d(_k)
    _SERVED[_k + "2"] = _n_d(_k, (-2, -1))
    _SERVED[_k + "n"] = _n_d(_k, None)
del _k
