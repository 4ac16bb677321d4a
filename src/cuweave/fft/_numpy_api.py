"""NumPy-style FFT functions on cuweave's cached plans: ``cuweave.fft.numpy``.

The functions of :mod:`numpy.fft` (and SciPy's ``hfft2``/``hfftn``/``ihfft2``/``ihfftn``) with
NumPy's ``n``/``s`` padding and cropping, ``axis``/``axes`` and ``norm`` (``None`` is
``"backward"``), on NumPy and CuPy arrays and torch tensors. Every transform runs through the
function forms :func:`cuweave.fft.fft`, :func:`~cuweave.fft.ifft`, :func:`~cuweave.fft.rfft`
and :func:`~cuweave.fft.irfft`, so plans are cached and ``norm`` is fused into the transform.

Why a namespace of its own: the nvmath-python forms ``cuweave.fft.fft(x)`` take a real ``x`` as
an R2C transform (half the spectrum) and never scale by default, while ``numpy.fft.fft(x)``
returns the full spectrum and scales the inverse. One name cannot carry both meanings, so the
NumPy set lives here (``from cuweave.fft import numpy as cfft``; ``cfft.fft(x, n=..)`` is
NumPy's) and its names that do not clash (``fftn``, ``rfft2``, ``hfft``, …) are also in
:mod:`cuweave.fft` itself.

Dtypes follow NumPy 2 and SciPy: float32/complex64 stay single precision, float16 is computed
in float32, integers and booleans in float64; long double is refused (cuFFT has no such type).
Results live where the input lives (``execution=`` may send a host array to the GPU).
Differences from NumPy: a repeated axis is an error (as in SciPy); ``out=`` is filled by a copy.
"""

from __future__ import annotations

import math
import operator
import sys

import numpy as np

from .._internal.errors import (
    CuweaveError,
    InvalidOperandError,
    InvalidOptionError,
    UnsupportedLayoutError,
)
from .._internal.options import OptionTypeError  # an argument of the wrong type (a float n)
from .._internal.packages import array_adapter
from ._options import NORMS as _NORMS
from ._options import FFTDirection
from ._spec import OperandTypeError  # an operand of the wrong kind (complex for a real FFT)
from .fft import C2R_ODD as _C2R_ODD
from .fft import _call as _form_call  # the function forms' body (cached plans)

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn",
           "fftshift", "ifftshift", "fftfreq", "rfftfreq"]

_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}
_MAX_GROUP = 3  # cuFFT transforms at most 3 axes in one plan


try:  # NumPy's class for a ufunc output it cannot cast (a TypeError; private but long stable)
    from numpy._core._exceptions import UFuncTypeError as _UFuncTypeError
except ImportError:  # pragma: no cover - NumPy 1.x keeps it under numpy.core
    try:
        from numpy.core._exceptions import UFuncTypeError as _UFuncTypeError
    except ImportError:
        _UFuncTypeError = TypeError


class OutCastError(CuweaveError, _UFuncTypeError):
    """``out`` cannot hold the result under NumPy's ``same_kind`` casting: an instance of
    NumPy's own ``UFuncTypeError`` (a ``TypeError``), as numpy.fft raises there."""

    def __init__(self, message: str):
        Exception.__init__(self, message)  # UFuncTypeError's own constructor takes a ufunc
        self.ufunc = None


class AxisError(InvalidOptionError, IndexError):
    """An axis out of range (also an ``IndexError``, like NumPy's ``AxisError``)."""


# ---- array packages -----------------------------------------------------------------------------
def array_ops(x, name: str = "x"):
    """The array operations for ``x``'s package (its adapter: NumPy, CuPy or torch), else a
    typed error."""
    ops = array_adapter(x)
    if ops is None:
        raise OperandTypeError(
            f"{name} must be a NumPy or CuPy array or a torch tensor, got {type(x).__name__}")
    return ops


# ---- dtypes -------------------------------------------------------------------------------------
_REAL_OF = {("c", 4): "float32", ("c", 8): "float32", ("c", 16): "float64",
            ("f", 2): "float32", ("f", 4): "float32", ("f", 8): "float64"}
_COMPLEX = {"float32": "complex64", "float64": "complex128"}


def working_precision(ops, x, name: str = "x") -> str:
    """The real dtype a transform of ``x`` computes in (NumPy 2/SciPy promotion), or an error."""
    kind, size = ops.kind_size(x)
    if kind in "biu":
        return "float64"
    real = _REAL_OF.get((kind, size))
    if real is None:
        raise OperandTypeError(
            f"{name} dtype must be boolean, integer, float16/32/64 or complex64/128, got "
            f"{ops.dtype_label(x)!r}")
    return real


