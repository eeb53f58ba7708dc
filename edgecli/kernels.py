"""The CUDA kernel source and its compile-time variants; no CuPy here.

``cuda/edges.cu`` is compiled once per variant: the norm, the border mode and the work layout are
``-D`` definitions (validated and emitted by :func:`kernel_defines`), the threshold and the
frame sizes are runtime arguments. :mod:`edgecli.gpu` compiles through CuPy/NVRTC at run time;
``python -m edgecli.kernels --check`` compiles every variant for sm_90 ahead of time, with
``nvcc`` (or NVRTC through CuPy where there is no nvcc), on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import OptionError
from .params import BORDERS, NORMS

KERNEL_FILE = "edges.cu"
KERNEL_NAME = "edges_bgr"
PACK_KERNEL_NAME = "pack_rows_1bit"  # in the same file: edge maps into 1-bit PNG scanlines

# The work item one warp computes: 128 columns (32 lanes x 4 pixels) by TILE_H rows, staged as
# TILE_H + 2 rows in a ring of SLOTS slots. TILE_H is a multiple of 3 (a lane walks the rows three
# at a time) and TILE_H + 2 a multiple of SLOTS: 6, 18 or 30. 30 divides 480, 720, 1080 and 2160.
# WARPS warps per block, each on its own items with its own ring: the block only groups them.
# See benchmarks/RESULTS.md for the alternatives measured.
TILE_W = 128
TILE_H = 30
WARPS = 4
SLOTS = 4
TILE_HEIGHTS = (6, 18, 30)
MAX_WARPS = 8
# The persistent grid's warps an SM, per norm: where more blocks would fit, the grid is held to
# this many warps an SM (blocks_per_sm), for staged 30-row items. On the H200, l1 ran 3% faster
# at 8 (2 blocks of 4 warps) than at the 16 that fit, and l2 2.5% faster at 12 (interleaved A/B,
# benchmarks/RESULTS.md, session 6).
WARPS_PER_SM = {"l1": 8, "l2": 12}
# Shared memory: one ring of TILE_H + 2 rows of STAGE_STRIDE bytes per warp (dynamic), and
# SLOTS 8-byte mbarriers per warp (static). At most 8 x 32 x 416 = 106,496 bytes a block:
# within what an sm_90 block may opt in to (227 KB); gpu.py checks the device's own limit.
STAGE_STRIDE = 416

CHECK_ARCH = "sm_90"

_NORM_DEFINES = {"l1": "EDGES_NORM_L1", "l2": "EDGES_NORM_L2"}
_BORDER_DEFINES = {
    "replicate": "EDGES_BORDER_REPLICATE",
    "reflect101": "EDGES_BORDER_REFLECT101",
    "constant": "EDGES_BORDER_CONSTANT",
}


@dataclass(frozen=True)
class Variant:
    """One compiled form of the kernel: everything that is a ``-D`` definition."""

    norm: str = "l1"
    border: str = "replicate"
    tile_h: int = TILE_H  # output rows per work item
    warps: int = WARPS  # warps per block
    # Fast items stage from their own first column (a 128-byte line) and load the left halo
    # column by hand.
    halo_loads: bool = False

    def __post_init__(self) -> None:
        kernel_defines(self)  # validates

    @property
    def name(self) -> str:
        loads = "-hl" if self.halo_loads else ""
        return f"{self.norm}-{self.border}-{TILE_W}x{self.tile_h}-w{self.warps}{loads}"

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def shared_bytes(self) -> int:
        """Dynamic shared memory of one block: one ring of staged rows per warp."""
        return self.warps * (self.tile_h + 2) * STAGE_STRIDE


def kernel_defines(variant: Variant) -> tuple[str, ...]:
    """The ``-D`` options that select ``variant`` in ``cuda/edges.cu``; raise naming a bad value."""
    if variant.norm not in _NORM_DEFINES:
        raise OptionError(f"kernel norm must be one of {', '.join(NORMS)}, got {variant.norm!r}")
    if variant.border not in _BORDER_DEFINES:
        raise OptionError(
            f"kernel border must be one of {', '.join(BORDERS)}, got {variant.border!r}"
        )
    tile_h = variant.tile_h
    if not isinstance(tile_h, int) or tile_h not in TILE_HEIGHTS:
        listed = ", ".join(str(h) for h in TILE_HEIGHTS)
        raise OptionError(f"kernel tile height must be one of {listed}, got {tile_h!r}")
    warps = variant.warps
    if not isinstance(warps, int) or not 1 <= warps <= MAX_WARPS:
        raise OptionError(f"kernel warps per block must be in 1..{MAX_WARPS}, got {warps!r}")
    if not isinstance(variant.halo_loads, bool):
        raise OptionError(f"kernel halo_loads must be True or False, got {variant.halo_loads!r}")
    return (
        f"-DEDGES_NORM={_NORM_DEFINES[variant.norm]}",
        f"-DEDGES_BORDER={_BORDER_DEFINES[variant.border]}",
        f"-DEDGES_TILE_H={tile_h}",
        f"-DEDGES_WARPS={warps}",
        f"-DEDGES_HALO_LOADS={int(variant.halo_loads)}",
    )


def blocks_per_sm(variant: Variant, fitting: int) -> int:
    """Blocks of ``variant`` the persistent grid puts on an SM, where ``fitting`` fit at once.

    Staged 30-row items (the layout the cap was measured on) are held to :data:`WARPS_PER_SM`
    warps for their norm, at least one block; other layouts take every block that fits (held
    to the same warps, shorter items and halo loads ran slower: session 6)."""
    if variant.halo_loads or variant.tile_h != TILE_H:
        return fitting
    return max(1, min(fitting, WARPS_PER_SM[variant.norm] // variant.warps))


def all_variants() -> list[Variant]:
    """Every norm x border at the default tile, with the halo columns staged, and with the left
    one loaded by hand: what ``--check`` compiles."""
    return [
        Variant(norm, border, halo_loads=loads)
        for loads, norm, border in itertools.product((False, True), NORMS, BORDERS)
    ]


def cuda_dir() -> Path:
    """Where the ``.cu`` files are: ``edgecli/cuda`` when installed, ``cuda/`` in a checkout."""
    installed = Path(__file__).parent / "cuda"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parent.parent / "cuda"


def kernel_path() -> Path:
    path = cuda_dir() / KERNEL_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"CUDA kernel source not found at {path}; reinstall edgecli (the wheel ships it)"
        )
    return path


@lru_cache(maxsize=1)
def kernel_source() -> str:
    """The kernel source, with a #line directive so compiler messages name the real file."""
    path = kernel_path()
    return f'#line 1 "{path.as_posix()}"\n' + path.read_text(encoding="utf-8")


