"""--shard i/n: the n shards are a disjoint, ordered, stable, size-balanced cover of a run,
and n shard runs into one folder (one after another or all at once) equal one plain run."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import cv2
import pytest

import edgecli
from edgecli.inputs.sources import discover_inputs
from edgecli.options.shards import partition, shard_of
from edgecli.output import resume
from edgecli.output.resume import MANIFEST_NAME

from .helpers import dead_runs_temporary, edgecli_command, folder_bytes, invoke
from .media import photo, write_video

COUNTS = (1, 2, 3, 7)


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    """Images of very different sizes (PNG and JPEG), a glob's worth of JPEGs, three clips."""
    root = tmp_path_factory.mktemp("shard-media")
    folder = root / "folder"
    folder.mkdir()
    shapes = [(12, 16), (60, 90), (20, 24), (8, 8), (90, 120), (16, 20), (30, 40), (10, 14)]
    for i, shape in enumerate(shapes):
        ext = ".png" if i % 2 else ".jpg"
        cv2.imwrite(str(folder / f"im{i}{ext}"), photo(*shape, seed=i))
    shots = root / "shots"
    shots.mkdir()
    for i in range(5):
        cv2.imwrite(str(shots / f"shot{i}.jpg"), photo(16 + 8 * i, 24, seed=i))
    clips = root / "clips"
    clips.mkdir()
    for i, count in enumerate((3, 5, 2)):
        write_video(clips / f"clip{i}.avi", [photo(16, 24, seed=i + k) for k in range(count)])
    return root


# Each case: the INPUTs, relative to the media folder.
CASES = {
    "folder": ["folder"],
    "glob": ["shots/*.jpg"],
    "videos": ["clips/clip0.avi", "clips/clip1.avi", "clips/clip2.avi"],
    "mixed": [
        "clips/clip1.avi",
        "folder",
        "shots/shot3.jpg",
        "clips/clip0.avi",
        "shots/shot[01].jpg",
    ],
}


def names(sources: list) -> list[str]:
    return [getattr(s, "out_name", None) or s.out_stem for s in sources]


def cli_inputs(media: Path, case: str) -> list[str]:
    return [str(media / text) for text in CASES[case]]


def plain_run(media: Path, case: str, out: Path) -> Path:
    edgecli.process(cli_inputs(media, case), out, backend="cpu", workers=1)
    return out


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("n", COUNTS)
def test_shards_are_an_ordered_disjoint_cover(media, case, n):
    """The n shards hold every source once, each in run order, and concatenated in shard
    order they are the run's sources in order (the shards are contiguous stretches)."""
    sources = discover_inputs(cli_inputs(media, case))
    shards = partition(sources, n)
    assert len(shards) == n
    assert [s for shard in shards for s in shard] == sources
    assert [shard_of(sources, i, n) for i in range(n)] == shards


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("n", COUNTS)
def test_partition_is_stable_across_working_folders(media, case, n, monkeypatch, tmp_path):
    """The same inputs named relatively from the media folder and absolutely from elsewhere
    give the same partition, as a recomputation does."""
    absolute = partition(discover_inputs(cli_inputs(media, case)), n)
    monkeypatch.chdir(media)
    relative = partition(discover_inputs(CASES[case]), n)
    again = partition(discover_inputs(CASES[case]), n)
    assert [names(s) for s in relative] == [names(s) for s in absolute] == [names(s) for s in again]


def test_balance_bound(tmp_path):
    """With files from 100 bytes to 200 KB, every shard's bytes are at most the ideal share
    plus the largest single file, the bound partition() documents."""
    folder = tmp_path / "sizes"
    folder.mkdir()
    for i, side in enumerate((8, 300, 12, 40, 200, 9, 150, 16, 90, 250, 10, 60)):
        cv2.imwrite(str(folder / f"s{i:02d}.png"), photo(side, side + 3, seed=i))
    sources = discover_inputs(folder)
    sizes = {s.out_name: s.path.stat().st_size for s in sources}
    total, largest = sum(sizes.values()), max(sizes.values())
    assert largest > 20 * min(sizes.values())
    for n in (2, 3, 4, 5, 7):
        totals = [sum(sizes[s.out_name] for s in shard) for shard in partition(sources, n)]
        assert sum(totals) == total
        assert max(totals) <= total / n + largest, (n, totals)


