"""Warming the disk cache for several device objects (:func:`warm_cache`) and for the cuBLASDx
device functions of kernels (:func:`warm_kernels`), in parallel worker processes
(:mod:`._parallel`, the one mechanism every device object uses)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

from .._internal.logging import get_logger

__all__ = ["warm_cache", "warm_kernels"]

_log = get_logger("device")


def warm_cache(configs, max_workers=None) -> list:
    """Build several device objects at once, generating the code of those missing from the
    disk cache in parallel processes; returns them in order.

    Parameters
    ----------
    configs : iterable of dict
        Keyword arguments, one dict per object: one with ``fft_type`` builds an
        :class:`~cuweave.device.FFT`, one naming a cuSOLVERDx ``function`` a
        :class:`~cuweave.device.Solver`, one with ``solver=`` (a class such as
        :class:`~cuweave.device.CholeskySolver`, or its name) that class, one whose ``size`` is
        ``(m, n, k)`` a :class:`~cuweave.device.Matmul`. Invalid knobs raise before any code is
        generated.
    max_workers : int, optional
        Worker processes (default: one per core).

    Returns
    -------
    list
        The objects, in the order of ``configs``.
    """
    from .._internal.errors import InvalidOptionError
    from .cusolverdx import is_solver_config, warm_solver_cache
    from .fft import warm_fft_cache
    from .matmul import warm_matmul_cache

    configs = [dict(c) for c in configs]
    kinds = []
    for i, kw in enumerate(configs):
        if is_solver_config(kw):
            kinds.append("solver")
        elif "fft_type" in kw:
            kinds.append("fft")
        elif isinstance(kw.get("size"), tuple | list) and len(kw["size"]) == 3:
            kinds.append("matmul")
        else:
            raise InvalidOptionError(f"configs[{i}] must hold fft_type (an FFT), size=(m, n, "
                                     f"k) (a Matmul), or function or solver (a solver), "
                                     f"got {kw!r}")
    built = {}
    for kind, warm in (("fft", warm_fft_cache), ("matmul", warm_matmul_cache),
                       ("solver", warm_solver_cache)):
        mine = [c for c, k in zip(configs, kinds) if k == kind]
        built[kind] = iter(warm(mine, max_workers) if mine else ())
    return [next(built[k]) for k in kinds]


# ---------------------------------------------------------------------------------------------
# Kernels: every cuBLASDx device function a kernel calls, generated in parallel
# ---------------------------------------------------------------------------------------------


def _load_builder(path: str, name: str):
    import hashlib
    import importlib.util

    tag = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"_cuweave_warm_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _kernel_requests(target) -> list | str:
    """Worker: lower one kernel with code generation switched off and return the cuBLASDx
    device functions it calls (those missing from the disk cache), or an error text.

    ``target`` is ``(path, name)``: ``name`` in the Python file ``path`` is a function
    returning ``(pyfunc, signature, sm)``. This process is thrown away afterwards (numba keeps
    the dry-lowered functions)."""
    try:
        from numba import cuda

        from . import _blas_groups, _blas_numba

        pyfunc, sig, sm = _load_builder(*target[:2])(*target[2:])
        found = []

        def execute_code(mm, dynamic_ld=False):
            found.append(("execute", mm, dynamic_ld))
            return {"symbol": f"cuweave_dry_{len(found)}", "ltoir": None}

        def require(request):
            found.append(("function", request))
            return ()

        real = (_blas_numba._execute_code, _blas_numba._link, _blas_groups.require)
        _blas_numba._execute_code = execute_code
        _blas_numba._link = lambda context, code: None
        _blas_groups.require = require
        try:
            cuda.compile(pyfunc, sig, cc=(sm // 100, sm // 10 % 10), output="ltoir",
                         device=False, abi="numba")
        finally:
            _blas_numba._execute_code, _blas_numba._link, _blas_groups.require = real
        return [r for r in found if not _generated(r)]
    except Exception as e:
        return f"{target[1]}: {type(e).__name__}: {e}"


def _generated(request, generate=False) -> bool:
    """Whether ``request``'s code is in the disk cache (with ``generate``: made so).

    ``request`` is ``('execute', mm, dynamic_ld)`` (a pointer execute), ``('function',
    Request)`` (one tensor device function) or, to generate, ``('function', [Request, ...])``:
    the tensor device functions of one GEMM description, generated in one compilation."""
    from . import _blas_groups, _blas_numba, _cache

    if request[0] == "function":
        if generate:
            _blas_groups.generate(list(request[1]))
            return True
        return _blas_groups.is_cached(request[1])
    if generate:
        _blas_numba._execute_code(*request[1:])
        return True
    return _cache.load(_cache.make_key(_blas_numba.execute_parts(*request[1:]))) is not None


def _generate_request(request) -> str | None:
    """Worker: generate one pointer execute, or the tensor functions of one GEMM description,
    into the disk cache."""
    try:
        _generated(request, generate=True)
    except Exception as e:
        return f"{'execute' if request[0] == 'execute' else 'functions'}: {type(e).__name__}: {e}"
    return None


def _grouped(found: list, requests: dict) -> None:
    """Add the requests a kernel listed to ``requests``: pointer executes one by one, tensor
    functions grouped by GEMM description (one generation each)."""
    for r in found:
        if r[0] == "execute":
            requests.setdefault(("execute", r[1]._kernel_key(), r[2]), r)
            continue
        group = requests.setdefault(("function", r[1].mm._kernel_key()), ["function", {}])
        group[1].setdefault(r[1].key, r[1])


def warm_kernels(targets, max_workers=None) -> list[str]:
    """Generate the cuBLASDx code of kernels before they are compiled, in parallel processes.

    A kernel calls one libmathdx-generated device function per distinct tensor operation
    (``copy``, ``clear``, ``axpby``, ``MM.execute``, accumulator queries, ...); each costs a
    few seconds of a serial code generator. Here every kernel of ``targets`` is first lowered in
    a worker process with code generation switched off, which lists the functions it calls;
    those missing from the disk cache are then generated one per worker process. Compiling the
    kernels afterwards finds everything in the cache.

    Parameters
    ----------
    targets : iterable of (str, str, *args)
        ``(path, name, *args)``: a Python file and the name of a function in it that, called
        with ``args`` (picklable), returns ``(pyfunc, signature, sm)`` (the kernel's Python
        function, its numba argument types, the target architecture as 900 for sm_90).
    max_workers : int, optional
        Processes to use (default: the CPU count).

    Returns
    -------
    list of str
        Errors met (as text); the kernels' own compilation raises them again, typed.
    """
    targets = [tuple(t) for t in targets]
    workers = max(1, min(max_workers or os.cpu_count() or 1, 64))
    ctx = multiprocessing.get_context("spawn")
    errors, requests = [], {}
    # one fresh process per kernel: numba keeps the dry-lowered overloads of a process, so a
    # second kernel there would not list the functions they call
    with ctx.Pool(min(workers, max(len(targets), 1)), maxtasksperchild=1) as pool:
        for found in pool.map(_kernel_requests, targets, chunksize=1):
            if isinstance(found, str):
                errors.append(found)
                continue
            _grouped(found, requests)
    jobs = [r if r[0] == "execute" else ("function", list(r[1].values()))
            for r in requests.values()]
    if jobs:
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=ctx) as pool:
            errors += [e for e in pool.map(_generate_request, jobs) if e]
    if _log.isEnabledFor(20):
        _log.info("warm_kernels: %d kernels, %d generations (executes and function groups)",
                  len(targets), len(jobs))
    return errors
