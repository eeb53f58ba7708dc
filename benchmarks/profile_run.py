"""Where one long run's threads spend their time: ``edgecli.pipeline.run`` in this process,
under ``e2e_tasks.Sampler`` (each thread group's places by share of samples, CPU cores,
preemptions, and how late the sampler itself woke: its wait for the GIL and a core), set up
as the CLI sets up a run (its GIL switch interval, the allocator's settings). For a run that
the summary calls hand-off-bound or not bound, this says which threads hold the GIL and where.

    python benchmarks/profile_run.py DIR [--frames 12000] [--decode gpu] [--into tmpfs]
    python benchmarks/profile_run.py VIDEO [--clips 10] [--decode auto]

DIR is a folder of frames (PNGs or JPEGs), cycled to ``--frames`` links; VIDEO a video file,
run as a glob of ``--clips`` links to it. Prints the run's figures and bottleneck line, then the
profile as JSON (also to ``--json``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from common import output_root, symlink_folder, video_copies  # noqa: E402
from e2e_tasks import Sampler  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a folder of PNG or JPEG frames, or a video")
    parser.add_argument("--frames", type=int, default=12000, help="links of a folder's frames")
    parser.add_argument("--clips", type=int, default=10, help="links of a video")
    parser.add_argument("--decode", default="gpu", choices=("auto", "cpu", "gpu"))
    parser.add_argument("--into", default="tmpfs", help="tmpfs (/dev/shm), disk, or a folder")
    parser.add_argument("--interval-ms", type=float, default=5.0, help="the sampler's period")
    parser.add_argument("--json", type=Path, help="also write the figures and profile here")
    args = parser.parse_args(argv)

    from edgecli.cli.run import SWITCH_INTERVAL_S
    from edgecli.options.params import Options
    from edgecli.pipeline import run
    from edgecli.pipeline.allocator import keep_freed_memory

    sys.setswitchinterval(SWITCH_INTERVAL_S)  # as the CLI runs
    keep_freed_memory()
    root = Path(output_root(args.into)) / f"edgecli-profile-{time.time_ns()}"
    try:
        if args.folder.is_file():
            source = video_copies(args.folder, args.clips, root / "in")
        else:
            frames = [p for p in args.folder.iterdir() if p.suffix.lower() in (".png", ".jpg")]
            source = symlink_folder(sorted(frames), args.frames, root / "in")
        with Sampler(args.interval_ms / 1e3) as sampler:
            summary = run(str(source), root / "out", Options(decode=args.decode))
        reported = summary.as_json()
        figures = {k: reported[k] for k in ("frames", "wall_s", "fps", "main_thread_waits_s")}
        figures |= {"decoders": reported["decoders"], "bottleneck": reported["bottleneck_detail"]}
        result = {"figures": figures, "busy": reported["busy"], "profile": sampler.report()}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures))
    print(json.dumps(result["profile"], indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