@pytest.mark.parametrize(
    "value, message",
    [
        ("3/3", "shard index must be in 0..2, got 3/3"),
        ("-1/2", "shard must be I/N with 0 <= I < N (e.g. 0/4), got '-1/2'"),
        ("1/0", "shard count must be >= 1, got 1/0"),
        ("a/b", "shard must be I/N with 0 <= I < N (e.g. 0/4), got 'a/b'"),
        ("1", "shard must be I/N with 0 <= I < N (e.g. 0/4), got '1'"),
        ("", "shard must be I/N with 0 <= I < N (e.g. 0/4), got ''"),
    ],
)
def test_bad_shard_is_a_usage_error(media, tmp_path, value, message):
    """A bad --shard exits 2 with one Error: line naming the value, and writes nothing."""
    out = tmp_path / "out"
    result = invoke("run", media / "folder", "-o", out, "--backend", "cpu", "--shard", value)
    assert result.exit_code == 2
    assert result.stderr == f"Error: {message}\n"
    assert not out.exists()


def test_library_refuses_a_bad_shard(media, tmp_path):
    """edgecli.process(shard=...) is validated as the CLI's is (OptionError, nothing written)."""
    for shard in ((2, 2), (0, 0), (-1, 3), ("0", 2), (0,)):
        with pytest.raises(edgecli.OptionError, match="shard"):
            edgecli.process(media / "folder", tmp_path / "out", backend="cpu", shard=shard)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", CASES)
def test_a_shard_given_its_sources_runs_those(media, tmp_path, case):
    """As a cluster's tasks run: the client lists and partitions the sources once, and each
    shard run takes the ones it is handed, listing nothing. Handed every source, shard 0 of
    3 leaves the folder as a plain run does (from its own listing it would do a third)."""
    from edgecli.options.params import Options
    from edgecli.pipeline import run

    clean = folder_bytes(plain_run(media, case, tmp_path / "clean"))
    inputs = cli_inputs(media, case)
    options = Options(backend="cpu", workers=1, shard=(0, 3))
    summary = run(inputs, tmp_path / "given", options, sources=discover_inputs(inputs))
    assert summary.frames == len(clean) - 1 and summary.params["shard"] == "0/3"
    assert folder_bytes(tmp_path / "given") == clean


@pytest.mark.parametrize("case", CASES)
def test_shards_one_after_another_equal_a_plain_run(media, tmp_path, case):
    """For n = 1, 2, 3 and 7, the n shard runs into one folder leave it byte for byte as one
    plain run leaves it: every PNG, and the run's record."""
    clean = folder_bytes(plain_run(media, case, tmp_path / "clean"))
    for n in COUNTS:
        out = tmp_path / f"sharded{n}"
        frames = 0
        for i in range(n):
            summary = edgecli.process(
                cli_inputs(media, case), out, backend="cpu", workers=1, shard=(i, n)
            )
            assert summary.params["shard"] == f"{i}/{n}"
            frames += summary.frames
        assert folder_bytes(out) == clean
        assert frames == len(clean) - 1  # every PNG, once