# ---- arguments ----------------------------------------------------------------------------------
def check_norm(norm) -> str:
    """NumPy's ``norm`` (``None`` is ``'backward'``), validated."""
    if isinstance(norm, str) and type(norm) is not str and norm in _NORMS:
        norm = str(norm)  # NumPy's np.str_, accepted as NumPy accepts it
    if norm is not None and not (type(norm) is str and norm in _NORMS):
        raise InvalidOptionError(
            f"norm must be None, 'backward', 'ortho' or 'forward', got {norm!r}")
    return norm or "backward"


def _index(value, name):
    try:
        return operator.index(value)
    except TypeError:
        raise OptionTypeError(f"{name} must be an int, got {value!r}") from None


def _int_seq(value, name):
    if isinstance(value, (str, bytes)):
        raise InvalidOptionError(f"{name} must be a sequence of ints, got {value!r}")
    try:
        items = list(value)
    except TypeError:
        return [_index(value, name)]  # SciPy accepts a scalar for a sequence
    return [_index(v, name) for v in items]


def shape_and_axes(shape, s, axes, *, one_d=False):
    """SciPy's rules for ``s``/``axes``: lists of (target lengths, non-negative axes).

    ``s=None``: the input lengths; ``axes=None``: the last ``len(s)`` axes (all without
    ``s``); an entry ``-1`` of ``s`` keeps the input length. Axes are unique and in range.
    """
    ndim = len(shape)
    if ndim == 0:
        raise InvalidOperandError("x must have at least one dimension, got a 0-d array")
    if s is not None:
        s = _int_seq(s, "n" if one_d else "s")
    if axes is None:
        axes = list(range(ndim - len(s), ndim)) if s is not None else list(range(ndim))
        if s is not None and len(s) > ndim:
            raise InvalidOptionError(
                f"s must have at most x.ndim = {ndim} entries when axes is None, got {s!r}")
    else:
        axes = _int_seq(axes, "axis" if one_d else "axes")
        for a in axes:
            if not -ndim <= a < ndim:
                raise AxisError(
                    f"{'axis' if one_d else 'axes'} must be in [-{ndim}, {ndim}) for a "
                    f"{ndim}-d x, got {a}")
        axes = [a % ndim for a in axes]
        if len(set(axes)) != len(axes):
            raise InvalidOptionError(f"axes must be unique, got {axes!r}")
    if s is None:
        return [shape[a] for a in axes], axes
    if len(s) != len(axes):
        raise InvalidOptionError(
            f"s and axes must have the same length when both are given, got s={s!r} and "
            f"axes={axes!r}")
    s = [shape[a] if n == -1 and not one_d else n for n, a in zip(s, axes)]
    bad = [n for n in s if n < 1]
    if bad:
        raise InvalidOptionError(
            f"{'n' if one_d else 's'} must be >= 1 (invalid number of data points), got "
            f"{bad[0]}")
    return s, axes


# ---- the transform ------------------------------------------------------------------------------
#: kind -> (engine step, input must be, swap norm + conjugate (Hermitian forms))
_KINDS = {"fft": ("C2C", "complex", False), "ifft": ("C2C-inv", "complex", False),
          "rfft": ("R2C", "real", False), "irfft": ("C2R", "complex", False),
          "hfft": ("C2R", "complex", True), "ihfft": ("R2C", "real", True)}
#: engine step -> (direction, fft_type) as the public function form passes them to its body
_FORMS = {"C2C": (FFTDirection.FORWARD, None), "C2C-inv": (FFTDirection.INVERSE, "C2C"),
          "R2C": (FFTDirection.FORWARD, "R2C"), "C2R": (FFTDirection.INVERSE, "C2R")}


