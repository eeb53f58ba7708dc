"""The wheel, built from this checkout and installed apart from it: it carries the kernel sources
of the top-level cuda/ where the installed package looks for them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the TOML reader pytest itself uses there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
KERNELS = sorted(path.name for path in (ROOT / "cuda").iterdir())
# What the build reads; copied, so that building leaves nothing in the checkout.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "edgecli", "cuda")


def unmet_build_requirements() -> list[str]:
    """pyproject.toml's build requirements that this environment does not meet (the wheel is
    built without an isolated environment, so without a package index)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    unmet = []
    for text in pyproject["build-system"]["requires"]:
        requirement = Requirement(text)
        try:
            have = version(requirement.name)
        except PackageNotFoundError:
            unmet.append(f"{text} (not installed)")
            continue
        if not requirement.specifier.contains(have, prereleases=True):
            unmet.append(f"{text} (have {have})")
    return unmet


def pip(*args: str, cwd: Path) -> None:
    """Run pip offline in this interpreter, failing the test with its output."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args, "--no-index"],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel of this checkout, built offline from a copy of it."""
    unmet = unmet_build_requirements()
    if unmet:
        pytest.skip(f"build requirements not met: {', '.join(unmet)} (make install-dev)")
    folder = tmp_path_factory.mktemp("wheel")
    source = folder / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.so")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(folder), str(source), cwd=folder)
    (built,) = folder.glob("edgecli-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_carries_every_kernel_inside_the_package(wheel):
    """The wheel holds each .cu file of cuda/ in edgecli/kernels/, and no other source."""
    with zipfile.ZipFile(wheel) as archive:
        sources = sorted(name for name in archive.namelist() if name.endswith((".cu", ".cuh")))
    assert sources == [f"edgecli/kernels/{name}" for name in KERNELS]


@pytest.mark.slow
def test_the_installed_package_loads_its_kernels(wheel, tmp_path):
    """Installed from the wheel and run away from the checkout, edgecli reads every kernel
    source from its own kernels/ folder, the same text as the checkout's cuda/."""
    target = tmp_path / "site"
    pip("install", "--no-deps", "--target", str(target), str(wheel), cwd=tmp_path)
    script = (
        "import json, sys\n"
        "from edgecli.cuda.compiling import cuda_dir, kernel_source\n"
        "names = sys.argv[1:]\n"
        "print(json.dumps([str(cuda_dir()), {n: kernel_source(n) for n in names}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *KERNELS],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    folder, sources = json.loads(done.stdout)
    assert Path(folder) == target / "edgecli" / "kernels"
    for name in KERNELS:
        installed = target / "edgecli" / "kernels" / name
        assert sources[name] == f'#line 1 "{installed.as_posix()}"\n' + (
            ROOT / "cuda" / name
        ).read_text(encoding="utf-8")
