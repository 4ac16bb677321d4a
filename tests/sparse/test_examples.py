"""The sparse examples run green on the CPU (small sizes, as subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("example, args", [("poisson_2d.py", ["64"]),
                                           ("circuit_unsymmetric.py", ["2000"]),
                                           ("batched_small.py", []),
                                           ("newton_loop.py", ["48"])])
def test_example_runs(example, args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "src"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "sparse", example),
                          *args], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip()
