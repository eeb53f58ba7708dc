"""Report paths (--json-summary, --timings-csv, --write-expected, the preview's sheet and
page): written into a device or FIFO, through a link to its target, never onto an input,
never into a folder that does not exist; and output PNGs never replace a link, device or
FIFO (edgecli.output.sinks.ReportFile, edgecli.inputs.overwrites)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

import edgecli
from edgecli import pipeline

from .helpers import edgecli_command, invoke, make_frames
from .media import REPO, photo, write_video

# Every option that names a report path: (command, option, what the errors call it).
REPORTS = [
    ("run", "--json-summary", "JSON summary"),
    ("run", "--timings-csv", "timings CSV"),
    ("run", "--write-expected", "manifest"),
    ("preview", "-o", "sheet"),
    ("preview", "--html", "page"),
]
RUN_REPORTS = [case for case in REPORTS if case[0] == "run"]
IDS = [option.lstrip("-") for _, option, _ in REPORTS]


def report_name(case, stem: str) -> str:
    """A name for the report of ``case``: the sheet's must end in .png."""
    return stem + (".png" if case[1] == "-o" else ".txt")


def command(case, inputs, tmp_path: Path, path) -> list:
    """The command line writing the report of ``case`` to ``path``."""
    cmd, option, _ = case
    if cmd == "run":
        return ["run", *inputs, "-o", tmp_path / "out", "--backend", "cpu", "-q", option, path]
    sheet = [] if option == "-o" else ["-o", tmp_path / "sheet.png"]
    return ["preview", *inputs, "--backend", "cpu", "-q", *sheet, option, path]


def check_report(case, data: bytes) -> None:
    """``data`` is the whole report of ``case`` on the two frames of ``frames``."""
    option = case[1]
    if option == "--json-summary":
        assert json.loads(data)["frames"] == 2
    elif option == "--timings-csv":
        assert data.startswith(b"frame,") and data.count(b"\n") == 3
    elif option == "--write-expected":
        assert sorted(json.loads(data)["frames"]) == ["f000.png", "f001.png"]
    elif option == "-o":
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82")
    else:
        assert data.startswith(b"<!doctype html>") and data.endswith(b"</html>\n")


@pytest.fixture
def frames(tmp_path) -> Path:
    return make_frames(tmp_path / "in", [(24, 32), (24, 32)])


def temporaries(*folders: Path) -> list[Path]:
    return [p for folder in folders for p in folder.iterdir() if p.name.startswith(".edgecli-")]


@contextmanager
def fifo_read(path: Path):
    """A FIFO made at ``path`` and read to its end on a thread; yields a bytearray that holds
    what was written into it once the block is left."""
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    # A writer of our own until the block ends: the reader sees no end before the run's.
    held = os.open(path, os.O_WRONLY)
    os.set_blocking(reader, True)
    chunks: list[bytes] = []

    def drain():
        while data := os.read(reader, 1 << 16):
            chunks.append(data)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    got = bytearray()
    try:
        yield got
    finally:
        os.close(held)
        thread.join(timeout=60)
        os.close(reader)
        got.extend(b"".join(chunks))


def make_null(path: Path) -> Path:
    """A character device at ``path`` that is /dev/null (1, 3), or skip where none can be made
    (not root) or opened (a file system mounted nodev)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.close(os.open(path, os.O_WRONLY))
    except OSError as exc:
        pytest.skip(f"no character device can be made and opened here ({exc.strerror})")
    return path


def is_null(path: Path) -> bool:
    found = os.lstat(path)
    return stat.S_ISCHR(found.st_mode) and found.st_rdev == os.makedev(1, 3)


# ---- devices, FIFOs, descriptors: written into -----------------------------------------------


@pytest.mark.parametrize("case", REPORTS, ids=IDS)
def test_report_into_a_fifo(frames, tmp_path, case):
    """A report named by a FIFO is written into it, whole, and the FIFO stays a FIFO."""
    fifo = tmp_path / report_name(case, "fifo")
    with fifo_read(fifo) as got:
        result = invoke(*command(case, [frames], tmp_path, fifo))
        assert result.exit_code == 0, result.output
    check_report(case, bytes(got))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize("case", REPORTS, ids=IDS)
def test_report_into_a_character_device(frames, tmp_path, case):
    """A report named by a character device is written into it and the device stays: first
    one made here, then (only once that one held, and where the name may lack .png) the
    machine's own /dev/null."""
    null = make_null(tmp_path / report_name(case, "null"))
    result = invoke(*command(case, [frames], tmp_path, null))
    assert result.exit_code == 0, result.output
    assert is_null(null)
    assert temporaries(tmp_path) == []
    if case[1] != "-o":
        result = invoke(*command(case, [frames], tmp_path, "/dev/null"))
        assert result.exit_code == 0, result.output
        assert is_null(Path("/dev/null"))
        assert temporaries(Path("/dev")) == []


