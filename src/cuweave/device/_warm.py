"""Warming the disk cache: the code generators (NVRTC, libmathdx) are CPU-bound and serial, so
configurations missing from the cache are generated in parallel worker processes; the objects
built afterwards load them in milliseconds. One mechanism for every device object."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

from .._internal.logging import get_logger

__all__ = ["with_sm", "generate_in_processes", "warm_cache"]

_log = get_logger("device")


def with_sm(configs) -> list[dict]:
    """Copies of the keyword dicts ``configs``, ``sm`` filled in (the current device's) where
    missing; the device is queried once, and only when needed."""
    out, sm = [], None
    for kw in configs:
        kw = dict(kw)
        if kw.get("sm") is None:
            if sm is None:
                from .fft import default_sm

                sm = default_sm()
            kw["sm"] = sm
        out.append(kw)
    return out


def generate_in_processes(worker, items: list, max_workers, what: str) -> None:
    """``worker(item)`` for every item in spawned processes (nothing when one item or
    ``max_workers == 1``: building the object generates it then). Workers report failures as
    text; the parent raises them, typed, when it builds the object."""
    workers = min(len(items), max_workers or os.cpu_count() or 1)
    if workers <= 1:
        return
    if _log.isEnabledFor(20):
        _log.info("generating %d %s configurations in %d processes", len(items), what, workers)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(worker, items))


def warm_cache(configs, max_workers=None) -> list:
    """Build several device objects at once, generating the code of those missing from the
    disk cache in parallel processes; returns them in order.

    ``configs`` is an iterable of keyword dicts: one with ``fft_type`` builds an
    :class:`~cuweave.device.FFT`, one whose ``size`` is ``(m, n, k)`` a
    :class:`~cuweave.device.Matmul`. Invalid knobs raise before any code is generated.
    """
    from .._internal.errors import InvalidOptionError
    from .fft import warm_fft_cache
    from .matmul import warm_matmul_cache

    configs = [dict(c) for c in configs]
    kinds = []
    for i, kw in enumerate(configs):
        if "fft_type" in kw:
            kinds.append("fft")
        elif isinstance(kw.get("size"), tuple | list) and len(kw["size"]) == 3:
            kinds.append("matmul")
        else:
            raise InvalidOptionError(f"configs[{i}] must hold fft_type (an FFT) or size=(m, n, "
                                     f"k) (a Matmul), got {kw!r}")
    built = {}
    for kind, warm in (("fft", warm_fft_cache), ("matmul", warm_matmul_cache)):
        mine = [c for c, k in zip(configs, kinds) if k == kind]
        built[kind] = iter(warm(mine, max_workers) if mine else ())
    return [next(built[k]) for k in kinds]
