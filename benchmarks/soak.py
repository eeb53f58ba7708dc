"""The soak (issue 39): many consecutive whole ``edgecli run`` processes of each input kind,
under a watchdog; per kind, the runs, the failures, the stalls and the spread of wall times.

    python benchmarks/soak.py                          # 30 runs a kind, bench_data/, into /tmp
    python benchmarks/soak.py --runs 5 --kinds jpeg,long --into tmpfs
    python benchmarks/soak.py --runs 4 --force-stall jpeg:2:write:5   # prove the watchdog

Kinds (``--kinds``, default all): ``jpeg``, a folder of ``--jpeg-frames`` links cycling over
the JPEGs in ``--jpeg`` (default ``bench_data/q95/jpeg``); ``png``, the same over ``--png``;
``clips``, a glob of ``--clips`` links to ``--data``/pan.mp4; ``long``, the one video
``--long`` (default ``--data``/pan_long.mp4). ``make bench-media`` makes them all.

Each run is ``python -X faulthandler benchmarks/soak_child.py run INPUT -o OUT -q --decode
auto`` (``--decode``; ``--edgecli-args`` adds options), started in a session of its own, its
stdout and stderr into files. The first run of a kind has ``--first-timeout-s``; each later
one a deadline of ``--factor`` times the median wall time of the kind's runs so far, at least
``--floor-s``. A run past its deadline is sent SIGUSR1, on which ``soak_child.py`` has
faulthandler write every thread's stack to ``KIND-NN.stacks``; ``--grace-s`` later its
session is killed, and the soak goes on. A run that exits non-zero is a failure; one whose
PNGs differ from the kind's first good run (``png_digests``: edgecli's encoder is
deterministic) is a mismatch. The stacks and stderr of every run that went wrong stay in
``--out`` (default ``bench_out/soak``) beside ``soak.json`` (every run) and ``soak.txt`` (the
table, printed last). Exit status: 0 when every run passed, 1 otherwise.

``--budget-s``: no run starts after it (the runs left are counted as not run, and the
exit status is 1). ``--force-stall KIND:N[:WHERE]`` makes run N of KIND stall
(``SOAK_STALL=WHERE`` for soak_child.py: ``start``, or ``write:K``, the Kth PNG write never
returning; default ``write:1``), to show that a stall is caught, dumped and survived.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import (
    log,
    median,
    output_root,
    png_digests,
    symlink_folder,
    video_copies,
    watched_command,
    watched_run,
)

REPO = Path(__file__).resolve().parent.parent
KINDS = ("jpeg", "png", "clips", "long")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of each kind (default 30)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"subset of {','.join(KINDS)}")
    parser.add_argument("--data", type=Path, default=REPO / "bench_data")
    parser.add_argument("--jpeg", type=Path, help="JPEG folder (default DATA/q95/jpeg)")
    parser.add_argument("--png", type=Path, help="PNG folder (default DATA/q95/png)")
    parser.add_argument("--long", type=Path, help="the long video (default DATA/pan_long.mp4)")
    parser.add_argument("--jpeg-frames", type=int, default=2400, help="links a JPEG run reads")
    parser.add_argument("--png-frames", type=int, default=480, help="links a PNG run reads")
    parser.add_argument("--clips", type=int, default=10, help="links to pan.mp4 a clips run reads")
    parser.add_argument("--decode", default="auto", choices=("auto", "cpu", "gpu"))
    parser.add_argument("--edgecli-args", default="", help="more options for every run")
    parser.add_argument(
        "--into",
        default="disk",
        help="where the runs write: tmpfs (/dev/shm), disk (TMPDIR or /tmp) or a folder",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench_out" / "soak")
    parser.add_argument("--factor", type=float, default=5.0, help="deadline / median wall time")
    parser.add_argument("--floor-s", type=float, default=30.0, help="the least deadline")
    parser.add_argument("--first-timeout-s", type=float, default=300.0, help="a kind's first run")
    parser.add_argument("--grace-s", type=float, default=3.0, help="from the dump to the kill")
    parser.add_argument("--budget-s", type=float, help="start no run after this many seconds")
    parser.add_argument("--force-stall", action="append", default=[], metavar="KIND:N[:WHERE]")
    args = parser.parse_args(argv)
    args.kinds = [k for k in args.kinds.split(",") if k]
    if unknown := set(args.kinds) - set(KINDS):
        parser.error(f"--kinds: unknown {sorted(unknown)}; choose from {', '.join(KINDS)}")
    if min(args.runs, args.jpeg_frames, args.png_frames, args.clips) < 1:
        parser.error("--runs, --jpeg-frames, --png-frames and --clips must be >= 1")
    args.jpeg = args.jpeg or args.data / "q95" / "jpeg"
    args.png = args.png or args.data / "q95" / "png"
    args.long = args.long or args.data / "pan_long.mp4"
    stalls = {}
    for spec in args.force_stall:
        kind, _, rest = spec.partition(":")
        run, _, where = rest.partition(":")
        if kind not in KINDS or not run.isdigit():
            parser.error(f"--force-stall {spec!r}: expected KIND:N[:WHERE], e.g. jpeg:2:start")
        stalls[kind, int(run)] = where or "write:1"
    args.force_stall = stalls
    return args


def make_inputs(args: argparse.Namespace, scratch: Path) -> dict[str, str]:
    """Each kind's INPUT; a kind whose media is missing is left out, with a line saying so."""
    inputs = {}
    for kind in args.kinds:
        if kind in ("jpeg", "png"):
            folder, count = (
                (args.jpeg, args.jpeg_frames) if kind == "jpeg" else (args.png, args.png_frames)
            )
            files = sorted(folder.glob(f"*.{'jpg' if kind == 'jpeg' else 'png'}"))
            if files:
                inputs[kind] = str(symlink_folder(files, count, scratch / f"{kind}-in"))
            else:
                log(f"{kind}: left out, no files in {folder} (make bench-media)")
        elif kind == "clips":
            clip = args.data / "pan.mp4"
            if clip.is_file():
                inputs[kind] = video_copies(clip, args.clips, scratch / "clips-in")
            else:
                log(f"clips: left out, no {clip} (make bench-media)")
        elif args.long.is_file():
            inputs[kind] = str(args.long)
        else:
            log(f"long: left out, no {args.long} (make bench-media)")
    return inputs


