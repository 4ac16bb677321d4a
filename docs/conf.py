"""Sphinx configuration of cuweave's documentation site.

The API pages are generated when the build starts (``_generated/``, not committed): one page per
public module, found on disk the way ``tests/test_docstrings.py`` finds them (every module whose
dotted path has no part starting with ``_``), so a new engine is documented the day it lands.
The benchmark page shows every plot in ``benchmarks/results`` beside its table.

Build: ``scripts/build-docs.sh`` (warnings, broken references included, are errors).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT / "src"))

project = "cuweave"
author = "cuweave developers"
copyright = "cuweave developers"  # noqa: A001 - Sphinx's name

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
suppress_warnings = ["myst.header"]  # README/DESIGN start their levels where they like

autodoc_default_options: dict = {}
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types
# optional packages a public module imports are mocked when missing, so the site builds from
# the core install plus the docs extra
autodoc_mock_imports = [m for m in ("torch", "cupy", "mpi4py", "jax", "numba", "numba_cuda")
                        if __import__("importlib.util").util.find_spec(m) is None]
numpydoc_show_class_members = False
numpydoc_validation_checks: set = set()
numpydoc_xref_param_type = False

html_theme = "alabaster"
html_title = "cuweave"
html_static_path: list = []

# references to other projects' objects are not checked (no network at build time)
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|torch|cupy|cp|scipy|numba|jax|mpi4py|cuda|ctypes|nvmath)(\..*)?"),
    (r"py:.*", r"(int|float|str|bool|dict|list|tuple|None|object|callable|Exception)"),
    (r"py:.*", r"(ValueError|TypeError|RuntimeError|ImportError|IndexError|KeyError)"),
    (r"py:.*", r"(NotImplemented|Ellipsis|type|enum\..*|typing\..*|collections\..*)"),
]
# Broken references in docstrings of code another helper is redesigning now (the matmul and
# FFT engines, cuweave._internal). The lead clears this list after merging that work.
nitpick_ignore = [
    ("py:class", "LTOIR"),  # cuweave.fft.compile_prolog
    ("py:class", "cuweave._internal.lifecycle.StatefulObject"),  # linalg.advanced.matmul
    # new engines merged from main (cuweave.tensor, the device solvers): their helpers fix
    # these, and the lead deletes the entries
    ("py:mod", "_cpu"),  # tensor.contraction
    ("py:mod", "_run"),  # tensor.contraction
    ("py:func", "_layout.operand_view"),  # tensor.contraction.Problem
    ("py:meth", "release_operands"),  # tensor.BinaryContraction.reset_operands
]


def public_modules() -> list[str]:
    """Dotted names of cuweave's public modules, found on disk (nothing is imported): every
    module whose dotted path has no part starting with ``_``. tests/test_docstrings.py checks
    the docstrings of the same modules (it imports this function)."""
    names = []
    src = ROOT / "src"
    for path in sorted((src / "cuweave").rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if "__pycache__" in parts or any(p.startswith("_") for p in parts[1:]):
            continue
        names.append(".".join(parts))
    return names


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _exports(name: str) -> list[tuple[str, object]]:
    """``(name, object)`` of what module ``name`` makes public (its ``__all__``)."""
    import importlib
    import inspect

    try:
        module = importlib.import_module(name)
    except ImportError:  # an optional package missing: autodoc documents what it can
        return []
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and getattr(v, "__module__", None) == name
                 and (inspect.isclass(v) or inspect.isfunction(v))]
    out = []
    for n in names:
        obj = getattr(module, n, None)
        if obj is not None and not inspect.ismodule(obj):
            out.append((n, obj))
    return out


HOME: dict[int, str] = {}  # id(object) -> the full name it is documented under


def _inherited_option(cls) -> str:
    """``:inherited-members:`` for a class whose public methods come from cuweave bases (a
    private ``_Contraction``, say), stopping at the first base from elsewhere (``object``,
    ``int``, ``Exception``, ...), whose members are not cuweave's to document."""
    ours = [c for c in cls.__mro__[1:] if (c.__module__ or "").startswith("cuweave")]
    if not ours:
        return ""
    others = sorted({c.__name__ for c in cls.__mro__ if not (c.__module__ or "")
                     .startswith("cuweave")})
    return f"   :inherited-members: {', '.join(others)}\n"


