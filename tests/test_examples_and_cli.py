"""The examples that run without a GPU, and the CLI's demo, run green (as subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src") + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


@pytest.mark.parametrize("example", ["examples/linalg/numpy_epilogs.py",
                                     "examples/linalg/mlp_training_step.py"])
def test_cpu_capable_examples(example):
    if "mlp" in example:
        pytest.importorskip("torch")
    assert _run(example).rstrip().endswith("OK")


def test_demo_runs_every_step():
    out = _run("-m", "cuweave", "demo", "--size", "256")
    steps = [line for line in out.splitlines() if line.startswith("[")]
    assert [s.split("]")[0] for s in steps] == [f"[{i}/8" for i in range(1, 9)]
    assert "relative error" in out and "fft round trip" in out
    # the library that ran is named, and the FFT is timed against what a user would call
    assert "NumPy's BLAS (" in out or "cuBLASLt" in out
    assert "vs scipy.fft (pocketfft, workers=" in out or "cuFFT" in out
    assert out.rstrip().endswith("demo OK")


def test_demo_bad_option_is_a_usage_error():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    res = subprocess.run([sys.executable, "-m", "cuweave", "demo", "--size", "x"],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.returncode == 2 and "--size" in res.stderr


def _run_raw(*args: str, **env_changes: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src") + os.pathsep
               + os.environ.get("PYTHONPATH", ""), **env_changes)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)


def test_demo_on_cuda_without_a_gpu_says_why_in_one_line():
    # CUDA_VISIBLE_DEVICES="" hides every GPU, so this runs the same on the GPU machine
    res = _run_raw("-m", "cuweave", "demo", "--execution", "cuda", CUDA_VISIBLE_DEVICES="")
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "--execution cuda needs a usable CUDA GPU" in lines[0] and "--execution cpu" in lines[0]


@pytest.mark.parametrize("command", [[], ["demo"], ["info"]])
def test_help_is_plain_text(command):
    res = _run_raw("-m", "cuweave", *command, "--help")
    assert res.returncode == 0 and "usage: python -m cuweave" in res.stdout
    assert "``" not in res.stdout and ":class:" not in res.stdout and ":func:" not in res.stdout


def test_info_tells_the_cpu_libraries_and_threads():
    import json

    from cuweave.fft import _cpu_backends

    res = _run_raw("-m", "cuweave", "info", "--json")
    assert res.returncode == 0, res.stderr
    cpu = json.loads(res.stdout)["cpu"]
    assert cpu["cores"] == os.cpu_count()
    # the BLAS libraries a fresh process has after importing NumPy (this one may have more:
    # MKL through torch or the FFT tests)
    fresh = _run_raw("-c", "import json, numpy, threadpoolctl; print(json.dumps(["
                     "[i['internal_api'], i['num_threads']] for i in "
                     "threadpoolctl.threadpool_info() if i['user_api'] == 'blas']))")
    blas = {tuple(b) for b in json.loads(fresh.stdout)}
    assert blas and {(b["library"], b["threads"]) for b in cpu["blas"]} == blas
    assert cpu["fft"]["library"] == _cpu_backends.backend_name()
    assert cpu["fft"]["threads"] == os.cpu_count()
    text = _run_raw("-m", "cuweave", "info", CUDA_VISIBLE_DEVICES="").stdout
    assert "BLAS (matmul)" in text and "FFT " in text
    assert "scipy.fft backend  not served (no usable GPU)" in text
