"""Opt-in persistent cache of autotune winners, keyed by GPU and problem spec (a cuweave extension).

Enable with ``cuweave.linalg.advanced.enable_autotune_cache(path)`` or the environment
variable ``CUWEAVE_AUTOTUNE_CACHE=/path/file.json``. Entries are keyed by the GPU name,
compute capability, cuBLASLt version and the planned problem; values are the tuned algorithms
in order (their opaque bytes). Nothing is written unless enabled.
"""

from __future__ import annotations

import json
import os
import threading

from ..._internal.errors import InvalidOptionError
from ._algorithm import Algorithm

__all__ = ["enable_autotune_cache", "enabled", "lookup", "store"]

_lock = threading.Lock()
_state: dict = {"path": None}


def enable_autotune_cache(path: str | os.PathLike | None) -> None:
    """Persist autotune winners in ``path`` (``None`` disables).

    A cuweave extension. Once enabled, :meth:`Matmul.autotune` stores the algorithms it found
    fastest (in order) in this JSON file, keyed by the GPU, its compute capability, the
    cuBLASLt version and the planned problem, and a later :meth:`Matmul.plan` of the same
    problem on the same GPU starts from them. The setting lasts for the process; without it,
    the ``CUWEAVE_AUTOTUNE_CACHE`` environment variable names the file. Nothing is read or
    written here: the file is made on the first store.

    Parameters
    ----------
    path : str, bytes, os.PathLike or None
        The JSON file to keep the winners in, or ``None`` to stop persisting them (the
        environment variable, if set, then applies again).

    Raises
    ------
    InvalidOptionError
        If ``path`` is not a str, bytes, os.PathLike or ``None``.

    Examples
    --------
    >>> import os, tempfile
    >>> from cuweave.linalg.advanced import enable_autotune_cache
    >>> enable_autotune_cache(os.path.join(tempfile.gettempdir(), "cuweave-autotune.json"))
    >>> enable_autotune_cache(None)  # off again
    """
    if path is not None and not isinstance(path, str | bytes | os.PathLike):
        raise InvalidOptionError(f"path must be a str, os.PathLike or None, got {path!r}")
    _state["path"] = os.fspath(path) if path is not None else None


def _path():
    return _state["path"] or os.environ.get("CUWEAVE_AUTOTUNE_CACHE") or None


def enabled() -> bool:
    return _path() is not None


def _gpu_key(device_id: int) -> str:
    from ..._bindings import cublaslt as lt
    from ..._internal import cuda

    cc = cuda.compute_capability(device_id)
    return f"{cuda.device_name(device_id)}|sm{cc[0]}{cc[1]}|cublasLt{lt.get_version()}"


def _load(path) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def lookup(device_id: int, key: str):
    """The stored algorithms for ``key`` on this GPU, or ``None``."""
    path = _path()
    if path is None:
        return None
    with _lock:
        entry = _load(path).get(_gpu_key(device_id), {}).get(key)
    if not entry:
        return None
    return [Algorithm(bytes.fromhex(h), ws) for h, ws in entry]


def store(device_id: int, key: str, algorithms) -> None:
    """Record ``algorithms`` (fastest first) for ``key`` on this GPU."""
    path = _path()
    if path is None:
        return
    with _lock:
        data = _load(path)
        data.setdefault(_gpu_key(device_id), {})[key] = [
            (a.__getstate__()["data"].hex(), a.workspace_size) for a in algorithms[:8]]
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
