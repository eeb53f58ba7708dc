"""The end-to-end benchmark's child processes (``e2e.py``): :class:`Bench` starts them within
a time budget, each with its wall time and own peak RSS, as a :class:`Run`. Standard library
only (the parent process stays small: see ``e2e.py``)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Run:
    """One child process: how it ended, how long it took, its peak RSS, what it printed."""

    label: str
    rc: int
    wall_s: float
    peak_rss_mb: float
    stdout: str
    stderr_tail: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out

    def json_out(self) -> dict | None:
        """The JSON object the child printed on stdout (edgecli's is indented), if any."""
        text = self.stdout.strip()
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return None


class Bench:
    """Child processes, scratch folders and the time budget of one benchmark run."""

    def __init__(self, args, scratch: Path):
        self.args, self.scratch = args, scratch
        self.started = time.perf_counter()
        self.counter = 0
        self.env = dict(os.environ)
        # Children import edgecli from this checkout, installed or not.
        path = self.env.get("PYTHONPATH")
        self.env["PYTHONPATH"] = str(REPO) + (os.pathsep + path if path else "")
        self.edgecli = [sys.executable, "-m", "edgecli"]

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def over_budget(self) -> bool:
        return self.elapsed() > self.args.budget_s

    def new_dir(self, name: str) -> Path:
        self.counter += 1
        path = self.scratch / f"{self.counter:03d}-{name}"
        path.mkdir(parents=True)
        return path

    def spawn(self, label: str, command: list[str], timeout_s: float | None = None) -> Run:
        """Run ``command``; wall time around it and its own ``ru_maxrss`` from os.wait4."""
        logs = self.new_dir(f"log-{label}")
        timeout_s = timeout_s or self.args.run_timeout_s
        with open(logs / "stdout", "wb") as out, open(logs / "stderr", "wb") as err:
            start = time.perf_counter()
            child = subprocess.Popen(command, stdout=out, stderr=err, env=self.env, cwd=REPO)
            killed = threading.Event()

            def kill() -> None:
                killed.set()
                child.kill()

            timer = threading.Timer(timeout_s, kill)
            timer.start()
            # wait4 rather than Popen.wait: it also returns this child's rusage.
            _, status, usage = os.wait4(child.pid, 0)
            wall_s = time.perf_counter() - start
            timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
        stdout = (logs / "stdout").read_text(errors="replace")
        stderr = (logs / "stderr").read_text(errors="replace")
        shutil.rmtree(logs)
        return Run(
            label=label,
            rc=child.returncode,
            wall_s=round(wall_s, 4),
            peak_rss_mb=round(usage.ru_maxrss / 1024, 1),  # Linux reports KiB
            stdout=stdout,
            stderr_tail=stderr[-2000:],
            timed_out=killed.is_set(),
        )

    def task(self, name: str, **task_args) -> dict:
        command = [sys.executable, str(Path(__file__).resolve().with_name("e2e_tasks.py")), name]
        run = self.spawn(f"task-{name}", command + [json.dumps(task_args)])
        if not run.ok:
            raise RuntimeError(f"task {name} failed (exit {run.rc}): {run.stderr_tail}")
        return run.json_out()

    def edgecli_run(self, backend: str, input_path: Path, label: str) -> tuple[Run, Path]:
        out_dir = self.new_dir(f"out-{label}")
        command = self.edgecli + [
            "run", str(input_path), "-o", str(out_dir), "--backend", backend,
            "--workers", str(self.args.workers), "-q", "--json-summary", "-",
        ]  # fmt: skip
        if backend == "cuda":
            command += shlex.split(self.args.gpu_args)
        return self.spawn(label, command), out_dir

    def course_run(self, input_path: Path, label: str) -> tuple[Run, Path]:
        out_dir = self.new_dir(f"out-{label}")
        script = REPO / "benchmarks" / "course_loop.py"
        command = [sys.executable, str(script), str(input_path), str(out_dir)]
        return self.spawn(label, command), out_dir