class Recipe:
    """One NumPy-style transform of arrays like ``x``, validated: what to fit, compute and
    return. Holds no array: recipes are cached by the arguments' metadata (:func:`recipe`)."""

    __slots__ = ("kind", "ops", "step", "hermitian", "norm", "axes", "s", "last_n", "in_name",
                 "in_targets", "out_shape", "out_dtype", "simple", "empty", "elements",
                 "direct")

    def __init__(self, kind, x, s, axes, norm, *, one_d=False):
        self.kind = kind
        self.ops = ops = array_ops(x)
        step, want, hermitian = _KINDS[kind]
        norm = check_norm(norm)
        shape = tuple(x.shape)
        if step == "C2R" and s is None:
            s, axes = shape_and_axes(shape, None, axes, one_d=one_d)
            s[-1] = 2 * (shape[axes[-1]] - 1)
            if s[-1] < 1:
                raise InvalidOptionError(
                    f"x must have >= 2 points along axis {axes[-1]} for a default output "
                    f"length 2*(m-1) >= 1 (invalid number of data points), got m = "
                    f"{shape[axes[-1]]}")
        else:
            s, axes = shape_and_axes(shape, s, axes, one_d=one_d)
        if 0 in s:  # a transformed axis of length 0 (numpy.fft refuses it too)
            raise InvalidOperandError(
                f"Invalid number of FFT data points (0) specified: every transformed length "
                f"must be >= 1, got lengths {list(s)} along axes {list(axes)}")
        real = working_precision(ops, x)
        if want == "real" and ops.kind_size(x)[0] == "c":
            raise OperandTypeError(f"x must be a real sequence for {kind}, got "
                                   f"{ops.dtype_label(x)!r} data")
        self.step, self.hermitian = step, hermitian
        self.norm = _SWAP[norm] if hermitian else norm
        self.s, self.axes, self.last_n = s, tuple(axes), s[-1]
        self.in_name = real if want == "real" else _COMPLEX[real]
        targets, out = list(s), list(shape)
        for a, n in zip(axes, s):
            out[a] = n
        if step == "C2R":
            targets[-1] = s[-1] // 2 + 1
        elif step == "R2C":
            out[axes[-1]] = s[-1] // 2 + 1
        self.in_targets = targets
        self.out_shape = tuple(out)
        self.out_dtype = real if step == "C2R" else _COMPLEX[real]
        fitted = list(shape)
        for a, n in zip(axes, targets):
            fitted[a] = n
        self.elements = max(math.prod(fitted), math.prod(out))
        self.empty = self.elements == 0 or 0 in shape
        self.simple = (not hermitian and not self.empty and len(axes) <= _MAX_GROUP
                       and ops.dtype_label(x) == self.in_name and fitted == list(shape))
        #: a simple recipe's arguments of the function forms' body after the operand, so a
        #: call goes straight to the plan cache (None after a layout cuFFT cannot express)
        self.direct = (_form_args(step, self.axes, s[-1], self.norm, None) if self.simple
                       else None)

    def run(self, x, *, execution=None):
        """Fit ``x`` (dtype, ``s``), transform, return the result where ``x`` lives."""
        if self.simple:
            direct = self.direct
            if direct is not None and execution is None:
                try:
                    return _form_call(x, *direct)
                except UnsupportedLayoutError:  # this layout (and later ones): by _engine,
                    self.direct = None          # which moves the axes and remembers it
            return _engine(self.step, x, self.axes, self.last_n, self.norm, execution)
        ops = self.ops
        if self.empty:
            return ops.new_like(self.out_shape, self.out_dtype, x, zeros=True)
        x, copied = self._fitted(x)
        if self.kind == "hfft":
            x = ops.conj_(x) if copied else ops.conj(x)
        y = _transform(self.step, x, self.axes, self.last_n, self.norm, execution)
        return ops.conj_(y) if self.kind == "ihfft" else y

    def _fitted(self, x):
        """(``x`` in the working dtype, cropped and zero-padded to ``in_targets``; whether it
        is a new array)."""
        ops, name = self.ops, self.in_name
        copied = ops.dtype_label(x) != name
        if copied:
            x = ops.astype(x, name)
        shape = tuple(x.shape)
        if all(shape[a] == t for a, t in zip(self.axes, self.in_targets)):
            return x, copied
        crop = [slice(None)] * len(shape)
        padded = list(shape)
        for a, t in zip(self.axes, self.in_targets):
            crop[a] = slice(0, min(t, shape[a]))
            padded[a] = t
        x = x[tuple(crop)]
        kept = tuple(x.shape)
        if tuple(padded) == kept:
            return x, copied
        z = ops.new_like(tuple(padded), name, x)
        z[tuple(slice(0, n) for n in kept)] = x
        for a, n in enumerate(kept):  # zero only the padding (not the whole array first)
            if padded[a] > n:
                tail = [slice(None)] * len(kept)
                tail[a] = slice(n, None)
                z[tuple(tail)] = 0
        return z, True


_RECIPES: dict = {}


def _tup(v):
    return tuple(v) if type(v) in (list, tuple) else v


def recipe(kind, x, s, axes, norm, *, one_d=False) -> Recipe:
    """The :class:`Recipe` for these arguments, cached by ``x``'s package, dtype and shape."""
    try:
        key = (kind, type(x), x.dtype, tuple(x.shape), s if s is None or type(s) is tuple
               else _tup(s), axes if type(axes) is tuple else _tup(axes), norm, one_d)
        r = _RECIPES.get(key)
    except (TypeError, AttributeError):  # unhashable arguments, or not an array
        key = r = None
    if r is None:
        r = Recipe(kind, x, s, axes, norm, one_d=one_d)
        if key is not None:
            if len(_RECIPES) >= 1024:
                _RECIPES.clear()
            _RECIPES[key] = r
    return r


