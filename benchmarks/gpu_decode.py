"""GPU decoding, end to end (issue 18): whole-process wall fps of ``edgecli run`` with
``--decode cpu``, ``auto`` and ``gpu`` on a JPEG folder, a PNG folder (no GPU decoder: the
CPU's, which GPU decoding must not slow), one long H.264 video, a glob of clips and a glob of
short clips; against the OpenCV script a user would write and the CPU codec floor, all
measured in the same run; with the GPU engines' decode-only rates, in this
process and as whole processes of their own (``engine_floor.py``), and the run's PNGs written
again alone (``writes_alone``): the two bounds on any whole-process figure.

    python benchmarks/gpu_decode.py --data bench_data --jpeg bench_data/q95/jpeg [--frames 2400]
    python benchmarks/gpu_decode.py --long-runs                   # issue 39's long runs
    python benchmarks/gpu_decode.py --data /tmp/bd --long-runs --skip-gpu --jpeg-frames 1200

Long runs (issue 39, ``--long-runs``): 12,000 JPEGs (``--jpeg-frames``), 24 clips
(``--clips``) and the 9,600-frame ``pan_long40.mp4`` (``--long``; ``make_bench_media.py
--long-copies 40 --long-name pan_long40.mp4``, a stream copy in plain Python, which the GPU
host runs itself), ``--decode cpu`` (the reference) and ``auto``, into tmpfs and into the disk
(``--into``: each run's outputs in a folder of ``/dev/shm`` or of ``TMPDIR``/``/tmp``), each
row's fps over the engines alone and over the OpenCV script (run on the first 2,400 frames:
``--script-frames``; a single reader's rate, which the length does not change), in one run,
within ``--budget-s``. ``--skip-gpu`` leaves out the engines and ``--decode gpu``, to try it
where there is no GPU.

Input (``make bench-media``): ``--jpeg``, 240 1080p JPEGs at q95 (``scripts/make_bench_media.py
--only jpeg --jpeg-quality 95``, which runs anywhere); ``--png``, the same 240 frames as PNGs
(``--only png``; the kind is skipped where the folder is missing); under ``--data``, ``pan.mp4``
(240 frames; it needs an H.264 encoder, so the GPU host gets it carried over) and
``pan_long.mp4`` (the same clip ten times over, 2400 frames, stream-copied in plain Python:
``--long-copies 10``, which runs anywhere). The JPEG and PNG folders are ``--frames`` symlinks
(``--jpeg-frames``, ``--png-frames``) cycling over the 240 files, the clips are ``--clips``
(``--frames / 240``) symlinks to pan.mp4, the short clips ``--frames / 48`` to
``pan_head.mp4`` (48 frames). The camera rows (issue 38) are ``--clips`` symlinks to
``pan_bt709.mp4`` (pan.mp4 tagged BT.709), ``pan_hevc.mp4`` (the pan in HEVC) and
``pan_rot90.mp4`` (pan.mp4 with a portrait phone's display matrix), made with the others by
``make_bench_media.py --only video`` and carried too; each is compared with the clips row, the
same frames untagged, in the table's last lines: with ``--camera-rounds N``, as the median of
N rounds in which the four kinds' ``--decode auto`` runs alternate, into tmpfs (a ratio of two
rows measured minutes apart into the disk also measures how far the disk's writeback has
fallen behind by then). Every GPU-decoded run's PNGs are checked,
file for file, against the ``--decode cpu`` run's (the PNG encoder is deterministic, so equal
pixels give equal bytes). Each is also run on a fifth of the frames, for the steady rate between
the two (not with ``--no-steady``). edgecli runs as ``python -m edgecli`` from this checkout,
as installed: with Python's bytecode cached (``PYTHONPYCACHEPREFIX`` in the scratch folder;
``--no-bytecode`` runs it without, as the GPU host's image runs everything:
``PYTHONDONTWRITEBYTECODE=1`` and no bytecode shipped, which costs each process about 0.26 s of
compiling), after one warm-up run that also fills the kernel cache.
The OpenCV scripts run in the same environment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "scripts"))

from common import (  # noqa: E402
    log,
    output_root,
    png_digests,
    ratio,
    symlink_folder,
    video_copies,
    watched_command,
    watched_run,
)
from concat_mp4 import concat  # noqa: E402

DECODES = ("cpu", "auto", "gpu")
# The clips rows beside pan.mp4's (issue 38): the same frames as cameras and phones write them,
# made by ``make_bench_media.py --only video``; each row is compared with the "clips" row.
CAMERA_CLIPS = {"bt709": "pan_bt709.mp4", "hevc": "pan_hevc.mp4", "rotated": "pan_rot90.mp4"}
FOLDERS = ("jpeg", "png")  # kinds that are folders of images; the others are videos
ENV = dict(os.environ)  # the children's environment: main() sets the bytecode cache


# A whole run's deadline where its caller gives none (BENCH_DEADLINE_S): past it, the run
# counts as stalled.
RUN_DEADLINE_S = float(os.environ.get("BENCH_DEADLINE_S", 600))
# Where a stalled run's stacks are kept (BENCH_STALLS, e.g. a device call's $OUT).
STALLS = Path(os.environ.get("BENCH_STALLS", tempfile.gettempdir()))


def edgecli(
    source: str, out: Path, decode: str, options: tuple[str, ...] = (), timeout_s=None, *,
    env: dict | None = None, prefix: tuple[str, ...] = (),
) -> dict:  # fmt: skip
    """One whole ``edgecli run`` (with more ``options``, e.g. the operator; more ``env``
    variables; through a ``prefix`` command such as taskset): its wall time (process start to
    exit) and JSON summary. Past ``timeout_s`` (RUN_DEADLINE_S where None) it counts as
    stalled: every thread's stack goes to a file in STALLS, which the error names, and the run
    is killed."""
    summary = out.with_suffix(".json")
    command = [*prefix, *watched_command("run", source, "-o", str(out), "-q", "--decode", decode,
                                         "--json-summary", str(summary), *options)]  # fmt: skip
    STALLS.mkdir(parents=True, exist_ok=True)
    stacks = STALLS / f"stall-{time.strftime('%H%M%S')}-{out.name}.stacks"
    logs = [out.with_name(f"{out.name}.{kind}") for kind in ("stdout", "stderr")]
    deadline = RUN_DEADLINE_S if timeout_s is None else timeout_s
    env = dict(ENV, **(env or {}), SOAK_STACKS=str(stacks))
    wall, code = watched_run(command, env, deadline, 5.0, *logs)
    stderr = logs[1].read_text(errors="replace").strip()
    for path in logs:
        path.unlink(missing_ok=True)
    if code is None:
        return {"error": f"still running after {deadline:g} s: killed; stacks in {stacks}"}
    stacks.unlink(missing_ok=True)
    if code:
        return {"error": f"exit {code}: {stderr[-400:]}"}
    figures = json.loads(summary.read_text())
    return {
        "wall_s": round(wall, 3),
        "fps": round(figures["frames"] / wall, 1),
        "frames": figures["frames"],
        "decoders": figures.get("decoders"),
        "bottleneck": figures["bottleneck_detail"],
        "run_s": figures["wall_s"],  # from the run's start, after Python and imports
        "stages_s": {k: round(v["total_ms"] / 1e3, 3) for k, v in figures["stages"].items()},
        "main_thread_waits_s": figures["main_thread_waits_s"],
    }


def videos_of(source: str) -> list[str]:
    """The videos a video INPUT names: one file, or a glob in one folder."""
    return sorted(str(p) for p in Path(source).parent.glob(Path(source).name))


def steady(long: dict, short: dict) -> float | None:
    """Frames a second between a short run's end and a long one's: the rate once started."""
    if "error" in long or "error" in short or long["wall_s"] <= short["wall_s"]:
        return None
    return round((long["frames"] - short["frames"]) / (long["wall_s"] - short["wall_s"]), 1)


def script(kind: str, inputs: list[str], out: Path, threshold: str = "100") -> dict:
    """The OpenCV script a user would write: a Pool over a folder's images, or one reader a
    video over ``inputs`` (what :func:`script_input` gives); Sobel at ``threshold``, or
    cv2.Canny where it is LOW,HIGH."""
    out.mkdir(parents=True)
    if kind in FOLDERS:
        command = [sys.executable, str(REPO / "benchmarks" / "pool_script.py"), *inputs, str(out)]
        command.append(threshold)
    else:
        command = [sys.executable, str(REPO / "benchmarks" / "video_script.py"), "-t", threshold]
        command += [str(out), *inputs]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=ENV)
    wall = time.perf_counter() - start
    if done.returncode:
        return {"error": done.stderr.strip()[-400:]}
    frames = len(list(out.glob("*.png")))
    return {"wall_s": round(wall, 3), "fps": round(frames / wall, 1), "frames": frames}


def codec_floor(kind: str, source: str, threads: int) -> dict:
    """The CPU's codecs alone: decode every frame (16 threads over files; a reader a video)
    and 1-bit PNG-encode edge maps of them (16 threads); floor = 1 / (1/decode + 1/encode)."""
    from edgecli.edges.reference import detect_frame
    from edgecli.options.params import Options
    from edgecli.output.png import encode_png

    pool = ThreadPoolExecutor(threads)
    if kind in FOLDERS:
        paths = sorted(str(p) for p in Path(source).iterdir())

        def decode_all():
            return list(pool.map(lambda p: cv2.imread(p, cv2.IMREAD_COLOR).shape, paths))

        sample = [cv2.imread(p, cv2.IMREAD_COLOR) for p in paths[:64]]
    else:
        videos = videos_of(source)

        def read(path: str) -> int:
            capture, n = cv2.VideoCapture(path), 0
            while capture.read()[0]:
                n += 1
            return n

        def decode_all():
            return list(pool.map(read, videos))

        sample = []  # 64 frames, from as many videos as that takes
        for path in videos:
            capture = cv2.VideoCapture(path)
            while len(sample) < 64 and (frame := capture.read()[1]) is not None:
                sample.append(frame)
    start = time.perf_counter()
    decoded = decode_all()
    frames = len(decoded) if kind in FOLDERS else sum(decoded)
    decode_fps = frames / (time.perf_counter() - start)
    edges = [detect_frame(f, Options()) for f in sample]
    reps = max(1, frames // len(edges))
    start = time.perf_counter()
    list(pool.map(lambda e: encode_png(e, 1), edges * reps))
    encode_fps = len(edges) * reps / (time.perf_counter() - start)
    pool.shutdown()
    return {
        "decode_fps": round(decode_fps, 1),
        "encode_fps": round(encode_fps, 1),
        "floor_fps": round(1 / (1 / decode_fps + 1 / encode_fps), 1),
    }


def engines_alone(kind: str, source: str, rounds: int = 3) -> dict:
    """``engine_floor.py`` as its own process, ``rounds`` times: the engines' decode alone,
    timed as :func:`edgecli` times a run (spawn to exit: ``whole_fps``), which bounds any
    whole-process figure; and from its start to its last frame (``fps``), without the
    process's end (the CUDA context's teardown). PNGs have no GPU decoder: nothing to time."""
    if kind == "png":
        return {"skipped": "no GPU decoder for PNG"}
    command = [sys.executable, str(REPO / "benchmarks" / "engine_floor.py")]
    if kind == "jpeg":
        command += ["jpeg", source]
    else:
        command += ["video", *videos_of(source)]
    runs = []
    for _ in range(rounds):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=ENV)
        wall = time.perf_counter() - start
        if done.returncode:
            return {"error": f"exit {done.returncode}: {done.stderr.strip()[-400:]}"}
        run = json.loads(done.stdout.strip().splitlines()[-1])
        run.update(wall_s=round(wall, 3), whole_fps=round(run["frames"] / wall, 1))
        runs.append(run)
    whole = sorted(run["whole_fps"] for run in runs)
    rates = sorted(run["fps"] for run in runs)
    return {
        "whole_best_fps": whole[-1], "whole_median_fps": whole[len(whole) // 2],
        "best_fps": rates[-1], "median_fps": rates[len(rates) // 2], "runs": runs,
    }  # fmt: skip


def writes_alone(pngs: Path, scratch: Path, threads: int, rounds: int = 2) -> dict:
    """The PNGs of a run (``pngs``, read into memory first) written again, atomically, by
    ``threads`` threads through edgecli's own ``write_atomic`` (C, without the GIL, where
    edgecli._native is built) into a new folder beside the runs': the output stage alone, in
    the file system's state the runs leave it, which bounds any whole-process figure too."""
    from edgecli.output.sinks import write_atomic

    files = [(p.name, p.read_bytes()) for p in sorted(pngs.glob("*.png"))]
    rates = []
    for round_ in range(rounds):
        out = scratch / f"writes-{round_}"
        out.mkdir()
        start = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(write_atomic, [out / name for name, _ in files], [d for _, d in files]))
        rates.append(round(len(files) / (time.perf_counter() - start)))
        shutil.rmtree(out)
    return {"files": len(files), "fps": rates, "mean_kb": round(
        sum(len(data) for _, data in files) / max(1, len(files)) / 1e3, 1)}  # fmt: skip


