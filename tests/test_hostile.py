"""Every option of ``edgecli run`` and ``edgecli preview`` given hostile values (huge, negative,
zero, empty, Unicode digits, control characters, and paths that are inputs, devices, symlinks,
missing folders): whatever the values, the command ends with a documented exit code and no
traceback, no input's bytes change, no device or symlink is replaced, and nothing is written
outside the paths the options name for writing.

The options are read from the commands themselves, so an option added later is tried too.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import cv2
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgecli.cli import main

from .media import photo, write_video

DOCUMENTED_EXITS = {0, 1, 2, 3, 4, 5}

# Values tried for any option: out of range, malformed, Unicode digits (which int() would
# take), control characters, and the forms the options take, right and wrong.
HOSTILE = [
    "0", "1", "-1", "2", "99999999999999999999999", "1e9", "0.5", "nan", "inf", "", " ",
    "４", "١٠", "０/２", "５%", "１G", "x\ny", "\x1b[31m", "-", "auto", "5%", "101%", "0/2",
    "1/1", "3/2", "0/99999999999999999999999", "1G", "0s", "1:30", "-5", "all", "0,1", "0,0",
    "local:0", "local:-1", "tcp://[::1", "tcp://host:99999", "tcp://host:0", "60,80", "l1",
]  # fmt: skip

# Paths, as tokens replaced inside the sandbox: the input folder and files in it, the output
# folder, a device, a symlink to an input, a folder that does not exist, a file of nobody's.
PATHS = ["{in}", "{image}", "{clip}", "{out}", "{device}", "{link}", "{missing}", "{victim}"]

# The files each INPUT value reads (a link's target among them), relative to the sandbox.
INPUTS = {
    "{in}": ["in/a.jpg", "in/b.png", "in/clip.avi"],
    "{image}": ["in/a.jpg"],
    "{clip}": ["in/clip.avi"],
    "{in}/*.jpg": ["in/a.jpg"],
    "{link}": ["in/a.jpg"],
}

# Options whose value names a file or folder the command may write (its output, its reports).
WRITERS = {"output", "json_summary", "timings_csv", "write_expected", "html"}

# Values that would start a Dask cluster or wait for a scheduler: slow, and tried elsewhere.
SLOW = {"scheduler": lambda value: value.startswith("local:") and value[6:].isdigit()}


@dataclass
class Sandbox:
    """A folder of inputs and bystanders, and what each held before the command ran."""

    root: Path

    def __post_init__(self) -> None:
        folder = self.root / "in"
        folder.mkdir()
        cv2.imwrite(str(folder / "a.jpg"), photo(20, 30, seed=1))
        cv2.imwrite(str(folder / "b.png"), photo(17, 23, seed=2))
        write_video(folder / "clip.avi", [photo(16, 24, seed=i) for i in range(3)])
        (self.root / "victim.txt").write_text("not edgecli's\n")
        os.symlink(folder / "a.jpg", self.root / "link.json")
        self.device = self.root / "null"
        try:  # a private /dev/null: a defect that replaced it must not replace the real one
            os.mknod(self.device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except (PermissionError, OSError):
            self.device = None
        self.tokens = {
            "{in}": folder,
            "{image}": folder / "a.jpg",
            "{clip}": folder / "clip.avi",
            "{out}": self.root / "out",
            "{device}": self.device or self.root / "no-device",
            "{link}": self.root / "link.json",
            "{missing}": self.root / "missing" / "deeper" / "x.json",
            "{victim}": self.root / "victim.txt",
        }
        self.before = self.snapshot()

    def value(self, text: str) -> str:
        return str(self.tokens.get(text, text))

    def snapshot(self) -> dict[str, tuple]:
        """Every entry below the root (not following links) by its relative path: its kind,
        and a file's hash or a link's target."""
        entries = {}
        for path in [self.root, *sorted(self.root.rglob("*"))]:
            info = path.lstat()
            key = path.relative_to(self.root).as_posix()
            if stat.S_ISLNK(info.st_mode):
                entries[key] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                entries[key] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                entries[key] = (stat.S_IFMT(info.st_mode), None)
        return entries


@contextlib.contextmanager
def sandbox() -> Iterator[Sandbox]:
    root = Path(tempfile.mkdtemp(prefix="edgecli-hostile-"))
    cwd = os.getcwd()
    try:
        made = Sandbox(root)
        os.chdir(root)  # a relative value lands in the sandbox, never in the checkout
        yield made
    finally:
        os.chdir(cwd)
        shutil.rmtree(root, ignore_errors=True)


def options_of(command: click.Command) -> dict[str, click.Option]:
    return {p.name: p for p in command.params if isinstance(p, click.Option)}


def value_strategy(option: click.Option) -> st.SearchStrategy:
    """Half the time a value the option may well take (one of its choices, its default, a
    small number), so that runs get past the checks to the work; else a hostile one."""
    slow = SLOW.get(option.name)
    hostile = [v for v in HOSTILE + PATHS if slow is None or not slow(v)]
    if isinstance(option.type, click.Choice):
        plausible = list(option.type.choices)
    else:
        plausible = ["1", "2"] + ([str(option.default)] if option.default is not None else [])
    plausible = [v for v in plausible if slow is None or not slow(v)]
    return st.one_of(st.sampled_from(plausible), st.sampled_from(hostile))


def arguments(command: click.Command, required: dict[str, str]) -> st.SearchStrategy:
    """One to three of the command's options, each with a hostile value (a flag: given), and
    its required options with theirs; then an INPUT. Few at once, so that a value that breaks
    a later stage is not always refused first for another's sake."""
    options = options_of(command)
    names = sorted(n for n in options if n not in ("help",))

    @st.composite
    def build(draw):
        chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
        args: list[tuple[str, str | None]] = []
        for name in chosen:
            option = options[name]
            flag = option.opts[-1]
            if option.is_flag:
                args.append((flag, None))
            else:
                args.append((flag, draw(value_strategy(option))))
        for name, default in required.items():
            if name not in chosen:
                args.append((options[name].opts[-1], draw(st.sampled_from([default, *PATHS]))))
        source = draw(st.sampled_from(["{in}", "{image}", "{clip}", "{in}/*.jpg", "{link}"]))
        return args, source

    return build()


