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
    assert out.rstrip().endswith("demo OK")


def test_demo_bad_option_is_a_usage_error():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    res = subprocess.run([sys.executable, "-m", "cuweave", "demo", "--size", "x"],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.returncode == 2 and "--size" in res.stderr