def _transform(step, x, axes, last_n, norm, execution):
    """Run ``step`` over ``axes`` in groups of at most three (the halved axis in the first
    group of a forward real transform, the last group of an inverse one)."""
    if len(axes) <= _MAX_GROUP:
        return _engine(step, x, axes, last_n, norm, execution)
    tail, head = axes[-_MAX_GROUP:], axes[:-_MAX_GROUP]
    groups = [head[max(0, i - _MAX_GROUP):i] for i in range(len(head), 0, -_MAX_GROUP)]
    if step in ("C2C", "R2C"):
        y = _engine(step, x, tail, last_n, norm, execution)
        for g in groups:
            y = _engine("C2C", y, g, None, norm, execution)
        return y
    inv = "C2C-inv"
    for g in groups:
        x = _engine(inv, x, g, None, norm, execution)
    return _engine(step, x, tail, last_n, norm, execution)


#: (package, shape, strides, axes) whose layout cuFFT cannot express: transformed as a copy
_MOVED: dict = {}


def _engine(step, x, axes, last_n, norm, execution):
    """One cuweave function-form call over at most three axes; a layout cuFFT cannot express
    is transformed as a dense copy with ``axes`` moved last (as CuPy does)."""
    axes = tuple(axes)
    key = (type(x).__module__, tuple(x.shape), _strides(x), axes)
    if key not in _MOVED:
        try:
            return _call(step, x, axes, last_n, norm, execution)
        except UnsupportedLayoutError:
            if len(_MOVED) > 1024:
                _MOVED.clear()
            _MOVED[key] = True
    ops = array_ops(x)
    k = len(axes)
    back = tuple(range(x.ndim - k, x.ndim))
    y = _call(step, ops.to_back(x, list(axes)), back, last_n, norm, execution)
    return ops.from_back(y, list(axes))


def _strides(x):
    st = getattr(x, "strides", None)
    return tuple(x.stride() if st is None else st)


def _form_args(step, axes, last_n, norm, execution) -> tuple:
    """The arguments after the operand with which the public function form of ``step``
    (:func:`cuweave.fft.fft`, ``ifft``, ``rfft``, ``irfft``) calls its body."""
    direction, fft_type = _FORMS[step]
    options = _C2R_ODD if step == "C2R" and last_n % 2 else None
    return (tuple(axes), options, execution, None, None, None, norm, direction, fft_type)


def _call(step, x, axes, last_n, norm, execution):
    return _form_call(x, *_form_args(step, axes, last_n, norm, execution))


def _finish(y, out):
    if out is None:
        return y
    ops = array_ops(out, "out")
    if tuple(out.shape) != tuple(y.shape):
        raise InvalidOperandError(
            f"out must have the result's shape {tuple(y.shape)}, got {tuple(out.shape)}")
    return ops.copy_into(out, y)


_SEQUENCES = (list, tuple, int, float, complex, np.generic)


def transform(kind, x, s, axes, norm, *, one_d=False, execution=None, out=None):
    """Validate and run one NumPy-style transform (the body of every public function)."""
    if isinstance(x, _SEQUENCES):  # Python sequences and scalars, as numpy.fft takes them
        x = np.asarray(x)
    r = recipe(kind, x, s, axes, norm, one_d=one_d)
    if out is not None:
        _check_out(out, r)
    return _finish(r.run(x, execution=execution), out)


def _check_out(out, r) -> None:
    """``out`` can receive the result under NumPy's ``same_kind`` casting (checked before the
    transform, as numpy.fft's ufunc-based functions refuse it)."""
    dtype = getattr(out, "dtype", None)
    if dtype is None:
        return  # not an array: _finish reports it
    if tuple(out.shape) != tuple(r.out_shape):  # NumPy checks the shape before the dtype
        raise InvalidOperandError(
            f"out must have the result's shape {tuple(r.out_shape)}, got {tuple(out.shape)}")
    try:
        target = np.dtype(str(dtype).replace("torch.", ""))
    except TypeError:
        return  # a package dtype NumPy does not know: the copy decides
    if not np.can_cast(np.dtype(r.out_dtype), target, "same_kind"):
        raise OutCastError(
            f"Cannot cast ufunc '{r.kind}' output from dtype('{r.out_dtype}') to "
            f"dtype('{target}') with casting rule 'same_kind': out dtype must hold the "
            f"{r.out_dtype} result, got {target}")


def _one_d_args(n, axis):
    return (None if n is None else [n]), [axis]


