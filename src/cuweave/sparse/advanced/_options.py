"""Options, execution spaces, preferences and enums of the sparse direct solver.

The names and fields follow nvmath-python 1.0's ``nvmath.sparse.advanced``; enums are the cuDSS
ones (:mod:`cuweave._bindings.cudss`, IntEnums carrying the C values). Every options argument
also takes a dict. cuweave adds CPU execution: ``execution="cpu"`` or
:class:`~cuweave.ExecutionCPU` (the same calls without a GPU).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import IntEnum
from logging import Logger
from typing import ClassVar, Literal

from ..._bindings.cudss import (
    FactorizationAlg,
    MatchingAlg,
    MatrixType,
    MatrixViewType,
    PivotEpsilonAlg,
    PivotType,
    ReorderingAlg,
    SolveAlg,
)
from ..._internal.errors import InvalidOptionError
from ..._internal.memory import parse_memory_limit
from ..._internal.options import ExecutionCPU, OptionTypeError, check_enum, coerce_options

__all__ = [
    "DirectSolverOptions", "DirectSolverMatrixType", "DirectSolverMatrixViewType",
    "DirectSolverReorderingAlg", "DirectSolverFactorizationAlg", "DirectSolverSolveAlg",
    "DirectSolverPivotEpsilonAlg", "DirectSolverMatchingAlg", "DirectSolverPivotType",
    "DirectSolverAlgType",
    "ExecutionCUDA", "ExecutionHybrid", "ExecutionCPU", "HybridMemoryModeOptions",
    "DirectSolverPlanPreferences", "DirectSolverFactorizationPreferences",
    "DirectSolverSolutionPreferences", "parse_execution",
]

DirectSolverMatrixType = MatrixType
DirectSolverMatrixViewType = MatrixViewType
DirectSolverReorderingAlg = ReorderingAlg
DirectSolverFactorizationAlg = FactorizationAlg
DirectSolverSolveAlg = SolveAlg
DirectSolverPivotEpsilonAlg = PivotEpsilonAlg
DirectSolverMatchingAlg = MatchingAlg
DirectSolverPivotType = PivotType


class DirectSolverAlgType(IntEnum):
    """cuDSS 0.x's ``cudssAlgType_t`` (nvmath-python 0.x's ``DirectSolverAlgType``), for programs
    written against it (``plan_config.algorithm = DirectSolverAlgType.ALG_1``). cuDSS 1.0 names
    the algorithms per phase (:class:`DirectSolverReorderingAlg`, ...); a value given here is
    passed on as that phase's algorithm of the same number."""

    DEFAULT = 0
    ALG_1 = 1
    ALG_2 = 2
    ALG_3 = 3
    ALG_4 = 4
    ALG_5 = 5


def _non_negative_int(value, name: str, *, positive: bool = False, allow_none: bool = True):
    if value is None and allow_none:
        return None
    low = 1 if positive else 0
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        kind = "a positive" if positive else "a non-negative"
        raise InvalidOptionError(f"{name} must be {kind} int{' or None' if allow_none else ''}, "
                                 f"got {value!r}")
    return value


