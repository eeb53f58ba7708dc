"""The edgecli command through click's CliRunner: exit codes and exact messages."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import cv2
import pytest

from edgecli import __version__
from edgecli.edges.backends import cuda_unusable_reason
from edgecli.output.resume import MANIFEST_NAME

from .helpers import invoke
from .media import REPO, photo, write_video

JSON_KEYS = {
    "schema", "frames", "failed", "wall_s", "fps", "megapixels", "megapixels_per_s",
    "backend", "device", "params", "workers", "output", "stages", "bottleneck",
    "bottleneck_detail", "skipped_existing", "interrupted", "gpu_busy_fraction",
    "main_thread_waits_s", "decoders", "videos", "busy",
}  # fmt: skip
STAGE_KEYS = {"count", "total_ms", "mean_ms", "p50_ms", "p95_ms"}


@pytest.fixture
def frames_dir(tmp_path):
    folder = tmp_path / "frames"
    folder.mkdir()
    for i in range(3):
        cv2.imwrite(str(folder / f"f{i}.png"), photo(21, 34, seed=i))
    return folder


def test_version():
    """--version prints the package version."""
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"edgecli, version {__version__}\n"


def test_run_writes_pngs_and_summary(frames_dir, tmp_path):
    """A run exits 0, writes one PNG per frame and a two-line summary on stderr: frames, time
    and fps, then the bottleneck in words."""
    result = invoke("run", frames_dir, "-o", tmp_path / "out", "--backend", "cpu")
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == [MANIFEST_NAME, "f0.png", "f1.png", "f2.png"]
    assert result.stdout == ""
    result_line, bottleneck = result.stderr.splitlines()
    assert re.fullmatch(
        rf"edgecli: 3 frame\(s\) -> {re.escape(str(tmp_path / 'out'))} in \d+\.\d\d s "
        r"\(\d+\.\d fps\) on cpu",
        result_line,
    )
    assert re.match(r"  (\w+-bound|not bound): ", bottleneck)


def test_verbose_adds_every_stage(frames_dir, tmp_path):
    """-v adds the time of every stage, the workers and the decoders to the summary."""
    result = invoke("run", frames_dir, "-o", tmp_path / "out", "--backend", "cpu", "-v")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    stages = [line.split()[0] for line in lines if re.match(r"  \w+ +total ", line)]
    assert stages == ["decode", "compute", "encode", "write"]
    assert any(
        re.fullmatch(r"edgecli: 3 frame.* on cpu \[cpu\], \d+ worker\(s\)", x) for x in lines
    )
    assert "  decoded by: cpu 3" in lines


def test_quiet_prints_nothing(frames_dir, tmp_path):
    """-q leaves stdout and stderr empty on success."""
    result = invoke("run", frames_dir, "-o", tmp_path / "out", "--backend", "cpu", "-q")
    assert result.exit_code == 0 and result.output == ""


@pytest.mark.parametrize("quiet", [False, True])
def test_a_skipped_frame_is_said_even_under_quiet(frames_dir, tmp_path, quiet):
    """A frame skipped under --on-error skip is named on stderr, and the run ends with its
    Error line (exit 3), with or without -q; -q leaves out only the summary."""
    (frames_dir / "f1.png").write_bytes(b"not a png")
    args = ["run", frames_dir, "-o", tmp_path / "out", "--backend", "cpu", "--on-error", "skip"]
    result = invoke(*args, *(["-q"] if quiet else []))
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert lines[0] == (
        f"edgecli: skipped {frames_dir / 'f1.png'}: not a decodable image (corrupt, truncated "
        "or wrong type)"
    )
    assert lines[-1] == "Error: 1 frame(s) skipped after errors"
    summary = [line for line in lines if line.startswith("edgecli: 2 frame(s) -> ")]
    assert len(summary) == (0 if quiet else 1)
    assert quiet or summary[0].endswith(" on cpu; 1 failed")
    assert len(lines) == (2 if quiet else 4)


@pytest.mark.parametrize("how", ["library", "command -q"])
def test_a_run_without_a_progress_bar_does_not_load_one(frames_dir, tmp_path, how):
    """A library call, or `edgecli run -q`, draws no bar and never imports tqdm (20-30 ms of
    a run's start-up)."""
    run = {
        "library": "edgecli.process(sys.argv[1], sys.argv[2], backend='cpu')",
        "command -q": "edgecli.cli.main(['run', sys.argv[1], '-o', sys.argv[2], '-q', "
        "'--backend', 'cpu'], standalone_mode=False)",
    }[how]
    code = f"import sys, edgecli, edgecli.cli\n{run}\nprint('tqdm' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code, str(frames_dir), str(tmp_path / "out")],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False"
    assert len(list((tmp_path / "out").glob("*.png"))) == 3


def test_json_summary_to_stdout(frames_dir, tmp_path):
    """--json-summary - prints the documented JSON schema on stdout, and only that."""
    result = invoke(
        "run", frames_dir, "-o", tmp_path / "out", "--backend", "cpu", "-q", "--json-summary", "-"
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert set(summary) == JSON_KEYS
    assert summary["frames"] == 3 and summary["failed"] == [] and summary["backend"] == "cpu"
    assert summary["decoders"] == {"cpu": 3}
    assert summary["params"] == {
        "threshold": 100,
        "norm": "l1",
        "border": "replicate",
        "png_bits": 1,
        "shard": None,
    }
    assert {"decode", "compute", "encode", "write"} <= set(summary["stages"])
    assert all(set(s) == STAGE_KEYS for s in summary["stages"].values())
    assert summary["bottleneck"] in set(summary["stages"]) | {"handoff", "none"}
    assert set(summary["busy"]) == {"workers", "main"}  # no video: the reader never ran
    assert summary["busy"]["workers"]["lanes"] == summary["workers"]
    assert set(summary["busy"]["workers"]["stages_s"]) == {"decode", "compute", "encode", "write"}
    assert set(summary["main_thread_waits_s"]) == {"decode", "encode"}
    assert all(s >= 0 for s in summary["main_thread_waits_s"].values())


def test_json_summary_to_file(frames_dir, tmp_path):
    """--json-summary PATH writes the same JSON to a file."""
    target = tmp_path / "summary.json"
    result = invoke(
        "run", frames_dir, "-o", tmp_path / "out", "--backend", "cpu", "--json-summary", target
    )
    assert result.exit_code == 0
    assert json.loads(target.read_text())["frames"] == 3


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["-t", "-1"], 2, "Invalid value for '-t' / '--threshold': -1 is not in the range x>=0."),
        (["--norm", "l3"], 2, "Invalid value for '--norm': 'l3' is not one of 'l1', 'l2'."),
        (["--png-bits", "4"], 2, "Invalid value for '--png-bits': '4' is not one of '1', '8'."),
        (["--workers", "0"], 2, "Invalid value for '--workers': 0 is not in the range x>=1."),
        (
            ["--max-memory", "lots"],
            2,
            "Invalid value for '--max-memory': 'lots' is not a size in bytes (e.g. 2000000000, "
            "512M, 4G)",
        ),
    ],
)
def test_usage_errors(frames_dir, tmp_path, args, code, message):
    """Bad option values are usage errors (exit 2) naming the option and the value."""
    result = invoke("run", frames_dir, "-o", tmp_path / "out", *args)
    assert result.exit_code == code
    assert result.stderr.splitlines()[-1] == f"Error: {message}"