# ---- public functions ---------------------------------------------------------------------------
def fft(a, n=None, axis=-1, norm=None, out=None, *, execution=None):
    """1-D discrete Fourier transform, as :func:`numpy.fft.fft`.

    Parameters
    ----------
    a : array
        NumPy/CuPy array, torch tensor or Python sequence (real input is transformed
        as complex).
    n : int, optional
        Length of the transformed axis: the input is cropped or zero-padded to it.
    axis : int
        Axis to transform (default: the last one).
    norm : {None, 'backward', 'ortho', 'forward'}
        NumPy's normalization (``None`` is ``'backward'``: the inverse scales by ``1/n``),
        fused into the transform on the GPU.
    out : array, optional
        Filled with the result (a copy) and returned.
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        cuweave's execution space (default: where ``a`` lives).

    Returns
    -------
    array
        Complex result in ``a``'s package and memory space (complex64 for single precision).

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.fft import numpy as cfft
    >>> x = np.arange(6, dtype=np.float32)
    >>> y = cfft.fft(x, n=8)                       # zero-padded to 8 points
    >>> y.dtype, bool(np.allclose(y, np.fft.fft(x, n=8)))
    (dtype('complex64'), True)
    """
    s, axes = _one_d_args(n, axis)
    return transform("fft", a, s, axes, norm, one_d=True, execution=execution, out=out)


def ifft(a, n=None, axis=-1, norm=None, out=None, *, execution=None):
    """1-D inverse DFT, as :func:`numpy.fft.ifft` (scaled by ``1/n`` by default); see :func:`fft`.

    >>> import numpy as np
    >>> from cuweave.fft import numpy as cfft
    >>> x = np.array([1.0, 2.0, 3.0])
    >>> bool(np.allclose(cfft.ifft(cfft.fft(x)), x))
    True
    """
    s, axes = _one_d_args(n, axis)
    return transform("ifft", a, s, axes, norm, one_d=True, execution=execution, out=out)


def rfft(a, n=None, axis=-1, norm=None, out=None, *, execution=None):
    """1-D DFT of real input, as :func:`numpy.fft.rfft` (``n//2 + 1`` outputs); see :func:`fft`.

    >>> import numpy as np
    >>> from cuweave.fft import numpy as cfft
    >>> cfft.rfft(np.ones(5), n=4).round(6).tolist()
    [(4+0j), 0j, 0j]
    """
    s, axes = _one_d_args(n, axis)
    return transform("rfft", a, s, axes, norm, one_d=True, execution=execution, out=out)


def irfft(a, n=None, axis=-1, norm=None, out=None, *, execution=None):
    """Inverse of :func:`rfft`, as :func:`numpy.fft.irfft`: ``n`` real outputs (default
    ``2*(m-1)``), the input cropped or zero-padded to ``n//2 + 1`` points; see :func:`fft`.

    >>> import numpy as np
    >>> from cuweave.fft import numpy as cfft
    >>> x = np.random.default_rng(0).standard_normal(7)
    >>> bool(np.allclose(cfft.irfft(cfft.rfft(x), n=7), x))
    True
    """
    s, axes = _one_d_args(n, axis)
    return transform("irfft", a, s, axes, norm, one_d=True, execution=execution, out=out)


def hfft(a, n=None, axis=-1, norm=None, out=None, *, execution=None):
    """DFT of a Hermitian-symmetric signal given by its first half, as :func:`numpy.fft.hfft`
    (``n`` real outputs, default ``2*(m-1)``); see :func:`fft`.

    Parameters
    ----------
    a : array
        NumPy/CuPy array, torch tensor or Python sequence (complex): the first half of a
        Hermitian-symmetric signal.
    n : int, optional
        Length of the real output (default ``2*(m-1)`` for ``m`` input points); the input
        is cropped or zero-padded to ``n//2 + 1`` points.
    axis : int, optional
        Axis to transform (default: the last one).
    norm : {None, 'backward', 'ortho', 'forward'}, optional
        NumPy's normalization (``None`` is ``'backward'``), fused into the transform on the
        GPU. As NumPy, ``'backward'`` leaves :func:`hfft` unscaled.
    out : array, optional
        Filled with the result (a copy) and returned; it must have the result's shape and a
        dtype the result casts to under NumPy's ``same_kind`` rule (checked first).
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        cuweave's execution space (default: where ``a`` lives).

    Returns
    -------
    array
        Real result in ``a``'s package and memory space.

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.fft import numpy as cfft
    >>> x = np.array([1, 2j, 3])
    >>> bool(np.allclose(cfft.hfft(x, n=5), np.fft.hfft(x, n=5)))
    True
    """
    s, axes = _one_d_args(n, axis)
    return transform("hfft", a, s, axes, norm, one_d=True, execution=execution, out=out)


