"""``make kernel-check``: compile every variant of ``edges.cu``, and ``deflate.cu``,
``decode.cu``, ``png.cu``, ``inflate.cu`` and both norms of ``canny.cu``, for
every architecture in :data:`edgecli.cuda.compiling.CHECK_ARCHS` through NVRTC, on a machine
without a GPU, and fail on any error or register spill (``python scripts/kernel_check.py --check``).

NVRTC is loaded by path from NVIDIA's wheels (the ``kernel-check`` extra: CUDA 12's, the last to
compile for Volta, and CUDA 13's), through ctypes: no CuPy, no GPU.
"""

from __future__ import annotations

import argparse
import ctypes
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# Run as a script from the checkout (make kernel-check): the package beside this folder.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from edgecli.cuda.compiling import (  # noqa: E402
    CHECK_ARCHS,
    CUDA13_MIN_ARCH,
    compile_options,
    kernel_path,
    kernel_source,
)
from edgecli.edges.variants import (  # noqa: E402
    CANNY_FILE,
    KERNEL_FILE,
    Variant,
    all_variants,
    canny_defines,
    kernel_defines,
)
from edgecli.options.params import NORMS, usable_cpus  # noqa: E402

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


# The other CUDA files, compiled for every architecture too, with the options
# edgecli.cuda.build.load_kernels compiles them with at run time: each of FILE_DEFINES' sets of
# definitions where it lists the file, else none.
OTHER_FILES = ("deflate.cu", "decode.cu", "png.cu", "inflate.cu", CANNY_FILE)
FILE_DEFINES = {CANNY_FILE: tuple(canny_defines(norm) for norm in NORMS)}

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


# Compiles of a source that spills before the check calls it a spill. ptxas does not always
# allocate a kernel's registers the same way: on a loaded machine, a kernel that takes all the
# registers its launch bounds leave it (inflate.cu) may come back with a few bytes spilled, and
# without them from the next compile. A spill the code makes, it makes every time.
SPILL_ATTEMPTS = 3


def compile_unspilled(compiler, source: str, name: str, options: tuple[str, ...]):
    """``compiler``'s (ok, report) for ``source``: the first compile that does not spill, or
    the last of SPILL_ATTEMPTS that all do (or a failed one, at once)."""
    for _ in range(SPILL_ATTEMPTS):
        ok, report = compiler.compile(source, name, options)
        if not ok or not spilled(report):
            break
    return ok, report


def check_one(compiler: Nvrtc, variant: Variant, arch: int) -> CheckResult:
    options = (*compile_options(kernel_defines(variant), arch), "--ptxas-options=-v")
    ok, report = compile_unspilled(compiler, kernel_source(KERNEL_FILE), KERNEL_FILE, options)
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
    compilers = _compilers(archs, out)
    if compilers is None:
        return 1
    used = ", ".join(f"NVRTC {'.'.join(map(str, c.version))}" for c in compilers.values())
    print(
        f"compiling {len(variants)} variants of {kernel_path(KERNEL_FILE)} for {len(archs)} "
        f"architectures with {used}",
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


def _compilers(archs: tuple[int, ...], out) -> dict[int, Nvrtc] | None:
    """The NVRTC of each CUDA major the architectures need, or None once one is missing (said
    on ``out``, with what to install)."""
    compilers: dict[int, Nvrtc] = {}
    for major in sorted({12 if arch < CUDA13_MIN_ARCH else 13 for arch in archs}):
        library = find_nvrtc(major)
        if library is None:
            print(
                f"error: no NVRTC {major} found on the import path; install it with "
                f"pip install {CHECK_PACKAGES} (make kernel-check does)",
                file=out,
            )
            return None
        compilers[major] = Nvrtc(library)
    return compilers


def check_files(
    names: tuple[str, ...] = OTHER_FILES, archs: tuple[int, ...] = CHECK_ARCHS, *, out=sys.stdout
) -> int:
    """Compile the other CUDA files (each set of their ``FILE_DEFINES``) for every
    architecture, as :func:`check` does; one line a file; the exit status."""
    compilers = _compilers(archs, out)
    if compilers is None:
        return 1
    failures = 0
    for name in names:
        bad = []
        for arch in archs:
            compiler = compilers[12 if arch < CUDA13_MIN_ARCH else 13]
            for defines in FILE_DEFINES.get(name, ((),)):
                options = (*compile_options(defines, arch), "--ptxas-options=-v")
                ok, report = compile_unspilled(compiler, kernel_source(name), name, options)
                if not ok or spilled(report):
                    bad.append(f"sm_{arch}")
                    print(f"FAIL sm_{arch} {name} {' '.join(defines)}\n{report}", file=out)
                    break
        failures += len(bad)
        line = f"{len(archs) - len(bad)}/{len(archs)} architectures compiled"
        print(f"{'FAIL' if bad else 'ok  '} {name}: {line}{'' if bad else ', no spills'}", file=out)
    return 1 if failures else 0


def _registers(report: str) -> int:
    """The most registers any kernel of the report uses."""
    return max((int(n) for n in re.findall(r"Used (\d+) registers", report)), default=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/kernel_check.py", description="Check the CUDA kernel's variants."
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
        print(kernel_path(KERNEL_FILE))
        return 0
    if not args.check:
        parser.print_help()
        return 2
    variants = check(all_variants(), resources=args.resources)
    return check_files() or variants


if __name__ == "__main__":
    sys.exit(main())
