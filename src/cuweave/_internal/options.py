"""Options helpers and execution spaces shared by every engine.

Options are dataclasses validated in ``__post_init__`` without side effects; every options
argument also accepts a ``dict`` (:func:`coerce_options`). ``execution=`` accepts ``"cuda"``,
``"cpu"``, :class:`ExecutionCUDA`, :class:`ExecutionCPU` or a dict such as
``{"name": "cpu", "num_threads": 4}``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Literal

from .errors import InvalidOptionError
from .logging import get_logger

__all__ = ["coerce_options", "ExecutionCUDA", "ExecutionCPU", "resolve_execution",
           "check_enum", "OptionTypeError"]

_log = get_logger("execution")


class OptionTypeError(InvalidOptionError, TypeError):
    """An options argument of the wrong type, or a dict with unknown keys (also a
    ``TypeError``, as nvmath-python raises there)."""


def coerce_options(value, cls, name: str = "options"):
    """Return ``value`` as a ``cls`` instance: ``None`` → defaults, dict → ``cls(**value)``.

    Another type, or a dict with keys that are not fields of ``cls``, raises
    :class:`OptionTypeError` (an :class:`InvalidOptionError` and a ``TypeError``). A class may
    map other accepted key names to its fields in a ``_aliases`` dict (nvmath's spellings).
    """
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        fields = {f.name for f in dataclasses.fields(cls)}
        aliases = getattr(cls, "_aliases", {})
        unknown = sorted(set(value) - fields - set(aliases))
        if unknown:
            raise OptionTypeError(
                f"{name} keys must be among {sorted(fields)}, got unknown {unknown!r}")
        return cls(**{aliases.get(k, k): v for k, v in value.items()})
    raise OptionTypeError(f"{name} must be a {cls.__name__}, a dict or None, got {value!r}")


def check_enum(value, enum_cls, name: str, *, allow_none: bool = False):
    """Coerce ``value`` (member, int or case-insensitive name) to ``enum_cls``."""
    if value is None and allow_none:
        return None
    if isinstance(value, enum_cls):
        return value
    try:
        if isinstance(value, str):
            key = value.strip().upper()
            if key in enum_cls.__members__:
                return enum_cls[key]
            prefixed = [m for m in enum_cls.__members__ if m.endswith("_" + key)]
            if len(prefixed) == 1:
                return enum_cls[prefixed[0]]
            raise KeyError(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return enum_cls(value)
    except (KeyError, ValueError):
        pass
    names = ", ".join(enum_cls.__members__)
    raise InvalidOptionError(f"{name} must be a {enum_cls.__name__} ({names}), got {value!r}")


@dataclass(frozen=True)
class ExecutionCUDA:
    """Execution space: run the operation on a CUDA device.

    Pass it (or ``"cuda"``, or a dict such as ``{"name": "cuda", "device_id": 1}``) as an
    engine's ``execution=`` argument. Operands already in device memory must live on this
    device.

    Parameters
    ----------
    device_id : int, optional
        Ordinal of the CUDA device to run on (a non-negative int). The default is device 0.
    name : {"cuda"}, optional
        The name of this execution space; always ``"cuda"``. It lets a dict name the space.

    Raises
    ------
    InvalidOptionError
        If ``device_id`` is not a non-negative int or ``name`` is not ``"cuda"``.

    Examples
    --------
    >>> from cuweave import ExecutionCUDA
    >>> ExecutionCUDA(device_id=1)
    ExecutionCUDA(device_id=1, name='cuda')
    """

    device_id: int = 0
    name: Literal["cuda"] = "cuda"

    def __post_init__(self):
        if (not isinstance(self.device_id, int) or isinstance(self.device_id, bool)
                or self.device_id < 0):
            raise InvalidOptionError(
                f"device_id must be a non-negative int, got {self.device_id!r}")
        if self.name != "cuda":
            raise InvalidOptionError(f"name must be 'cuda', got {self.name!r}")


@dataclass(frozen=True)
class ExecutionCPU:
    """Execution space: run the operation on the CPU.

    Pass it (or ``"cpu"``, or a dict such as ``{"name": "cpu", "num_threads": 4}``) as an
    engine's ``execution=`` argument.

    Parameters
    ----------
    num_threads : int or None, optional
        Number of CPU threads the operation may use (a positive int). ``None`` (the default)
        uses as many threads as the machine has CPU cores.
    name : {"cpu"}, optional
        The name of this execution space; always ``"cpu"``. It lets a dict name the space.

    Raises
    ------
    InvalidOptionError
        If ``num_threads`` is not a positive int or ``None``, or ``name`` is not ``"cpu"``.

    Examples
    --------
    >>> from cuweave import ExecutionCPU
    >>> ExecutionCPU(num_threads=2).threads
    2
    """

    num_threads: int | None = None
    name: Literal["cpu"] = "cpu"

    def __post_init__(self):
        n = self.num_threads
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise InvalidOptionError(f"num_threads must be a positive int or None, got {n!r}")
        if self.name != "cpu":
            raise InvalidOptionError(f"name must be 'cpu', got {self.name!r}")

    @property
    def threads(self) -> int:
        """The number of threads the CPU path uses: ``num_threads``, or the number of CPU
        cores (at least 1) when ``num_threads`` is ``None``."""
        return self.num_threads or os.cpu_count() or 1


_EXPECTED = ("'cuda', 'cpu', ExecutionCUDA(device_id=...), ExecutionCPU(num_threads=...), "
             "a dict with 'name', or None")


def _parse_execution(execution, default_name=None):
    if isinstance(execution, ExecutionCUDA | ExecutionCPU):
        return execution
    if isinstance(execution, str):
        key = execution.strip().lower()
        if key in ("cuda", "gpu"):
            return ExecutionCUDA()
        if key == "cpu":
            return ExecutionCPU()
    if isinstance(execution, dict):
        d = dict(execution)
        kind = d.pop("name", default_name)
        kind = kind.strip().lower() if isinstance(kind, str) else None
        cls = {"cuda": ExecutionCUDA, "cpu": ExecutionCPU}.get(kind)
        if cls is not None:
            return coerce_options(d, cls, "execution")
    raise InvalidOptionError(f"execution must be {_EXPECTED}, got {execution!r}")


def resolve_execution(execution, *, operand_device: str, operand_device_id: int | None,
                      host_default: str = "cuda", default_device_id: int = 0,
                      cpu_for_device: bool = False, name_from_operands: bool = False):
    """Choose the execution space for operands living on ``operand_device``.

    Device operands run on their device; CPU execution for them is refused unless
    ``cpu_for_device`` (FFT: the engine copies them to the host and the result back). Host
    operands run where ``execution`` says; by default on CUDA (``host_default="cuda"``, as
    advanced matmul) when a GPU is usable, else on the CPU with one INFO log line; with
    ``host_default="cpu"`` (as FFT) on the CPU. ``name_from_operands``: a dict without
    ``"name"`` (``{"num_threads": 2}``) names the operands' memory space (as FFT in
    nvmath-python); otherwise it is refused.
    """
    from . import cuda

    if execution is None:
        if operand_device == "cuda":
            return ExecutionCUDA(device_id=operand_device_id or 0)
        if host_default == "cuda":
            if cuda.is_available():
                return ExecutionCUDA(device_id=default_device_id)
            _log.info("no usable CUDA device (%s): running on the CPU",
                      cuda.unavailable_reason())
        return ExecutionCPU()
    default_name = operand_device if name_from_operands else None
    space = _parse_execution(execution, default_name)
    if isinstance(space, ExecutionCPU):
        if operand_device == "cuda" and not cpu_for_device:
            raise InvalidOptionError(
                "execution must be 'cuda' for operands in device memory, got CPU execution; "
                "copy the operands to the host to run on the CPU")
        return space
    cuda.require(space.device_id)
    if operand_device == "cuda" and operand_device_id != space.device_id:
        raise InvalidOptionError(
            f"execution device_id must match the operands' device ({operand_device_id}), got "
            f"{space.device_id}")
    return space