def ihfft(a, n=None, axis=-1, norm=None, out=None, *, execution=None):
    """Inverse of :func:`hfft` for real input, as :func:`numpy.fft.ihfft`; see :func:`fft`.

    Parameters
    ----------
    a : array
        NumPy/CuPy array, torch tensor or Python sequence of real values.
    n : int, optional
        Length of the transformed axis: the input is cropped or zero-padded to it.
    axis : int, optional
        Axis to transform (default: the last one).
    norm : {None, 'backward', 'ortho', 'forward'}, optional
        NumPy's normalization (``None`` is ``'backward'``), fused into the transform on the
        GPU. As NumPy, ``'backward'`` scales :func:`ihfft` by ``1/n``.
    out : array, optional
        Filled with the result (a copy) and returned; it must have the result's shape and a
        dtype the result casts to under NumPy's ``same_kind`` rule (checked first).
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        cuweave's execution space (default: where ``a`` lives).

    Returns
    -------
    array
        Complex result in ``a``'s package and memory space, ``n//2 + 1`` long along
        ``axis``.

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.fft import numpy as cfft
    >>> x = np.array([1.0, 2.0, 0.5, 4.0])
    >>> bool(np.allclose(cfft.ihfft(x), np.fft.ihfft(x)))
    True
    """
    s, axes = _one_d_args(n, axis)
    return transform("ihfft", a, s, axes, norm, one_d=True, execution=execution, out=out)


def fftn(a, s=None, axes=None, norm=None, out=None, *, execution=None):
    """N-D DFT, as :func:`numpy.fft.fftn`: any number of axes (cuFFT runs them three at a time).

    Parameters
    ----------
    a : array
    s : sequence of int, optional
        Lengths along ``axes`` (cropping or zero-padding; ``-1`` keeps the input length).
        Without ``axes``, the last ``len(s)`` axes.
    axes : sequence of int, optional
        Axes to transform (default: all); repeated axes are an error.
    norm, out, execution
        See :func:`fft`.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> x = np.random.default_rng(0).standard_normal((4, 6, 5))
    >>> y = F.fftn(x, s=(8, 3), axes=(0, -1))
    >>> y.shape, bool(np.allclose(y, np.fft.fftn(x, s=(8, 3), axes=(0, -1))))
    ((8, 6, 3), True)
    """
    return transform("fft", a, s, axes, norm, execution=execution, out=out)


def ifftn(a, s=None, axes=None, norm=None, out=None, *, execution=None):
    """N-D inverse DFT, as :func:`numpy.fft.ifftn`; see :func:`fftn`.

    Parameters
    ----------
    a : array
        NumPy/CuPy array, torch tensor or Python sequence (real input is transformed
        as complex).
    s : sequence of int, optional
        Lengths along ``axes``: the input is cropped or zero-padded to them (``-1`` keeps
        the input length). Default: the input's lengths. Without ``axes``, the last
        ``len(s)`` axes.
    axes : sequence of int, optional
        Axes to transform (default: all, or the last ``len(s)``); repeated axes are an error.
    norm : {None, 'backward', 'ortho', 'forward'}, optional
        NumPy's normalization (``None`` is ``'backward'``: the inverse scales by ``1/n``),
        fused into the transform on the GPU.
    out : array, optional
        Filled with the result (a copy) and returned; it must have the result's shape and a
        dtype the result casts to under NumPy's ``same_kind`` rule (checked first).
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        cuweave's execution space (default: where ``a`` lives).

    Returns
    -------
    array
        Complex result in ``a``'s package and memory space.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> x = np.random.default_rng(0).standard_normal((3, 4, 5))
    >>> bool(np.allclose(F.ifftn(F.fftn(x)), x))
    True
    """
    return transform("ifft", a, s, axes, norm, execution=execution, out=out)


def rfftn(a, s=None, axes=None, norm=None, out=None, *, execution=None):
    """N-D DFT of real input, as :func:`numpy.fft.rfftn` (``axes[-1]`` halved); see :func:`fftn`.

    Parameters
    ----------
    a : array
        NumPy/CuPy array, torch tensor or Python sequence of real values.
    s : sequence of int, optional
        Lengths along ``axes``: the input is cropped or zero-padded to them (``-1`` keeps
        the input length). Default: the input's lengths. Without ``axes``, the last
        ``len(s)`` axes.
    axes : sequence of int, optional
        Axes to transform (default: all, or the last ``len(s)``); repeated axes are an
        error. ``axes[-1]`` is halved.
    norm : {None, 'backward', 'ortho', 'forward'}, optional
        NumPy's normalization (``None`` is ``'backward'``: the inverse scales by ``1/n``),
        fused into the transform on the GPU.
    out : array, optional
        Filled with the result (a copy) and returned; it must have the result's shape and a
        dtype the result casts to under NumPy's ``same_kind`` rule (checked first).
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        cuweave's execution space (default: where ``a`` lives).

    Returns
    -------
    array
        Complex result in ``a``'s package and memory space, ``s[-1] // 2 + 1`` long
        along ``axes[-1]``.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> F.rfftn(np.ones((4, 6), np.float32)).shape
    (4, 4)
    """
    return transform("rfft", a, s, axes, norm, execution=execution, out=out)


