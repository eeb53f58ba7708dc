"""The CUDA kernel source, its compile-time variants and its ahead-of-time check; no CuPy here.

``cuda/edges.cu`` is compiled once per variant: the norm and the border mode are ``-D``
definitions (validated and emitted by :func:`kernel_defines`), the threshold and the frame
sizes are runtime arguments. One form of the kernel runs on every GPU from compute capability
7.0 on; :mod:`edgecli.gpu` compiles it for the device at hand through NVRTC and caches the
result on disk. ``python -m edgecli.kernels --check`` compiles every variant for every
architecture in :data:`CHECK_ARCHS` through NVRTC on a machine without a GPU (the libraries
come from NVIDIA's ``nvidia-cuda-nvrtc`` wheels) and fails on any error or spill.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import itertools
import os
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .cache import cache_dir
from .errors import OptionError
from .params import BORDERS, NORMS, usable_cpus

KERNEL_FILE = "edges.cu"
KERNEL_NAME = "edges_bgr"
PACK_KERNEL_NAME = "pack_rows_1bit"  # in the same file: edge maps into 1-bit PNG scanlines

# The work item one warp computes: 128 columns (32 lanes x 4 pixels) by 30 rows, staged as 32 rows
# of STAGE_STRIDE bytes in shared memory; WARPS warps a block, each on its own items. Fixed in
# cuda/edges.cu, which static_asserts the same numbers.
TILE_W = 128
TILE_H = 30
WARPS = 4
THREADS = 32 * WARPS
STAGE_STRIDE = 416
SHARED_BYTES = WARPS * (TILE_H + 2) * STAGE_STRIDE  # dynamic shared memory of one block
# The persistent grid's warps an SM, per norm: where more blocks fit, the grid is held to this
# many warps an SM (blocks_per_sm). On the H200 (benchmarks/kernel.py --blocks-per-sm), 3 blocks
# of 4 warps an SM were fastest for l1 (2.71 us a 1080p frame, against 3.13 at 2 and 2.79 at 4)
# and as fast as 4 for l2 (2.86 and 2.83).
WARPS_PER_SM = {"l1": 12, "l2": 12}

# The oldest GPUs the kernel runs on (it uses warp shuffles with masks, dp2a, 16-byte loads; and
# cp.async from sm_80 on), and the architectures --check compiles for: Volta, Turing, Ampere
# (A100, and A10/RTX 30), Ada (L4, RTX 40), Hopper, Blackwell (B200, RTX 50).
MIN_COMPUTE_CAPABILITY = (7, 0)
CHECK_ARCHS = (70, 75, 80, 86, 89, 90, 100, 120)
# Where NVRTC 13 stops: CUDA 13 compiles for sm_75 and newer only, so Volta needs CUDA 12's.
CUDA13_MIN_ARCH = 75

# An environment setting for tests and benchmarks: compile the kernel as PTX for this older
# compute capability (e.g. "75" or "80"), which the driver then compiles for the device, so that
# a newer GPU runs the code path an older one would (without cp.async below 80).
ARCH_ENV = "EDGECLI_CUDA_ARCH"

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

    def __post_init__(self) -> None:
        kernel_defines(self)  # validates

    @property
    def name(self) -> str:
        return f"{self.norm}-{self.border}"


def kernel_defines(variant: Variant) -> tuple[str, ...]:
    """The ``-D`` options that select ``variant`` in ``cuda/edges.cu``; raise naming a bad value."""
    if variant.norm not in _NORM_DEFINES:
        raise OptionError(f"kernel norm must be one of {', '.join(NORMS)}, got {variant.norm!r}")
    if variant.border not in _BORDER_DEFINES:
        raise OptionError(
            f"kernel border must be one of {', '.join(BORDERS)}, got {variant.border!r}"
        )
    return (
        f"-DEDGES_NORM={_NORM_DEFINES[variant.norm]}",
        f"-DEDGES_BORDER={_BORDER_DEFINES[variant.border]}",
    )


def compile_options(variant: Variant, arch: int, *, ptx: bool = False) -> tuple[str, ...]:
    """NVRTC's options for ``variant`` on compute capability ``arch`` (e.g. 90): machine code for
    that architecture, or with ``ptx`` PTX for it (which the driver compiles for newer GPUs)."""
    target = f"compute_{arch}" if ptx else f"sm_{arch}"
    return ("--std=c++17", f"--gpu-architecture={target}", *kernel_defines(variant))


def blocks_per_sm(variant: Variant, fitting: int) -> int:
    """Blocks the persistent grid puts on an SM where ``fitting`` fit at once: held to
    :data:`WARPS_PER_SM` warps for the variant's norm, at least one block."""
    return max(1, min(fitting, WARPS_PER_SM[variant.norm] // WARPS))


def all_variants() -> list[Variant]:
    """Every norm x border: what ``--check`` compiles."""
    return [Variant(norm, border) for norm, border in itertools.product(NORMS, BORDERS)]


def cuda_dir() -> Path:
    """Where the ``.cu`` files are: ``edgecli/cuda`` when installed, ``cuda/`` in a checkout."""
    installed = Path(__file__).parent / "cuda"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parent.parent / "cuda"


def kernel_path(name: str = KERNEL_FILE) -> Path:
    """Where ``cuda/<name>`` is: beside the package in a checkout, inside it in a wheel."""
    path = cuda_dir() / name
    if not path.is_file():
        raise FileNotFoundError(
            f"CUDA kernel source not found at {path}; reinstall edgecli (the wheel ships it)"
        )
    return path


@lru_cache(maxsize=4)
def kernel_source(name: str = KERNEL_FILE) -> str:
    """A kernel source, with a #line directive so compiler messages name the real file."""
    path = kernel_path(name)
    return f'#line 1 "{path.as_posix()}"\n' + path.read_text(encoding="utf-8")


def forced_arch() -> int | None:
    """The compute capability :data:`ARCH_ENV` asks the kernel to be compiled for, or None;
    OptionError for a value that is not one of :data:`CHECK_ARCHS`."""
    value = os.environ.get(ARCH_ENV, "").strip()
    if not value:
        return None
    digits = value.removeprefix("sm_").removeprefix("compute_")
    if not digits.isdigit() or int(digits) not in CHECK_ARCHS:
        listed = ", ".join(str(a) for a in CHECK_ARCHS)
        raise OptionError(f"{ARCH_ENV} must be one of {listed}, got {value!r}")
    return int(digits)


def kernel_cache_dir() -> Path:
    """Where compiled kernels are kept across runs: ``$XDG_CACHE_HOME/edgecli/kernels`` (by
    default ``~/.cache/edgecli/kernels``)."""
    return cache_dir() / "kernels"


def cache_key(source: str, options: tuple[str, ...], compiler: str) -> str:
    """A file name for the compiled code of ``source`` under ``options`` by ``compiler``: a
    hash of all three, so that any change compiles anew."""
    digest = hashlib.sha256("\0".join((source, *options, compiler)).encode()).hexdigest()
    return digest[:40]


# ---- NVRTC through ctypes, for --check (no CuPy, no GPU) --------------------------------------


class Nvrtc:
    """One NVRTC library (``libnvrtc.so.12`` or ``.so.13``), loaded by path. NVRTC may compile
    different programs on several threads at once; ctypes lets go of the GIL while it does."""

    def __init__(self, library: Path):
        major = library.name.rsplit(".", 1)[-1]
        # NVRTC loads its builtins library by name; loading it first, globally, lets that find it.
        for builtins in sorted(library.parent.glob(f"libnvrtc-builtins.so.{major}*")):
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
            break
        self.lib = ctypes.CDLL(str(library))
        self.path = library
        version = (ctypes.c_int(), ctypes.c_int())
        self.lib.nvrtcVersion(ctypes.byref(version[0]), ctypes.byref(version[1]))
        self.version = (version[0].value, version[1].value)

    def compile(self, source: str, name: str, options: tuple[str, ...]) -> tuple[bool, str]:
        """Compile ``source``; whether it compiled, and the compiler's log."""
        program = ctypes.c_void_p()
        status = self.lib.nvrtcCreateProgram(
            ctypes.byref(program), source.encode(), name.encode(), 0, None, None
        )
        if status != 0:
            return False, f"nvrtcCreateProgram failed with status {status}"
        try:
            encoded = [option.encode() for option in options]
            status = self.lib.nvrtcCompileProgram(
                program, len(encoded), (ctypes.c_char_p * len(encoded))(*encoded)
            )
            size = ctypes.c_size_t()
            self.lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            self.lib.nvrtcGetProgramLog(program, log)
            return status == 0, log.value.decode(errors="replace").strip()
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(program))


# The libraries' places in NVIDIA's wheels (site-packages/nvidia/...).
NVRTC_WHEEL_PATHS = {12: "cuda_nvrtc/lib/libnvrtc.so.12", 13: "cu13/lib/libnvrtc.so.13"}
CHECK_PACKAGES = '"nvidia-cuda-nvrtc-cu12>=12.8,<13" "nvidia-cuda-nvrtc>=13.0,<14"'


def find_nvrtc(major: int) -> Path | None:
    """The NVRTC library of CUDA ``major`` from NVIDIA's wheels on the import path, or None."""
    for entry in sys.path:
        candidate = Path(entry or ".", "nvidia", NVRTC_WHEEL_PATHS[major])
        if candidate.is_file():
            return candidate
    return None


@dataclass(frozen=True)
class CheckResult:
    variant: Variant
    arch: int
    ok: bool
    report: str  # the compiler's log: errors, or ptxas's resource report


def spilled(report: str) -> bool:
    """Whether ptxas's report shows any kernel spilling registers (or keeping a stack)."""
    counts = re.findall(r"(\d+) bytes (?:stack frame|spill stores|spill loads)", report)
    return any(int(n) for n in counts)


def resource_summary(report: str) -> str:
    """The ptxas lines that matter, per kernel of the file: registers, stack and spills, as
    ``name: …, …; name: …``."""
    kernels: dict[str, list[str]] = {}
    name = "?"
    for line in report.splitlines():
        if "Function properties for " in line:
            name = line.split("Function properties for ", 1)[1].strip()
        elif "registers" in line or "spill" in line:
            # nvcc's "ptxas info    : Used …", NVRTC's "ptxas         .     0 bytes …"
            text = re.sub(r"^ptxas\s+(info\s+:|\.)\s*", "", line.strip())
            kernels.setdefault(name, []).append(text)
    return "; ".join(f"{name}: {', '.join(lines)}" for name, lines in kernels.items())


def check_one(compiler: Nvrtc, variant: Variant, arch: int) -> CheckResult:
    options = (*compile_options(variant, arch), "--ptxas-options=-v")
    ok, report = compiler.compile(kernel_source(), KERNEL_FILE, options)
    return CheckResult(variant, arch, ok and not spilled(report), report)


def check(
    variants: list[Variant],
    archs: tuple[int, ...] = CHECK_ARCHS,
    *,
    resources: bool = False,
    out=sys.stdout,
) -> int:
    """Compile every variant for every architecture, each with the NVRTC a user of that GPU has
    (CUDA 12's for Volta, CUDA 13's for the rest); print one line an architecture, and each
    failure's log; the exit status (0 only if everything compiled without spilling)."""
    compilers: dict[int, Nvrtc] = {}
    for major in sorted({12 if arch < CUDA13_MIN_ARCH else 13 for arch in archs}):
        library = find_nvrtc(major)
        if library is None:
            print(
                f"error: no NVRTC {major} found on the import path; install it with "
                f"pip install {CHECK_PACKAGES} (make kernel-check does)",
                file=out,
            )
            return 1
        compilers[major] = Nvrtc(library)
    used = ", ".join(f"NVRTC {'.'.join(map(str, c.version))}" for c in compilers.values())
    print(
        f"compiling {len(variants)} variants of {kernel_path()} for {len(archs)} architectures "
        f"with {used}",
        file=out,
    )
    jobs = [(arch, variant) for arch in archs for variant in variants]
    lock = threading.Lock()

    def run(job: tuple[int, Variant]) -> CheckResult:
        arch, variant = job
        compiler = compilers[12 if arch < CUDA13_MIN_ARCH else 13]
        result = check_one(compiler, variant, arch)
        with lock:  # a failure's log as soon as it is known
            if not result.ok:
                print(f"FAIL sm_{arch} {variant.name}\n{result.report}", file=out)
        return result

    with ThreadPoolExecutor(max_workers=usable_cpus()) as pool:
        results = list(pool.map(run, jobs))
    failures = 0
    for arch in archs:
        mine = [r for r in results if r.arch == arch]
        bad = [r.variant.name for r in mine if not r.ok]
        failures += len(bad)
        line = f"{'ok  ' if not bad else 'FAIL'} sm_{arch}: {len(mine) - len(bad)}/{len(mine)}"
        line += " variants compiled, no spills" if not bad else f" ({', '.join(bad)} failed)"
        if resources and not bad:
            worst = max(mine, key=lambda r: _registers(r.report))
            line += f"  [{worst.variant.name}: {resource_summary(worst.report)}]"
        print(line, file=out)
    total = len(results)
    print(f"{total - failures}/{total} variant-architectures compiled", file=out)
    return 1 if failures else 0


def _registers(report: str) -> int:
    """The most registers any kernel of the report uses."""
    return max((int(n) for n in re.findall(r"Used (\d+) registers", report)), default=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edgecli.kernels", description="Check the CUDA kernel's variants."
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compile every variant for " + ", ".join(f"sm_{a}" for a in CHECK_ARCHS),
    )
    parser.add_argument(
        "--resources",
        action="store_true",
        help="with --check: print ptxas's register and spill report (the variant with most)",
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
