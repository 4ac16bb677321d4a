"""Run cuweave's benchmarks side by side with torch, CuPy and nvmath-python.

    python benchmarks/run.py --engines matmul,fft,fft_scipy,device_fft,device_random,\
        linalg,linalg_cpu,matmul_cpu,torch,llm,tensor,tensor_cpu,sparse,sparse_cpu \
        [--quick] --out DIR

Each engine lives in ``benchmarks/cases_<engine>.py`` with ``run(results, quick)``. Results go
to ``DIR/<engine>.json|md|png``. Engines whose hardware is missing are skipped with a note.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from harness import Results  # noqa: E402

GPU_ENGINES = ("matmul", "fft", "fft_scipy", "device_fft", "device_random", "device_matmul",
               "device_solver", "torch", "llm", "graph", "tensor", "linalg",
               "sparse")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engines", default="matmul,fft,fft_scipy,device_fft,matmul_cpu")
    p.add_argument("--quick", action="store_true", help="the quick set (CI-sized)")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    args = p.parse_args(argv)
    from cuweave._internal import cuda

    status = 0
    for engine in [e.strip() for e in args.engines.split(",") if e.strip()]:
        if engine in GPU_ENGINES and not cuda.is_available() and engine != "fft":
            print(f"== {engine}: skipped (no usable GPU: {cuda.unavailable_reason()})")
            continue
        print(f"== {engine}", flush=True)
        try:
            mod = importlib.import_module(f"cases_{engine}")
        except ImportError as e:
            print(f"   no benchmark module for {engine}: {e}")
            status = 1
            continue
        res = Results()
        try:
            mod.run(res, quick=args.quick)
        except Exception:
            traceback.print_exc()
            status = 1
        for path in res.write(args.out, engine):
            print(f"   wrote {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