@pytest.mark.parametrize("stdout_is", ["a pipe", "a file appended to"])
@pytest.mark.parametrize("named", ["/dev/stdout", "a link to /dev/stdout", "-"])
@pytest.mark.parametrize("case", REPORTS, ids=IDS)
def test_report_into_stdout(frames, tmp_path, case, named, stdout_is):
    """/dev/stdout (or a link to it, or ``-``) is written into whatever stdout holds: a pipe,
    or a file the shell opened with >>, whose earlier content is kept."""
    if named in ("/dev/stdout", "-"):
        if case[1] == "-o":
            pytest.skip("the sheet's name must end in .png")
        path = named
    else:
        path = tmp_path / report_name(case, "stdout")
        path.symlink_to("/dev/stdout")
    args = [str(a) for a in command(case, [frames], tmp_path, path)]
    if stdout_is == "a pipe":
        done = subprocess.run([*edgecli_command(), *args], capture_output=True, timeout=120)
        written = done.stdout
    else:
        log = tmp_path / "log"
        log.write_bytes(b"earlier\n")
        with open(log, "ab") as appended:
            done = subprocess.run([*edgecli_command(), *args], stdout=appended,
                                  stderr=subprocess.PIPE, timeout=120)  # fmt: skip
        written = log.read_bytes()
        assert written.startswith(b"earlier\n")
        written = written.removeprefix(b"earlier\n")
    assert done.returncode == 0, done.stderr
    check_report(case, written)
    if named not in ("/dev/stdout", "-"):
        assert os.readlink(path) == "/dev/stdout"


# ---- links: written through to the target, atomically ----------------------------------------


@pytest.mark.parametrize("link", ["a link", "a chain of links", "a dangling link"])
@pytest.mark.parametrize("case", REPORTS, ids=IDS)
def test_report_through_a_symlink(frames, tmp_path, case, link):
    """A report named by a link is written whole at the link's final target (made there if
    missing), by a rename beside the target; every link stays a link to where it pointed."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / report_name(case, "target")
    if link != "a dangling link":
        target.write_bytes(b"earlier")
    named = tmp_path / report_name(case, "link")
    if link == "a chain of links":
        middle = tmp_path / report_name(case, "middle")
        middle.symlink_to(target)
        named.symlink_to(middle.name)  # relative, as a link often is
    else:
        named.symlink_to(target)
    links = {p: os.readlink(p) for p in tmp_path.iterdir() if p.is_symlink()}
    result = invoke(*command(case, [frames], tmp_path, named))
    assert result.exit_code == 0, result.output
    check_report(case, target.read_bytes())
    assert {p: os.readlink(p) for p in tmp_path.iterdir() if p.is_symlink()} == links
    assert [p.name for p in elsewhere.iterdir()] == [target.name]
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize("case", REPORTS, ids=IDS)
def test_report_replacing_a_file_keeps_its_permissions(frames, tmp_path, case):
    """A report written over an existing file keeps that file's permissions (0600 stays
    private), as the shell's > does."""
    named = tmp_path / report_name(case, "private")
    named.write_bytes(b"earlier")
    named.chmod(0o600)
    result = invoke(*command(case, [frames], tmp_path, named))
    assert result.exit_code == 0, result.output
    check_report(case, named.read_bytes())
    assert stat.S_IMODE(named.stat().st_mode) == 0o600


# ---- never onto an input ---------------------------------------------------------------------


@pytest.mark.parametrize("given", ["a folder", "a video", "a glob", "a link to an input"])
@pytest.mark.parametrize("case", RUN_REPORTS, ids=[c[1].lstrip("-") for c in RUN_REPORTS])
def test_report_naming_an_input_is_refused(frames, tmp_path, case, given):
    """A report that would be written onto an input (an image of a folder, the video itself,
    a glob's match, or through a link) is a usage error before any work; the input's bytes
    are unchanged and no output folder is made."""
    what = case[2]
    inputs, victim = [frames], frames / "f001.png"
    named = victim
    if given == "a video":
        victim = tmp_path / "clip.avi"
        write_video(victim, [photo(16, 16, seed=i) for i in range(2)])
        inputs, named = [victim], victim
    elif given == "a glob":
        inputs = [f"{frames}/*.png"]
    elif given == "a link to an input":
        named = tmp_path / "link.txt"
        named.symlink_to(victim)
    before = victim.read_bytes()
    result = invoke(*command(case, inputs, tmp_path, named))
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"Error: {victim}: the {what} would overwrite this input; choose another name for the "
        f"{what}\n"
    )
    assert victim.read_bytes() == before
    assert not (tmp_path / "out").exists() and temporaries(tmp_path, frames) == []