def _api_pages() -> None:
    """One page per public module. An object that several modules export is documented once,
    on the page of the shortest module path exporting it; the others link to it."""
    import inspect

    out = DOCS / "_generated" / "api"
    names = public_modules()
    exports = {n: _exports(n) for n in names}
    home: dict[int, str] = {}
    for n in sorted(names, key=lambda m: (m.count("."), names.index(m))):
        for attr, obj in exports[n]:
            home.setdefault(id(obj), f"{n}.{attr}")
    HOME.clear()
    HOME.update(home)
    for old in out.glob("*.rst"):
        if old.stem not in names and old.stem != "index":
            old.unlink()
    toc = "\n".join(f"   {n}" for n in names)
    _write(out / "index.rst", "API reference\n=============\n\nEvery public module of "
           "cuweave, from its docstrings.\n\n.. toctree::\n   :maxdepth: 1\n\n" + toc + "\n")
    for n in names:
        title = f"``{n}``"
        parent, _, leaf = n.rpartition(".")
        # a module named like a function of its package (cuweave.fft.fft): the function keeps
        # the name as a reference target
        shadowed = any(a == leaf for a, _ in exports.get(parent, ()))
        body = [f"{title}\n{'=' * len(title)}\n", f".. automodule:: {n}\n   :no-members:\n"
                + ("   :no-index:\n" if shadowed else "")]
        elsewhere = []
        for attr, obj in exports[n]:
            target = home[id(obj)]
            if target != f"{n}.{attr}":
                elsewhere.append(f"- ``{attr}``: :py:obj:`{target}`")
                continue
            if inspect.isclass(obj):
                kind = "exception" if issubclass(obj, BaseException) else "class"
                body.append(f".. auto{kind}:: {n}.{attr}\n   :members:\n   :undoc-members:\n"
                            + _inherited_option(obj))
            elif callable(obj):
                body.append(f".. autofunction:: {n}.{attr}\n")
            elif (getattr(type(obj), "__module__", "") or "").startswith("cuweave"):
                body.append(f".. autodata:: {n}.{attr}\n   :no-value:\n")
            else:  # an instance of another package's type (a NumPy dtype, say): its class's
                # docstring is not this object's
                body.append(f".. py:data:: {attr}\n   :module: {n}\n\n   A ``"
                            f"{type(obj).__module__}.{type(obj).__qualname__}``: ``{obj!r}``.\n")
        if elsewhere:
            body.append("Also exported here (documented once, where linked):\n\n"
                        + "\n".join(elsewhere) + "\n")
        if len(body) == 2 and not exports[n]:
            body[1] = f".. automodule:: {n}\n   :members:\n"
        _write(out / f"{n}.rst", "\n".join(body))


def _benchmark_page() -> None:
    results = ROOT / "benchmarks" / "results"
    lines = ["# Benchmarks", "",
             "Plots and tables from `benchmarks/results` (rerun them with "
             "`python -m cuweave bench`). Each run compares cuweave side by side with torch, "
             "CuPy and nvmath-python on one machine; the tables say which.", ""]
    for png in sorted(results.glob("*.png")):
        table = png.with_suffix(".md")
        lines += [f"## {png.stem}", "", f"![{png.stem}](../../benchmarks/results/{png.name})", ""]
        if table.exists():
            lines += ["```{include} ../../benchmarks/results/" + table.name,
                      ":heading-offset: 2", "```", ""]
    _write(DOCS / "_generated" / "benchmarks.md", "\n".join(lines))


def _lookup(dotted: str):
    """``(object, attributes after it)`` for a dotted name: the longest importable module
    prefix, then attributes, stopping at the first object documented somewhere (HOME)."""
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        rest = parts[i:]
        for j, attr in enumerate(rest):
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
            if id(obj) in HOME:
                return obj, rest[j + 1:]
        return None
    return None


def _resolve_alias(app, env, node, contnode):
    """A reference to a name under another module that exports the same object (the package
    re-exporting a private module's class, an alias) resolves to where it is documented."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    mod, cls = node.get("py:module"), node.get("py:class")
    candidates = [target]
    if mod:
        candidates += [f"{mod}.{target}"] + ([f"{mod}.{cls}.{target}"] if cls else [])
    for full in candidates:
        if not full.startswith("cuweave"):
            continue
        found = _lookup(full)
        if found is None:
            continue
        obj, rest = found
        new = ".".join([HOME[id(obj)], *rest])
        if new == full:
            continue
        domain = env.get_domain("py")
        return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], new,
                                   node, contnode) or domain.resolve_any_xref(
            env, node["refdoc"], app.builder, new, node, contnode) and None
    return None


def _generate(app) -> None:
    _api_pages()
    _benchmark_page()


def setup(app):
    app.connect("builder-inited", _generate)  # before Sphinx looks for the pages
    app.connect("missing-reference", _resolve_alias)
