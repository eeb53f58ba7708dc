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
    """The default variant is l1 + replicate with the default warps per block, as -D options."""
    assert kernel_defines(Variant()) == (
        "-DEDGES_NORM=EDGES_NORM_L1",
        "-DEDGES_BORDER=EDGES_BORDER_REPLICATE",
        f"-DEDGES_WARPS={kernels.WARPS}",
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("norm", "l3"),
        ("border", "wrap"),
        ("warps", 0),
        ("warps", kernels.MAX_WARPS + 1),
        ("warps", 1.5),
    ],
)
def test_defines_reject_bad_values(field, value):
    """A bad variant value raises OptionError naming that value."""
    with pytest.raises(OptionError, match=re.escape(repr(value))):
        dataclasses.replace(Variant(), **{field: value})


@pytest.mark.parametrize("rows", [30, 54, 78, 270, 1062])
def test_item_rows_of_the_form_24m_plus_6_are_accepted(rows):
    assert kernels.check_item_rows(rows) == rows


@pytest.mark.parametrize("rows", [0, 6, 24, 29, 31, 32, 60, 62, 30.0, "30"])
def test_other_item_rows_are_refused(rows):
    """L + 2 staged rows must fill 8-row slots and the rows after the first 6 go 24 at a time."""
    with pytest.raises(ValueError, match=re.escape(repr(rows))):
        kernels.check_item_rows(rows)


def _launch_cost(rows: int, n_frames: int, height: int, width: int, warps: int) -> int:
    """Staged rows of the busiest warp: what choose_item_rows minimises (its docstring)."""
    items = n_frames * -(-width // kernels.TILE_W) * -(-height // rows)
    return -(-items // warps) * (rows + 2)


@pytest.mark.parametrize(
    ("n_frames", "height", "width", "expected"),
    [
        (32, 1080, 1920, 270),  # 4 items a column: 1920 items, one round on 2112 warps
        (1, 1080, 1920, 30),  # one frame: the most items, 540 of 2112 warps busy
        (32, 720, 1280, 30),  # 30 divides 720, and there are plenty of items
        (1, 1, 1, 30),  # the shortest item for the smallest frame
    ],
)
def test_item_rows_chosen_for_h200_launches(n_frames, height, width, expected):
    """On 2112 resident warps (132 SMs x 16), the choice for a few launches, worked by hand."""
    assert kernels.choose_item_rows(n_frames, height, width, 2112) == expected


@pytest.mark.parametrize("warps", [1, 7, 132, 2112])
@pytest.mark.parametrize(
    ("n_frames", "height", "width"),
    [(32, 1080, 1920), (32, 2160, 3840), (5, 481, 641), (1, 4320, 7680), (100, 37, 100)],
)
def test_item_rows_choice_is_the_cheapest(n_frames, height, width, warps):
    """No allowed height up to the frame's own has a lower cost than the chosen one."""
    chosen = kernels.choose_item_rows(n_frames, height, width, warps)
    kernels.check_item_rows(chosen)
    assert chosen < height + kernels.ITEM_ROWS_STEP
    cost = _launch_cost(chosen, n_frames, height, width, warps)
    for rows in range(kernels.MIN_ITEM_ROWS, height + kernels.ITEM_ROWS_STEP, 24):
        assert cost <= _launch_cost(rows, n_frames, height, width, warps), rows


def test_all_variants_cover_every_norm_and_border():
    """--check compiles each norm x border once."""
    pairs = {(v.norm, v.border) for v in all_variants()}
    assert pairs == {(n, b) for n in ("l1", "l2") for b in ("replicate", "reflect101", "constant")}
    assert len(all_variants()) == len(pairs)


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
    """Variant.shared_bytes (what a launch allocates) uses the staged-row stride and ring size
    edges.cu asserts, for one ring per warp."""
    assert f"STAGE_STRIDE == {kernels.STAGE_STRIDE}" in kernel_source()
    assert f"RING_ROWS == {kernels.RING_ROWS}" in kernel_source()
    assert Variant().shared_bytes == 4 * 32 * 416
    assert Variant(warps=8).shared_bytes == 8 * 32 * 416


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
