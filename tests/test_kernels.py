"""The kernel source and its variants, on the CPU: no GPU and no CuPy needed."""

from __future__ import annotations

import dataclasses
import io
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from edgecli.cuda import compiling
from edgecli.decode.gpu import convert, inflate, png
from edgecli.edges import variants as kernels
from edgecli.edges.variants import KERNEL_FILE, Variant, all_variants, kernel_defines
from edgecli.errors import OptionError
from edgecli.options.params import NORMS
from scripts import kernel_check


def kernel_path(name: str = KERNEL_FILE) -> Path:
    return compiling.kernel_path(name)


def kernel_source(name: str = KERNEL_FILE) -> str:
    return compiling.kernel_source(name)


def compile_options(variant: Variant, arch: int, *, ptx: bool = False) -> tuple[str, ...]:
    """NVRTC's options for an edges.cu variant."""
    return compiling.compile_options(kernel_defines(variant), arch, ptx=ptx)


CHECKOUT_CUDA = Path(__file__).resolve().parents[1] / "cuda"
# Every kernel source a module loads, by the name it loads it by.
LOADED_KERNELS = {
    kernels.KERNEL_FILE,
    kernels.DEFLATE_FILE,
    kernels.CANNY_FILE,
    convert.DECODE_FILE,
    inflate.INFLATE_FILE,
    png.PNG_FILE,
}

NVRTC13 = kernel_check.find_nvrtc(13)
needs_nvrtc = pytest.mark.skipif(
    NVRTC13 is None, reason=f"NVRTC 13 not installed (pip install {kernel_check.CHECK_PACKAGES})"
)


def test_default_defines():
    """The default variant is l1 + replicate, as -D options."""
    assert kernel_defines(Variant()) == (
        "-DEDGES_NORM=EDGES_NORM_L1",
        "-DEDGES_BORDER=EDGES_BORDER_REPLICATE",
    )


@pytest.mark.parametrize(("field", "value"), [("norm", "l3"), ("border", "wrap"), ("norm", 1)])
def test_defines_reject_bad_values(field, value):
    """A bad variant value raises OptionError naming that value."""
    with pytest.raises(OptionError, match=re.escape(repr(value))):
        dataclasses.replace(Variant(), **{field: value})


def test_all_variants_cover_every_norm_and_border_once():
    """--check compiles each norm x border once: the six forms that ship."""
    keys = [(v.norm, v.border) for v in all_variants()]
    assert sorted(keys) == sorted(
        (n, b) for n in ("l1", "l2") for b in ("replicate", "reflect101", "constant")
    )


def test_canny_defines_name_the_norm():
    """Each norm selects its CANNY_NORM in canny.cu; anything else raises, naming the value."""
    assert kernels.canny_defines("l1") == ("-DCANNY_NORM=CANNY_NORM_L1",)
    assert kernels.canny_defines("l2") == ("-DCANNY_NORM=CANNY_NORM_L2",)
    with pytest.raises(OptionError, match="'l3'"):
        kernels.canny_defines("l3")


@pytest.mark.parametrize(
    ("variant", "fitting", "expected"),
    [
        (Variant("l1"), 4, 3),  # 12 warps an SM: 3 blocks of 4
        (Variant("l2"), 5, 3),
        (Variant("l1"), 1, 1),  # never more than fit
        (Variant("l2"), 0, 1),  # never less than one block
    ],
)
def test_blocks_per_sm_holds_the_grid_to_its_warps_an_sm(variant, fitting, expected):
    """The persistent grid takes WARPS_PER_SM warps an SM where more fit, else what fits."""
    assert kernels.blocks_per_sm(variant, fitting) == expected


def test_every_norm_has_its_warps_an_sm():
    assert set(kernels.WARPS_PER_SM) == set(NORMS)


@pytest.mark.parametrize(
    ("value", "expected"), [("", None), ("75", 75), ("sm_80", 80), ("compute_70", 70)]
)
def test_the_architecture_setting_is_read(monkeypatch, value, expected):
    """EDGECLI_CUDA_ARCH names an architecture of the check list, with or without a prefix."""
    monkeypatch.setenv(compiling.ARCH_ENV, value)
    assert compiling.forced_arch() == expected


@pytest.mark.parametrize("value", ["61", "90a", "sm_", "x"])
def test_a_bad_architecture_setting_is_an_option_error(monkeypatch, value):
    """An architecture the kernel is not checked for is refused, naming the value."""
    monkeypatch.setenv(compiling.ARCH_ENV, value)
    with pytest.raises(OptionError, match=re.escape(repr(value))):
        compiling.forced_arch()


def test_compile_options_name_machine_code_or_ptx():
    """sm_XY for machine code of that GPU, compute_XY for PTX the driver compiles."""
    assert "--gpu-architecture=sm_86" in compile_options(Variant(), 86)
    assert "--gpu-architecture=compute_75" in compile_options(Variant(), 75, ptx=True)


