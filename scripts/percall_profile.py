"""Host cost of the matmul GPU execute path, profiled on a CPU-only machine.

The cuBLASLt entry points are stubbed (``tests.fakes.cublaslt``'s recording stubs; the planned
``cublasLtMatmul`` itself is libc's ``labs``, a real ctypes call that ignores its extra
arguments), and *real* torch CPU tensors pose as CUDA tensors of device 0 (``is_cuda``,
``get_device``, the raw current-stream accessor, results made on ``"cpu"``), so torch's own
costs (``data_ptr``, ``stride``, the allocator as reached from Python) are real. Cases:

- ``execute``: a planned ``Matmul(a, b).execute()``, 64x64 fp32, a fresh result each call;
- ``matmul()``: the function form ``matmul(a, b)`` on the same tensors (plan-cache hit);
- ``matmul(stream=0)``: the same with a stream given (a handle: the run's other path).

Reports µs/call (medians of interleaved blocks) and a cProfile of each case. With ``--before
REV`` the tree of git revision ``REV`` is imported as the package ``cwbefore`` (its imports are
relative) and timed in the same process, interleaved with the working tree: a ratio per round,
their median reported::

    PYTHONPATH=src:. python3 scripts/percall_profile.py [--before HEAD~3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import importlib
import io
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (os.path.join(ROOT, "src"), ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)


def export_before(rev: str) -> str:
    """Directory holding revision ``rev``'s ``src/cuweave`` as the package ``cwbefore``."""
    tmp = tempfile.mkdtemp(prefix="cw-before-")
    tar = subprocess.run(["git", "-C", ROOT, "archive", rev, "src/cuweave"], check=True,
                         capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
    shutil.move(os.path.join(tmp, "src", "cuweave"), os.path.join(tmp, "cwbefore"))
    return tmp


def install(mp, pkg: str, noop) -> None:
    """Stub the native layers of the package ``pkg`` (``cuweave`` or ``cwbefore``)."""
    lt = importlib.import_module(f"{pkg}._bindings.cublaslt")
    cuda = importlib.import_module(f"{pkg}._internal.cuda")
    resources = importlib.import_module(f"{pkg}._internal.resources")
    packages = importlib.import_module(f"{pkg}._internal.packages")
    staging = importlib.import_module(f"{pkg}._internal.staging")
    _cuda = importlib.import_module(f"{pkg}.linalg.advanced._cuda")
    keep = []

    def host_alloc(nbytes):
        buf = ctypes.create_string_buffer(max(int(nbytes), 1))
        keep.append(buf)
        return ctypes.addressof(buf)

    class Mem:
        def __init__(self, nbytes, **_):
            self.device_ptr, self.size = host_alloc(nbytes), nbytes

        def free(self):
            pass

    handles = iter(range(0x1000, 1 << 30, 0x10))
    for name in ("matrix_layout_create", "preference_create"):
        mp.setattr(lt, name, lambda *a, **k: next(handles))
    # descriptors are multiples of 2**32: the stubbed untyped setter's status is labs(desc)
    # read as a C int, i.e. 0
    descs = iter(range(1 << 32, 1 << 62, 1 << 32))
    mp.setattr(lt, "matmul_desc_create", lambda *a, **k: next(descs))
    mp.setattr(lt, "create", lambda: 0)  # labs(handle) is the status of the stubbed call: 0
    for name in ("matrix_layout_set_attribute", "matrix_layout_destroy", "matmul_desc_destroy",
                 "preference_destroy", "preference_set_attribute", "matmul_desc_set_attribute"):
        mp.setattr(lt, name, lambda *a, **k: None)
    mp.setattr(lt, "get_version", lambda: 130100)

    def heuristic(*a, **k):
        r = lt.HeuristicResult()
        r.workspaceSize = 1024
        return [r]

    mp.setattr(lt, "algo_get_heuristic", heuristic)
    mp.setattr(_cuda, "_raw_matmul_function", lambda: noop)
    mp.setattr(_cuda, "_raw_desc_set_function", lambda: noop, raising=False)  # older trees
    mp.setattr(_cuda, "_handles", {})
    mp.setattr(_cuda, "allocate", Mem)
    mp.setattr(resources, "allocate", Mem)
    for name, fn in (("set_device", lambda d: None), ("total_memory", lambda d: 1 << 34),
                     ("device_count", lambda: 1), ("is_available", lambda: True),
                     ("require", lambda *a: None), ("synchronize", lambda s: None),
                     ("is_capturing", lambda s: False), ("host_alloc", host_alloc),
                     ("host_free", lambda p: None), ("compute_capability", lambda d=0: (9, 0)),
                     ("pointer_space", lambda p: ("device", 0))):
        mp.setattr(cuda, name, fn, raising=False)
    mp.setattr(staging, "_SHARED", [])
    mp.setattr(packages.ADAPTERS["torch"], "device_type", "cpu")
    mp.setattr(packages.ADAPTERS["torch"], "_keep_stubs", keep, raising=False)


def pose_torch(mp) -> None:
    """torch CPU tensors as CUDA tensors of device 0 on stream 0 (the raw accessor a builtin,
    as cheap as torch's own)."""
    mp.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    mp.setattr(torch.Tensor, "get_device", lambda self: 0)
    mp.setattr(torch._C, "_cuda_getCurrentRawStream", abs, raising=False)
    current = types.SimpleNamespace(cuda_stream=0)  # stream 0 current: no stream switch
    mp.setattr(torch.cuda, "current_stream", lambda device=None: current)


def cases(pkg: str, a, b) -> tuple[dict, list]:
    adv = importlib.import_module(f"{pkg}.linalg.advanced")
    mm = adv.Matmul(a, b)
    mm.plan()
    matmul = adv.matmul
    fns = {"execute": mm.execute, "matmul()": lambda: matmul(a, b),
           "matmul(stream=0)": lambda: matmul(a, b, stream=0)}
    for fn in fns.values():  # the plan cache filled, every lazy import done
        for _ in range(200):
            fn()
    return fns, [mm]


def block(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def interleaved(impls: dict, calls: int, rounds: int) -> dict:
    """Median µs/call per implementation, round-robin with the order rotated each round."""
    names = list(impls)
    spans = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            spans[n].append(block(impls[n], calls))
    return spans


def profile(fn, calls: int, top: int) -> str:
    prof = cProfile.Profile()
    prof.runcall(lambda: [fn() for _ in range(calls)])
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next(i for i, ln in enumerate(lines) if "ncalls" in ln)
    return "\n".join(lines[start - 1:])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="git revision timed alongside as the package cwbefore")
    ap.add_argument("--calls", type=int, default=400, help="calls per timed block")
    ap.add_argument("--rounds", type=int, default=150, help="blocks per implementation")
    ap.add_argument("--profile", action="store_true", help="cProfile each case (working tree)")
    ap.add_argument("--top", type=int, default=18)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    noop = ctypes.CDLL(None)["labs"]  # ignores the extra arguments (caller-cleaned C ABI)
    noop.restype = ctypes.c_int
    pkgs = ["cuweave"]
    if args.before:
        sys.path.insert(0, export_before(args.before))
        pkgs.insert(0, "cwbefore")
    mp = pytest.MonkeyPatch()
    try:
        pose_torch(mp)
        for pkg in pkgs:
            install(mp, pkg, noop)
        a, b = torch.randn(64, 64), torch.randn(64, 64)
        impls, objs = {}, []
        for pkg in pkgs:
            fns, made = cases(pkg, a, b)
            objs += made
            for name, fn in fns.items():
                impls[(name, pkg)] = fn
        impls[("torch.empty_like (reference)", "torch")] = lambda: torch.empty_like(a)
        spans = interleaved(impls, args.calls, args.rounds)
        # short blocks, many rounds: on a shared machine the fastest blocks are the ones
        # nothing preempted; the median of per-round ratios is the drift-free comparison
        print(f"{'case':30s} {'package':9s} {'min µs':>8s} {'p20 µs':>8s} {'vs before':>26s}")
        for (name, pkg), t in spans.items():
            ratio = ""
            if pkg == "cuweave" and (name, "cwbefore") in spans:
                t0 = spans[(name, "cwbefore")]
                rs = [x / y for x, y in zip(t, t0)]
                ratio = (f"min {min(t) / min(t0):.3f}x, "
                         f"median {statistics.median(rs):.3f}x")
            p20 = sorted(t)[len(t) // 5]
            print(f"{name:30s} {pkg:9s} {min(t):8.2f} {p20:8.2f} {ratio:>26s}")
        if args.profile:
            for (name, pkg), fn in impls.items():
                if pkg == "cuweave":
                    print(f"\n---- cProfile: {name} ({args.calls} calls), by own time")
                    print(profile(fn, args.calls, args.top))
        for obj in objs:
            obj.free()
    finally:
        for pkg in pkgs:
            importlib.import_module(f"{pkg}.linalg.advanced._function").plan_cache.clear()
        mp.undo()


if __name__ == "__main__":
    main()
