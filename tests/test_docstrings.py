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

``KNOWN_GAPS`` lists the gaps not closed yet (in engines other helpers are adding: the device
solvers); they are cleared there, and the list with them: an entry that is no longer a gap
fails ``test_known_gaps_are_still_gaps`` so that it is deleted.
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

# Gaps not closed yet (the device solvers, whose helper documents them). Delete an entry
# once its docstring is complete. Each entry is "<where it is defined>" or
# "<where>: <parameters left out>".
KNOWN_GAPS = {
    # New engines merged from main while this list was made: cuweave.device's solvers
    # (cuSOLVERDx) and cuTENSOR's bindings. The helpers adding them document them; the lead
    # deletes these entries as they are.
    "cuweave.device._solver_core.Solver.a_arrangement",
    "cuweave.device._solver_core.Solver.b_arrangement",
    "cuweave.device._solver_core.Solver.block_size",
    "cuweave.device._solver_core.Solver.data_type",
    "cuweave.device._solver_core.Solver.diag",
    "cuweave.device._solver_core.Solver.execute: args",
    "cuweave.device._solver_core.Solver.execution",
    "cuweave.device._solver_core.Solver.fill_mode",
    "cuweave.device._solver_core.Solver.function",
    "cuweave.device._solver_core.Solver.job",
    "cuweave.device._solver_core.Solver.k",
    "cuweave.device._solver_core.Solver.lda",
    "cuweave.device._solver_core.Solver.ldb",
    "cuweave.device._solver_core.Solver.m",
    "cuweave.device._solver_core.Solver.n",
    "cuweave.device._solver_core.Solver.precision",
    "cuweave.device._solver_core.Solver.side",
    "cuweave.device._solver_core.Solver.sm",
    "cuweave.device._solver_core.Solver.transpose_mode",
    "cuweave.device._solver_core.Solver.value_type",
    "cuweave.device._solver_core.compile_solver_execute: solver, code_type, execution_api",
    "cuweave.device.cusolverdx.CholeskySolver.a_size: kw",
    "cuweave.device.cusolverdx.CholeskySolver.a_strides: kw",
    "cuweave.device.cusolverdx.CholeskySolver.b_size: kw",
    "cuweave.device.cusolverdx.CholeskySolver.b_strides: kw",
    "cuweave.device.cusolverdx.CholeskySolver.factorize",
    "cuweave.device.cusolverdx.CholeskySolver.fill_mode",
    "cuweave.device.cusolverdx.CholeskySolver.solve",
    "cuweave.device.cusolverdx.CholeskySolver: size, precision, execution, fill_mode, sm, "
    "arrangement, batches_per_block, data_type, leading_dimensions, block_dim",
    "cuweave.device.cusolverdx.LQFactorize.a_size: kw",
    "cuweave.device.cusolverdx.LQFactorize.a_strides: kw",
    "cuweave.device.cusolverdx.LQFactorize: size, precision, execution, sm, arrangement, "
    "batches_per_block, data_type, leading_dimension, block_dim",
    "cuweave.device.cusolverdx.LQMultiply.a_shape",
    "cuweave.device.cusolverdx.LQMultiply.a_size: kw",
    "cuweave.device.cusolverdx.LQMultiply.a_strides: kw",
    "cuweave.device.cusolverdx.LQMultiply.c_size: kw",
    "cuweave.device.cusolverdx.LQMultiply.c_strides: kw",
    "cuweave.device.cusolverdx.LQMultiply: size, precision, execution, side, sm, transpose_mode, "
    "arrangement, batches_per_block, data_type, leading_dimensions, block_dim",
    "cuweave.device.cusolverdx.LUPivotSolver.a_size: kw",
    "cuweave.device.cusolverdx.LUPivotSolver.a_strides: kw",
    "cuweave.device.cusolverdx.LUPivotSolver.b_size: kw",
    "cuweave.device.cusolverdx.LUPivotSolver.b_strides: kw",
    "cuweave.device.cusolverdx.LUPivotSolver.ipiv_shape",
    "cuweave.device.cusolverdx.LUPivotSolver.ipiv_size",
    "cuweave.device.cusolverdx.LUPivotSolver.ipiv_strides",
    "cuweave.device.cusolverdx.LUPivotSolver: size, precision, execution, sm, transpose_mode, "
    "arrangement, batches_per_block, data_type, leading_dimensions, block_dim",
    "cuweave.device.cusolverdx.LUSolver.a_size: kw",
    "cuweave.device.cusolverdx.LUSolver.a_strides: kw",
    "cuweave.device.cusolverdx.LUSolver.b_size: kw",
    "cuweave.device.cusolverdx.LUSolver.b_strides: kw",
    "cuweave.device.cusolverdx.LUSolver: size, precision, execution, sm, transpose_mode, "
    "arrangement, batches_per_block, data_type, leading_dimensions, block_dim",
    "cuweave.device.cusolverdx.LeastSquaresSolver.a_shape",
    "cuweave.device.cusolverdx.LeastSquaresSolver.a_size: kw",
    "cuweave.device.cusolverdx.LeastSquaresSolver.a_strides: kw",
    "cuweave.device.cusolverdx.LeastSquaresSolver.b_shape",
    "cuweave.device.cusolverdx.LeastSquaresSolver.bx_size: kw",
    "cuweave.device.cusolverdx.LeastSquaresSolver.bx_strides: kw",
    "cuweave.device.cusolverdx.LeastSquaresSolver.solve",
    "cuweave.device.cusolverdx.LeastSquaresSolver.tau_shape",
    "cuweave.device.cusolverdx.LeastSquaresSolver.tau_size",
    "cuweave.device.cusolverdx.LeastSquaresSolver.tau_strides",
    "cuweave.device.cusolverdx.LeastSquaresSolver.tau_type",
    "cuweave.device.cusolverdx.LeastSquaresSolver.transpose_mode",
    "cuweave.device.cusolverdx.LeastSquaresSolver.x_shape",
    "cuweave.device.cusolverdx.LeastSquaresSolver: size, precision, execution, sm, "
    "transpose_mode, arrangement, batches_per_block, data_type, leading_dimensions, block_dim",
    "cuweave.device.cusolverdx.QRFactorize.a_size: kw",
    "cuweave.device.cusolverdx.QRFactorize.a_strides: kw",
    "cuweave.device.cusolverdx.QRFactorize: size, precision, execution, sm, arrangement, "
    "batches_per_block, data_type, leading_dimension, block_dim",
    "cuweave.device.cusolverdx.QRMultiply.a_shape",
    "cuweave.device.cusolverdx.QRMultiply.a_size: kw",
    "cuweave.device.cusolverdx.QRMultiply.a_strides: kw",
    "cuweave.device.cusolverdx.QRMultiply.c_size: kw",
    "cuweave.device.cusolverdx.QRMultiply.c_strides: kw",
    "cuweave.device.cusolverdx.QRMultiply: size, precision, execution, side, sm, transpose_mode, "
    "arrangement, batches_per_block, data_type, leading_dimensions, block_dim",
    "cuweave.device.cusolverdx.TriangularSolver.a_shape",
    "cuweave.device.cusolverdx.TriangularSolver.a_size: kw",
    "cuweave.device.cusolverdx.TriangularSolver.a_strides: kw",
    "cuweave.device.cusolverdx.TriangularSolver.b_shape",
    "cuweave.device.cusolverdx.TriangularSolver.b_size: kw",
    "cuweave.device.cusolverdx.TriangularSolver.b_strides: kw",
    "cuweave.device.cusolverdx.TriangularSolver.diag",
    "cuweave.device.cusolverdx.TriangularSolver.fill_mode",
    "cuweave.device.cusolverdx.TriangularSolver.side",
    "cuweave.device.cusolverdx.TriangularSolver.solve",
    "cuweave.device.cusolverdx.TriangularSolver.transpose_mode",
    "cuweave.device.cusolverdx.TriangularSolver: size, precision, execution, side, fill_mode, "
    "diag, transpose_mode, sm, arrangement, batches_per_block, data_type, leading_dimensions, "
    "block_dim",
    "cuweave.device.cusolverdx._LU.factorize",
    "cuweave.device.cusolverdx._LU.solve",
    "cuweave.device.cusolverdx._LinearSolver.a_shape",
    "cuweave.device.cusolverdx._LinearSolver.b_shape",
    "cuweave.device.cusolverdx._LinearSolver.info_shape",
    "cuweave.device.cusolverdx._LinearSolver.info_strides",
    "cuweave.device.cusolverdx._Multiply.c_shape",
    "cuweave.device.cusolverdx._Multiply.multiply",
    "cuweave.device.cusolverdx._Multiply.side",
    "cuweave.device.cusolverdx._Multiply.tau_shape",
    "cuweave.device.cusolverdx._Multiply.tau_size",
    "cuweave.device.cusolverdx._Multiply.tau_strides",
    "cuweave.device.cusolverdx._Multiply.tau_type",
    "cuweave.device.cusolverdx._Multiply.transpose_mode",
    "cuweave.device.cusolverdx._Orthogonal.a_shape",
    "cuweave.device.cusolverdx._Orthogonal.factorize",
    "cuweave.device.cusolverdx._Orthogonal.tau_shape",
    "cuweave.device.cusolverdx._Orthogonal.tau_size",
    "cuweave.device.cusolverdx._Orthogonal.tau_strides",
    "cuweave.device.cusolverdx._Orthogonal.tau_type",
    "cuweave.device.cusolverdx._SolverAPI.a_arrangement",
    "cuweave.device.cusolverdx._SolverAPI.arrangement",
    "cuweave.device.cusolverdx._SolverAPI.b_arrangement",
    "cuweave.device.cusolverdx._SolverAPI.batches_per_block",
    "cuweave.device.cusolverdx._SolverAPI.block_dim",
    "cuweave.device.cusolverdx._SolverAPI.block_size",
    "cuweave.device.cusolverdx._SolverAPI.data_type",
    "cuweave.device.cusolverdx._SolverAPI.execution",
    "cuweave.device.cusolverdx._SolverAPI.k",
    "cuweave.device.cusolverdx._SolverAPI.lda",
    "cuweave.device.cusolverdx._SolverAPI.ldb",
    "cuweave.device.cusolverdx._SolverAPI.leading_dimensions",
    "cuweave.device.cusolverdx._SolverAPI.m",
    "cuweave.device.cusolverdx._SolverAPI.n",
    "cuweave.device.cusolverdx._SolverAPI.precision",
    "cuweave.device.cusolverdx._SolverAPI.sm",
    "cuweave.device.cusolverdx._SolverAPI.value_type",
}

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