def soak_kind(kind: str, source: str, args: argparse.Namespace, into: Path, end: float) -> dict:
    """``args.runs`` runs of one kind, none started after ``end`` (perf_counter); each run's
    record and the kind's totals."""
    runs: list[dict] = []
    reference: dict[str, str] | None = None
    walls: list[float] = []
    for n in range(1, args.runs + 1):
        if time.perf_counter() > end:
            log(f"  {kind}: {args.runs - n + 1} runs not started, past --budget-s")
            break
        deadline = (
            args.first_timeout_s if not walls else max(args.floor_s, args.factor * median(walls))
        )
        name = f"{kind}-{n:02d}"
        out = into / name
        stacks, stdout, stderr = (args.out / f"{name}.{s}" for s in ("stacks", "stdout", "stderr"))
        env = dict(os.environ, SOAK_STACKS=str(stacks))
        env.pop("SOAK_STALL", None)
        if (kind, n) in args.force_stall:
            env["SOAK_STALL"] = args.force_stall[kind, n]
        command = watched_command("run", source, "-o", str(out), "-q", "--decode", args.decode,
                                  *args.edgecli_args.split())  # fmt: skip
        wall, code = watched_run(command, env, deadline, args.grace_s, stdout, stderr)
        run = {"run": n, "wall_s": round(wall, 3), "deadline_s": round(deadline, 1)}
        if "SOAK_STALL" in env:
            run["forced_stall"] = env["SOAK_STALL"]
        if code is None:
            run["result"] = "stall"
        elif code:
            run["result"] = f"exit {code}"
        else:
            digests = png_digests(out)
            if reference is None:
                reference = digests
            if not digests:
                run["result"] = "no PNGs"
            elif digests != reference:
                differ = sum(digests.get(k) != v for k, v in reference.items())
                run["result"] = f"differs: {differ} of {len(reference)} PNGs"
            else:
                run["result"] = "ok"
                walls.append(wall)
            run["pngs"] = len(digests)
        shutil.rmtree(out, ignore_errors=True)
        kept = []  # what a run left in its files: a stall's stacks, an error, a warning
        for path in (stacks, stdout, stderr):
            if path.stat().st_size:
                kept.append(str(path))
            else:
                path.unlink()
        if kept:
            run["kept"] = kept
        runs.append(run)
        if run["result"] != "ok":
            log(
                f"  {name}: {run['result']} after {wall:.2f} s (deadline {deadline:.1f} s); "
                f"kept {', '.join(Path(p).name for p in kept)}"
            )
        elif n == 1 or n % 10 == 0:
            log(f"  {name}: ok, {wall:.2f} s, {run['pngs']} PNGs")
    every = [r["wall_s"] for r in runs if r["result"] == "ok"]
    return {
        "input": source,
        "runs": len(runs),
        "ok": len(every),
        "failures": sum(r["result"].startswith(("exit", "no PNGs")) for r in runs),
        "mismatches": sum(r["result"].startswith("differs") for r in runs),
        "stalls": sum(r["result"] == "stall" for r in runs),
        "wall_s": {
            "min": min(every, default=None),
            "median": median(every),
            "max": max(every, default=None),
        },
        "pngs": len(reference) if reference else None,
        "each": runs,
    }


def table(report: dict) -> str:
    lines = [
        f"soak: {report['runs']} runs a kind, --decode {report['decode']}, into {report['into']}",
        "kind    runs  ok  failures  mismatches  stalls  wall s min / median / max  PNGs",
    ]
    for kind, k in report["kinds"].items():
        wall = k["wall_s"]
        spread = " / ".join(
            "-" if wall[s] is None else f"{wall[s]:.2f}" for s in ("min", "median", "max")
        )
        lines.append(
            f"{kind:<7} {k['runs']:>4}  {k['ok']:>2}  {k['failures']:>8}  "
            f"{k['mismatches']:>10}  {k['stalls']:>6}  {spread:>25}  {k['pngs']}"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="edgecli-soak-"))
    root = output_root(args.into)
    into = Path(tempfile.mkdtemp(prefix="edgecli-soak-out-", dir=root))
    report: dict = {
        "runs": args.runs,
        "decode": args.decode,
        "into": f"{args.into} ({root})",
        "edgecli_args": args.edgecli_args,
        "kinds": {},
    }
    try:
        inputs = make_inputs(args, scratch)
        started = time.perf_counter()
        end = started + args.budget_s if args.budget_s is not None else float("inf")
        for kind, source in inputs.items():
            log(f"== {kind}: {args.runs} runs of {source}")
            report["kinds"][kind] = soak_kind(kind, source, args, into, end)
        report["elapsed_s"] = round(time.perf_counter() - started, 1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(into, ignore_errors=True)
    report["table"] = table(report)
    (args.out / "soak.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "soak.txt").write_text(report["table"] + "\n")
    log(f"\n{report['table']}\n({report.get('elapsed_s')} s; every run in {args.out}/soak.json)")
    if not report["kinds"]:
        return 1
    bad = any(k["ok"] != args.runs for k in report["kinds"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