def irfftn(a, s=None, axes=None, norm=None, out=None, *, execution=None):
    """Inverse of :func:`rfftn`, as :func:`numpy.fft.irfftn` (default ``s[-1] = 2*(m-1)``);
    see :func:`fftn`.

    Parameters
    ----------
    a : array
        NumPy/CuPy array, torch tensor or Python sequence (complex; the half spectrum
        along ``axes[-1]``).
    s : sequence of int, optional
        Lengths of the real output along ``axes`` (default: the input's, with
        ``s[-1] = 2*(m-1)`` for the ``m`` points along ``axes[-1]``). Without ``axes``, the
        last ``len(s)`` axes.
    axes : sequence of int, optional
        Axes to transform (default: all, or the last ``len(s)``); repeated axes are an error.
    norm : {None, 'backward', 'ortho', 'forward'}, optional
        NumPy's normalization (``None`` is ``'backward'``: the inverse scales by ``1/n``),
        fused into the transform on the GPU.
    out : array, optional
        Filled with the result (a copy) and returned; it must have the result's shape and a
        dtype the result casts to under NumPy's ``same_kind`` rule (checked first).
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        cuweave's execution space (default: where ``a`` lives).

    Returns
    -------
    array
        Real result in ``a``'s package and memory space.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> x = np.random.default_rng(0).standard_normal((4, 7))
    >>> bool(np.allclose(F.irfftn(F.rfftn(x), s=x.shape), x))
    True
    """
    return transform("irfft", a, s, axes, norm, execution=execution, out=out)


def hfftn(a, s=None, axes=None, norm=None, out=None, *, execution=None):
    """N-D DFT of a Hermitian-symmetric signal, as :func:`scipy.fft.hfftn`; see :func:`fftn`."""
    return transform("hfft", a, s, axes, norm, execution=execution, out=out)