def check(command_name: str, args, source: str, box: Sandbox, writes: set[str]) -> None:
    """Run the command; assert a documented ending and that nothing but what the options
    name for writing (``writes``: option names) changed or appeared in the sandbox."""
    command = main.commands[command_name]
    argv = [command_name, box.value(source)]
    files: list[Path] = []  # report files the options name: written whole, where they are
    folders: list[Path] = []  # run's output folder: made, parents too, and filled
    for flag, value in args:
        argv.append(flag)
        if value is None:
            continue
        argv.append(box.value(value))
        name = next(n for n, o in options_of(command).items() if flag in o.opts)
        if name in writes and value not in ("-", ""):
            path = (box.root / box.value(value)).resolve()
            (folders if (command_name, name) == ("run", "output") else files).append(path)
    result = CliRunner().invoke(main, argv)
    said = result.output

    assert result.exit_code in DOCUMENTED_EXITS, (argv, result.exit_code, said)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        argv,
        repr(result.exception),
        said,
    )
    assert "Traceback" not in said, (argv, said)
    if result.exit_code != 0:
        assert any(line.startswith("Error: ") for line in said.splitlines()), (argv, said)

    def written(key: str, new: bool) -> bool:
        path = (box.root / key).resolve()
        if path in files or any(path == f or f in path.parents for f in folders):
            return True
        return new and any(path in f.parents for f in folders)  # the output's parents

    # The run's inputs, a link (itself) and a device are never changed, whatever is named.
    protected = {*INPUTS[source], "in", "link.json", "null"}
    after = box.snapshot()
    for key, was in box.before.items():
        if key and (key in protected or not written(key, new=False)):
            assert after.get(key) == was, (argv, key, was, after.get(key), said)
    for key in after.keys() - box.before.keys():
        assert written(key, new=True), (argv, "made", key, said)


HYPOTHESIS = settings(
    max_examples=int(os.environ.get("EDGECLI_HOSTILE_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)


# The values that broke the commands when a new user tried them, each tried for sure.
KNOWN_RUN = [
    [("--end", "0")], [("--end", "0s")], [("--shard", "0/100000000")],
    [("--shard", "0/99999999999999999999999")], [("--scheduler", "tcp://[::1")],
    [("--scheduler", "tcp://host:99999")], [("--shard", "０/２")], [("--workers", "４")],
    [("--max-memory", "١٠G")], [("--start", "١٠")], [("-t", "５%")], [("--device", "0,1")],
    [("--write-expected", "{image}")], [("--write-expected", "{clip}")],
    [("--json-summary", "{device}")], [("--timings-csv", "{link}")],
    [("--write-expected", "{missing}")], [("-o", "{in}")], [("--recursive", None), ("-o", "{in}")],
    [("--operator", "canny"), ("-t", "1" + "0" * 400 + ",3")],
    [("--operator", "canny"), ("-t", "٣,٥")], [("--operator", "canny"), ("-t", "-0,5")],
]  # fmt: skip
KNOWN_PREVIEW = [[("--width", "100000")], [("--width", "1000000000")], [("-t", "auto")],
                 [("-t", "5%")], [("-o", "{image}")], [("-o", "{link}")],
                 [("--operator", "canny"), ("-t", "1" + "0" * 400 + ",3")]]  # fmt: skip


KNOWN = [("run", ("-o", "{out}"), args) for args in KNOWN_RUN] + [
    ("preview", ("-o", "sheet.png"), args) for args in KNOWN_PREVIEW
]


@pytest.mark.parametrize(
    "command, output, args",
    KNOWN,
    ids=[f"{c} " + " ".join(f"{f} {v or ''}" for f, v in a) for c, _, a in KNOWN],
)
def test_the_values_once_found_to_break_a_command(command, output, args):
    """Each value that once broke ``edgecli run`` or ``preview``, alone: documented exit, no
    traceback, no harm."""
    with sandbox() as box:
        check(command, [("--backend", "cpu"), output, *args], "{in}", box, WRITERS)


# Each command, and the output its required -o names.
REQUIRED = {"run": {"output": "{out}"}, "preview": {"output": "sheet.png"}}


@pytest.mark.parametrize("command", REQUIRED)
@HYPOTHESIS
@given(data=st.data())
def test_hostile_options(command, data):
    """``edgecli run`` and ``edgecli preview`` with hostile option values: documented exit,
    no traceback, no harm."""
    args, source = data.draw(arguments(main.commands[command], REQUIRED[command]))
    with sandbox() as box:
        check(command, [("--backend", "cpu"), *args], source, box, WRITERS)


@pytest.mark.parametrize("flag", ["--json-summary", "--timings-csv", "--write-expected"])
@pytest.mark.parametrize("target", ["{image}", "{clip}", "{link}", "{device}", "{missing}"])
def test_run_reports_never_harm_what_they_name(flag, target):
    """Each report option aimed at an input, a link to one, a device or a missing folder: the
    run refuses it or writes into the device, and leaves every one of them as it was."""
    with sandbox() as box:
        if target == "{device}" and box.device is None:
            pytest.skip("no device node can be made here (not root)")
        args = [("--backend", "cpu"), ("-o", "{out}"), (flag, target)]
        check("run", args, "{in}", box, {"output"})