@dataclass
class HybridMemoryModeOptions:
    """Keeping the factors in host memory under CUDA execution (cuDSS's hybrid memory mode).

    Attributes
    ----------
    hybrid_memory_mode : bool
        Store the factors in host memory, moving parts to the GPU as needed (default
        ``False``): systems whose factors do not fit the GPU then still solve.
    hybrid_device_memory_limit : int, str or None
        The device memory cuDSS may use: bytes, a string with a unit (``"4 GiB"``) or a
        percentage of the device (``"50%"``); ``None``: cuDSS's own heuristic.
    register_cuda_memory : bool
        Page-lock the host buffers with ``cudaHostRegister`` (default ``True``).
    """

    hybrid_memory_mode: bool = False
    hybrid_device_memory_limit: int | str | None = None
    register_cuda_memory: bool = True

    def __post_init__(self):
        for name in ("hybrid_memory_mode", "register_cuda_memory"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidOptionError(f"{name} must be a bool, got {getattr(self, name)!r}")
        limit = self.hybrid_device_memory_limit
        if limit is not None:
            try:  # validate the spelling now; percentages are resolved against the device
                parse_memory_limit(limit, total=1 << 40)
            except (InvalidOptionError, ValueError, TypeError) as e:
                raise InvalidOptionError(
                    "hybrid_device_memory_limit must be bytes (int), a size string such as "
                    f"'4 GiB' or a percentage such as '50%', got {limit!r}") from e


@dataclass(frozen=True)
class ExecutionCUDA:
    """Run the solver on CUDA device ``device_id`` with cuDSS (the default).

    Attributes
    ----------
    device_id : int
        The device for host (SciPy/NumPy) operands; device operands run on their own device.
    hybrid_memory_mode_options : HybridMemoryModeOptions or dict
        Keep the factors in host memory (see :class:`HybridMemoryModeOptions`).
    """

    device_id: int = 0
    hybrid_memory_mode_options: object = field(default_factory=HybridMemoryModeOptions)
    name: ClassVar[Literal["cuda"]] = "cuda"

    def __post_init__(self):
        _non_negative_int(self.device_id, "device_id", allow_none=False)
        hmo = coerce_options(self.hybrid_memory_mode_options, HybridMemoryModeOptions,
                             "hybrid_memory_mode_options")
        object.__setattr__(self, "hybrid_memory_mode_options", hmo)


@dataclass
class ExecutionHybrid:
    """cuDSS's hybrid execution: the host runs parts of every phase, operands may stay in host
    memory. Single systems with one right-hand side only (as cuDSS).

    Attributes
    ----------
    device_id : int
        The CUDA device cuDSS uses.
    num_threads : int or None
        Host threads (more than one needs a threading layer: ``multithreading_lib``).
    """

    device_id: int = 0
    num_threads: int | None = None
    name: ClassVar[Literal["hybrid"]] = "hybrid"

    def __post_init__(self):
        _non_negative_int(self.device_id, "device_id", allow_none=False)
        _non_negative_int(self.num_threads, "num_threads", positive=True)


_MATRIX_TYPES = tuple(MatrixType)


@dataclass
class DirectSolverOptions:
    """Options of :class:`DirectSolver` and :func:`direct_solver` (as nvmath-python's).

    Attributes
    ----------
    sparse_system_type : DirectSolverMatrixType
        GENERAL (default), SYMMETRIC, HERMITIAN, SPD or HPD.
    sparse_system_view : DirectSolverMatrixViewType
        FULL (default), LOWER or UPPER: the triangle of a symmetric/Hermitian matrix that is
        read (the other one is ignored, whatever it holds).
    multithreading_lib : str or None
        Path of cuDSS's threading layer (``libcudss_mtlayer_gomp.so.1`` of the wheel); default
        the ``CUDSS_THREADING_LIB`` environment variable; ``None``: single-threaded host parts.
    logger : logging.Logger or None
        Where to log; default the ``cuweave.sparse`` logger.
    blocking : True or "auto"
        ``"auto"``: device operands under CUDA execution return before the GPU finishes.
    handle : int or None
        A cuDSS handle to use instead of creating one (not destroyed by the solver).
    """

    sparse_system_type: int = MatrixType.GENERAL
    sparse_system_view: int = MatrixViewType.FULL
    multithreading_lib: str | None = None
    logger: Logger | None = None
    blocking: Literal[True, "auto"] = "auto"
    handle: int | None = None

    def __post_init__(self):
        if self.blocking is not True and self.blocking != "auto":
            raise InvalidOptionError(f"blocking must be True or 'auto', got {self.blocking!r}")
        self.sparse_system_type = check_enum(self.sparse_system_type, MatrixType,
                                             "sparse_system_type")
        self.sparse_system_view = check_enum(self.sparse_system_view, MatrixViewType,
                                             "sparse_system_view")
        if self.multithreading_lib is not None and not isinstance(self.multithreading_lib, str):
            raise InvalidOptionError(
                f"multithreading_lib must be a path (str) or None, got {self.multithreading_lib!r}")
        if self.logger is not None and not isinstance(self.logger, Logger):
            raise InvalidOptionError(f"logger must be a logging.Logger or None, got "
                                     f"{self.logger!r}")
        if self.handle is not None and (not isinstance(self.handle, int)
                                        or isinstance(self.handle, bool) or self.handle <= 0):
            raise InvalidOptionError(f"handle must be a cuDSS handle (int) or None, got "
                                     f"{self.handle!r}")


@dataclass
class DirectSolverPlanPreferences:
    """Plan-phase settings for :func:`direct_solver` (``None``: leave the default); each is
    the :class:`DirectSolverPlanConfig` attribute of the same name.

    Attributes
    ----------
    host_nthreads : int or None
        Host threads (needs a threading layer under CUDA execution).
    reordering_algorithm : DirectSolverReorderingAlg or None
        The fill-reducing reordering.
    pivot_type : DirectSolverPivotType or None
        The pivoting.
    pivot_threshold : float or None
        The pivot threshold.
    max_nnz : int or None
        Upper bound of the factors' nonzeros (COLAMD reorderings).
    matching_algorithm : DirectSolverMatchingAlg or None
        The matching.
    nd_min_levels : int or None
        Minimum levels of nested dissection.
    use_superpanels : bool or None
        Whether superpanels are used.
    """

    host_nthreads: int | None = None
    reordering_algorithm: ReorderingAlg | None = None
    pivot_type: int | None = None
    pivot_threshold: float | None = None
    max_nnz: int | None = None
    matching_algorithm: MatchingAlg | None = None
    nd_min_levels: int | None = None
    use_superpanels: bool | None = None


@dataclass
class DirectSolverFactorizationPreferences:
    """Factorization-phase settings for :func:`direct_solver` (``None``: the default); each is
    the :class:`DirectSolverFactorizationConfig` attribute of the same name.

    Attributes
    ----------
    factorization_algorithm : DirectSolverFactorizationAlg or None
        The factorization algorithm.
    pivot_eps_algorithm : DirectSolverPivotEpsilonAlg or None
        How the pivot epsilon is applied.
    pivot_eps : float or None
        Pivots smaller than this are replaced by it.
    """

    factorization_algorithm: FactorizationAlg | None = None
    pivot_eps_algorithm: PivotEpsilonAlg | None = None
    pivot_eps: float | None = None


@dataclass
class DirectSolverSolutionPreferences:
    """Solve-phase settings for :func:`direct_solver` (``None``: the default); each is the
    :class:`DirectSolverSolutionConfig` attribute of the same name.

    Attributes
    ----------
    solution_algorithm : DirectSolverSolveAlg or None
        The solve algorithm.
    ir_num_steps : int or None
        Iterative refinement steps.
    """

    solution_algorithm: SolveAlg | None = None
    ir_num_steps: int | None = None


def preferences_items(value, cls, name: str) -> list[tuple[str, object]]:
    """The ``(field, value)`` pairs of the preferences ``value`` (object or dict) that are set."""
    prefs = coerce_options(value, cls, name)
    return [(f.name, getattr(prefs, f.name)) for f in dataclasses.fields(prefs)
            if getattr(prefs, f.name) is not None]


_EXPECTED = ("'cuda', 'hybrid', 'cpu', ExecutionCUDA(...), ExecutionHybrid(...), "
             "ExecutionCPU(...), a dict with 'name', or None")


def parse_execution(execution):
    """``execution`` as an :class:`ExecutionCUDA`, :class:`ExecutionHybrid` or
    :class:`~cuweave.ExecutionCPU` (``None``: CUDA, as nvmath-python; the caller falls back to
    the CPU when no GPU is usable)."""
    from ..._internal.options import ExecutionCUDA as CoreExecutionCUDA

    if execution is None:
        return None
    if isinstance(execution, ExecutionCUDA | ExecutionHybrid | ExecutionCPU):
        return execution
    if isinstance(execution, CoreExecutionCUDA):  # cuweave.ExecutionCUDA / sparse.ExecutionCUDA
        return ExecutionCUDA(device_id=execution.device_id)
    classes = {"cuda": ExecutionCUDA, "gpu": ExecutionCUDA, "hybrid": ExecutionHybrid,
               "cpu": ExecutionCPU}
    if isinstance(execution, str) and execution.strip().lower() in classes:
        return classes[execution.strip().lower()]()
    if isinstance(execution, dict):
        d = dict(execution)
        kind = d.pop("name", "cuda")
        cls = classes.get(kind.strip().lower()) if isinstance(kind, str) else None
        if cls is not None:
            return coerce_options(d, cls, "execution")
    if isinstance(execution, dict | str):
        raise InvalidOptionError(f"execution must be {_EXPECTED}, got {execution!r}")
    raise OptionTypeError(f"execution must be {_EXPECTED}, got {execution!r}")
