"""Generating code in parallel worker processes: the code generators (NVRTC, libmathdx) are
CPU-bound and serial, so configurations missing from the disk cache are generated in spawned
processes (:func:`generate_in_processes`); the objects built afterwards load them in
milliseconds. The device FFT and Matmul use it to warm their caches; :mod:`._warm` warms
several kinds of objects, and kernels, at once."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

from .._internal.logging import get_logger

__all__ = ["with_sm", "generate_in_processes"]

_log = get_logger("device")


def with_sm(configs) -> list[dict]:
    """Copies of the keyword dicts ``configs``, ``sm`` filled in (the current device's) where
    missing; the device is queried once, and only when needed."""
    out, sm = [], None
    for kw in configs:
        kw = dict(kw)
        if kw.get("sm") is None:
            if sm is None:
                from ._options import default_sm

                sm = default_sm()
            kw["sm"] = sm
        out.append(kw)
    return out


def generate_in_processes(worker, items: list, max_workers, what: str) -> list:
    """``worker(item)`` for every item in spawned processes (nothing when one item or
    ``max_workers == 1``: building the object generates it then); returns the results. Workers
    report failures as text; the parent raises them, typed, when it builds the object."""
    workers = min(len(items), max_workers or os.cpu_count() or 1)
    if workers <= 1:
        return []
    if _log.isEnabledFor(20):
        _log.info("generating %d %s configurations in %d processes", len(items), what, workers)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(worker, items))
