"""Who writes into an output folder now: a run claims the folder for as long as it writes
there, with the options that decide its output bytes, and a run whose options differ from a
live claim's is refused before it writes anything (the folder's record,
:mod:`edgecli.output.resume`, would otherwise name one run's options over PNGs of both). Runs with
the same options share the folder: shards (``--shard``, several hosts among them), ``--device``
workers, a cluster's tasks and the client that started them, or the same command twice.

A claim is a file ``.edgecli-claim-<pid>-<n>@<host>.json`` in the output folder, written
whole (by rename) and removed when the run ends. A run writes its own claim before it looks
at the others', so of two runs with different options that start together at least one sees
the other: both may be refused, never both let in. On one host the look is also serialised by
an advisory lock on the folder (``flock``), so that only the later one is refused; where the
lock is not to be had (some network file systems) the order of writing and looking is what is
relied on, and a network client that caches folder listings may see another host's claim late.

A claim whose run is gone does not block: on its own host, one whose process is dead; on any
host, one not refreshed for :data:`CLAIM_STALE_S` (its run refreshes it every
:data:`CLAIM_REFRESH_S`), which covers a killed run on another host and a process number that
was given to another process since.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import OptionError
from ..options.params import Options
from ..workers import start_thread
from .resume import recorded_options
from .sinks import HOST, process_alive, write_atomic

CLAIM_PREFIX = ".edgecli-claim-"
CLAIM_SUFFIX = ".json"
CLAIM_REFRESH_S = 60
CLAIM_STALE_S = 600  # ten refreshes missed: no live run is that late, even a loaded host's
_claim_numbers = itertools.count()


@contextlib.contextmanager
def claimed(out_dir: Path, options: Options) -> Iterator[None]:
    """Hold a claim on ``out_dir`` for the ``with`` block; OptionError (exit 2), naming the
    other run, where a live claim there has other output-deciding options."""
    claim = out_dir / f"{CLAIM_PREFIX}{os.getpid()}-{next(_claim_numbers)}@{HOST}{CLAIM_SUFFIX}"
    mine = {"pid": os.getpid(), "host": HOST, "options": recorded_options(options)}
    ended = threading.Event()
    refresher = threading.Thread(
        target=_refresh, args=(claim, ended), name="edgecli-claim", daemon=True
    )
    with _serialised(out_dir):
        write_atomic(claim, (json.dumps(mine) + "\n").encode())
        try:
            _refuse_other_options(out_dir, claim, mine["options"])
            start_thread(refresher, "the thread that keeps the output folder's claim fresh")
        except BaseException:
            claim.unlink(missing_ok=True)
            raise
    try:
        yield
    finally:
        ended.set()
        refresher.join()
        claim.unlink(missing_ok=True)
        for _ in _live_claims(out_dir):  # and those of runs that died meanwhile (a killed
            pass  # worker of this run's cluster, say): a finished run leaves none behind


@contextlib.contextmanager
def _serialised(out_dir: Path) -> Iterator[None]:
    """An exclusive advisory lock on the folder while held, where the file system gives one."""
    try:
        fd = os.open(out_dir, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _refresh(claim: Path, ended: threading.Event) -> None:
    while not ended.wait(CLAIM_REFRESH_S):
        with contextlib.suppress(OSError):
            os.utime(claim)


def _refuse_other_options(out_dir: Path, mine: Path, wanted: dict) -> None:
    for claim, other in _live_claims(out_dir):
        if claim == mine or other["options"] == wanted:
            continue
        differ = [key for key in wanted if other["options"].get(key) != wanted[key]]
        theirs = " ".join(f"{key}={other['options'].get(key)}" for key in differ)
        ours = " ".join(f"{key}={wanted[key]}" for key in differ)
        raise OptionError(
            f"{out_dir}: another edgecli run writes into this folder with other options "
            f"(pid {other['pid']} on {other['host']}: {theirs}; this run: {ours}); wait for "
            "it to end, or choose another output folder"
        )


def _live_claims(out_dir: Path) -> Iterator[tuple[Path, dict]]:
    """The folder's claims whose runs may be alive, with what they hold; the others are
    removed (quietly: another run may be removing them too)."""
    now = time.time()
    for claim in out_dir.glob(f"{CLAIM_PREFIX}*{CLAIM_SUFFIX}"):
        try:
            age = now - claim.stat().st_mtime
            held = json.loads(claim.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # gone meanwhile, or not a claim edgecli wrote
        if not isinstance(held, dict) or not isinstance(held.get("options"), dict):
            continue
        pid = held.get("pid")
        dead = held.get("host") == HOST and isinstance(pid, int) and not process_alive(pid)
        if dead or age > CLAIM_STALE_S:
            with contextlib.suppress(OSError):
                claim.unlink()
            continue
        yield claim, held
