"""The distributed checks, run under ``mpiexec -n 4`` (skipped without mpi4py or mpiexec).

Each group of ``mpi_worker.py`` runs in one ``mpiexec`` subprocess; 4 processes on a 2-core
machine work with MPICH's Hydra launcher as is (no oversubscription flag is needed). Open MPI's
``mpiexec`` (the GPU machine's, run as root) needs ``--allow-run-as-root --oversubscribe``,
added when ``mpiexec --version`` names Open MPI. The GPU groups run with one process (``gpu``)
and with two, one GPU each (``multi_gpu``); tests/conftest.py decides their skips.
"""

from __future__ import annotations

import functools
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


def launcher_flags(version_text: str) -> list[str]:
    """Flags Open MPI's mpiexec needs here (root, more processes than cores); none for MPICH."""
    text = version_text.lower()
    if "open mpi" in text or "openrte" in text or "open-mpi" in text:
        return ["--allow-run-as-root", "--oversubscribe"]
    return []


@functools.cache
def _flags_of(launcher: str) -> tuple[str, ...]:
    try:
        res = subprocess.run([launcher, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(launcher_flags(res.stdout + res.stderr))


def run_mpi(nprocs: int, *args: str, timeout: int = 150, env_extra=None) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               CUWEAVE_TEST_NPROCS=str(nprocs),
               PYTHONPATH=os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(env_extra or {})
    launcher = mpiexec()
    res = subprocess.run([launcher, *_flags_of(launcher), "-n", str(nprocs), sys.executable,
                          *args], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=timeout)
    assert res.returncode == 0, res.stdout[-20000:] + res.stderr[-5000:]
    return res.stdout


@pytest.mark.parametrize("group", ["fft_c2c", "fft_r2c", "fft_boxes", "fft_stateful",
                                   "redistribute", "matmul", "matmul_bgrad", "errors",
                                   "planner"])
def test_four_processes(group):
    out = run_mpi(4, os.path.join(HERE, "mpi_worker.py"), group)
    last = out.strip().splitlines()[-1]
    assert last.endswith(" 0 failed") and not last.startswith("0 passed"), out


def test_three_processes_uneven_splits():
    out = run_mpi(3, os.path.join(HERE, "mpi_worker.py"), "fft_r2c", "fft_boxes", "redistribute",
                  "matmul_bgrad", "errors", "planner")
    assert out.strip().splitlines()[-1].endswith(" 0 failed"), out


@pytest.mark.parametrize("example, nprocs", [("fft_slab.py", 4), ("redistribute_boxes.py", 2),
                                             ("matmul_block_cyclic.py", 4),
                                             ("matmul_bias_gradients.py", 3)])
def test_examples(example, nprocs):
    out = run_mpi(nprocs, os.path.join(ROOT, "examples", "distributed", example))
    assert out.rstrip().endswith("OK"), out


@pytest.mark.parametrize("text, flags", [
    ("mpiexec (OpenRTE) 4.1.6\n\nReport bugs to http://www.open-mpi.org/community/help/",
     ["--allow-run-as-root", "--oversubscribe"]),
    ("HYDRA build details:\n    Version:                                 5.0.2", []),
])
def test_launcher_flags_follow_the_mpi(text, flags):
    assert launcher_flags(text) == flags


GPU_GROUPS = ("gpu_fft", "gpu_redistribute", "gpu_matmul", "gpu_errors")


def _last_line_ok(out: str) -> None:
    last = out.strip().splitlines()[-1]
    assert last.endswith(" 0 failed") and not last.startswith("0 passed"), out


@pytest.mark.gpu
def test_gpu_groups_one_process():
    _last_line_ok(run_mpi(1, os.path.join(HERE, "mpi_worker.py"), *GPU_GROUPS, timeout=600))


@pytest.mark.multi_gpu
@pytest.mark.parametrize("backends", ["", "nccl"])
def test_gpu_groups_two_processes_one_gpu_each(backends):
    # backends="nccl": the communicator is made at initialize; "": at the first exchange
    out = run_mpi(2, os.path.join(HERE, "mpi_worker.py"), *GPU_GROUPS, timeout=600,
                  env_extra={"CUWEAVE_TEST_BACKENDS": backends})
    _last_line_ok(out)


@pytest.mark.multi_gpu
def test_gpu_example_two_processes():
    out = run_mpi(2, os.path.join(ROOT, "examples", "distributed", "fft_gpu.py"), timeout=300)
    assert out.rstrip().endswith("OK"), out