# ---- ahead-of-time checks (python -m edgecli.kernels --check) --------------------------------


@dataclass(frozen=True)
class CheckResult:
    variant: Variant
    ok: bool
    report: str  # compiler messages: errors, or the -Xptxas -v resource report


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for candidate in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if candidate and Path(candidate, "bin", "nvcc").is_file():
            return str(Path(candidate, "bin", "nvcc"))
    return None


def compile_with_nvcc(nvcc: str, variant: Variant, arch: str = CHECK_ARCH) -> CheckResult:
    """Compile ``variant`` to a cubin for ``arch`` and keep ptxas's resource report."""
    with tempfile.TemporaryDirectory(prefix="edgecli-kernel-") as tmp:
        source = Path(tmp, "edges.cu")
        source.write_text(kernel_source(), encoding="utf-8")
        command = [
            nvcc,
            f"-arch={arch}",
            "-cubin",
            "-Xptxas",
            "-v",
            "-Werror",
            "all-warnings",
            *kernel_defines(variant),
            "-o",
            str(Path(tmp, "edges.cubin")),
            str(source),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    report = (done.stdout + done.stderr).strip()
    return CheckResult(variant, done.returncode == 0, report)


def compile_with_nvrtc(variant: Variant, arch: str = CHECK_ARCH) -> CheckResult:
    """Compile ``variant`` through NVRTC (CuPy's bindings); needs no GPU."""
    from cupy.cuda import compiler  # optional dependency: only where nvcc is absent

    try:
        compiler.compile_using_nvrtc(
            kernel_source(),
            options=("--std=c++17", *kernel_defines(variant)),
            arch=arch.removeprefix("sm_"),
            filename=KERNEL_FILE,
        )
    except Exception as exc:  # CompileException carries the compiler log
        return CheckResult(variant, False, str(exc).strip())
    return CheckResult(variant, True, "compiled with NVRTC (no ptxas report)")


def _resource_summary(report: str) -> str:
    """The ptxas lines that matter, per kernel of the file: registers, shared memory, stack and
    spills, as ``name: …, …; name: …``."""
    kernels: dict[str, list[str]] = {}
    name = "?"
    for line in report.splitlines():
        if "Function properties for " in line:
            name = line.split("Function properties for ", 1)[1].strip()
        elif "registers" in line or "spill" in line:
            kernels.setdefault(name, []).append(line.split("info    :", 1)[-1].strip())
    return "; ".join(f"{name}: {', '.join(lines)}" for name, lines in kernels.items())


def check(variants: list[Variant], *, resources: bool = False, out=sys.stdout) -> int:
    """Compile every variant, print one line each; the exit status (0 only if all compiled)."""
    nvcc = find_nvcc()
    nvrtc = False
    if nvcc is None:
        try:
            import cupy.cuda.compiler  # noqa: F401

            nvrtc = True
        except ImportError:
            pass
    if nvcc is None and not nvrtc:
        print(
            "error: no CUDA compiler: neither nvcc (PATH, CUDA_HOME, /usr/local/cuda) nor "
            "CuPy's NVRTC is available",
            file=out,
        )
        return 1
    tool = f"nvcc ({nvcc})" if nvcc else "NVRTC (CuPy)"
    print(
        f"compiling {len(variants)} variants of {kernel_path()} for {CHECK_ARCH} with {tool}",
        file=out,
    )
    failures = 0
    for variant in variants:
        result = compile_with_nvcc(nvcc, variant) if nvcc else compile_with_nvrtc(variant)
        status = "ok  " if result.ok else "FAIL"
        line = f"{status} {variant.name}"
        if result.ok and resources and nvcc:
            line += f"  [{_resource_summary(result.report)}]"
        print(line, file=out)
        if not result.ok:
            failures += 1
            print(result.report, file=out)
    print(f"{len(variants) - failures}/{len(variants)} variants compiled", file=out)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edgecli.kernels", description="Check the CUDA kernel's variants."
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"compile every variant for {CHECK_ARCH} (nvcc, else NVRTC)",
    )
    parser.add_argument(
        "--resources",
        action="store_true",
        help="with --check: print ptxas's register/shared-memory/spill report",
    )
    parser.add_argument("--source", action="store_true", help="print where the .cu file is")
    args = parser.parse_args(argv)
    if args.source:
        print(kernel_path())
        return 0
    if not args.check:
        parser.print_help()
        return 2
    return check(all_variants(), resources=args.resources)


if __name__ == "__main__":
    sys.exit(main())
