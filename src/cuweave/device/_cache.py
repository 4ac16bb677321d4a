"""On-disk cache of compiled device-FFT configurations.

One entry per configuration: ``<key>.json`` (traits and metadata) and ``<key>.ltoir`` (the
LTO-IR of the ``extern "C"`` wrapper). The key hashes every knob, the generated source and the
versions of cuFFTDx (nvidia-mathdx), NVRTC and cuweave, so an upgrade never reuses stale code.
Writes go through a temporary file and ``os.replace`` so concurrent processes never see a
partial entry. The directory is ``$CUWEAVE_CACHE_DIR`` if set, else ``~/.cache/cuweave/device``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading

from .._internal.logging import get_logger

__all__ = ["cache_dir", "make_key", "load", "store", "cached", "clear_memory"]

_log = get_logger("device.cache")
_memory: dict[str, dict] = {}
_lock = threading.Lock()
_build_lock = threading.RLock()  # one build of an entry at a time in a process (builds nest)


def cache_dir() -> str:
    """The cache directory (not created here)."""
    env = os.environ.get("CUWEAVE_CACHE_DIR")
    if env:
        return os.path.join(os.path.expanduser(env), "device")
    return os.path.join(os.path.expanduser("~"), ".cache", "cuweave", "device")


def make_key(parts) -> str:
    """A short hex digest of a JSON-serializable description."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


def _paths(key: str) -> tuple[str, str]:
    base = os.path.join(cache_dir(), key)
    return base + ".json", base + ".ltoir"


def load(key: str) -> dict | None:
    """The cached entry (``{'traits':..., 'symbol':..., 'ltoir': bytes|None}``) or None."""
    hit = _memory.get(key)
    if hit is not None:
        return hit
    meta_path, ir_path = _paths(key)
    try:
        with open(meta_path, encoding="utf-8") as f:
            entry = json.load(f)
        if entry.get("has_ltoir"):
            with open(ir_path, "rb") as f:
                entry["ltoir"] = f.read()
        else:
            entry["ltoir"] = None
    except (OSError, ValueError):
        return None
    with _lock:
        _memory[key] = entry
    if _log.isEnabledFor(10):
        _log.debug("device FFT cache hit %s in %s", key, cache_dir())
    return entry


def _atomic_write(path: str, data: bytes) -> None:
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def store(key: str, entry: dict) -> None:
    """Remember ``entry`` in memory and, best effort, on disk (an unwritable dir only logs)."""
    with _lock:
        _memory[key] = entry
    meta = {k: v for k, v in entry.items() if k != "ltoir"}
    meta["has_ltoir"] = entry.get("ltoir") is not None
    meta_path, ir_path = _paths(key)
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        if meta["has_ltoir"]:
            _atomic_write(ir_path, bytes(entry["ltoir"]))
        _atomic_write(meta_path, json.dumps(meta, sort_keys=True).encode())
    except OSError as e:
        _log.warning("could not write the device FFT cache in %s: %s", cache_dir(), e)


def cached(parts, build) -> dict:
    """The entry keyed by ``parts`` (:func:`make_key`): from memory or disk, else
    ``build(key)``, stored. Threads asking for one missing entry build it once."""
    key = make_key(parts)
    entry = load(key)
    if entry is None:
        with _build_lock:
            entry = load(key)
            if entry is None:
                entry = build(key)
                store(key, entry)
    return entry


def clear_memory() -> None:
    """Forget in-process entries (the disk cache stays); used by tests."""
    with _lock:
        _memory.clear()