def test_workers_above_the_cap_are_a_usage_error(frames_dir, tmp_path):
    """--workers past 4 per usable CPU core: exit 2 before any work, naming limit and value.
    (One past the limit: a value that, accepted, still runs, as 99999999999 would not.)"""
    limit = 4 * len(os.sched_getaffinity(0))
    result = invoke("run", frames_dir, "-o", tmp_path / "out", "--workers", limit + 1)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: workers must be <= {limit} (4 per usable CPU core")
    assert result.stderr.endswith(f", got {limit + 1}\n") and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_default_workers_follow_the_cpus_this_process_may_use(frames_dir, tmp_path):
    """Run pinned to one CPU (sched_setaffinity), the default is 1 worker, whatever the
    machine's core count."""
    script = (
        "import os, sys; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from edgecli.cli import main; sys.argv[0] = 'edgecli'; main()"
    )
    args = ["run", str(frames_dir), "-o", str(tmp_path / "out"), "--backend", "cpu", "-q"]
    result = subprocess.run(
        [sys.executable, "-c", script, *args, "--json-summary", "-"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["workers"] == 1


def test_missing_output_option(frames_dir):
    """-o is required."""
    result = invoke("run", frames_dir)
    assert result.exit_code == 2
    assert "Missing option '-o' / '--output'" in result.stderr


def test_missing_input(tmp_path):
    """A path that does not exist: exit 1, one line naming it."""
    result = invoke("run", tmp_path / "nope", "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {tmp_path / 'nope'}: no such file or folder\n"


def test_empty_folder(tmp_path):
    """A folder with no frames: exit 1 and a message listing what was looked for."""
    (tmp_path / "empty").mkdir()
    result = invoke("run", tmp_path / "empty", "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {tmp_path / 'empty'}: no frames in this folder")


def test_glob_matching_nothing(tmp_path):
    """An unmatched glob: exit 1, quoting the pattern."""
    pattern = str(tmp_path / "*.jpg")
    result = invoke("run", pattern, "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr == f"Error: no files match the pattern {pattern!r}\n"


def test_corrupt_frame(frames_dir, tmp_path):
    """A corrupt frame: exit 1, one line naming the file and the reason, no traceback."""
    (frames_dir / "f1.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    result = invoke("run", frames_dir, "-o", tmp_path / "out", "--backend", "cpu")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"Error: {frames_dir / 'f1.png'}: not a decodable image (corrupt PNG: no IHDR chunk first)"
    )
    assert "Traceback" not in result.output


def test_name_collision_exit_code(frames_dir, tmp_path):
    """Two inputs for one output name: exit 2 before any output exists."""
    cv2.imwrite(str(frames_dir / "f0.jpg"), photo(8, 8))
    result = invoke("run", frames_dir, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: output name collision: {frames_dir / 'f0.jpg'} and {frames_dir / 'f0.png'} "
        "would both write f0.png; rename one or process them separately\n"
    )
    assert not (tmp_path / "out").exists()


def test_output_is_a_file(frames_dir, tmp_path):
    """-o naming an existing file is an unwritable output (exit 1, as the README's table and
    the library's OutputError say), in one line, and the file is left as it was."""
    target = tmp_path / "file.txt"
    target.write_text("x")
    result = invoke("run", frames_dir, "-o", target, "--backend", "cpu")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {target}: output path exists and is not a folder\n"
    assert target.read_text() == "x"


@pytest.mark.parametrize(
    "args, message",
    [
        (["-o", ""], "output folder is empty (''); name a path ('.' for the current folder)"),
        (["-o", "out", "--timings-csv", ""], "timings CSV path is empty (''); name a path ('.' "
         "for the current folder)"),
        (["-o", "out", "--json-summary", ""], "JSON summary path is empty (''); name a path "
         "('.' for the current folder)"),
        (["", "-o", "out"], "an INPUT is empty (''): name a folder, a file or a glob"),
    ],
    ids=["output", "timings-csv", "json-summary", "input"],
)  # fmt: skip
def test_empty_paths_are_usage_errors(frames_dir, tmp_path, monkeypatch, args, message):
    """An empty path ('', as an unset shell variable gives) is a usage error (exit 2), not
    the current folder: nothing is written there."""
    monkeypatch.chdir(tmp_path)
    result = invoke("run", frames_dir, *args, "--backend", "cpu")
    assert result.exit_code == 2, result.output
    assert result.stderr == f"Error: {message}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames"]


def test_output_folder_that_is_the_recursive_input(frames_dir):
    """run same -o same --recursive: every image lies in the output folder, which the scan
    leaves out; the error says so (exit 2) instead of 'no frames in this folder'."""
    result = invoke("run", frames_dir, "-o", frames_dir, "--recursive", "--backend", "cpu")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: {frames_dir}: every image in this folder lies in the output folder "
        f"{frames_dir}, which a recursive scan leaves out (it holds outputs, not frames); "
        "choose an output folder outside the input\n"
    )


@pytest.mark.parametrize("option", ["--timings-csv", "--json-summary"])
def test_report_that_would_overwrite_an_input(frames_dir, tmp_path, option):
    """A timings CSV or JSON summary named like an input is refused (exit 2) before any
    work, and the input is left as it was."""
    frame = frames_dir / "f1.png"
    before = frame.read_bytes()
    result = invoke("run", frames_dir, "-o", tmp_path / "out", option, frame, "--backend", "cpu")
    assert result.exit_code == 2
    what = "timings CSV" if option == "--timings-csv" else "JSON summary"
    assert result.stderr == (
        f"Error: {frame}: the {what} would overwrite this input; "
        f"choose another name for the {what}\n"
    )
    assert frame.read_bytes() == before and not (tmp_path / "out").exists()


def test_several_inputs_as_a_shell_expands_a_glob(frames_dir, tmp_path):
    """run f0.png f1.png f2.png clip.avi -o out (an unquoted glob, say) processes every
    INPUT, and the JSON summary counts all their frames."""
    write_video(tmp_path / "clip.avi", [photo(16, 16, seed=i) for i in range(2)])
    files = sorted(frames_dir.iterdir())
    out = tmp_path / "out"
    result = invoke("run", *files, tmp_path / "clip.avi", "-o", out, "--backend", "cpu",
                    "-q", "--json-summary", "-")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["frames"] == 5
    assert sorted(p.name for p in out.glob("*.png")) == [
        "clip_000000.png", "clip_000001.png", "f0.png", "f1.png", "f2.png"
    ]  # fmt: skip


@pytest.mark.skipif(cuda_unusable_reason() is None, reason="a CUDA device is usable here")
def test_cuda_requested_but_unusable(frames_dir, tmp_path):
    """--backend cuda without a usable device: exit 4 and the reason, nothing written."""
    result = invoke("run", frames_dir, "-o", tmp_path / "out", "--backend", "cuda")
    assert result.exit_code == 4
    assert result.stderr.startswith("Error: CUDA backend unusable: ")
    assert not (tmp_path / "out").exists()


MISSING_DRIVER = "libedgecli-no-such-driver.so.1"  # as libcuda.so.1 is where no driver is
NO_DRIVER = f"no NVIDIA GPU (the NVIDIA driver, {MISSING_DRIVER}, is not installed)"
NO_CUPY = (
    "CuPy is not importable (import of cupy halted; None in sys.modules); install "
    "edgecli[cuda12] or edgecli[cuda13]"
)


@pytest.fixture(params=["no driver", "driver, no CuPy"])
def machine(request, monkeypatch):
    """A machine without an NVIDIA driver, or with a GPU and its driver but without CuPy."""
    from edgecli.cuda import driver

    if request.param == "no driver":
        monkeypatch.setattr(driver, "DRIVER_LIBRARY", MISSING_DRIVER)
    else:
        monkeypatch.setattr(driver, "absence_reason", lambda: None)
        monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    return request.param


@pytest.mark.parametrize("verbose", [False, True])
def test_auto_on_the_cpu_says_why_where_it_helps(frames_dir, tmp_path, machine, verbose):
    """--backend auto runs on the CPU: without a GPU it says so only under -v, in words that
    name no package; with a GPU but no CuPy it always gives the install hint, once."""
    result = invoke("run", frames_dir, "-o", tmp_path / "out", *(["-v"] if verbose else []))
    assert result.exit_code == 0, result.output
    notices = [line for line in result.stderr.splitlines() if "GPU" in line or "CUDA" in line]
    if machine == "no driver":
        assert notices == (["edgecli: no NVIDIA GPU: using the CPU"] if verbose else [])
    else:
        assert notices == [f"edgecli: using the CPU backend; CUDA unusable: {NO_CUPY}"]


def test_cuda_asked_for_says_why_not(frames_dir, tmp_path, machine):
    """--backend cuda where it cannot run: exit 4, the reason (the install hint only where a
    GPU is there), nothing written."""
    result = invoke("run", frames_dir, "-o", tmp_path / "out", "--backend", "cuda")
    assert result.exit_code == 4
    reason = NO_DRIVER if machine == "no driver" else NO_CUPY
    assert result.stderr == f"Error: CUDA backend unusable: {reason}\n"
    assert not (tmp_path / "out").exists()


def test_info_says_why_cuda_is_not_used(machine):
    """info's last line: no GPU, using the CPU (and why) on a machine without a driver; the
    install hint on one with a GPU but without CuPy."""
    result = invoke("info")
    assert result.exit_code == 0
    expected = {
        "no driver": f"cuda: no NVIDIA GPU: using the CPU (the NVIDIA driver, {MISSING_DRIVER}, "
        "is not installed)",
        "driver, no CuPy": f"cuda: unusable: {NO_CUPY}",
    }
    assert result.stdout.splitlines()[-1] == expected[machine]


def test_a_driver_without_a_device_node_is_no_gpu(monkeypatch, tmp_path):
    """A driver library but no /dev/nvidia* (a container started without a GPU) is no GPU;
    with a device node there, the GPU may be usable."""
    from edgecli.cuda import driver

    monkeypatch.setattr(driver, "DRIVER_LIBRARY", "libc.so.6")  # loads, as a driver would
    monkeypatch.setattr(driver, "DEVICE_NODES", (str(tmp_path / "nvidia[0-9]*"),))
    assert driver.absence_reason() == "no NVIDIA device node (/dev/nvidia*)"
    (tmp_path / "nvidia0").touch()
    assert driver.absence_reason() is None


def test_info_reports_cuda_state():
    """info lists versions and ends with whether CUDA is usable."""
    result = invoke("info")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"edgecli {__version__}"
    assert any(line.startswith("opencv-python-headless ") for line in lines)
    reason = cuda_unusable_reason()
    if reason is None:
        assert lines[-1].startswith("cuda: usable: ")
    elif reason.startswith("no NVIDIA GPU"):
        assert lines[-1] == f"cuda: no NVIDIA GPU: using the CPU{reason[len('no NVIDIA GPU') :]}"
    else:
        assert lines[-1] == f"cuda: unusable: {reason}"


def test_info_names_the_png_encoder(monkeypatch):
    """info says whether PNGs are encoded and written in C or in Python, and why Python."""
    from edgecli import native

    def encoder_lines():
        lines = invoke("info").stdout.splitlines()
        return [line for line in lines if line.startswith("png encoding and writing: ")]

    if native.c is not None:
        version = native.c.zlib_version()
        assert encoder_lines() == [
            f"png encoding and writing: C, without the GIL (edgecli._native, zlib {version})"
        ]
    monkeypatch.setattr(native, "c", None)
    assert encoder_lines() == [
        "png encoding and writing: Python (edgecli._native is not built: reinstall edgecli "
        "where a C compiler and zlib's header are, such as Debian's build-essential and "
        "zlib1g-dev)"
    ]


def test_info_names_the_cpus_png_decoder(monkeypatch):
    """info says which decoder the CPU decodes PNGs with: edgecli's C, and its inflater, or
    cv2 alone where edgecli._native is not built."""
    from edgecli import native

    def decoder_lines():
        lines = invoke("info").stdout.splitlines()
        return [line for line in lines if line.startswith("png decoding on the cpu: ")]

    if native.c is not None:
        assert decoder_lines() == [
            f"png decoding on the cpu: C for gray and RGB(A), inflated by "
            f"{native.c.png_inflater()}; cv2 (libpng) for the rest"
        ]
        # The deflate package is a dependency: its libdeflate is the one taken.
        assert native.c.png_inflater() == "libdeflate (the deflate package's)"
    monkeypatch.setattr(native, "c", None)
    assert decoder_lines() == ["png decoding on the cpu: cv2 (libpng)"]