def test_concurrent_shard_processes_equal_a_plain_run(media, tmp_path):
    """Three shard processes started at once into one folder exit 0 and leave it byte for
    byte as a plain run does, the record included (not marked mixed)."""
    out = tmp_path / "out"
    processes = [
        subprocess.Popen(
            [
                *edgecli_command(),
                "run",
                *cli_inputs(media, "mixed"),
                "-o",
                str(out),
                "--backend",
                "cpu",
                "--workers",
                "1",
                "-q",
                "--shard",
                f"{i}/3",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i in range(3)
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
    assert folder_bytes(out) == folder_bytes(plain_run(media, "mixed", tmp_path / "clean"))
    assert json.loads((out / MANIFEST_NAME).read_text())["mixed"] is False


def test_empty_shard_exits_0_and_writes_nothing(media, tmp_path):
    """A shard with no sources (7 shards of 3 clips) exits 0, says so, reports 0 frames and
    leaves no output folder."""
    out = tmp_path / "out"
    sources = discover_inputs(cli_inputs(media, "videos"))
    empty = next(i for i, shard in enumerate(partition(sources, 7)) if not shard)
    result = invoke(
        "run", *cli_inputs(media, "videos"), "-o", out, "--backend", "cpu",
        "--shard", f"{empty}/7", "--json-summary", "-",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert f"edgecli: shard {empty}/7 has no sources (the run has 3, split by size)" in (
        result.stderr
    )
    summary = json.loads(result.stdout)
    assert (summary["frames"], summary["params"]["shard"]) == (0, f"{empty}/7")
    assert not out.exists()


def test_an_empty_shard_fails_where_its_siblings_would(media, tmp_path):
    """An empty shard is refused as every other shard of the run is, when the output path
    is a file (exit 1, one line): one task of an array does not succeed where the rest fail."""
    (tmp_path / "afile").write_text("x")
    sources = discover_inputs(cli_inputs(media, "videos"))
    empty = next(i for i, shard in enumerate(partition(sources, 7)) if not shard)
    result = invoke(
        "run", *cli_inputs(media, "videos"), "-o", tmp_path / "afile", "--backend", "cpu",
        "--shard", f"{empty}/7",
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr == f"Error: {tmp_path / 'afile'}: output path exists and is not a folder\n"


def test_a_size_that_overflows_is_a_usage_error(tmp_path):
    """--max-memory inf is one usage error line (exit 2), not a traceback."""
    result = invoke("run", tmp_path, "-o", tmp_path / "out", "--max-memory", "inf")
    assert result.exit_code == 2 and "is not a size in bytes" in result.stderr
    assert "Traceback" not in result.output


def test_plain_run_summary_says_no_shard(media, tmp_path):
    """A run without --shard reports "shard": null in its params."""
    summary = edgecli.process(media / "shots" / "shot0.jpg", tmp_path, backend="cpu")
    assert summary.as_json()["params"]["shard"] is None


def test_shard_resume_after_a_lost_png_equals_a_clean_run(media, tmp_path):
    """A shard whose run lost a PNG, cut another short and left a dead writer's temporary,
    rerun with --skip-existing, recomputes just those two: the folder equals a clean run."""
    inputs = cli_inputs(media, "mixed")
    out = tmp_path / "out"
    for i in range(3):
        edgecli.process(inputs, out, backend="cpu", workers=1, shard=(i, 3))
    mine = partition(discover_inputs(inputs), 3)[1]
    images = [s.out_name for s in mine if not s.multi_frame]
    assert len(images) >= 2
    (out / images[0]).unlink()
    (out / images[1]).write_bytes((out / images[1]).read_bytes()[:50])
    (out / ".edgecli-999999999-0.tmp").write_bytes(b"partial")  # no such process
    summary = edgecli.process(inputs, out, backend="cpu", shard=(1, 3), skip_existing=True)
    assert summary.frames == 2
    assert folder_bytes(out) == folder_bytes(plain_run(media, "mixed", tmp_path / "clean"))


@pytest.mark.slow
def test_shard_killed_then_resumed_equals_a_clean_run(tmp_path):
    """A shard's process killed with SIGKILL mid-run, rerun with --skip-existing, completes
    the folder as the other shard and a clean run make it, byte for byte."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(120):
        cv2.imwrite(str(folder / f"f{i:03d}.png"), photo(120, 160, seed=i))
    out = tmp_path / "out"
    edgecli.process(folder, out, backend="cpu", shard=(0, 2))
    command = [*edgecli_command(), "run", str(folder), "-o", str(out), "--backend", "cpu",
               "--workers", "1", "-q", "--shard", "1/2"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    before = len(list(out.glob("*.png")))
    deadline = time.monotonic() + 60
    while len(list(out.glob("*.png"))) < before + 5 and process.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    process.kill()
    process.communicate(timeout=60)
    assert before + 5 <= len(list(out.glob("*.png"))) < 120
    resumed = subprocess.run([*command, "--skip-existing"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert not [p for p in out.iterdir() if p.suffix == ".tmp"]
    edgecli.process(folder, tmp_path / "clean", backend="cpu")
    assert folder_bytes(out) == folder_bytes(tmp_path / "clean")


def test_shards_over_a_folder_of_the_same_options_keep_it_unmixed(media, tmp_path):
    """Shards into a folder a run with the same options made leave it unmixed, so
    --skip-existing still works per shard."""
    inputs = cli_inputs(media, "folder")
    out = plain_run(media, "folder", tmp_path / "out")
    edgecli.process(inputs, out, backend="cpu", shard=(1, 2))
    assert json.loads((out / MANIFEST_NAME).read_text())["mixed"] is False
    summary = edgecli.process(inputs, out, backend="cpu", shard=(0, 2), skip_existing=True)
    assert summary.frames == 0 and summary.skipped_existing > 0


def test_a_shard_keeps_a_mixed_mark_it_cannot_vouch_for(media, tmp_path):
    """After a run with other options, shards that rewrite only their part keep the folder
    marked mixed (so --skip-existing refuses it); a plain run rewriting it all clears it."""
    inputs = cli_inputs(media, "folder")
    out = tmp_path / "out"
    edgecli.process(inputs, out, backend="cpu", threshold=50)
    for i in range(2):
        edgecli.process(inputs, out, backend="cpu", shard=(i, 2))
        assert json.loads((out / MANIFEST_NAME).read_text())["mixed"] is True
    result = invoke("run", *inputs, "-o", out, "--backend", "cpu", "--shard", "0/2",
                    "--skip-existing")  # fmt: skip
    assert result.exit_code == 2
    assert "the folder holds PNGs of several runs" in result.stderr
    edgecli.process(inputs, out, backend="cpu")
    assert folder_bytes(out) == folder_bytes(plain_run(media, "folder", tmp_path / "clean"))


@pytest.mark.parametrize("n", (2, 3))
def test_a_sole_shard_clears_a_mark_it_can_vouch_for(tmp_path, n):
    """Where every stale PNG lies in one shard's part, that shard's rewrite clears the
    mixed mark, since the folder then holds only PNGs it wrote."""
    folder = tmp_path / "in"
    folder.mkdir()
    cv2.imwrite(str(folder / "big.png"), photo(200, 200))
    cv2.imwrite(str(folder / "small.png"), photo(8, 8))
    out = tmp_path / "out"
    edgecli.process(folder / "big.png", out, backend="cpu", threshold=50)
    sources = discover_inputs(folder)
    owner = next(i for i, s in enumerate(partition(sources, n)) if names(s) == ["big.png"])
    edgecli.process(folder, out, backend="cpu", shard=(owner, n))
    assert json.loads((out / MANIFEST_NAME).read_text())["mixed"] is False
    assert set(os.listdir(out)) == {MANIFEST_NAME, "big.png"}


def test_another_hosts_temporaries_are_kept_until_stale(media, tmp_path):
    """In a folder shared by shards on several hosts, a run removes its own host's dead
    temporaries and another host's old ones, but keeps another host's recent ones (its
    writer may be alive: a PID says nothing about another host)."""
    out = tmp_path / "out"
    mine = dead_runs_temporary(out)  # this host's, its writer dead
    dead = 999999999  # no such process here
    recent = out / f".edgecli-{dead}-0@other-host.example.tmp"
    old = out / f".edgecli-{dead}-1@other-host.example.tmp"
    for temp in (recent, old):
        temp.write_bytes(b"partial")
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    edgecli.process(media / "shots" / "shot0.jpg", out, backend="cpu", shard=(0, 1))
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MANIFEST_NAME, "shot0.png", recent.name]
    )
    assert not mine.exists() and not old.exists()


def test_a_shard_starting_beside_another_does_not_mark_the_folder_mixed(media, tmp_path):
    """Two shards begin at once on a new folder, the other recording the options and writing
    its first PNG just as this one reads the record: the record stays unmixed."""
    out = tmp_path / "out"
    out.mkdir()
    options = edgecli.Options(backend="cpu", shard=(0, 2))
    first_png = (plain_run(media, "glob", tmp_path / "clean") / "shot4.png").read_bytes()
    read = resume.read_manifest

    def other_shard_starts(folder):
        found = read(folder)
        if not (folder / "shot4.png").exists():  # the other shard: its record, then a PNG
            resume.write_manifest(folder, edgecli.Options(shard=(1, 2)), mixed=False)
            (folder / "shot4.png").write_bytes(first_png)
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(resume, "read_manifest", other_shard_starts)
        assert resume.begin(out, options) is False
    assert json.loads((out / MANIFEST_NAME).read_text())["mixed"] is False