def test_manifest_naming_an_input_is_refused_on_a_cluster(frames, tmp_path):
    """--write-expected naming an input is refused on a cluster run too (exit 2)."""
    pytest.importorskip("distributed", reason="the cluster extra is not installed")
    victim = frames / "f000.png"
    before = victim.read_bytes()
    result = invoke("run", frames, "-o", tmp_path / "out", "--backend", "cpu", "-q",
                    "--scheduler", "local:1", "--write-expected", victim)  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr.endswith("the manifest would overwrite this input; choose another "
                                  "name for the manifest\n")  # fmt: skip
    assert victim.read_bytes() == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("through_a_link", [False, True], ids=["the input", "a link to it"])
@pytest.mark.parametrize("case", REPORTS[3:], ids=IDS[3:])
def test_preview_file_naming_an_input_is_refused(frames, tmp_path, case, through_a_link):
    """The preview's sheet or page named like an input (or a link to one) is a usage error;
    the input's bytes are unchanged."""
    victim = frames / "f001.png"
    named = victim
    if through_a_link:
        named = tmp_path / "link.png"
        named.symlink_to(victim)
    before = victim.read_bytes()
    result = invoke(*command(case, [frames], tmp_path, named))
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and " is an input; " in lines[0]
    assert victim.read_bytes() == before
    assert temporaries(tmp_path, frames) == [] and not (tmp_path / "sheet.png").exists()


# ---- folders: never made, checked before any frame -------------------------------------------


