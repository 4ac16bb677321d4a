"""The generic linalg examples run green on the CPU (as subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


@pytest.mark.parametrize("example", ["examples/linalg/qualified_matmul.py",
                                     "examples/linalg/direct_solver.py"])
def test_example_runs(example):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src") + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, example], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.rstrip().endswith("OK")
