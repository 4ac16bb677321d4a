"""cuRAND's device API inside numba kernels, as nvmath-python's ``nvmath.device.random``.

Bit generators: ``StatesXORWOW``, ``StatesMRG32k3a``, ``StatesPhilox4_32_10``,
``StatesSobol32``, ``StatesScrambledSobol32``, ``StatesSobol64``, ``StatesScrambledSobol64``
(each ``States...(n)`` is a device array of ``n`` states; ``states[i]`` inside a kernel is the
state of element ``i``, passed by reference). Functions, all called inside kernels:

* ``init(seed, subsequence, offset, state)`` (XORWOW, MRG32k3a, Philox4_32_10),
  ``init(direction_vectors, offset, state)`` (Sobol32/64) and
  ``init(direction_vectors, scramble_c, offset, state)`` (scrambled Sobol); the direction
  vectors are a device array (or a pointer) of 32 (64) integers, see
  :mod:`cuweave.device.random_helpers`;
* ``rand`` (32 or 64 bits), ``rand4`` (Philox: ``uint32x4``);
* ``uniform``, ``uniform_double``, ``uniform2_double``, ``uniform4``; ``normal``,
  ``normal_double``, ``normal2``, ``normal2_double``, ``normal4``; ``log_normal(state, mean,
  stddev)`` and its ``_double``/``2``/``2_double``/``4`` forms; ``poisson(state, Lambda)``,
  ``poisson4``; vector forms return ``float32x2``/``float32x4``/``float64x2``/``uint32x4``;
* ``skipahead(n, state)``, ``skipahead_sequence(n, state)``, ``skipahead_subsequence(n,
  state)``.

The functions are cuRAND's own (``curand_kernel.h`` from the nvidia-curand wheel or a CUDA
toolkit), compiled once per architecture by NVRTC to LTO-IR, kept in the device cache and
linked into the kernels that call them. ``Compile(cc)`` builds them ahead of time (and picks the
architecture); its ``files``/``extension`` keep nvmath-style ``cuda.jit(link=...,
extensions=...)`` decorations working, though nothing needs to be passed.

Example
-------
>>> from numba import cuda                                            # doctest: +SKIP
>>> from cuweave.device import random
>>> states = random.StatesPhilox4_32_10(64 * 64)
>>> @cuda.jit
... def kernel(states, out):
...     i = cuda.grid(1)
...     random.init(1234, i, 0, states[i])
...     out[i] = random.normal(states[i])
"""

from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir
from numba import cuda
from numba.cuda import types
from numba.cuda.extending import intrinsic, overload

from .._internal.errors import InvalidOptionError
from . import _random_codegen as _gen
from . import random_helpers
from ._options import normalize_sm
from ._vector_types import (
    float32x2_type,
    float32x4_type,
    float64x2_type,
    float64x4_type,
    uint32x4_type,
)

__all__ = [
    "Compile", "random_helpers", "state_dtype", "init", "rand", "rand4",
    "uniform", "uniform_double", "uniform2_double", "uniform4",
    "normal", "normal_double", "normal2", "normal2_double", "normal4",
    "log_normal", "log_normal_double", "log_normal2", "log_normal2_double", "log_normal4",
    "poisson", "poisson4", "skipahead", "skipahead_sequence", "skipahead_subsequence",
    "StatesXORWOW", "StatesMRG32k3a", "StatesPhilox4_32_10", "StatesSobol32",
    "StatesScrambledSobol32", "StatesSobol64", "StatesScrambledSobol64",
]

_FIELD = "cuweave_curand_"
_SCALARS = {"unsigned int": types.uint32, "unsigned long long": types.uint64,
            "float": types.float32, "double": types.float64,
            "unsigned int*": types.voidptr, "unsigned long long*": types.voidptr}
_VECTORS = {"float2": float32x2_type, "float4": float32x4_type, "double2": float64x2_type,
            "double4": float64x4_type, "uint4": uint32x4_type}
_target: list[int] = []


# ---------------------------------------------------------------------------------------------
# Host side: architecture, states
# ---------------------------------------------------------------------------------------------


def _sm() -> int:
    if not _target:
        from ._options import default_sm

        _target.append(default_sm())
    return _target[0]


class Compile:
    """Build cuRAND's device functions for a compute capability and make it the architecture
    random-number kernels are compiled for.

    Parameters
    ----------
    cc : int or ComputeCapability, optional
        The compute capability (``90``, ``(9, 0)``, ...); default: the current device's.
    """

    def __init__(self, cc=None):
        sm = _sm() if cc is None else normalize_sm(cc)
        _target[:] = [sm]
        self._entry = _gen.compiled(sm)
        self.cc = sm

    @property
    def files(self) -> list:
        """Nothing to link by hand (the functions link themselves); kept for nvmath code."""
        return []

    @property
    def extension(self) -> list:
        """No numba extension is needed; kept for nvmath-style ``cuda.jit(extensions=...)``."""
        return []


