"""Knobs of a device FFT: enums and the validated, hashable :class:`FFTSpec`.

Everything here is pure Python (no numba, no NVRTC): it runs on machines without CUDA and is
what the CPU tests exercise. A spec is normalized once; its :meth:`FFTSpec.key` is the part of
the on-disk cache key that describes the configuration.
"""

from __future__ import annotations

import enum
import importlib.util
from dataclasses import dataclass

import numpy as np

from .._internal.errors import CudaUnavailableError, InvalidOptionError, LibraryNotFoundError

__all__ = [
    "FFTType",
    "Direction",
    "Execution",
    "ComplexLayout",
    "RealMode",
    "FFTSpec",
    "MAX_BLOCK_SIZE",
    "MAX_THREAD_SIZE",
    "SUPPORTED_SM",
    "EPT_CANDIDATES",
    "precision_name",
    "normalize_sm",
    "max_size",
]


class FFTType(enum.IntEnum):
    """``cufftdx::fft_type`` values."""

    c2c = 0
    c2r = 1
    r2c = 2


class Direction(enum.IntEnum):
    """``cufftdx::fft_direction`` values."""

    forward = 0
    inverse = 1


class Execution(enum.IntEnum):
    """Where one FFT runs: a whole thread block, or a single thread."""

    Block = 0
    Thread = 1


class ComplexLayout(enum.IntEnum):
    """``cufftdx::complex_layout`` of the complex side of a real FFT."""

    natural = 0
    packed = 1
    full = 2


class RealMode(enum.IntEnum):
    """``cufftdx::real_mode`` of a real FFT."""

    normal = 0
    folded = 1


# Largest block FFT per (sm, precision) for cuFFTDx 1.5 (its documented limits); real FFTs in
# normal mode reach twice these.
_BLOCK_LIMITS = {
    700: (24389, 12167), 720: (24389, 12167), 750: (16384, 8192), 800: (32768, 16384),
    860: (24389, 12167), 870: (32768, 16384), 890: (24389, 12167), 900: (32768, 16384),
    1000: (32768, 16384), 1010: (32768, 16384), 1030: (32768, 16384),
    1200: (24389, 12167), 1210: (24389, 12167),
}
SUPPORTED_SM = tuple(sorted(_BLOCK_LIMITS))
MAX_BLOCK_SIZE = {sm: {"float16": a, "float32": a, "float64": b}
                  for sm, (a, b) in _BLOCK_LIMITS.items()}
MAX_THREAD_SIZE = {"float16": 64, "float32": 64, "float64": 40}
# Elements-per-thread values probed when the compiler is asked which ones are valid.
EPT_CANDIDATES = tuple(range(1, 65))
_PRECISIONS = {"float16": "__half", "float32": "float", "float64": "double"}


def _choice(value, enum_cls, name: str, accepted: str):
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        for member in enum_cls:
            if member.name.lower() == value.lower():
                return member
    raise InvalidOptionError(f"{name} must be {accepted}, got {value!r}")


def precision_name(precision) -> str:
    """Canonical name ('float16', 'float32' or 'float64') of a precision (dtype, type, str)."""
    try:
        name = np.dtype(precision).name
    except TypeError:
        name = None
    if name in _PRECISIONS:
        return name
    raise InvalidOptionError(
        f"precision must be one of numpy.float16, numpy.float32, numpy.float64, got {precision!r}"
    )


