"""``--operator canny`` on the command line and in the library: runs whose outputs are
cv2.Canny's on the contract's luma, -t LOW,HIGH and -t auto, the values refused (exit 2, one
line, nothing written), and the records that keep Canny and Sobel outputs apart."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

import edgecli
from edgecli import OptionError
from edgecli.options.params import Options, parse_pair
from edgecli.pipeline.preview import SPREAD, preview
from tests import canny_reference

from .helpers import folder_bytes, invoke, png_pixels, same_bytes
from .media import SAMPLE_FRAMES, photo
from .test_preview import check_sheet, run_outputs


def sources() -> dict[str, np.ndarray]:
    """The sample frames, BGR, by the name of their output."""
    return {f"{p.stem}.png": cv2.imread(str(p)) for p in sorted(SAMPLE_FRAMES.glob("pan_*"))}


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


@pytest.mark.parametrize("name", sorted(sources()))
@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_detect_edges_is_cv2_canny_of_cvtcolor(name, norm):
    """The contract: detect_edges(operator='canny') is cv2.Canny(cv2.cvtColor(frame,
    BGR2GRAY), low, high, L2gradient=...) byte for byte."""
    frame = sources()[name]
    gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
    for low, high in [(50, 150), (150, 50), (20.5, 40.25), (0, 0)]:
        expected = cv2.Canny(gray, low, high, L2gradient=norm == "l2")
        actual = edgecli.detect_edges(
            frame, operator="canny", threshold=(low, high), norm=norm, backend="cpu"
        )
        assert np.array_equal(actual, expected), (low, high)


@pytest.mark.parametrize(
    "text, pair",
    [("50,150", (50, 150)), ("150.5,40.25", (150.5, 40.25)), ("0,0", (0, 0)),
     ("5000,5000", (5000, 5000)), (" 7 , 9 ", (7, 9)), ("99999999999999999999999,3", (3, 1e23)),
     ("1" + "0" * 400 + ",3", (3, 10**400)), ("3," + "9" * 400 + ".5", (3, 10**400))],
)  # fmt: skip
@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_run_writes_canny_edges(tmp_path, text, pair, norm):
    """A CPU run with --operator canny -t LOW,HIGH writes each frame's reference Canny edges,
    and records the operator and the pair in its summary."""
    out = tmp_path / "out"
    args = ["--operator", "canny", "-t", text, "--norm", norm, "--backend", "cpu", "-q"]
    result = invoke("run", SAMPLE_FRAMES, "-o", out, *args, "--json-summary", tmp_path / "s.json")
    assert result.exit_code == 0, result.output
    written = png_pixels(out)
    assert sorted(written) == sorted(sources())
    for name, frame in sources().items():
        expected = canny_reference.canny_bgr(frame, *pair, norm == "l2")
        assert np.array_equal(written[name], expected), name
    summary = (tmp_path / "s.json").read_text()
    assert '"operator": "canny"' in summary


@pytest.mark.parametrize(
    "value, message",
    [
        ("1,", "'1,' is not LOW,HIGH: two numbers >= 0 such as 100,200"),
        (",2", "',2' is not LOW,HIGH: two numbers >= 0 such as 100,200"),
        ("1,2,3", "'1,2,3' is not LOW,HIGH: two numbers >= 0 such as 100,200"),
        ("1e3,5", "'1e3,5' is not LOW,HIGH: two numbers >= 0 such as 100,200"),
        ("a,b", "'a,b' is not LOW,HIGH: two numbers >= 0 such as 100,200"),
        ("-1,5", "canny thresholds must be >= 0, got '-1,5'"),
        ("5,-1", "canny thresholds must be >= 0, got '5,-1'"),
    ],
)
def test_run_refuses_malformed_pairs(tmp_path, value, message):
    """A malformed -t LOW,HIGH is a usage error (exit 2) naming it; nothing is written."""
    out = tmp_path / "out"
    result = invoke("run", SAMPLE_FRAMES, "-o", out, "--operator", "canny", "-t", value)
    assert result.exit_code == 2, result.output
    assert error_lines(result.stderr) == [
        f"Error: Invalid value for '-t' / '--threshold': {message}"
    ]
    assert not out.exists()


@pytest.mark.parametrize("value, pair", [("-0,5", (0, 5)), ("3,-0.0", (3, 0))])
def test_a_negative_zero_is_zero_as_under_sobel(value, pair):
    """-t -0 is 0 for Sobel; a -0 in a Canny pair is 0 too, not a negative threshold."""
    assert parse_pair(value) == pair
    assert Options(operator="canny", threshold=parse_pair(value)).canny_limits == (0, max(pair))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--operator", "canny", "-t", "100"],
         "canny takes two thresholds, low and high, such as 100,200 (or auto); got 100"),
        (["--operator", "canny", "-t", "5%"],
         "threshold '5%': a share of edge pixels chooses a Sobel threshold; Canny's share "
         "depends on its hysteresis, so give low,high or auto"),
        (["-t", "50,150"],
         "threshold 50,150 is a pair (low, high), which only the canny operator takes; sobel "
         "takes one number"),
        (["--operator", "canny", "--border", "reflect101"],
         "border 'reflect101' does not apply to canny: its Sobel always uses the replicate "
         "border, as cv2.Canny's"),
        (["--operator", "canny", "--border", "constant", "-t", "1,2"],
         "border 'constant' does not apply to canny: its Sobel always uses the replicate "
         "border, as cv2.Canny's"),
    ],
)  # fmt: skip
def test_run_refuses_what_the_operator_does_not_take(tmp_path, args, message):
    """A threshold or border the operator does not take: one Error: line, exit 2, nothing
    written."""
    out = tmp_path / "out"
    result = invoke("run", SAMPLE_FRAMES, "-o", out, "--backend", "cpu", *args)
    assert result.exit_code == 2, result.output
    assert error_lines(result.stderr) == [f"Error: {message}"]
    assert not out.exists()


def test_auto_is_otsus_threshold_as_high_and_half_as_low(tmp_path):
    """-t auto under canny picks (T // 2, T), T what -t auto picks for Sobel with the same
    norm and border (Otsu's of the same magnitudes), once for the run; the outputs are Canny's
    at that pair."""
    sobel = edgecli.process(SAMPLE_FRAMES, tmp_path / "sobel", threshold="auto", backend="cpu")
    t = sobel.params["threshold"]
    summary = edgecli.process(
        SAMPLE_FRAMES, tmp_path / "canny", operator="canny", threshold="auto", backend="cpu"
    )
    assert summary.params["threshold"] == [t // 2, t]
    assert summary.params["threshold_rule"] == "auto"
    written = png_pixels(tmp_path / "canny")
    for name, frame in sources().items():
        assert np.array_equal(written[name], canny_reference.canny_bgr(frame, t // 2, t)), name


def test_cli_auto_says_what_it_chose(tmp_path):
    """The run says the pair -t auto chose, and how, on stderr."""
    result = invoke("run", SAMPLE_FRAMES, "-o", tmp_path / "o", "--operator", "canny",
                    "-t", "auto", "--backend", "cpu")  # fmt: skip
    assert result.exit_code == 0, result.output
    chosen = edgecli.process(SAMPLE_FRAMES, tmp_path / "p", operator="canny", threshold="auto",
                             backend="cpu").params["threshold"]  # fmt: skip
    low, high = chosen
    assert f"-t auto: canny thresholds {low},{high} (Otsu's as high, half of it as low" in (
        result.stderr
    )


@pytest.mark.parametrize(
    "first, second",
    [(["-t", "100"], ["--operator", "canny", "-t", "50,100"]),
     (["--operator", "canny", "-t", "50,100"], ["-t", "100"]),
     (["--operator", "canny", "-t", "50,100"], ["--operator", "canny", "-t", "50,101"])],
)  # fmt: skip
def test_skip_existing_keeps_apart_canny_and_sobel_outputs(tmp_path, first, second):
    """--skip-existing refuses a folder made by the other operator or other thresholds."""
    out = tmp_path / "out"
    common = ["run", SAMPLE_FRAMES, "-o", out, "--backend", "cpu", "-q"]
    assert invoke(*common, *first).exit_code == 0
    result = invoke(*common, *second, "--skip-existing")
    assert result.exit_code == 2, result.output
    assert "made with other options" in result.stderr


def test_skip_existing_resumes_a_canny_folder(tmp_path):
    """A Canny folder is resumed by the same Canny options, its outputs kept."""
    out = tmp_path / "out"
    common = ["run", SAMPLE_FRAMES, "-o", out, "--backend", "cpu", "-q", "--operator", "canny",
              "-t", "40.5,90"]  # fmt: skip
    assert invoke(*common).exit_code == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.png")}
    result = invoke(*common, "--skip-existing")
    assert result.exit_code == 0, result.output
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.png")} == before


def test_expect_tells_canny_from_sobel(tmp_path):
    """A Sobel run's manifest does not pass a Canny run of the same folder (exit 5)."""
    manifest = tmp_path / "m.json"
    common = ["run", SAMPLE_FRAMES, "-o", tmp_path / "out", "--backend", "cpu", "-q"]
    assert invoke(*common, "--write-expected", manifest).exit_code == 0
    result = invoke(*common, "--operator", "canny", "--expect", manifest)
    assert result.exit_code == 5, result.output
    assert "options differ: operator canny (expected missing)" in result.stderr


# Preview -------------------------------------------------------------------------------


def test_preview_tiles_are_canny_run_outputs(tmp_path):
    """preview --operator canny with pairs and auto: each tile is the Canny run's output at
    that pair; the message lists the pairs."""
    sheet = tmp_path / "sheet.png"
    args = ["--operator", "canny", "-t", "50,150", "-t", "auto", "-t", "20.5,40", "--backend",
            "cpu", "--samples", 3, "--width", 900]  # fmt: skip
    result = invoke("preview", SAMPLE_FRAMES, "-o", sheet, *args)
    assert result.exit_code == 0, result.output
    auto = tuple(edgecli.process(SAMPLE_FRAMES, tmp_path / "auto", operator="canny",
                                 threshold="auto", backend="cpu").params["threshold"])  # fmt: skip
    shown = preview([SAMPLE_FRAMES], tmp_path / "again.png", edgecli.Options(
        operator="canny", backend="cpu"), thresholds=[(50, 150), "auto", (20.5, 40)], frames=3,
        width=900)  # fmt: skip
    assert shown["thresholds"] == sorted([(50, 150), auto, (20.5, 40)])
    assert shown["rules"] == {auto: "auto"}
    listed = "; ".join(",".join(map(str, t)) for t in shown["thresholds"])
    assert f"at thresholds {listed} (cpu)" in result.stderr
    folders = run_outputs(SAMPLE_FRAMES, tmp_path, shown["thresholds"], operator="canny")
    check_sheet(sheet, shown, folders, width=900)


def test_preview_default_spreads_auto_high(tmp_path):
    """With no -t, canny's preview shows auto's high times the spread, low half of each."""
    options = edgecli.Options(operator="canny", backend="cpu")
    shown = preview([SAMPLE_FRAMES], tmp_path / "s.png", options, frames=2, width=600)
    auto = shown["auto"]
    assert auto is not None and auto[0] == auto[1] // 2
    highs = sorted({max(0, round(auto[1] * f)) for f in SPREAD})
    assert shown["thresholds"] == [(h // 2, h) for h in highs]


@pytest.mark.parametrize(
    "values, message",
    [
        (["50"], "Error: canny takes two thresholds, low and high, such as 100,200 (or auto); "
                 "got 50"),
        (["50,150,100,200"],
         "Error: Invalid value for '-t' / '--thresholds': '50,150,100,200' is not LOW,HIGH: "
         "two numbers >= 0 such as 100,200 (canny: one pair a -t, as in -t 50,150 -t 100,200)"),
        (["5%"], "Error: threshold '5%': a share of edge pixels chooses a Sobel threshold; "
                 "Canny's share depends on its hysteresis, so give low,high or auto"),
    ],
)  # fmt: skip
def test_preview_refuses_what_canny_does_not_take(tmp_path, values, message):
    """A threshold canny does not take: exit 2, one Error: line, no sheet."""
    t_args = [arg for value in values for arg in ("-t", value)]
    result = invoke("preview", SAMPLE_FRAMES, "-o", tmp_path / "s.png", "--operator", "canny",
                    "--backend", "cpu", *t_args)  # fmt: skip
    assert result.exit_code == 2, result.output
    assert error_lines(result.stderr) == [message]
    assert list(tmp_path.iterdir()) == []


def test_sobel_preview_takes_several_t(tmp_path):
    """Sobel's preview thresholds may come in several -t, each a list: all are shown."""
    result = invoke("preview", SAMPLE_FRAMES, "-o", tmp_path / "s.png", "--backend", "cpu",
                    "-t", "140,60", "-t", "100")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "at thresholds 60, 100, 140 (cpu)" in result.stderr


def test_odd_frames_run_through_the_pipeline(tmp_path):
    """Frames of odd sizes (1x1, 1xN, Nx1, 2x2) run through the whole pipeline under canny
    and come out as the reference's edges."""
    folder = tmp_path / "in"
    folder.mkdir()
    shapes = [(1, 1), (1, 19), (19, 1), (2, 2), (33, 65)]
    for i, shape in enumerate(shapes):
        assert cv2.imwrite(str(folder / f"f{i}.png"), photo(*shape, seed=i))
    out = tmp_path / "out"
    edgecli.process(folder, out, operator="canny", threshold=(10, 30), backend="cpu")
    written = png_pixels(out)
    for i, shape in enumerate(shapes):
        expected = canny_reference.canny_bgr(photo(*shape, seed=i), 10, 30)
        assert np.array_equal(written[f"f{i}.png"], expected), shape


def test_canny_auto_on_a_cluster_equals_a_plain_run(tmp_path):
    """--operator canny -t auto on a local:2 Dask cluster: the pair chosen once, the plain
    run's, and its files byte for byte, its manifest holding."""
    pytest.importorskip("distributed", reason="the cluster extra is not installed")
    golden = tmp_path / "golden.json"
    args = ["--backend", "cpu", "-q", "--operator", "canny", "-t", "auto", "--norm", "l2"]
    plain = invoke("run", SAMPLE_FRAMES, "-o", tmp_path / "plain", *args,
                   "--write-expected", golden)  # fmt: skip
    assert plain.exit_code == 0, plain.output
    out = tmp_path / "cluster"
    result = invoke("run", SAMPLE_FRAMES, "-o", out, *args, "--scheduler", "local:2",
                    "--expect", golden, "--json-summary", tmp_path / "s.json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert folder_bytes(out) == folder_bytes(tmp_path / "plain")
    params = json.loads((tmp_path / "s.json").read_text())["params"]
    assert params["operator"] == "canny" and params["threshold_rule"] == "auto"


def test_gpu_pipeline_path_writes_canny_edges(tmp_path):
    """The pipeline's GPU path (batches on slabs, here a stand-in backend computing the
    reference) writes the CPU backend's Canny PNGs, byte for byte."""
    from edgecli import pipeline

    from .standins import StandInGpuBackend

    options = edgecli.Options(operator="canny", threshold=(30, 70), norm="l2", batch=3)
    summary = pipeline.run(SAMPLE_FRAMES, tmp_path / "gpu", options,
                           backend=StandInGpuBackend(options))  # fmt: skip
    edgecli.process(SAMPLE_FRAMES, tmp_path / "cpu", operator="canny", threshold=(30, 70),
                    norm="l2", backend="cpu")  # fmt: skip
    assert summary.frames == len(sources())
    same_bytes(tmp_path / "cpu", tmp_path / "gpu")


def test_sobel_threshold_is_not_cannys():
    """Canny options have no single Sobel threshold: asking for one is an error saying so."""
    with pytest.raises(OptionError, match="the canny operator has no single threshold"):
        edgecli.Options(operator="canny").effective_threshold  # noqa: B018