def test_cache_keys_change_with_source_options_and_compiler():
    """A cached kernel is found again only for the same source, options and compiler."""
    options = compile_options(Variant(), 90)
    key = compiling.cache_key("src", options, "nvrtc")
    assert key == compiling.cache_key("src", options, "nvrtc")
    assert key != compiling.cache_key("src2", options, "nvrtc")
    assert key != compiling.cache_key("src", compile_options(Variant("l2"), 90), "nvrtc")
    assert key != compiling.cache_key("src", options, "nvcc")


def test_the_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compiling.kernel_cache_dir() == tmp_path / "edgecli" / "kernels"


def test_source_is_found_in_the_checkout():
    """Run from a checkout, the .cu files are found in its top-level cuda/."""
    path = kernel_path()
    assert path == CHECKOUT_CUDA / "edges.cu"
    assert compiling.cuda_dir() == CHECKOUT_CUDA


def test_shipped_kernels_come_first(monkeypatch, tmp_path):
    """Where the package holds the wheel's kernels/ folder, that is where sources are read."""
    shipped = tmp_path / "kernels"
    shipped.mkdir()
    (shipped / "edges.cu").write_text("// shipped\n", encoding="utf-8")
    monkeypatch.setattr(compiling, "SHIPPED_KERNELS", shipped)
    assert compiling.cuda_dir() == shipped
    assert kernel_path() == shipped / "edges.cu"


def test_a_missing_source_is_one_clear_error(monkeypatch, tmp_path):
    """With neither folder holding the file, the error names the path and what to do."""
    monkeypatch.setattr(compiling, "SHIPPED_KERNELS", tmp_path / "kernels")
    monkeypatch.setattr(compiling, "CHECKOUT_KERNELS", tmp_path / "cuda")
    with pytest.raises(FileNotFoundError) as caught:
        kernel_path("edges.cu")
    assert str(caught.value) == (
        f"CUDA kernel source not found at {tmp_path / 'cuda' / 'edges.cu'}; "
        "reinstall edgecli (the wheel ships it)"
    )


def test_source_starts_with_a_line_directive_naming_the_real_file():
    """Compiler messages point at cuda/edges.cu, not at a temporary copy."""
    first, rest = kernel_source().split("\n", 1)
    assert first == f'#line 1 "{kernel_path().as_posix()}"'
    assert rest == kernel_path().read_text(encoding="utf-8")


@needs_nvrtc
def test_the_source_compiled_without_its_defines_names_where_they_come_from():
    """Compiled without the -D options of kernel_defines(), edges.cu stops with an error that
    names kernel_defines(), the function that supplies them."""
    compiler = kernel_check.Nvrtc(NVRTC13)
    options = [o for o in compile_options(Variant(), 90) if not o.startswith("-D")]
    ok, log = compiler.compile(kernel_source(), "edges.cu", tuple(options))
    assert not ok
    assert "edgecli.edges.variants.kernel_defines()" in log


@needs_nvrtc
@pytest.mark.parametrize("variant", [Variant("l1", "replicate"), Variant("l2", "constant")])
def test_shared_memory_size_is_what_the_kernel_stages(variant):
    """SHARED_BYTES (what a launch allocates) is, to the compiler, the bytes the kernel's warps
    stage their rows in; one byte more is not (so the check can fail)."""
    compiler = kernel_check.Nvrtc(NVRTC13)
    options = compile_options(variant, 90)

    def compiles_with(size: int) -> tuple[bool, str]:
        check = f'static_assert(WARPS * WARP_SHARED_BYTES == {size}, "the launch size");'
        return compiler.compile(f"{kernel_source()}\n{check}\n", "x.cu", options)

    ok, log = compiles_with(kernels.SHARED_BYTES)
    assert ok, log
    ok, log = compiles_with(kernels.SHARED_BYTES + 1)
    assert not ok and "the launch size" in log


@needs_nvrtc
def test_compile_errors_name_the_real_file():
    """With the #line directive, an error in the source is reported against cuda/edges.cu."""
    compiler = kernel_check.Nvrtc(NVRTC13)
    options = compile_options(Variant(), 90)
    ok, log = compiler.compile(kernel_source() + "\nthis is not C++;\n", "x.cu", options)
    assert not ok
    assert str(kernel_path()) in log


@needs_nvrtc
def test_check_prints_one_line_per_architecture_and_succeeds():
    """check() reports each architecture and returns exit status 0 when all compile."""
    out = io.StringIO()
    status = kernel_check.check([Variant(), Variant("l2", "constant")], (90, 120), out=out)
    lines = out.getvalue().splitlines()
    assert status == 0, out.getvalue()
    assert lines[1].startswith("ok   sm_90: 2/2 variants compiled, no spills")
    assert lines[2].startswith("ok   sm_120: 2/2")
    assert lines[-1] == "4/4 variant-architectures compiled"


@needs_nvrtc
def test_check_fails_on_a_compile_error(monkeypatch):
    """A variant that does not compile fails the check (exit 1) and its log is printed."""
    monkeypatch.setattr(kernel_check, "kernel_source", lambda name: "#error planted\n")
    out = io.StringIO()
    assert kernel_check.check([Variant()], (90,), out=out) == 1
    assert "FAIL sm_90" in out.getvalue() and "planted" in out.getvalue()


