"""Code generation in a fresh process, for the disk cache (``CUWEAVE_CACHE_DIR``).

An xdist worker carries the imports of every test module (torch, JAX, numba: 0.5-0.9 GB). One
libmathdx compilation (NVRTC on cuBLASDx) adds 1-1.5 GB at its peak; done in that worker, the
sum passed the 2 GB a 2-core box gives the whole run. :func:`in_a_fresh_process` runs it in a
spawned process first (numpy and cuweave only): the result lands in the disk cache, and the
test's own call reads it from there.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor


def in_a_fresh_process(fn, *args) -> None:
    """Call ``fn(*args)`` (picklable, module-level) once in a spawned process; the environment,
    ``CUWEAVE_CACHE_DIR`` included, is this process's."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(fn, *args).result()


def pipeline_traits(knobs: dict, depth: int, a: tuple, b: tuple) -> None:
    """``pipeline_traits`` of ``Matmul(**knobs)`` and a pipeline of ``depth`` over operands
    ``a``/``b`` (``(dtype name, shape, strides)``), into the disk cache."""
    from cuweave.device import Matmul
    from cuweave.device import _blas_pipeline as bp

    mm = Matmul(**knobs)
    bp.pipeline_traits(mm._resolved, bp.PipelineConfig(mm._resolved, depth, a, b))