def state_dtype(generator: str) -> np.dtype:
    """NumPy dtype of one state of a bit generator.

    Parameters
    ----------
    generator : str
        ``'XORWOW'``, ``'MRG32k3a'``, ``'Philox4_32_10'``, ``'Sobol32'``,
        ``'ScrambledSobol32'``, ``'Sobol64'`` or ``'ScrambledSobol64'``.

    Returns
    -------
    numpy.dtype
        A record of the state's bytes (cuRAND's size for the target architecture).
    """
    if generator not in _gen.STATES:
        raise InvalidOptionError(
            f"generator must be one of {sorted(_gen.STATES)}, got {generator!r}")
    size, _align = _gen.compiled(_sm())["traits"][generator]
    return np.dtype([(_FIELD + generator, np.uint8, (int(size),))])


def _states_class(generator: str):
    def __new__(cls, n):  # noqa: N807 - returns the device array of states
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise InvalidOptionError(f"n must be a positive int, got {n!r}")
        return cuda.device_array(int(n), dtype=state_dtype(generator))

    doc = (f"``States{generator}(n)``: a device array of ``n`` {generator} states (uninitialized:"
           " call :func:`init` in a kernel).")
    return type(f"States{generator}", (), {"__new__": __new__, "__doc__": doc,
                                            "generator": generator})


StatesXORWOW = _states_class("XORWOW")
StatesMRG32k3a = _states_class("MRG32k3a")
StatesPhilox4_32_10 = _states_class("Philox4_32_10")
StatesSobol32 = _states_class("Sobol32")
StatesScrambledSobol32 = _states_class("ScrambledSobol32")
StatesSobol64 = _states_class("Sobol64")
StatesScrambledSobol64 = _states_class("ScrambledSobol64")


# ---------------------------------------------------------------------------------------------
# numba side
# ---------------------------------------------------------------------------------------------


def _generator_of(ty) -> str | None:
    if isinstance(ty, types.Record):
        for field in ty.fields:
            if field.startswith(_FIELD):
                return field[len(_FIELD):]
    return None


