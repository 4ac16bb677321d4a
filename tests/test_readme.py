"""Every Python code block in README.md runs, as written, in a fresh interpreter.

A block that uses a GPU package or a CUDA device is a ``gpu`` test (run on the GPU machine);
the others run everywhere. A block needing a package that is not installed (an optional extra,
torch) is skipped with the package's name. The two set-up commands (bash) are run by CI itself.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_GPU_MARKS = ("import cupy", "from numba import cuda", 'device="cuda"', ".cuda()",
              "import cuweave.device")
_IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", re.M)


def _blocks() -> list:
    params = []
    for i, m in enumerate(_BLOCK.finditer(README.read_text(encoding="utf-8"))):
        code = m.group(1)
        line = README.read_text(encoding="utf-8")[:m.start()].count("\n") + 2
        marks = [pytest.mark.gpu] if any(g in code for g in _GPU_MARKS) else []
        params.append(pytest.param(code, id=f"block{i}-line{line}", marks=marks))
    return params


def test_readme_has_python_blocks():
    assert len(_blocks()) >= 4


@pytest.mark.parametrize("code", _blocks())
def test_readme_block_runs(code, tmp_path):
    for module in sorted(set(_IMPORT.findall(code))):
        if module != "cuweave" and importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module}")
    if "cuweave.tensor" in code and any(g in code for g in _GPU_MARKS):
        from cuweave._bindings import cutensor

        if not cutensor.is_loadable():  # the GPU image has no cuTENSOR unless it is carried
            pytest.skip("needs libcutensor.so.2 (pip install 'cuweave[tensor]')")
    script = tmp_path / "block.py"
    script.write_text(code, encoding="utf-8")
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert res.returncode == 0, f"stdout:\n{res.stdout[-2000:]}\nstderr:\n{res.stderr[-4000:]}"