def test_the_cuda_folder_holds_exactly_the_kernels_loaded():
    """The top-level cuda/ holds the kernel sources the code loads, and nothing else."""
    assert {path.name for path in CHECKOUT_CUDA.iterdir()} == LOADED_KERNELS


def test_check_covers_every_cuda_file():
    """make kernel-check compiles every kernel source the code loads (decode.cu included)."""
    assert {kernels.KERNEL_FILE, *kernel_check.OTHER_FILES} == LOADED_KERNELS


@needs_nvrtc
def test_other_files_compile():
    """The files without variants compile for the oldest and newest architectures."""
    out = io.StringIO()
    status = kernel_check.check_files(archs=(75, 120), out=out)
    assert status == 0, out.getvalue()
    assert out.getvalue().splitlines() == [
        f"ok   {name}: 2/2 architectures compiled, no spills" for name in kernel_check.OTHER_FILES
    ]


def test_check_fails_loudly_without_nvrtc(monkeypatch):
    """With no NVRTC library installed, --check exits 1 and says what to install."""
    monkeypatch.setattr(kernel_check, "find_nvrtc", lambda major: None)
    out = io.StringIO()
    assert kernel_check.check(all_variants(), out=out) == 1
    assert "no NVRTC 12 found" in out.getvalue() and "nvidia-cuda-nvrtc" in out.getvalue()


def test_importing_kernels_does_not_import_cupy():
    """edgecli.cuda.compiling, edgecli.edges.variants and make kernel-check work where CuPy is
    not installed."""
    code = "import sys, scripts.kernel_check; sys.exit('cupy' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(__file__).parent.parent, check=False
    )
    assert done.returncode == 0


NVCC_REPORT = """ptxas info    : Compiling entry function 'pack_rows_1bit' for 'sm_90'
ptxas info    : Function properties for pack_rows_1bit
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
ptxas info    : Compiling entry function 'edges_bgr' for 'sm_90'
ptxas info    : Function properties for edges_bgr
    0 bytes stack frame, 0 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 96 registers, used 0 barriers, 128 bytes smem"""
NVRTC_REPORT = """ptxas info    : Function properties for edges_bgr
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 96 registers, used 0 barriers, 392 bytes cmem[0]"""


def test_the_resource_report_names_each_kernel():
    """--check --resources gives each kernel of the file its own registers and spills."""
    assert kernel_check.resource_summary(NVCC_REPORT) == (
        "pack_rows_1bit: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads, "
        "Used 32 registers, used 0 barriers; "
        "edges_bgr: 0 bytes stack frame, 0 bytes spill stores, 8 bytes spill loads, "
        "Used 96 registers, used 0 barriers, 128 bytes smem"
    )
    assert kernel_check.resource_summary(NVRTC_REPORT) == (
        "edges_bgr: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads, "
        "Used 96 registers, used 0 barriers, 392 bytes cmem[0]"
    )


class ReportsInTurn:
    """A compiler whose compiles give ``reports`` in turn (each ok), counting them."""

    def __init__(self, *reports: str):
        self.reports, self.compiles = list(reports), 0

    def compile(self, source, name, options):
        self.compiles += 1
        return True, self.reports.pop(0)


def test_a_spill_ptxas_makes_only_now_and_then_is_compiled_again():
    """A compile that spills is tried again, up to SPILL_ATTEMPTS compiles: one without the
    spill passes; a spill every compile makes is a spill."""
    varies = ReportsInTurn(NVCC_REPORT, NVRTC_REPORT)
    ok, report = kernel_check.compile_unspilled(varies, "", "x.cu", ())
    assert ok and not kernel_check.spilled(report) and varies.compiles == 2
    always = ReportsInTurn(*[NVCC_REPORT] * kernel_check.SPILL_ATTEMPTS)
    ok, report = kernel_check.compile_unspilled(always, "", "x.cu", ())
    assert kernel_check.spilled(report) and always.compiles == kernel_check.SPILL_ATTEMPTS
    clean = ReportsInTurn(NVRTC_REPORT)
    assert kernel_check.compile_unspilled(clean, "", "x.cu", ()) == (True, NVRTC_REPORT)


def test_spills_are_found_in_either_report():
    """Any spill or stack in ptxas's report is a spill; none is none."""
    assert kernel_check.spilled(NVCC_REPORT)
    assert not kernel_check.spilled(NVRTC_REPORT)


def test_starting_the_driver_never_fails_where_there_is_none(monkeypatch):
    """Without an NVIDIA driver (as here), the early driver start returns quietly, and the
    thread it runs on is a daemon that never holds up the process's exit."""
    from edgecli.cuda import driver

    monkeypatch.setattr(driver, "DRIVER_LIBRARY", "libcuda-that-is-not-there.so.1")
    raised = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    thread = driver.start_driver(0)
    thread.join(timeout=5)
    assert raised == []  # the thread raised nothing
    assert thread.daemon and not thread.is_alive()