@intrinsic
def _address(typingctx, value):
    """``void*`` of a state reference, an array's data, a pointer or an integer address."""
    if not isinstance(value, (types.Record, types.Array, types.CPointer, types.RawPointer,
                              types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ty, v = sig.args[0], args[0]
        void_ptr = ir.IntType(8).as_pointer()
        if isinstance(ty, types.Array):
            v = context.make_array(ty)(context, builder, v).data
        if isinstance(ty, types.Integer):
            return builder.inttoptr(v, void_ptr)
        return builder.bitcast(v, void_ptr)

    return types.voidptr(value), codegen


@functools.cache
def _ltoir(sm: int):
    return cuda.LTOIR(_gen.compiled(sm)["ltoir"], name=f"cuweave_curand_sm{sm}.ltoir")


@functools.cache
def _external(name: str, generator: str):
    """``(device function, vector result type or None)`` for one wrapper of the shim."""
    sm = _sm()
    if name == "init":
        params, result = _gen.init_params(generator), "void"
        argtys = [_SCALARS[p] for p in params] + [types.voidptr]
    else:
        fn = _gen.FUNCTIONS[name]
        params, result = fn.params, fn.result
        argtys = [types.voidptr] + [_SCALARS[p] for p in params]
    vector = _VECTORS.get(result)
    if vector is not None:
        argtys.append(types.voidptr)
    restype = types.void if result == "void" or vector is not None else _SCALARS[result]
    ext = cuda.declare_device(_gen.symbol(name, generator), restype(*argtys),
                              link=[_ltoir(sm)], abi="c")
    return ext, vector


def _resolve(name: str, state_ty):
    generator = _generator_of(state_ty)
    if generator is None:
        return None
    if name == "rand":
        name = "rand64" if generator in ("Sobol64", "ScrambledSobol64") else "rand"
    if name != "init" and generator not in _gen.FUNCTIONS[name].states:
        raise InvalidOptionError(
            f"{name} must be called with a state of "
            f"{', '.join(_gen.FUNCTIONS[name].states)}, got a {generator} state")
    return _external(name, generator)


def _sampler(name: str, extra: tuple[str, ...]):
    fn = _gen.FUNCTIONS[name]
    doc = (f"``{name}(state{''.join(', ' + e for e in extra)})``: cuRAND's ``{fn.c_name}`` "
           f"for {', '.join(fn.states)} states (inside kernels).\n\n"
           "Parameters\n----------\nstate : state\n    ``states[i]`` of a ``States...`` "
           "array, advanced by the call.\n")
    if extra == _MEAN_STDDEV:
        doc += ("mean, stddev : float\n    Mean and standard deviation of the normal "
                "distribution whose exponential is drawn.\n")
    elif extra == _LAMBDA:
        doc += "Lambda : float\n    The Poisson distribution's mean.\n"
    if len(extra) == 0:
        def f(state):
            raise RuntimeError(f"cuweave.device.random.{name} is called inside kernels only")
    elif len(extra) == 1:
        def f(state, Lambda):  # noqa: N803 - nvmath's name
            raise RuntimeError(f"cuweave.device.random.{name} is called inside kernels only")
    else:
        def f(state, mean, stddev):
            raise RuntimeError(f"cuweave.device.random.{name} is called inside kernels only")
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc

    def typer(state_ty):
        found = _resolve(name, state_ty)
        if found is None:
            return None
        ext, vector = found
        if vector is None:
            return (lambda state: ext(_address(state)),
                    lambda state, Lambda: ext(_address(state), Lambda),
                    lambda state, mean, stddev: ext(_address(state), mean, stddev))[len(extra)]

        def impl0(state):
            out = cuda.local.array(1, vector)
            ext(_address(state), _address(out))
            return out[0]

        def impl1(state, Lambda):  # noqa: N803
            out = cuda.local.array(1, vector)
            ext(_address(state), Lambda, _address(out))
            return out[0]

        def impl2(state, mean, stddev):
            out = cuda.local.array(1, vector)
            ext(_address(state), mean, stddev, _address(out))
            return out[0]

        return (impl0, impl1, impl2)[len(extra)]

    if len(extra) == 0:
        overload(f, jit_options={"forceinline": True})(lambda state: typer(state))
    elif len(extra) == 1:
        overload(f, jit_options={"forceinline": True})(lambda state, Lambda: typer(state))
    else:
        overload(f, jit_options={"forceinline": True})(
            lambda state, mean, stddev: typer(state))
    return f


def _skipper(name: str):
    fn = _gen.FUNCTIONS[name]

    def f(n, state):
        raise RuntimeError(f"cuweave.device.random.{name} is called inside kernels only")

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"``{name}(n, state)``: cuRAND's ``{fn.c_name}`` for "
                 f"{', '.join(fn.states)} (inside kernels).\n\nParameters\n----------\n"
                 "n : int\n    How far to skip ahead.\nstate : state\n    ``states[i]`` of "
                 "a ``States...`` array, moved in place.\n")

    @overload(f, jit_options={"forceinline": True})
    def _overload(n, state):
        found = _resolve(name, state)
        if found is None:
            return None
        ext = found[0]
        return lambda n, state: ext(_address(state), n)

    return f


def init(a, b, c, d=None):
    """``init(seed, subsequence, offset, state)``, ``init(direction_vectors, offset, state)`` or
    ``init(direction_vectors, scramble_c, offset, state)``: cuRAND's ``curand_init``.

    Called inside kernels; the form follows the generator of the state.

    Parameters
    ----------
    a : int or device array
        The seed (XORWOW, MRG32k3a, Philox4_32_10), or the direction vectors (Sobol: a device
        array of 32 or 64 integers, see :mod:`cuweave.device.random_helpers`).
    b : int
        The subsequence (seeded generators), the scramble constant (scrambled Sobol) or the
        offset (Sobol).
    c : int or state
        The offset (seeded generators and scrambled Sobol), or the state (Sobol).
    d : state, optional
        The state (seeded generators and scrambled Sobol).
    """
    raise RuntimeError("cuweave.device.random.init is called inside numba CUDA kernels only")


@overload(init, jit_options={"forceinline": True})
def _overload_init(a, b, c, d=None):
    four = not (d is None or isinstance(d, (types.Omitted, types.NoneType)))
    found = _resolve("init", d if four else c)
    if found is None:
        return None
    ext = found[0]
    generator = _generator_of(d if four else c)
    form = _gen.STATES[generator][1]
    if form == "seed":
        return lambda a, b, c, d=None: ext(a, b, c, _address(d))
    if form in ("scrambled32", "scrambled64"):
        return lambda a, b, c, d=None: ext(_address(a), b, c, _address(d))
    return lambda a, b, c, d=None: ext(_address(a), b, _address(c))


_MEAN_STDDEV, _LAMBDA = ("mean", "stddev"), ("Lambda",)
rand = _sampler("rand", ())
rand4 = _sampler("rand4", ())
uniform = _sampler("uniform", ())
uniform_double = _sampler("uniform_double", ())
uniform2_double = _sampler("uniform2_double", ())
uniform4 = _sampler("uniform4", ())
normal = _sampler("normal", ())
normal_double = _sampler("normal_double", ())
normal2 = _sampler("normal2", ())
normal2_double = _sampler("normal2_double", ())
normal4 = _sampler("normal4", ())
log_normal = _sampler("log_normal", _MEAN_STDDEV)
log_normal_double = _sampler("log_normal_double", _MEAN_STDDEV)
log_normal2 = _sampler("log_normal2", _MEAN_STDDEV)
log_normal2_double = _sampler("log_normal2_double", _MEAN_STDDEV)
log_normal4 = _sampler("log_normal4", _MEAN_STDDEV)
poisson = _sampler("poisson", _LAMBDA)
poisson4 = _sampler("poisson4", _LAMBDA)
skipahead = _skipper("skipahead")
skipahead_sequence = _skipper("skipahead_sequence")
skipahead_subsequence = _skipper("skipahead_subsequence")