def engine_rates(jpeg_dir: Path, clip: Path) -> dict:
    """Decode-only (and conversion) rates of the JPEG engines and NVDEC, 1080p."""
    import cupy as cp

    from edgecli.decode import nvjpeg, yuv
    from edgecli.decode.gpu import convert

    untagged = yuv.Conversion().coefficients()  # pan.mp4's: BT.601, limited range

    rates: dict = {}
    files = [p.read_bytes() for p in sorted(jpeg_dir.iterdir())[:64]]
    decoder = nvjpeg.BatchDecoder("hardware")
    h, w = 1080, 1920
    frame_bytes = h * w * 3 // 2
    stream = cp.cuda.Stream(non_blocking=True)
    for batch in (32, 64):
        planes = cp.empty(batch * frame_bytes, cp.uint8)
        out = cp.empty((batch, h, w, 3), cp.uint8)
        base = planes.data.ptr
        destinations = [
            [(b, w), (b + h * w, w // 2), (b + h * w + h * w // 4, w // 2)]
            for b in (base + i * frame_bytes for i in range(batch))
        ]
        data = (files * 4)[:batch]
        decoder.decode(data, destinations, stream.ptr)  # warm
        stream.synchronize()
        calls = max(1, 1024 // batch)
        start = time.perf_counter()
        for _ in range(calls):
            decoder.decode(data, destinations, stream.ptr)
            convert.launch_jpeg_to_bgr(0, planes, frame_bytes, out, h, w, (2, 2), 1, stream)
        stream.synchronize()
        rates[f"jpeg_engines_batch{batch}_fps"] = round(
            calls * batch / (time.perf_counter() - start)
        )
    decoder.close()

    import PyNvVideoCodec as nvc

    def session(results: list) -> None:
        cp.cuda.Device(0).use()
        own = cp.cuda.Stream(non_blocking=True)
        dec = nvc.SimpleDecoder(str(clip), gpu_id=0, use_device_memory=True,
                                output_color_type=nvc.OutputColorType.NATIVE)  # fmt: skip
        out = cp.empty((16, h, w, 3), cp.uint8)
        total = len(dec)
        n = 0
        while n < total:
            frames = dec.get_batch_frames(min(16, total - n))
            if not frames:
                break
            with own:
                for j, frame in enumerate(frames):
                    nv12 = cp.from_dlpack(frame)
                    pitch = nv12.strides[0]
                    convert.launch_nv12_to_bgr(
                        0, nv12.data.ptr, pitch, nv12.data.ptr + pitch * h, pitch, out[j], own,
                        coefficients=untagged, rotation=0,
                    )  # fmt: skip
            own.synchronize()
            n += len(frames)
        results.append(n)

    for sessions in (1, 4, 8):
        results: list = []
        threads = [threading.Thread(target=session, args=(results,)) for _ in range(sessions)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rates[f"nvdec_{sessions}_sessions_fps"] = round(
            sum(results) / (time.perf_counter() - start)
        )
    return rates


# Issue 39's long runs (--long-runs): what each option is unless given.
LONG_RUNS = {
    "kinds": "jpeg,clips,long",
    "jpeg_frames": 12000,
    "clips": 24,
    "long": "pan_long40.mp4",
    "into": "tmpfs,disk",
    "decodes": "cpu,auto",
    "script_frames": 2400,
    "budget_s": 420.0,
}
DEFAULTS = {"kinds": "jpeg,png,long,clips,bt709,hevc,rotated,short", "long": "pan_long.mp4",
            "into": "disk", "decodes": ",".join(DECODES)}  # fmt: skip


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO / "bench_data")
    parser.add_argument("--jpeg", type=Path, default=REPO / "bench_data" / "q95" / "jpeg")
    parser.add_argument("--png", type=Path, default=REPO / "bench_data" / "q95" / "png")
    parser.add_argument(
        "--long-runs",
        action="store_true",
        help="issue 39's long runs: 12,000 JPEGs, 24 clips, pan_long40.mp4 (9,600 frames), "
        "into tmpfs and disk, --decode cpu and auto, the script on 2,400 frames, no steady "
        "runs, no codec floor, a 420 s budget; options given still count",
    )
    parser.add_argument("--frames", type=int, default=2400, help="frames of a kind's runs")
    parser.add_argument("--jpeg-frames", type=int, help="links of the JPEG runs (--frames)")
    parser.add_argument("--png-frames", type=int, help="links of the PNG runs (--frames)")
    parser.add_argument("--clips", type=int, help="pan.mp4 links of the clips runs (--frames/240)")
    parser.add_argument("--long", help="the long video, in DATA unless a path (pan_long.mp4)")
    parser.add_argument("--kinds", help=f"comma-separated (default {DEFAULTS['kinds']})")
    parser.add_argument("--decodes", help="subset of cpu,auto,gpu (default all)")
    parser.add_argument(
        "--into",
        help="where runs write, comma-separated: tmpfs (/dev/shm), disk (TMPDIR or /tmp) or a "
        "folder (default disk); each --decode but cpu runs into each, cpu (the reference, "
        "whose PNGs the others must equal) into the first",
    )
    parser.add_argument("--script-frames", type=int, help="the OpenCV script's frames (all)")
    parser.add_argument("--engine-rounds", type=int, default=3, help="engines-alone processes")
    parser.add_argument("--no-steady", action="store_true", help="no fifth-length runs")
    parser.add_argument("--no-floor", action="store_true", help="no CPU codec floor")
    parser.add_argument("--skip-gpu", action="store_true", help="no engines, no --decode gpu")
    parser.add_argument("--budget-s", type=float, help="start no kind after this many seconds")
    parser.add_argument(
        "--camera-rounds",
        type=int,
        default=0,
        help="rounds of the camera comparison: clips, bt709, hevc and rotated with --decode "
        "auto, alternating, into tmpfs (default 0: none)",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-bytecode", action="store_true", help="run without a bytecode cache")
    args = parser.parse_args(argv)
    for name, value in (LONG_RUNS if args.long_runs else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name, value in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.no_steady = args.no_steady or args.long_runs
    args.no_floor = args.no_floor or args.long_runs
    args.jpeg_frames = args.jpeg_frames or args.frames
    args.png_frames = args.png_frames or args.frames
    args.clips = args.clips or max(1, args.frames // 240)
    args.long = Path(args.long) if "/" in args.long else args.data / args.long
    args.kinds = [k for k in args.kinds.split(",") if k]
    args.decodes = [d for d in args.decodes.split(",") if d and not (args.skip_gpu and d == "gpu")]
    if unknown := set(args.decodes) - set(DECODES):
        parser.error(f"--decodes: unknown {sorted(unknown)}; choose from {', '.join(DECODES)}")
    args.into = [name for name in args.into.split(",") if name]
    if not args.into or not args.decodes:
        parser.error("--into and --decodes name at least one each")
    return args


def video_frames(path: Path) -> int:
    """The frames a video's container says it holds."""
    capture = cv2.VideoCapture(str(path))
    frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    capture.release()
    return frames


def script_input(kind: str, source: str, frames: int | None, clip: Path, scratch: Path) -> list:
    """What the OpenCV script reads: ``source``'s first ``frames`` frames (None: all of it).
    A folder's first links; a glob's first videos; for the long video, ``clip`` (pan.mp4, of
    which it is made) stream-copied to one video of at least ``frames`` frames."""
    if kind in FOLDERS:
        links = sorted(Path(source).iterdir())
        if frames is None or frames >= len(links):
            return [source]
        return [str(symlink_folder(links[:frames], frames, scratch / f"{kind}-script-in"))]
    if kind == "long":
        if frames is None or frames >= video_frames(Path(source)):
            return [source]
        copies = -(-frames // video_frames(clip))
        cut = scratch / "long-script-in.mp4"
        concat(clip, copies, cut)
        return [str(cut)]
    videos = videos_of(source)
    if frames is None:
        return videos
    return videos[: -(-frames // video_frames(Path(videos[0])))]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    threads = os.cpu_count() or 1
    scratch = Path(tempfile.mkdtemp(prefix="edgecli-bench-decode-"))
    # Each location's own folder for the runs' PNGs; the first also holds the reference's.
    roots = {
        name: Path(tempfile.mkdtemp(prefix="edgecli-bench-decode-out-", dir=output_root(name)))
        for name in args.into
    }
    if not args.no_bytecode:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = str(scratch / "pyc")
    results: dict = {
        "frames": args.frames,
        "threads": threads,
        "into": {name: str(root.parent) for name, root in roots.items()},
        "kinds": {},
        "bytecode": not args.no_bytecode,
    }
    started = time.perf_counter()
    try:
        warm = symlink_folder(sorted(args.jpeg.iterdir())[:80], 80, scratch / "warm-in")
        warm_up = edgecli(str(warm), scratch / "warm", "cpu" if args.skip_gpu else "gpu")
        log(f"== warm-up (bytecode and kernel caches): {warm_up}")
        if not args.skip_gpu:
            log(f"== engines (decode and conversion only, 1080p) at {time.strftime('%H:%M:%S')}")
            results["engines"] = engine_rates(args.jpeg, args.data / "pan.mp4")
            log(json.dumps(results["engines"]))
        inputs, short_inputs = make_inputs(args, scratch)
        for kind in args.kinds:
            if kind not in inputs:
                log(f"== {kind}: skipped, no input for it under {args.data}")
                continue
            if args.budget_s is not None and time.perf_counter() - started > args.budget_s:
                log(f"== {kind}: not measured, past --budget-s {args.budget_s:g}")
                results.setdefault("not_measured", []).append(kind)
                continue
            log(f"== {kind}: {inputs[kind]}")
            results["kinds"][kind] = measure_kind(
                kind, inputs[kind], short_inputs.get(kind), args, roots, scratch, threads
            )
        if args.camera_rounds:
            results["cameras"] = camera_rounds(inputs, args.camera_rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)
    results["elapsed_s"] = round(time.perf_counter() - started, 1)
    results["table"] = table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    log(f"\n{results['table']}\n({results['elapsed_s']} s)")
    failed = any(
        "error" in run or run.get("equal_to_cpu") is False
        for figures in results["kinds"].values()
        for run in figures["runs"]
    )
    return 1 if failed else 0


def make_inputs(args: argparse.Namespace, scratch: Path) -> tuple[dict, dict]:
    """Each kind's INPUT, and the fifth as long of it that the steady rate subtracts."""
    images = {
        kind: (sorted(folder.iterdir()), count)
        for kind, folder, count in (
            ("jpeg", args.jpeg, args.jpeg_frames),
            ("png", args.png, args.png_frames),
        )
        if folder.is_dir() and kind in args.kinds
    }
    pan, head = args.data / "pan.mp4", args.data / "pan_head.mp4"
    cameras = {k: args.data / clip for k, clip in CAMERA_CLIPS.items()}
    inputs = {
        **{
            k: str(symlink_folder(files, n, scratch / f"{k}-in"))
            for k, (files, n) in images.items()
        },
        **({"long": str(args.long)} if args.long.is_file() else {}),
        "clips": video_copies(pan, args.clips, scratch / "clips"),
        "short": video_copies(head, args.frames // 48, scratch / "short"),
        **{
            k: video_copies(clip, args.clips, scratch / k)
            for k, clip in cameras.items()
            if clip.is_file()
        },
    }
    if args.no_steady:
        return inputs, {}
    clip_frames = max(1, video_frames(pan))
    long_frames = video_frames(args.long) if args.long.is_file() else 0
    # A fifth of each, for the steady rate: the folders and clips cut; for the long video, the
    # copies of pan.mp4 it begins with, as clips (the same frames).
    short = {
        **{
            k: str(symlink_folder(files, max(1, n // 5), scratch / f"{k}-short"))
            for k, (files, n) in images.items()
        },
        "long": video_copies(pan, max(1, long_frames // 5 // clip_frames), scratch / "long-s"),
        "clips": video_copies(pan, max(1, args.clips // 5), scratch / "clips-short"),
        "short": video_copies(head, max(1, args.frames // 5 // 48), scratch / "short-short"),
        **{
            k: video_copies(clip, max(1, args.clips // 5), scratch / f"{k}-s")
            for k, clip in cameras.items()
            if clip.is_file()
        },
    }
    return inputs, short


def measure_kind(
    kind: str, source: str, short_source: str | None, args, roots: dict, scratch: Path, threads: int
) -> dict:
    """One kind's rows: each --decode into each location (cpu, the reference, into the first),
    their PNGs checked against the reference's; then the OpenCV script, the codec floor and
    the engines alone, the figures the rows are compared with."""
    figures: dict = {"runs": []}
    reference = None
    for decode in args.decodes:
        for into in args.into[:1] if decode == "cpu" else args.into:
            out = roots[into] / f"{kind}-{decode}"
            run = {"decode": decode, "into": into, **edgecli(source, out, decode)}
            log(f"  edgecli --decode {decode} into {into}: {run}")
            if short_source is not None and "error" not in run:
                short = edgecli(short_source, roots[into] / f"{kind}-{decode}-short", decode)
                shutil.rmtree(roots[into] / f"{kind}-{decode}-short", ignore_errors=True)
                run["short_run"] = short
                run["steady_fps"] = steady(run, short)
                log(
                    f"    {short.get('frames')} frames: {short.get('wall_s')} s; steady "
                    f"{run['steady_fps']} fps"
                )
            if "error" not in run:
                digests = png_digests(out)
                if decode == "cpu":
                    reference = digests
                    figures["writes_alone"] = writes_alone(out, roots[into], threads)
                    log(f"  its PNGs written alone, {threads} threads: {figures['writes_alone']}")
                elif reference is not None:
                    run["equal_to_cpu"] = digests == reference
                    log(f"  PNGs == --decode cpu PNGs: {run['equal_to_cpu']}")
            shutil.rmtree(out, ignore_errors=True)
            figures["runs"].append(run)
    videos = script_input(kind, source, args.script_frames, args.data / "pan.mp4", scratch)
    figures["script"] = script(kind, videos, scratch / f"{kind}-script")
    log(f"  OpenCV script: {figures['script']}")
    shutil.rmtree(scratch / f"{kind}-script", ignore_errors=True)
    if not args.no_floor:
        figures["codec_floor"] = codec_floor(kind, source, threads)
        log(f"  CPU codec floor: {figures['codec_floor']}")
    if not args.skip_gpu:
        figures["engines_alone"] = engines_alone(kind, source, args.engine_rounds)
        log(f"  the engines alone, whole process: {figures['engines_alone']}")
    return figures


def camera_rounds(inputs: dict, rounds: int) -> dict:
    """Issue 38's comparison: ``rounds`` rounds of ``--decode auto`` on the untagged clips and
    each camera kind, alternating so that every kind meets the same host, into tmpfs so that
    no run pays for an earlier one's writeback; each kind's fps, run by run."""
    kinds = [k for k in ("clips", *CAMERA_CLIPS) if k in inputs]
    root = Path(tempfile.mkdtemp(prefix="edgecli-bench-cameras-", dir=output_root("tmpfs")))
    fps: dict = {kind: [] for kind in kinds}
    log(f"== the camera comparison: {rounds} rounds of {', '.join(kinds)}, auto, into tmpfs")
    try:
        for round_ in range(rounds):
            for kind in kinds:
                run = edgecli(inputs[kind], root / kind, "auto")
                shutil.rmtree(root / kind, ignore_errors=True)
                said = run.get("error") or f"{run['fps']} fps, the run proper {run['run_s']} s"
                log(f"  round {round_ + 1}, {kind}: {said}")
                fps[kind].append(run.get("fps"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return fps


def table(results: dict) -> str:
    """Each row's fps and its ratios to the engines alone (whole process, median), the OpenCV
    script and the CPU codec floor of the same kind; then the figures those come from."""
    lines = [
        "kind    decode into   frames  wall fps  steady  /engines  /script  /floor  equal  decoders"
    ]
    notes = []
    for kind, figures in results["kinds"].items():
        engines = figures.get("engines_alone", {}).get("whole_median_fps")
        script_fps = figures["script"].get("fps")
        floor = figures.get("codec_floor", {}).get("floor_fps")
        for run in figures["runs"]:
            head = f"{kind:<7} {run['decode']:<6} {run['into']:<6}"
            if "error" in run:
                lines.append(f"{head} {run['error'][:70]}")
                continue
            ratios = [ratio(run["fps"], x) for x in (engines, script_fps, floor)]
            steady_fps = run.get("steady_fps") or "-"
            lines.append(
                f"{head} {run['frames']:>6}  {run['fps']:8.0f}  {steady_fps!s:>6}  "
                + "  ".join(
                    f"{'-' if r is None else f'{r:.2f}':>{w}}"
                    for r, w in zip(ratios, (8, 7, 6), strict=True)
                )
                + f"  {str(run.get('equal_to_cpu', '-')):<5}  {run['decoders']}"
            )
        alone = figures.get("engines_alone", {})
        said = [f"OpenCV script {script_fps} fps ({figures['script'].get('frames')} frames)"]
        if engines is not None:
            said.append(
                f"engines alone {engines} median, {alone['whole_best_fps']} best (to the "
                f"last frame {alone['median_fps']}, {alone['best_fps']})"
            )
        elif "engines_alone" in figures:
            said.append(f"engines alone: {next(iter(alone.values()))}")
        if floor is not None:
            said.append(f"CPU codec floor {floor}")
        if "writes_alone" in figures:
            said.append(f"PNGs written alone {figures['writes_alone']['fps']}/s")
        notes.append(f"{kind}: {', '.join(said)}")
    runs = {k: f["runs"] for k, f in results["kinds"].items()}
    clips = next(
        (r["fps"] for r in runs.get("clips", []) if r["decode"] == "auto" and "fps" in r), None
    )
    cameras = results.get("cameras")
    for kind in CAMERA_CLIPS:
        if cameras:
            rates = cameras.get(kind, [])
            if not rates or None in rates or None in cameras["clips"]:
                notes.append(f"{kind}: a run of the camera comparison failed (see the log)")
                continue
            fps, base = statistics.median(rates), statistics.median(cameras["clips"])
            notes.append(
                f"{kind}: --decode auto {fps:.0f} fps, {fps / base:.2f}x the untagged clips' "
                f"{base:.0f} (medians of {len(rates)} alternating rounds into tmpfs; "
                f"issue 38's target: >= 0.9x)"
            )
            continue
        auto = next((r for r in runs.get(kind, []) if r["decode"] == "auto" and "fps" in r), None)
        if clips and auto:
            notes.append(
                f"{kind}: --decode auto {auto['fps']:.0f} fps, {auto['fps'] / clips:.2f}x "
                f"the untagged clips' {clips:.0f} (issue 38's target: >= 0.9x)"
            )
    return "\n".join(lines + [""] + notes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
