"""The kernel source and its variants, on the CPU: no GPU and no CuPy needed."""

from __future__ import annotations

import dataclasses
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edgecli import kernels
from edgecli.errors import OptionError
from edgecli.kernels import Variant, all_variants, kernel_defines, kernel_path, kernel_source

NVCC = kernels.find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, CUDA_HOME)")


def test_default_defines():
    """The default variant is l1 + replicate on the default tile, as -D options."""
    assert kernel_defines(Variant()) == (
        "-DEDGES_NORM=EDGES_NORM_L1",
        "-DEDGES_BORDER=EDGES_BORDER_REPLICATE",
        f"-DEDGES_TILE_H={kernels.TILE_H}",
        f"-DEDGES_WARPS={kernels.WARPS}",
        "-DEDGES_HALO_LOADS=0",
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("norm", "l3"),
        ("border", "wrap"),
        ("tile_h", 0),
        ("tile_h", 33),  # 35 staged rows: not four slots
        ("tile_h", 29),  # rows are walked three at a time
        ("tile_h", 12),  # 14 staged rows: not four slots
        ("tile_h", 30.0),
        ("warps", 0),
        ("warps", kernels.MAX_WARPS + 1),
        ("warps", 1.5),
        ("halo_loads", 1),
    ],
)
def test_defines_reject_bad_values(field, value):
    """A bad variant value raises OptionError naming that value."""
    with pytest.raises(OptionError, match=re.escape(repr(value))):
        dataclasses.replace(Variant(), **{field: value})


def test_all_variants_cover_every_norm_and_border():
    """--check compiles each norm x border once with the halo columns staged, once with the
    left one loaded by hand."""
    keys = {(v.norm, v.border, v.halo_loads) for v in all_variants()}
    assert keys == {
        (n, b, h)
        for n in ("l1", "l2")
        for b in ("replicate", "reflect101", "constant")
        for h in (False, True)
    }
    assert len(all_variants()) == len(keys)


@pytest.mark.parametrize(
    ("variant", "fitting", "expected"),
    [
        (Variant("l1"), 4, 2),  # 8 warps an SM: 2 blocks of 4
        (Variant("l2"), 4, 3),  # 12 warps an SM: 3 blocks of 4
        (Variant("l1"), 1, 1),  # never more than fit
        (Variant("l2", warps=8), 2, 1),  # never less than one block
        (Variant("l1", warps=1), 20, 8),
        (Variant("l1", warps=8), 2, 1),
        (Variant("l1", halo_loads=True), 3, 3),  # other layouts: every block that fits
        (Variant("l1", tile_h=18, warps=8), 2, 2),
        (Variant("l2", tile_h=6, warps=8), 2, 2),
    ],
)
def test_blocks_per_sm_holds_staged_30_row_items_to_their_warps_an_sm(variant, fitting, expected):
    assert kernels.blocks_per_sm(variant, fitting) == expected


def test_every_norm_has_its_warps_an_sm():
    assert set(kernels.WARPS_PER_SM) == set(kernels.NORMS)


def test_source_is_found_in_the_checkout():
    """The .cu file is found beside the package (checkout) or inside it (wheel)."""
    path = kernel_path()
    assert path.is_file()
    assert path.name == "edges.cu"
    assert path.parent == kernels.cuda_dir()


def test_source_starts_with_a_line_directive_naming_the_real_file():
    """Compiler messages point at cuda/edges.cu, not at a temporary copy."""
    first, rest = kernel_source().split("\n", 1)
    assert first == f'#line 1 "{kernel_path().as_posix()}"'
    assert rest == kernel_path().read_text(encoding="utf-8")


def test_source_includes_no_headers():
    """NVRTC compiles the file on its own: no #include."""
    assert not [
        line for line in kernel_source().splitlines() if line.lstrip().startswith("#include")
    ]


def test_source_names_the_function_that_supplies_its_defines():
    """The .cu header says where its -D definitions come from."""
    assert "edgecli.kernels.kernel_defines()" in kernel_source()


@needs_nvcc
@pytest.mark.parametrize("variant", all_variants(), ids=lambda v: v.name)
def test_every_variant_compiles_for_sm90(variant):
    """nvcc -arch=sm_90 -cubin accepts each variant without warnings, and nothing spills."""
    result = kernels.compile_with_nvcc(NVCC, variant)
    assert result.ok, result.report
    assert "0 bytes spill stores" in result.report


def test_shared_memory_size_matches_the_source():
    """Variant.shared_bytes (what a launch allocates) uses the staged-row stride edges.cu
    asserts, for one ring of tile_h + 2 rows per warp."""
    assert f"STAGE_STRIDE == {kernels.STAGE_STRIDE}" in kernel_source()
    assert f"#define SLOTS {kernels.SLOTS}" in kernel_source()
    assert Variant().shared_bytes == 4 * 32 * 416
    assert Variant(tile_h=18, warps=8).shared_bytes == 8 * 20 * 416


@needs_nvcc
def test_compile_errors_name_the_real_file(tmp_path):
    """With the #line directive, an error in the source is reported against cuda/edges.cu."""
    broken = tmp_path / "copy.cu"
    broken.write_text(kernel_source() + "\nthis is not C++;\n", encoding="utf-8")
    done = subprocess.run(
        [
            NVCC,
            "-arch=sm_90",
            "-cubin",
            "-o",
            str(tmp_path / "x.cubin"),
            *kernel_defines(Variant()),
            str(broken),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert str(kernel_path()) in done.stderr + done.stdout


@needs_nvcc
def test_check_prints_one_line_per_variant_and_succeeds():
    """check() reports each variant and returns exit status 0 when all compile."""
    out = io.StringIO()
    status = kernels.check([Variant(), Variant("l2", "constant")], resources=True, out=out)
    lines = out.getvalue().splitlines()
    assert status == 0
    assert [line.split()[0] for line in lines[1:3]] == ["ok", "ok"]
    assert "registers" in lines[1]
    assert lines[-1] == "2/2 variants compiled"


def test_check_fails_loudly_without_any_compiler(monkeypatch):
    """With neither nvcc nor CuPy's NVRTC, --check exits 1 and says why."""
    monkeypatch.setattr(kernels, "find_nvcc", lambda: None)
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setitem(sys.modules, "cupy.cuda", None)
    monkeypatch.setitem(sys.modules, "cupy.cuda.compiler", None)
    out = io.StringIO()
    assert kernels.check(all_variants(), out=out) == 1
    assert "no CUDA compiler" in out.getvalue()


def test_importing_kernels_does_not_import_cupy():
    """edgecli.kernels (and so make kernel-check) works where CuPy is not installed."""
    code = "import sys, edgecli.kernels; sys.exit('cupy' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(__file__).parent.parent, check=False
    )
    assert done.returncode == 0


def test_the_resource_report_names_each_kernel():
    """--check --resources gives each kernel of the file its own registers and spills."""
    report = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'pack_rows_1bit' for 'sm_90'
ptxas info    : Function properties for pack_rows_1bit
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
ptxas info    : Compile time = 15.465 ms
ptxas info    : Compiling entry function 'edges_bgr' for 'sm_90'
ptxas info    : Function properties for edges_bgr
    0 bytes stack frame, 0 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 96 registers, used 0 barriers, 128 bytes smem"""
    assert kernels._resource_summary(report) == (
        "pack_rows_1bit: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads, "
        "Used 32 registers, used 0 barriers; "
        "edges_bgr: 0 bytes stack frame, 0 bytes spill stores, 8 bytes spill loads, "
        "Used 96 registers, used 0 barriers, 128 bytes smem"
    )