def ihfftn(a, s=None, axes=None, norm=None, out=None, *, execution=None):
    """N-D inverse of :func:`hfftn` for real input, as :func:`scipy.fft.ihfftn`."""
    return transform("ihfft", a, s, axes, norm, execution=execution, out=out)


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, execution=None):
    """2-D DFT, as :func:`numpy.fft.fft2` (:func:`fftn` over the last two axes).

    Parameters
    ----------
    a : array
        NumPy/CuPy array, torch tensor or Python sequence (real input is transformed
        as complex).
    s : sequence of int, optional
        Lengths along ``axes``: the input is cropped or zero-padded to them (``-1`` keeps
        the input length). Default: the input's lengths.
    axes : sequence of int, optional
        Axes to transform (default: the last two); repeated axes are an error.
    norm : {None, 'backward', 'ortho', 'forward'}, optional
        NumPy's normalization (``None`` is ``'backward'``: the inverse scales by ``1/n``),
        fused into the transform on the GPU.
    out : array, optional
        Filled with the result (a copy) and returned; it must have the result's shape and a
        dtype the result casts to under NumPy's ``same_kind`` rule (checked first).
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        cuweave's execution space (default: where ``a`` lives).

    Returns
    -------
    array
        Complex result in ``a``'s package and memory space.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> x = np.random.default_rng(0).standard_normal((2, 4, 5))
    >>> bool(np.allclose(F.fft2(x), np.fft.fft2(x)))
    True
    """
    return transform("fft", a, s, axes, norm, execution=execution, out=out)


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, execution=None):
    """2-D inverse DFT, as :func:`numpy.fft.ifft2`; see :func:`fftn`.

    Parameters
    ----------
    a : array
        NumPy/CuPy array, torch tensor or Python sequence (real input is transformed
        as complex).
    s : sequence of int, optional
        Lengths along ``axes``: the input is cropped or zero-padded to them (``-1`` keeps
        the input length). Default: the input's lengths.
    axes : sequence of int, optional
        Axes to transform (default: the last two); repeated axes are an error.
    norm : {None, 'backward', 'ortho', 'forward'}, optional
        NumPy's normalization (``None`` is ``'backward'``: the inverse scales by ``1/n``),
        fused into the transform on the GPU.
    out : array, optional
        Filled with the result (a copy) and returned; it must have the result's shape and a
        dtype the result casts to under NumPy's ``same_kind`` rule (checked first).
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        cuweave's execution space (default: where ``a`` lives).

    Returns
    -------
    array
        Complex result in ``a``'s package and memory space.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> x = np.random.default_rng(0).standard_normal((3, 4))
    >>> bool(np.allclose(F.ifft2(F.fft2(x)), x))
    True
    """
    return transform("ifft", a, s, axes, norm, execution=execution, out=out)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, execution=None):
    """2-D DFT of real input, as :func:`numpy.fft.rfft2`; see :func:`rfftn`.

    Parameters
    ----------
    a : array
        NumPy/CuPy array, torch tensor or Python sequence of real values.
    s : sequence of int, optional
        Lengths along ``axes``: the input is cropped or zero-padded to them (``-1`` keeps
        the input length). Default: the input's lengths.
    axes : sequence of int, optional
        Axes to transform (default: the last two); repeated axes are an error. ``axes[-1]``
        is halved.
    norm : {None, 'backward', 'ortho', 'forward'}, optional
        NumPy's normalization (``None`` is ``'backward'``: the inverse scales by ``1/n``),
        fused into the transform on the GPU.
    out : array, optional
        Filled with the result (a copy) and returned; it must have the result's shape and a
        dtype the result casts to under NumPy's ``same_kind`` rule (checked first).
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        cuweave's execution space (default: where ``a`` lives).

    Returns
    -------
    array
        Complex result in ``a``'s package and memory space, ``s[-1] // 2 + 1`` long
        along ``axes[-1]``.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> x = np.random.default_rng(0).standard_normal((4, 6))
    >>> y = F.rfft2(x)
    >>> y.shape, bool(np.allclose(y, np.fft.rfft2(x)))
    ((4, 4), True)
    """
    return transform("rfft", a, s, axes, norm, execution=execution, out=out)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, execution=None):
    """Inverse of :func:`rfft2`, as :func:`numpy.fft.irfft2`; see :func:`irfftn`.

    Parameters
    ----------
    a : array
        NumPy/CuPy array, torch tensor or Python sequence (complex; the half spectrum
        along ``axes[-1]``).
    s : sequence of int, optional
        Lengths of the real output along ``axes`` (default: the input's, with
        ``s[-1] = 2*(m-1)`` for the ``m`` points along ``axes[-1]``).
    axes : sequence of int, optional
        Axes to transform (default: the last two); repeated axes are an error.
    norm : {None, 'backward', 'ortho', 'forward'}, optional
        NumPy's normalization (``None`` is ``'backward'``: the inverse scales by ``1/n``),
        fused into the transform on the GPU.
    out : array, optional
        Filled with the result (a copy) and returned; it must have the result's shape and a
        dtype the result casts to under NumPy's ``same_kind`` rule (checked first).
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        cuweave's execution space (default: where ``a`` lives).

    Returns
    -------
    array
        Real result in ``a``'s package and memory space.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> x = np.random.default_rng(0).standard_normal((4, 5))
    >>> bool(np.allclose(F.irfft2(F.rfft2(x), s=x.shape), x))
    True
    """
    return transform("irfft", a, s, axes, norm, execution=execution, out=out)


def hfft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, execution=None):
    """2-D :func:`hfftn`, as :func:`scipy.fft.hfft2`."""
    return transform("hfft", a, s, axes, norm, execution=execution, out=out)


def ihfft2(a, s=None, axes=(-2, -1), norm=None, out=None, *, execution=None):
    """2-D :func:`ihfftn`, as :func:`scipy.fft.ihfft2`."""
    return transform("ihfft", a, s, axes, norm, execution=execution, out=out)


# ---- helpers of numpy.fft -----------------------------------------------------------------------
def fftshift(x, axes=None):
    """Move the zero frequency to the centre, with ``x``'s own package (as numpy.fft.fftshift).

    >>> import numpy as np
    >>> from cuweave.fft import numpy as cfft
    >>> cfft.fftshift(np.arange(5)).tolist()
    [3, 4, 0, 1, 2]
    """
    return _shift(x, axes, "fftshift")


def ifftshift(x, axes=None):
    """Inverse of :func:`fftshift` (as numpy.fft.ifftshift)."""
    return _shift(x, axes, "ifftshift")


def _shift(x, axes, name):
    return array_ops(x).fft_shift(x, axes, name)


def fftfreq(n, d=1.0):
    """Sample frequencies of :func:`fft` (a NumPy array; as numpy.fft.fftfreq)."""
    import numpy as np

    return np.fft.fftfreq(n, d)


def rfftfreq(n, d=1.0):
    """Sample frequencies of :func:`rfft` (a NumPy array; as numpy.fft.rfftfreq)."""
    import numpy as np

    return np.fft.rfftfreq(n, d)


# ``import cuweave.fft.numpy`` works as well as ``from cuweave.fft import numpy``
sys.modules.setdefault(__name__.rpartition(".")[0] + ".numpy", sys.modules[__name__])
