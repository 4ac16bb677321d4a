"""The distributed checks, run under ``mpiexec -n 4`` (skipped without mpi4py or mpiexec).

Each group of ``mpi_worker.py`` runs in one ``mpiexec`` subprocess; 4 processes on a 2-core
machine work with MPICH's Hydra launcher as is (no oversubscription flag is needed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def mpiexec() -> str:
    pytest.importorskip("mpi4py")
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = local if os.path.exists(local) else shutil.which("mpiexec")
    if not found:
        pytest.skip("mpiexec not found (pip install 'cuweave[distributed]')")
    return found


def run_mpi(nprocs: int, *args: str, timeout: int = 150) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               CUWEAVE_TEST_NPROCS=str(nprocs),
               PYTHONPATH=os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([mpiexec(), "-n", str(nprocs), sys.executable, *args],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    assert res.returncode == 0, res.stdout[-20000:] + res.stderr[-5000:]
    return res.stdout


@pytest.mark.parametrize("group", ["fft_c2c", "fft_r2c", "fft_boxes", "fft_stateful",
                                   "redistribute", "matmul", "errors"])
def test_four_processes(group):
    out = run_mpi(4, os.path.join(HERE, "mpi_worker.py"), group)
    last = out.strip().splitlines()[-1]
    assert last.endswith(" 0 failed") and not last.startswith("0 passed"), out


def test_three_processes_uneven_splits():
    out = run_mpi(3, os.path.join(HERE, "mpi_worker.py"), "fft_r2c", "fft_boxes", "redistribute",
                  "errors")
    assert out.strip().splitlines()[-1].endswith(" 0 failed"), out


@pytest.mark.parametrize("example, nprocs", [("fft_slab.py", 4), ("redistribute_boxes.py", 2),
                                             ("matmul_block_cyclic.py", 4)])
def test_examples(example, nprocs):
    out = run_mpi(nprocs, os.path.join(ROOT, "examples", "distributed", example))
    assert out.rstrip().endswith("OK"), out
