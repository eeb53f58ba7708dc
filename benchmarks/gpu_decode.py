"""GPU decoding, end to end (issue 18): whole-process wall fps of ``edgecli run`` with
``--decode cpu``, ``auto`` and ``gpu`` on a JPEG folder, a PNG folder (no GPU decoder: the
CPU's, which GPU decoding must not slow), one long H.264 video, a glob of clips and a glob of
short clips; against the OpenCV script a user would write and the CPU codec floor, all
measured in the same run; with the GPU engines' decode-only rates, in this
process and as whole processes of their own (``engine_floor.py``), and the run's PNGs written
again alone (``writes_alone``): the two bounds on any whole-process figure.

    python benchmarks/gpu_decode.py --data bench_data --jpeg bench_data/q95/jpeg [--frames 2400]

Input (``make bench-media``): ``--jpeg``, 240 1080p JPEGs at q95 (``scripts/make_bench_media.py
--only jpeg --jpeg-quality 95``, which runs anywhere); ``--png``, the same 240 frames as PNGs
(``--only png``; the kind is skipped where the folder is missing); under ``--data``, ``pan.mp4``
(240 frames) and ``pan_long.mp4`` (the same clip ten times over, 2400 frames, stream-copied:
``--long-copies 10``; both need an H.264 encoder, so the GPU host gets them carried over). The
JPEG and PNG folders are ``--frames`` symlinks cycling over the 240 files, the clips are
``--frames / 240`` symlinks to pan.mp4, the short clips ``--frames / 48`` to ``pan_head.mp4``
(48 frames). The camera rows (issue 38) are ``--frames / 240`` symlinks to
``pan_bt709.mp4`` (pan.mp4 tagged BT.709), ``pan_hevc.mp4`` (the pan in HEVC) and
``pan_rot90.mp4`` (pan.mp4 with a portrait phone's display matrix), made with the others by
``make_bench_media.py --only video`` and carried too; each is compared with the clips row, the
same frames untagged, in the table's last lines. Every GPU-decoded run's PNGs are checked,
file for file, against the ``--decode cpu`` run's (the PNG encoder is deterministic, so equal
pixels give equal bytes). Each is also run on a fifth of the frames, for the steady rate between
the two. edgecli runs as ``python -m
edgecli`` from this checkout, as installed: with Python's bytecode cached
(``PYTHONPYCACHEPREFIX`` in the scratch folder; ``--no-bytecode`` runs it without, as the GPU
host's image runs everything: ``PYTHONDONTWRITEBYTECODE=1`` and no bytecode shipped, which costs
each process about 0.26 s of compiling), after one warm-up run that also fills the kernel cache.
The OpenCV scripts run in the same environment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

from common import log, png_digests, symlink_folder, video_copies  # noqa: E402

DECODES = ("cpu", "auto", "gpu")
# The clips rows beside pan.mp4's (issue 38): the same frames as cameras and phones write them,
# made by ``make_bench_media.py --only video``; each row is compared with the "clips" row.
CAMERA_CLIPS = {"bt709": "pan_bt709.mp4", "hevc": "pan_hevc.mp4", "rotated": "pan_rot90.mp4"}
FOLDERS = ("jpeg", "png")  # kinds that are folders of images; the others are videos
ENV = dict(os.environ)  # the children's environment: main() sets the bytecode cache


def edgecli(source: str, out: Path, decode: str) -> dict:
    """One whole ``edgecli run``: its wall time (process start to exit) and JSON summary."""
    summary = out.with_suffix(".json")
    command = [sys.executable, "-m", "edgecli", "run", source, "-o", str(out), "-q"]
    command += ["--decode", decode, "--json-summary", str(summary)]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=ENV)
    wall = time.perf_counter() - start
    if done.returncode:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-400:]}"}
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


def script(kind: str, source: str, out: Path) -> dict:
    """The OpenCV script a user would write: a Pool over the images, or one reader a video."""
    out.mkdir(parents=True)
    if kind in FOLDERS:
        command = [sys.executable, str(REPO / "benchmarks" / "pool_script.py"), source, str(out)]
    else:
        command = [sys.executable, str(REPO / "benchmarks" / "video_script.py"), str(out)]
        command += videos_of(source)
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
    from edgecli.params import Options
    from edgecli.png import encode_png
    from edgecli.reference import detect_frame

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
    from edgecli.sinks import write_atomic

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

    from edgecli.decode import nvjpeg
    from edgecli.decode.gpu import convert

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
                        0, nv12.data.ptr, pitch, nv12.data.ptr + pitch * h, pitch, out[j], own
                    )
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO / "bench_data")
    parser.add_argument("--jpeg", type=Path, default=REPO / "bench_data" / "q95" / "jpeg")
    parser.add_argument("--png", type=Path, default=REPO / "bench_data" / "q95" / "png")
    parser.add_argument("--frames", type=int, default=2400)
    parser.add_argument("--kinds", default="jpeg,png,long,clips,bt709,hevc,rotated,short")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-bytecode", action="store_true", help="run without a bytecode cache")
    args = parser.parse_args()
    threads = os.cpu_count() or 1
    scratch = Path(tempfile.mkdtemp(prefix="edgecli-bench-decode-"))
    if not args.no_bytecode:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = str(scratch / "pyc")
    results: dict = {"frames": args.frames, "threads": threads, "kinds": {},
                     "bytecode": not args.no_bytecode}  # fmt: skip
    try:
        warm = symlink_folder(sorted(args.jpeg.iterdir())[:80], 80, scratch / "warm-in")
        warm_up = edgecli(str(warm), scratch / "warm", "gpu")
        log(f"== warm-up (bytecode and kernel caches): {warm_up}")
        log(f"== engines (decode and conversion only, 1080p) at {time.strftime('%H:%M:%S')}")
        results["engines"] = engine_rates(args.jpeg, args.data / "pan.mp4")
        log(json.dumps(results["engines"]))
        images = {k: sorted(d.iterdir()) for k, d in (("jpeg", args.jpeg), ("png", args.png))
                  if d.is_dir()}  # fmt: skip

        def folders(count: int, name: str) -> dict:
            """Each folder kind's ``count`` links, cycling over its files: scratch / kind-name."""
            return {k: str(symlink_folder(files, count, scratch / f"{k}-{name}"))
                    for k, files in images.items()}  # fmt: skip

        inputs = {
            **folders(args.frames, "in"),
            "long": str(args.data / "pan_long.mp4"),
            "clips": video_copies(args.data / "pan.mp4", args.frames // 240, scratch / "clips"),
            "short": video_copies(args.data / "pan_head.mp4", args.frames // 48, scratch / "short"),
            **{
                kind: video_copies(args.data / clip, args.frames // 240, scratch / kind)
                for kind, clip in CAMERA_CLIPS.items()
                if (args.data / clip).is_file()
            },
        }
        # A fifth of each, for the steady rate: the JPEGs and clips cut, the long video's
        # first 480 frames (pan.mp4 twice, the long one's first two copies: the same frames).
        fifth = args.frames // 5
        short_inputs = {
            **folders(fifth, "short"),
            "long": video_copies(args.data / "pan.mp4", 2, scratch / "long-short"),
            "clips": video_copies(
                args.data / "pan.mp4", max(1, fifth // 240), scratch / "clips-short"
            ),  # fmt: skip
            "short": video_copies(
                args.data / "pan_head.mp4", max(1, fifth // 48), scratch / "short-short"
            ),  # fmt: skip
            **{
                kind: video_copies(args.data / clip, max(1, fifth // 240), scratch / f"{kind}-s")
                for kind, clip in CAMERA_CLIPS.items()
            },
        }
        for kind in args.kinds.split(","):
            if kind not in inputs:
                log(f"== {kind}: skipped, no {getattr(args, kind, kind)} folder")
                continue
            log(f"== {kind}: {inputs[kind]}")
            figures: dict = {}
            for decode in DECODES:
                out = scratch / f"{kind}-{decode}"
                figures[decode] = edgecli(inputs[kind], out, decode)
                log(f"  edgecli --decode {decode}: {figures[decode]}")
                short = edgecli(short_inputs[kind], scratch / f"{kind}-{decode}-short", decode)
                shutil.rmtree(scratch / f"{kind}-{decode}-short", ignore_errors=True)
                figures[decode]["short_run"] = short
                figures[decode]["steady_fps"] = steady(figures[decode], short)
                log(f"    {short.get('frames')} frames: {short.get('wall_s')} s; steady "
                    f"{figures[decode]['steady_fps']} fps")  # fmt: skip
            figures["writes_alone"] = writes_alone(scratch / f"{kind}-cpu", scratch, threads)
            log(f"  its PNGs written alone, {threads} threads: {figures['writes_alone']}")
            reference = png_digests(scratch / f"{kind}-cpu")
            for decode in ("auto", "gpu"):
                if "error" not in figures[decode]:
                    same = png_digests(scratch / f"{kind}-{decode}") == reference
                    figures[decode]["equal_to_cpu"] = same
                    log(f"  --decode {decode} PNGs == --decode cpu PNGs: {same}")
            for decode in DECODES:
                shutil.rmtree(scratch / f"{kind}-{decode}", ignore_errors=True)
            figures["script"] = script(kind, inputs[kind], scratch / f"{kind}-script")
            log(f"  OpenCV script: {figures['script']}")
            shutil.rmtree(scratch / f"{kind}-script", ignore_errors=True)
            figures["codec_floor"] = codec_floor(kind, inputs[kind], threads)
            log(f"  CPU codec floor: {figures['codec_floor']}")
            figures["engines_alone"] = engines_alone(kind, inputs[kind])
            log(f"  the engines alone, whole process: {figures['engines_alone']}")
            results["kinds"][kind] = figures
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    log("\nkind   decode  wall fps  steady fps  vs script  vs floor  equal  decoders")
    for kind, figures in results["kinds"].items():
        script_fps = figures["script"].get("fps")
        floor = figures["codec_floor"]["floor_fps"]
        for decode in DECODES:
            run = figures[decode]
            if "error" in run:
                log(f"{kind:<6} {decode:<6} {run['error'][:60]}")
                continue
            vs_script = run["fps"] / script_fps if script_fps else float("nan")
            log(f"{kind:<6} {decode:<6} {run['fps']:8.0f}  {run.get('steady_fps')!s:>10}  "
                f"{vs_script:8.2f}  "
                f"{run['fps'] / floor:8.2f}  {str(run.get('equal_to_cpu', '-')):<5}  "
                f"{run['decoders']}")  # fmt: skip
        alone = figures["engines_alone"]
        log(f"{kind:<6} script {script_fps}  floor {floor}  engines alone, whole process "
            f"{alone.get('whole_median_fps')} median, {alone.get('whole_best_fps')} best (to "
            f"the last frame {alone.get('median_fps')}, {alone.get('best_fps')}); PNGs "
            f"written alone {figures['writes_alone']['fps']}")  # fmt: skip
    clips = results["kinds"].get("clips", {}).get("auto", {}).get("fps")
    for kind in CAMERA_CLIPS:
        run = results["kinds"].get(kind, {}).get("auto", {})
        if clips and "fps" in run:
            log(f"{kind:<7} --decode auto {run['fps']:.0f} fps: {run['fps'] / clips:.2f}x the "
                f"untagged H.264 clips' {clips:.0f} (issue 38's target: >= 0.9x)")  # fmt: skip


if __name__ == "__main__":
    main()
