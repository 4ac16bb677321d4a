#!/usr/bin/env bash
# Build the documentation site into docs/_build/html from the docstrings and docs/.
# Warnings are errors: a broken cross-reference, a malformed docstring or a missing page fails
# the build. Installs the `docs` extra (Sphinx, numpydoc, MyST) first unless --no-install is
# given. The API pages are generated from the public modules found on disk (docs/conf.py).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" != "--no-install" ]]; then
    python -m pip install --quiet -e ".[docs]"
fi
python -m sphinx -E -b html -n -W --keep-going -q docs docs/_build/html
echo "docs built: docs/_build/html/index.html"