@pytest.mark.parametrize("case", REPORTS, ids=IDS)
def test_report_in_a_missing_folder_fails_before_any_frame(tmp_path, case):
    """A report whose folder does not exist: one Error line naming it, exit 1, before any
    frame is decoded (the input's undecodable image is never reached), nothing made."""
    folder = make_frames(tmp_path / "in", [(24, 32)])
    (folder / "bad.png").write_bytes(b"not a PNG")
    missing = tmp_path / "missing" / "deeper"
    named = missing / report_name(case, "report")
    result = invoke(*command(case, [folder], tmp_path, named))
    assert result.exit_code == 1, result.output
    assert result.stderr == (
        f"Error: {named}: cannot write {case[2]} (folder {missing} does not exist)\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["in"]


@pytest.mark.parametrize(
    "kind, reason",
    [("a folder", "it is a folder"), ("a block device", "it is a block device"),
     ("a link to a closed descriptor", "no such file descriptor")],
)  # fmt: skip
@pytest.mark.parametrize("case", REPORTS, ids=IDS)
def test_report_that_cannot_be_written_into_or_replaced(frames, tmp_path, case, kind, reason):
    """A report named by a folder, a block device or a descriptor not open fails (exit 1,
    one line) before the run, and the node stays as it was."""
    named = tmp_path / report_name(case, "node")
    if kind == "a folder":
        named.mkdir()
    elif kind == "a block device":
        try:
            os.mknod(named, stat.S_IFBLK | 0o600, os.makedev(7, 0))  # a loop device's numbers
        except OSError as exc:
            pytest.skip(f"no block device can be made here ({exc.strerror})")
    else:
        named.symlink_to("/dev/fd/99")
    mode = os.lstat(named).st_mode
    result = invoke(*command(case, [frames], tmp_path, named))
    assert result.exit_code == 1, result.output
    assert result.stderr == f"Error: {named}: cannot write {case[2]} ({reason})\n"
    assert os.lstat(named).st_mode == mode
    assert not (tmp_path / "out").exists() and temporaries(tmp_path) == []


@pytest.mark.parametrize("case", RUN_REPORTS, ids=[c[1].lstrip("-") for c in RUN_REPORTS])
def test_report_in_the_output_folder_to_be_made(frames, tmp_path, case):
    """A report in the output folder, which the run makes, is written there."""
    named = tmp_path / "out" / "report.txt"
    result = invoke(*command(case, [frames], tmp_path, named))
    assert result.exit_code == 0, result.output
    check_report(case, named.read_bytes())


# ---- a failed run: no report -----------------------------------------------------------------


@pytest.mark.parametrize("case", REPORTS, ids=IDS)
def test_failed_run_keeps_an_earlier_report(tmp_path, case):
    """A run (or preview) that fails on its frames leaves an earlier file of the report's
    name as it was, and no temporary."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "bad.png").write_bytes(b"not a PNG")
    named = tmp_path / report_name(case, "report")
    named.write_bytes(b"earlier")
    result = invoke(*command(case, [folder], tmp_path, named))
    assert result.exit_code == 1, result.output
    assert named.read_bytes() == b"earlier"
    assert temporaries(tmp_path) == [] and not (tmp_path / "sheet.png").exists()


# ---- reports among themselves and the outputs ------------------------------------------------


def test_reports_sharing_a_file_are_refused(frames, tmp_path):
    """Two reports that would replace one file (here through a link) are a usage error."""
    (tmp_path / "s.json").symlink_to("real.json")
    result = invoke("run", frames, "-o", tmp_path / "out", "--backend", "cpu",
                    "--json-summary", tmp_path / "real.json",
                    "--write-expected", tmp_path / "s.json")  # fmt: skip
    assert result.exit_code == 2
    named = tmp_path / "s.json"
    assert result.stderr == (
        f"Error: {named}: the JSON summary and the manifest need names of their own\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "s.json"]


@pytest.mark.parametrize(
    "name, clash",
    [("f001.png", "the output of {frames}/f001.png"),
     (".edgecli-run.json", "the output folder's record"), (".", "the output folder")],
)  # fmt: skip
@pytest.mark.parametrize("case", RUN_REPORTS, ids=[c[1].lstrip("-") for c in RUN_REPORTS])
def test_report_over_an_output_is_refused(frames, tmp_path, case, name, clash):
    """A report named like a file the run writes in the output folder, or like the folder
    itself (made by the run), is a usage error."""
    named = tmp_path / "out" / name
    result = invoke(*command(case, [frames], tmp_path, named))
    assert result.exit_code == 2
    what = case[2]
    assert result.stderr == (
        f"Error: {named}: the {what} would overwrite {clash.format(frames=frames)}; choose "
        f"another name for the {what}\n"
    )
    assert not (tmp_path / "out").exists()


# ---- output PNGs: never onto a link, device or FIFO ------------------------------------------


@pytest.mark.parametrize(
    "entry", ["a symbolic link", "a FIFO", "a device", "a video's link", "the record's FIFO"]
)
def test_output_name_holding_a_link_fifo_or_device_is_refused(tmp_path, entry):
    """An output name (a PNG's, the folder's record) that holds a link (to the user's file),
    a FIFO or a device is refused (exit 2, naming it) before any PNG and before the record is
    read: it stays as it was, and so does what a link names."""
    users = tmp_path / "users.txt"
    users.write_bytes(b"the user's")
    out = tmp_path / "out"
    out.mkdir()
    inputs = [make_frames(tmp_path / "in", [(24, 32), (24, 32)])]
    held = out / "f001.png"
    if entry == "a symbolic link":
        held.symlink_to(users)
    elif entry == "a FIFO":
        os.mkfifo(held)
    elif entry == "a device":
        make_null(held)
    elif entry == "the record's FIFO":
        held = out / ".edgecli-run.json"
        os.mkfifo(held)
    else:
        inputs = [REPO / "tests" / "data" / "pan_h264.mp4"]
        held = out / "pan_h264_000007.png"
        held.symlink_to(users)
    mode = os.lstat(held).st_mode
    result = invoke("run", *inputs, "-o", out, "--backend", "cpu")
    assert result.exit_code == 2, result.output
    kind = {"a video's link": "a symbolic link", "the record's FIFO": "a FIFO"}.get(entry, entry)
    assert result.stderr == (
        f"Error: {held}: {kind} lies at an output name, and edgecli replaces only regular files "
        "in the output folder; remove it or choose another output folder\n"
    )
    assert os.lstat(held).st_mode == mode and [p.name for p in out.iterdir()] == [held.name]
    assert users.read_bytes() == b"the user's"


def test_output_subfolder_that_is_a_link_is_refused(tmp_path):
    """A --recursive run's output subfolder that is a link (out of the output folder) is
    refused (exit 2); nothing is written where it leads."""
    folder = make_frames(tmp_path / "in" / "sub", [(24, 32)]).parent
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "sub").symlink_to(elsewhere)
    result = invoke("run", folder, "-o", out, "--recursive", "--backend", "cpu")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"Error: {out / 'sub'}: an output subfolder is a symbolic link, and edgecli writes "
        "only into the output folder; remove it or choose another output folder\n"
    )
    assert list(elsewhere.iterdir()) == []


def test_interrupted_run_writes_its_summary_but_no_manifest(frames, tmp_path):
    """A run stopped early writes its JSON summary (which says so) but no manifest: its
    folder is not the whole run's."""
    stop = threading.Event()
    stop.set()
    summary_path, manifest = tmp_path / "s.json", tmp_path / "g.json"
    summary = pipeline.run(frames, tmp_path / "out", edgecli.Options(backend="cpu"), stop=stop,
                           json_summary=summary_path, write_expected=manifest)  # fmt: skip
    assert summary.interrupted and json.loads(summary_path.read_text())["interrupted"]
    assert not manifest.exists() and temporaries(tmp_path) == []
