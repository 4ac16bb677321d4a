"""Every public name of cuweave has a numpydoc docstring that documents its parameters.

Public means: every module under ``src/cuweave`` whose dotted path has no part starting with
``_`` (found on disk, so new engines are covered the day they land), each name of its
``__all__`` (else the classes and functions it defines), and for a class its public methods,
properties, class and static methods (inherited ones too, when a cuweave class defines them).
A function or method documents each of its parameters (``*args`` as ``*args``) in a numpydoc
``Parameters`` (or ``Other Parameters``) section; a class documents its constructor's
parameters in its own docstring or its ``__init__``'s (``Attributes`` counts, as for
dataclass fields). Enum members, constants and parameters whose name starts with ``_`` are
exempt.

``KNOWN_GAPS`` lists the gaps not closed yet (empty: every public name is documented); an
entry that is no longer a gap fails ``test_known_gaps_are_still_gaps`` so that it is deleted.
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _docs_conf():
    """docs/conf.py, whose ``public_modules`` says which modules are public (for the site too);
    loading it imports nothing and writes nothing (the pages are made when Sphinx starts)."""
    spec = importlib.util.spec_from_file_location("_cuweave_docs_conf", ROOT / "docs" / "conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


public_modules = _docs_conf().public_modules

# Public names whose docstring is not complete yet: none. A new gap is listed here only while
# its docstring is being written, as "<where it is defined>" or "<where>: <parameters left
# out>"; the test below fails on an entry that is complete (delete it then).
KNOWN_GAPS: set = set()

# Packages a public module may need that an install without every extra lacks.
_OPTIONAL = ("torch", "numba", "numba_cuda", "cupy", "mpi4py", "jax", "cuda", "nvmath")


def _sections(doc: str) -> dict[str, list[str]]:
    """numpydoc sections of a cleaned docstring: title -> its lines."""
    lines, out, current = doc.splitlines(), {}, None
    for i, line in enumerate(lines):
        underline = i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip())
        if underline and line.strip() and not line[0].isspace():
            current = line.strip()
            out[current] = []
        elif current is not None and not re.fullmatch(r"-{3,}", line.strip()):
            out[current].append(line)
    return out


def documented_parameters(doc: str, titles=("Parameters", "Other Parameters")) -> set[str]:
    """Names listed in the given sections (``a, b : int`` lists two; ``*args`` is ``args``)."""
    names = set()
    sections = _sections(doc)
    for title in titles:
        for line in sections.get(title, ()):
            if line and not line[0].isspace():
                for name in line.split(" :")[0].split(","):
                    names.add(name.strip().lstrip("*"))
    return names


def _parameters(fn, skip_first: bool) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins and some numba objects have no signature
        return []
    if skip_first and params:
        params = params[1:]
    return [p.name for p in params if not p.name.startswith("_")]


def _ours(obj) -> bool:
    return (getattr(obj, "__module__", None) or "").startswith("cuweave")


class _Audit:
    def __init__(self):
        self.gaps: list[str] = []

    def callable(self, label, fn, skip_first, doc=None, titles=("Parameters",
                                                                 "Other Parameters")):
        doc = inspect.getdoc(fn) if doc is None else doc
        if not doc:
            self.gaps.append(label)
            return
        have = documented_parameters(doc, titles)
        lacking = [p for p in _parameters(fn, skip_first) if p not in have]
        if lacking:
            self.gaps.append(f"{label}: {', '.join(lacking)}")

    def cls(self, obj):
        label = f"{obj.__module__}.{obj.__qualname__}"
        if not obj.__doc__ or not inspect.getdoc(obj):
            self.gaps.append(label)
            return
        if issubclass(obj, enum.Enum):  # members carry the library's values, no parameters
            return
        init_owner = next((c for c in obj.__mro__ if "__init__" in c.__dict__), object)
        if _ours(init_owner):
            doc = inspect.getdoc(obj) + "\n" + (inspect.getdoc(obj.__init__) or "")
            self.callable(label, obj.__init__, True, doc,
                          ("Parameters", "Other Parameters", "Attributes"))
        for name in dir(obj):
            if name.startswith("_"):
                continue
            owner = next((c for c in obj.__mro__ if name in c.__dict__), None)
            if owner is None or not _ours(owner):
                continue
            raw = owner.__dict__[name]
            where = f"{owner.__module__}.{owner.__qualname__}.{name}"
            if isinstance(raw, property):
                if not raw.__doc__:
                    self.gaps.append(where)
            elif isinstance(raw, classmethod | staticmethod):
                self.callable(where, raw.__func__, isinstance(raw, classmethod))
            elif inspect.isfunction(raw):
                self.callable(where, raw, True)

    def module(self, module):
        if not (module.__doc__ or "").strip():
            self.gaps.append(module.__name__)
        names = getattr(module, "__all__", None)
        if names is None:
            names = [n for n, v in vars(module).items() if not n.startswith("_")
                     and getattr(v, "__module__", None) == module.__name__
                     and (inspect.isclass(v) or inspect.isfunction(v))]
        for name in names:
            obj = getattr(module, name)
            if inspect.ismodule(obj) or not _ours(obj):
                continue
            if inspect.isclass(obj):
                self.cls(obj)
            elif inspect.isfunction(obj):
                self.callable(f"{obj.__module__}.{obj.__qualname__}", obj, False)


def _import(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as e:  # an optional package of an extra that is not installed
        missing = (getattr(e, "name", None) or "").split(".")[0]
        if missing in _OPTIONAL:
            pytest.skip(f"{name} needs {missing}, not installed here")
        raise


def test_public_modules_are_found():
    names = public_modules()
    assert {"cuweave", "cuweave.fft", "cuweave.linalg.advanced", "cuweave.memory",
            "cuweave.device", "cuweave.torch", "cuweave.distributed"} <= set(names)
    assert not any(part.startswith("_") for n in names for part in n.split(".")[1:])


@pytest.mark.parametrize("name", public_modules())
def test_public_names_have_numpydoc_docstrings(name):
    audit = _Audit()
    audit.module(_import(name))
    new = sorted(set(audit.gaps) - KNOWN_GAPS)
    assert not new, ("public names without a numpydoc docstring, or with parameters their "
                     "docstring does not list:\n  " + "\n  ".join(new))


def test_known_gaps_are_still_gaps():
    audit = _Audit()
    for name in public_modules():
        try:
            audit.module(importlib.import_module(name))
        except ImportError:
            pytest.skip(f"{name} cannot be imported here: the list cannot be checked whole")
    stale = sorted(KNOWN_GAPS - set(audit.gaps))
    assert not stale, ("documented now (or renamed): delete these from KNOWN_GAPS in "
                       "tests/test_docstrings.py:\n  " + "\n  ".join(stale))


def test_the_checker_sees_a_missing_parameter():
    def documented(a, b, *args, **kwargs):
        """Do something.

        Parameters
        ----------
        a, b : int
            Two numbers.
        *args
            More.
        """

    audit = _Audit()
    audit.callable("f", documented, False)
    assert audit.gaps == ["f: kwargs"]
    audit = _Audit()
    audit.callable("g", lambda x: x, False)
    assert audit.gaps == ["g"]
