"""The CUDA-side modules import where CuPy is absent (as on CI), given a stand-in for it: a
name that moved, or an import that no longer resolves, fails here rather than on the GPU host.
What they do is the GPU tests' to check; the CLI and the CPU path never import them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

GPU_MODULES = [
    "edgecli.cuda.build",
    "edgecli.cuda.pinned",
    "edgecli.edges.kernels",
    "edgecli.edges.cuda_deflate",
    "edgecli.edges.ring",
    "edgecli.edges.cuda_backend",
    "edgecli.decode.gpu.convert",
    "edgecli.decode.gpu.slots",
    "edgecli.decode.gpu.jpeg",
    "edgecli.decode.gpu.video",
    "edgecli.decode.gpu.decoders",
    "edgecli.cluster.run",
]


@pytest.mark.parametrize("module", GPU_MODULES)
def test_gpu_module_imports_with_a_stand_in_cupy(module):
    code = (
        "import sys\nfrom unittest import mock\nsys.modules['cupy'] = mock.MagicMock()\n"
        f"import importlib\nm = importlib.import_module({module!r})\n"
        "assert 'cupy' not in sys.modules or isinstance(sys.modules['cupy'], mock.MagicMock)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


PACKAGE = Path(__file__).resolve().parent.parent / "edgecli"


def _module_file(dotted: str) -> Path | None:
    """The file of module ``dotted`` (edgecli.x.y) in the package, or None."""
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _package_imports():
    """Every ``from .x import y`` in edgecli, at module level or inside a function (those run
    only on some paths: the GPU's, on the GPU host), as (file, line, module, name)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        package = ".".join(path.parent.relative_to(PACKAGE.parent).parts)  # what "." means
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
                for alias in node.names:
                    yield path.relative_to(PACKAGE.parent), node.lineno, module, alias.name


def test_every_relative_import_in_the_package_resolves():
    """Each name imported from a module of edgecli's is defined there (or is a submodule):
    a lazy import on the GPU path that a move broke fails on CI, not on the GPU host."""
    broken = []
    for where, line, module, name in _package_imports():
        target = _module_file(module)
        if target is None:
            broken.append(f"{where}:{line}: no module {module}")
        elif name not in _top_level_names(target) and _module_file(f"{module}.{name}") is None:
            broken.append(f"{where}:{line}: {module} has no {name}")
    assert broken == []
