"""Module loggers: always ``cuweave.<module>``, never the root logger."""

from __future__ import annotations

import logging

_ROOT = logging.getLogger("cuweave")
_ROOT.addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """Return the logger ``cuweave.<name>`` (``name`` may already start with ``cuweave.``)."""
    if not name.startswith("cuweave"):
        name = f"cuweave.{name}"
    return logging.getLogger(name)
