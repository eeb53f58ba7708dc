"""The CUDA-side modules import where CuPy is absent (as on CI), given a stand-in for it: a
name that moved, or an import that no longer resolves, fails here rather than on the GPU host.
What they do is the GPU tests' to check; the CLI and the CPU path never import them."""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import tokenize
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


def _comment_lines(source: str) -> set[int]:
    """The numbers of the lines of ``source`` that hold a non-empty ``#`` comment."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0] for t in tokens if t.type == tokenize.COMMENT and t.string.strip("# ")}


def _local_imports(tree: ast.AST):
    """Each import statement inside a function of ``tree``, with the line above the run of
    imports, one a line, that it belongs to (one comment may give the reason for a run)."""
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for block in ast.walk(function):
            for field in ("body", "orelse", "finalbody", "handlers"):
                statements = getattr(block, field, None)
                if not isinstance(statements, list):
                    continue
                head = last = None
                for statement in statements:
                    if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                        head = None
                        continue
                    if head is None or statement.lineno > last.end_lineno + 1:  # a new run
                        head = statement
                    last = statement
                    yield statement, head.lineno - 1


def test_every_function_local_import_says_why():
    """An import inside a function of edgecli (which each call pays for, and which hides a
    dependency from the module's head) has a comment saying why it is there, on its line or
    the line above it or its run of imports: costly, optional, or a cycle."""
    bare = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        comments = _comment_lines(source)
        for statement, above in _local_imports(ast.parse(source)):
            lines = set(range(statement.lineno - 1, statement.end_lineno + 1)) | {above}
            if not lines & comments:
                bare.add(f"{path.relative_to(PACKAGE.parent)}:{statement.lineno}")
    assert not bare, "imports in functions with no reason given:\n" + "\n".join(sorted(bare))


HEAVY = ("numpy", "cv2", "cupy", "dask", "distributed", "tqdm", "PIL", "imageio")


@pytest.mark.parametrize(
    "statement, allowed",
    [
        ("import edgecli", {"edgecli", "edgecli.version"}),
        ("import edgecli.cli", {"edgecli", "edgecli.version", "edgecli.errors", "edgecli.cli",
                                "edgecli.options"}),
    ],
)  # fmt: skip
def test_start_up_imports_no_stage_and_no_heavy_library(statement, allowed):
    """``import edgecli`` and every command's start-up (``import edgecli.cli``) load none of
    NumPy, OpenCV, CuPy, Dask, tqdm, PIL or imageio, and no module of the stages: those come
    only when a command runs or a library function is first called."""
    code = (
        f"import sys\n{statement}\n"
        "print('\\n'.join(m for m in sys.modules if m.split('.')[0] in "
        f"{HEAVY!r} or m.startswith('edgecli')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent
    )
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []
    packages = tuple(f"{name}." for name in allowed - {"edgecli"})
    assert [m for m in loaded if m not in allowed and not m.startswith(packages)] == []