def normalize_sm(sm) -> int:
    """Compute capability as cuFFTDx's ``SM<...>`` value (900 for 9.0).

    Accepts 900, 90, "sm_90", (9, 0) or an object with ``major``/``minor``.
    """
    raw = sm
    if hasattr(sm, "major") and hasattr(sm, "minor"):
        sm = (sm.major, sm.minor)
    if isinstance(sm, str):
        s = sm.lower().removeprefix("sm_").removeprefix("sm")
        sm = int(s) if s.isdigit() else None
    if isinstance(sm, tuple) and len(sm) == 2 and all(isinstance(v, (int, np.integer)) for v in sm):
        sm = int(sm[0]) * 100 + int(sm[1]) * 10
    if isinstance(sm, (int, np.integer)) and not isinstance(sm, bool):
        sm = int(sm)
        sm = sm * 10 if sm < 200 else sm
        if sm in _BLOCK_LIMITS:
            return sm
    accepted = ", ".join(str(s // 10) for s in SUPPORTED_SM)
    raise InvalidOptionError(
        f"sm must be a compute capability such as 90, (9, 0) or 'sm_90' among {accepted}, "
        f"got {raw!r}"
    )


def max_size(precision: str, execution: Execution, sm: int, real: bool = False) -> int:
    """Largest supported FFT size (real FFTs in normal mode may be twice a complex one)."""
    if execution is Execution.Thread:
        return MAX_THREAD_SIZE[precision] * (2 if real else 1)
    return MAX_BLOCK_SIZE[sm][precision] * (2 if real else 1)


def _positive_or_suggested(value, name: str):
    if value is None or value == "suggested":
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1:
        return int(value)
    raise InvalidOptionError(f"{name} must be None, 'suggested' or a positive int, got {value!r}")


def _real_options(value, fft_type: FFTType):
    if value is None:
        return ComplexLayout.natural, RealMode.normal
    if fft_type is FFTType.c2c:
        raise InvalidOptionError(
            f"real_fft_options must be None for a c2c FFT, got {value!r}"
        )
    if not isinstance(value, dict):
        raise InvalidOptionError(
            "real_fft_options must be None or a dict with keys 'complex_layout' and "
            f"'real_mode', got {value!r}"
        )
    unknown = set(value) - {"complex_layout", "real_mode"}
    if unknown:
        raise InvalidOptionError(
            "real_fft_options keys must be among 'complex_layout', 'real_mode', "
            f"got {sorted(unknown)!r}"
        )
    layout = _choice(value.get("complex_layout", "natural"), ComplexLayout,
                     "real_fft_options['complex_layout']", "'natural', 'packed' or 'full'")
    mode = _choice(value.get("real_mode", "normal"), RealMode,
                   "real_fft_options['real_mode']", "'normal' or 'folded'")
    return layout, mode


@dataclass(frozen=True)
class FFTSpec:
    """A validated device-FFT configuration (knob values as the user gave them, normalized).

    ``ffts_per_block`` / ``elements_per_thread`` stay ``None`` or ``'suggested'`` when the user
    left the choice to cuFFTDx; the compiler resolves them.
    """

    fft_type: FFTType
    size: int
    precision: str
    direction: Direction
    execution: Execution
    sm: int
    ffts_per_block: int | str | None = None
    elements_per_thread: int | str | None = None
    complex_layout: ComplexLayout = ComplexLayout.natural
    real_mode: RealMode = RealMode.normal

    def __post_init__(self):
        real = self.fft_type is not FFTType.c2c
        limit = max_size(self.precision, self.execution, self.sm, real)
        if not (isinstance(self.size, int) and 2 <= self.size <= limit):
            raise InvalidOptionError(
                f"size must be an int in [2, {limit}] for a {self.execution.name} "
                f"{self.fft_type.name} FFT in {self.precision} on sm_{self.sm // 10}, "
                f"got {self.size!r}"
            )
        if self.real_mode is RealMode.folded and self.size % 2:
            raise InvalidOptionError(
                f"size must be even with real_mode='folded', got {self.size!r}"
            )
        if self.execution is Execution.Thread:
            for name in ("ffts_per_block", "elements_per_thread"):
                if getattr(self, name) is not None:
                    raise InvalidOptionError(
                        f"{name} must be None with execution='Thread', "
                        f"got {getattr(self, name)!r}"
                    )
        ept = self.elements_per_thread
        if isinstance(ept, int) and ept not in self.ept_candidates():
            raise InvalidOptionError(
                f"elements_per_thread must be a divisor of {self.execution_size} (the executed "
                f"FFT size) no larger than {EPT_CANDIDATES[-1]}, got {ept!r}"
            )
        fpb = self.ffts_per_block
        if isinstance(fpb, int) and fpb > 1024:
            raise InvalidOptionError(f"ffts_per_block must be at most 1024, got {fpb!r}")
        if isinstance(fpb, int) and self.precision == "float16" and fpb % 2:
            raise InvalidOptionError(
                "ffts_per_block must be even in half precision (two FFTs are batched per "
                f"value), got {fpb!r}"
            )

    @classmethod
    def from_knobs(cls, fft_type="c2c", size=None, precision=np.float32, direction=None,
                   execution="Block", *, sm=900, ffts_per_block=None, elements_per_thread=None,
                   real_fft_options=None) -> FFTSpec:
        """Validate user knobs (public spelling) into a spec; raises InvalidOptionError."""
        ftype = _choice(fft_type, FFTType, "fft_type", "'c2c', 'r2c' or 'c2r'")
        if direction is None:
            direction = "inverse" if ftype is FFTType.c2r else "forward"
        dirn = _choice(direction, Direction, "direction", "'forward' or 'inverse'")
        if ftype is FFTType.r2c and dirn is not Direction.forward:
            raise InvalidOptionError(f"direction must be 'forward' for r2c, got {direction!r}")
        if ftype is FFTType.c2r and dirn is not Direction.inverse:
            raise InvalidOptionError(f"direction must be 'inverse' for c2r, got {direction!r}")
        exe = _choice(execution, Execution, "execution", "'Block' or 'Thread'")
        if isinstance(size, np.integer):
            size = int(size)
        if not isinstance(size, int) or isinstance(size, bool):
            raise InvalidOptionError(f"size must be a positive int, got {size!r}")
        layout, mode = _real_options(real_fft_options, ftype)
        return cls(
            fft_type=ftype, size=size, precision=precision_name(precision), direction=dirn,
            execution=exe, sm=normalize_sm(sm),
            ffts_per_block=_positive_or_suggested(ffts_per_block, "ffts_per_block"),
            elements_per_thread=_positive_or_suggested(elements_per_thread,
                                                       "elements_per_thread"),
            complex_layout=layout, real_mode=mode,
        )

    @property
    def execution_size(self) -> int:
        """Size of the complex FFT cuFFTDx executes (half the size in folded real mode)."""
        return self.size // 2 if self.real_mode is RealMode.folded else self.size

    def ept_candidates(self) -> tuple[int, ...]:
        """Elements-per-thread values worth probing: divisors of the executed size."""
        n = self.execution_size
        return tuple(e for e in EPT_CANDIDATES if n % e == 0)

    @property
    def cxx_precision(self) -> str:
        return _PRECISIONS[self.precision]

    def key(self) -> tuple:
        """Hashable, JSON-friendly description of every knob (part of the cache key)."""
        return (self.fft_type.name, self.size, self.precision, self.direction.name,
                self.execution.name, self.sm, self.ffts_per_block, self.elements_per_thread,
                self.complex_layout.name, self.real_mode.name)


def default_sm() -> int:
    """cuFFTDx SM value of the current CUDA device (raises CudaUnavailableError without one)."""
    from .._internal import cuda

    if not cuda.is_available():
        raise CudaUnavailableError(
            "sm must be given (e.g. sm=90) when no CUDA device is present: "
            f"{cuda.unavailable_reason()}"
        )
    device = cuda.current_device()
    return normalize_sm(cuda.compute_capability(0 if device is None else device))


def require_numba() -> None:
    """Raise LibraryNotFoundError unless numba and numba.cuda can be imported."""
    for name in ("numba", "numba.cuda"):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise LibraryNotFoundError("numba-cuda", "dx", f"module {name!r} not found")
