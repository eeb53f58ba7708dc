"""``--scheduler``: a run spread over a Dask cluster, as shards of its sources; and
``--device 0,2`` / ``--device all``: the same over a host's GPUs, one Dask worker process a
GPU (``CUDA_VISIBLE_DEVICES``, as dask-cuda does it), each with its own pipeline, streams,
rings, decoders and GIL.

Each task is one shard (``Options.shard``, :mod:`edgecli.options.shards`) run by the ordinary
pipeline on a Dask worker, into the same output folder; the client gathers the tasks'
summaries as they complete and merges them into one. Dask does the scheduling: it retries
the task of a worker that dies, and since every PNG is renamed into place whole, a retried
task only redoes its shard, and the final folder equals a clean run's.

Dask (the ``cluster`` extra) is imported here only, and this module only for
``--scheduler``: ``import edgecli`` and a plain run never load it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

from tqdm import tqdm

from ..errors import ClusterError, EdgecliError, OptionError, ResourceError
from ..inputs.sources import input_list
from ..options.params import Options, check_path, parse_scheduler, usable_cpus
from ..options.shards import partition
from ..output import resume
from ..output.claims import claimed
from ..output.sinks import prepare_output_dir, remove_stale_temporaries
from ..pipeline import listed_run, run, run_callbacks, with_reports
from ..pipeline.allocator import MMAP_THRESHOLD, TRIM_THRESHOLD
from . import warmup
from .summary import ClusterSummary, merge
from .warmup import WARM_UP_ENV

# A scheduler that does not answer within this many seconds fails the run (Dask's own
# distributed.comm.timeouts.connect, 30 s by default, bounds it where shorter).
CONNECT_TIMEOUT_S = 10.0
# Tasks per Dask worker of a running scheduler: enough that a fast worker takes more shards
# than a slow one, few enough that each task's start (its threads, rings and decoders) stays
# small. The workers of a cluster edgecli starts on one host are alike, so each takes one
# shard: there a second task would only pay a task's start again, with no slower worker to
# take shards from.
TASKS_PER_WORKER = {"tcp": 4, "local": 1, "devices": 1}
# Retries of a task that raised something other than an edgecli error (which is returned,
# not raised, so a corrupt frame is not decoded three times). A task whose worker died is
# retried by the scheduler (distributed.scheduler.allowed-failures, 3 by default).
TASK_RETRIES = 2
# Dask's nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536, so glibc hands every large
# buffer a frame frees back to the kernel and faults it in again for the next frame (and
# allocator.keep_freed_memory, which yields to a setting in the environment, cannot undo it).
# A LocalCluster's workers get the settings keep_freed_memory makes instead.
WORKER_ENVIRONMENT = {
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD),
    "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
}
# A cluster edgecli starts must start within START_S seconds plus START_S_PER_WORKER a worker
# (local:8 in 28 s, several times what a loaded host takes), else the run fails: a worker
# process the system refuses a thread (under a pids limit) can neither report nor exit, and
# Dask's start then waits for it for ever. The same bound fails the tasks of a cluster whose
# workers all died and cannot come back.
START_S = 20.0
START_S_PER_WORKER = 1.0
POLL_S = 0.1  # how often the client looks at a stop request while it waits for tasks
STOP_POLL_S = 0.5  # how often a task asks the scheduler whether the client said stop


def run_shard(
    inputs: list[str], output: str, options: Options, backend=None, stop_name: str | None = None,
    sources: list | None = None,
) -> dict:  # fmt: skip
    """One task, on a Dask worker: the ordinary pipeline on shard ``options.shard``, whose
    ``sources`` the client listed and checked (with None, the task lists them itself).

    An edgecli error is returned (message and exit code) rather than raised: it is the run's
    answer (a corrupt frame under --on-error fail, say), which a retry would only repeat.
    ``stop_name`` names the Dask Event the client sets on SIGINT: the task then stops as a
    plain run does (no new frame started, frames in flight finished) and returns its summary.
    """
    from distributed import Event, get_worker  # optional: there in every Dask worker

    started = time.perf_counter()
    stop, ended = threading.Event(), threading.Event()
    if stop_name is not None:
        client_stop = Event(stop_name)
        if client_stop.is_set():
            return {"not_started": True}

        def watch() -> None:
            try:
                while not ended.is_set():
                    if client_stop.wait(timeout=STOP_POLL_S):
                        stop.set()
                        return
            except Exception:  # the scheduler went away (the run is over): nothing to stop
                return

        threading.Thread(target=watch, name="edgecli-stop-watch", daemon=True).start()
    try:
        summary = run(inputs, output, options, backend=backend, stop=stop, sources=sources)
    except EdgecliError as exc:
        return {"error": str(exc), "exit_code": exc.exit_code}
    finally:
        ended.set()
    return {
        "summary": asdict(summary),
        "worker": get_worker().address,
        "host": socket.gethostname(),
        "device": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "task_s": time.perf_counter() - started,
    }


def task_options(options: Options, kind: str, n_workers: int, i: int, n: int) -> Options:
    """The options of task ``i`` of ``n``. On ``local:N`` the N workers share this host, so
    each runs the CPU backend unless CUDA was asked for (``--device`` gives each worker a GPU
    of its own); on ``devices`` each runs on its one GPU. Either way a worker gets its share of
    the cores unless --workers says otherwise."""
    changes: dict = {"shard": (i, n)}
    if kind == "local" and options.backend == "auto":
        changes["backend"] = "cpu"
    if kind == "devices":
        changes["device"] = 0  # the one GPU its CUDA_VISIBLE_DEVICES shows the worker
    if kind in ("local", "devices") and options.workers is None:
        changes["workers"] = max(1, usable_cpus() // n_workers)
    return replace(options, **changes)


def connect(kind: str, target: int | str, connect_timeout: float, warm_up: dict | None = None):
    """A Dask client, and the LocalCluster it started (None for a running scheduler); the
    workers of a cluster started here begin with ``warm_up`` (:mod:`edgecli.cluster.warmup`)."""
    try:  # optional (edgecli[cluster]), and slow to import: only a cluster run needs them
        import dask
        from distributed import Client
    except ImportError:
        raise ClusterError(
            "--scheduler needs Dask: pip install 'edgecli[cluster]' (dask and distributed)"
        ) from None
    if kind in ("local", "devices"):
        cluster = _start_cluster(kind, target, warm_up)
        try:
            return Client(cluster), cluster
        except BaseException:
            cluster.close()
            raise
    configured = dask.utils.parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"))
    timeout = min(connect_timeout, configured)
    try:
        client = Client(target, timeout=timeout)
    except (OSError, TimeoutError) as exc:
        reason = str(exc).split(":", 1)[0] if "Timed out" in str(exc) else str(exc)
        raise ClusterError(
            f"scheduler {target}: cannot connect ({reason or type(exc).__name__}, "
            f"{timeout:g} s bound)"
        ) from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        client.close()
        raise ClusterError(
            f"scheduler {target}: no worker joined within {timeout:g} s "
            "(start them with: dask worker " + target + ")"
        ) from None
    return client, None


def _start_cluster(kind: str, target, warm_up: dict | None):
    """A LocalCluster of ``target`` workers (``local``) or one worker a GPU of ``target``
    (``devices``), each preloading :mod:`edgecli.cluster.warmup` with ``warm_up``."""
    # Optional: Dask, which connect() has found.
    import dask
    from distributed import LocalCluster

    # The workers are started with SIGINT ignored, and keep it so (an ignored signal stays
    # ignored in a child): a Ctrl-C at the terminal reaches the whole process group, and
    # only the client may act on it, stopping the tasks through their stop event.
    ignoring = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if ignoring else None
    preload = {"preload": [warmup.__name__], "env": {WARM_UP_ENV: json.dumps(warm_up or {})}}
    workers_stderr = tempfile.TemporaryFile()
    what = f"local:{target}" if kind == "local" else f"devices {','.join(target)}"
    bound_s = START_S + START_S_PER_WORKER * (target if kind == "local" else len(target))
    no_workers = {"distributed.scheduler.no-workers-timeout": f"{bound_s:g}s"}
    try:
        with _stderr_of_children(workers_stderr), dask.config.set(WORKER_ENVIRONMENT | no_workers):
            if kind == "local":
                start = partial(
                    LocalCluster,
                    n_workers=target,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=50,  # CRITICAL: a worker that dies is edgecli's to report
                    **preload,
                )
            else:
                start = partial(gpu_cluster, target, preload)
            cluster = _started_within(bound_s, start, what)
    except (OSError, RuntimeError) as exc:  # no port, no process or thread could start
        raise _start_error(what, exc, workers_stderr) from None
    finally:
        workers_stderr.close()  # the workers keep theirs open
        if ignoring:
            signal.signal(signal.SIGINT, previous)
    return cluster


def _started_within(bound_s: float, start: Callable, what: str):
    """``start()``'s cluster, if it starts within ``bound_s`` seconds; else a ResourceError,
    once the worker processes it started are killed."""
    import psutil  # comes with distributed, which a cluster run has

    before = {child.pid for child in psutil.Process().children()}
    outcome: dict = {}
    deciding = threading.Lock()  # the start ends in time, or is given up: never both

    def starting() -> None:
        try:
            ended = {"cluster": start()}
        except BaseException as exc:
            ended = {"error": exc}
        with deciding:
            if "given_up" not in outcome:
                outcome.update(ended)
            elif "cluster" in ended:  # it started just too late
                ended["cluster"].close()

    # A daemon thread: a start that waits for a worker that will never report cannot be
    # interrupted. Once its workers are killed it fails and closes its scheduler itself, but
    # should it not, it must not keep this process from exiting after the run has failed.
    thread = threading.Thread(target=starting, name="edgecli-cluster-start", daemon=True)
    thread.start()
    thread.join(bound_s)
    with deciding:
        if not outcome:
            outcome["given_up"] = True
    if "given_up" in outcome:
        _kill_workers_started(before)
        raise ResourceError(
            f"scheduler {what}: its worker processes did not start within {bound_s:g} s: the "
            "system may be refusing them threads or processes (a limit such as ulimit -u or a "
            "container's pids.max); ask for fewer workers or raise the limit"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["cluster"]


def _kill_workers_started(before: set[int]) -> None:
    """Kill, with their own children, the worker processes this process started since its
    children were ``before``: those multiprocessing started (Dask's nannies spawn or fork
    them), never another process a thread of this one (or of a library's caller) started."""
    import psutil  # comes with distributed, which a cluster run has

    me = psutil.Process()
    own_command = me.cmdline()
    doomed = []
    for child in me.children():
        try:
            command = child.cmdline()
            if child.pid not in before and (
                "--multiprocessing-fork" in command or command == own_command
            ):
                doomed += [child, *child.children(recursive=True)]
        except psutil.Error:  # it has ended already
            continue
    for process in doomed:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(doomed, timeout=5)


# What a worker process prints when the system refuses it a thread or a process.
_REFUSED = ("can't start new thread", "Resource temporarily unavailable")


def _start_error(what: str, exc: BaseException, workers_stderr) -> EdgecliError:
    """The one error of a cluster that did not start: a ResourceError where the system
    refused its workers a thread or a process (their stderr says so), else a ClusterError."""
    workers_stderr.seek(0)
    said = workers_stderr.read().decode("utf-8", "replace")
    if any(refusal in f"{said}{exc}" for refusal in _REFUSED):
        return ResourceError(
            f"scheduler {what}: cannot start its worker processes: the system refused them a "
            "thread or a process (a limit such as ulimit -u or a container's pids.max); ask "
            "for fewer workers or raise the limit"
        )
    return ClusterError(f"scheduler {what}: cannot start ({exc})")


@contextmanager
def _stderr_of_children(file):
    """Processes started in this block write their stderr to ``file``, not the user's
    terminal; this process's own Python output still reaches it.

    A worker process that cannot start prints its traceback from multiprocessing, before
    any of edgecli's code runs in it, one per worker; the run says it in one line instead
    (:func:`_start_error`). Later, the workers' stderr holds only what Dask logs at CRITICAL:
    their failures reach the client as errors.
    """
    saved = os.dup(2)
    stderr = sys.stderr
    if stderr is not None:
        stderr.flush()
        sys.stderr = open(  # noqa: SIM115 -- closed below
            saved, "w", encoding=stderr.encoding, errors=stderr.errors, buffering=1,
            closefd=False,
        )  # fmt: skip
    os.dup2(file.fileno(), 2)
    try:
        yield
    finally:
        if stderr is not None:
            sys.stderr.close()
            sys.stderr = stderr
        os.dup2(saved, 2)
        os.close(saved)


def gpu_cluster(devices: list[str], preload: dict):
    """A cluster of one worker process a GPU of ``devices`` (CUDA_VISIBLE_DEVICES ids), each
    seeing only its own GPU, as its device 0, and starting with ``preload``."""
    from distributed import Nanny, Scheduler, SpecCluster  # optional: connect() found it

    workers = {
        f"gpu-{device}": {
            "cls": Nanny,
            "options": {
                "nthreads": 1,
                "env": preload["env"] | {"CUDA_VISIBLE_DEVICES": device},
                "preload": preload["preload"],
                "silence_logs": 50,
            },
        }
        for device in devices
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=50)


def run_on_cluster(
    inputs,
    output,
    options: Options,
    scheduler: str | None = None,
    *,
    devices: list[str] | None = None,
    progress: bool = False,
    notify: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    json_summary: str | Path | None = None,
    write_expected: str | Path | None = None,
    backend=None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> ClusterSummary:
    """Process ``inputs`` into ``output`` as :func:`edgecli.pipeline.run` does, in shards
    run as tasks on the Dask cluster ``scheduler`` names (``local:N`` or ``tcp://HOST:PORT``),
    or, with ``devices`` (CUDA_VISIBLE_DEVICES ids), on a cluster of one worker a GPU.

    The inputs are checked, and the output folder's record (``.edgecli-run.json``) written,
    here, once, before any task starts: the tasks then find it recorded with their own
    options, so they neither refuse it nor mark it mixed. For ``tcp://`` the output folder
    must be one filesystem that every worker and this client see at the same path.
    ``backend`` (a stand-in from :mod:`tests.standins`, say) is sent to every task.
    """
    started = time.perf_counter()
    notify, warn, stop = run_callbacks(notify, warn, stop)
    what = "--scheduler" if devices is None else "--device with several GPUs"
    if options.shard is not None:
        raise OptionError(f"{what} runs every shard itself; it cannot be combined with --shard")
    if devices is None:
        kind, target = parse_scheduler(scheduler)
    else:
        kind, target = "devices", devices
        scheduler = f"devices:{','.join(devices)}"
    # Absolute paths: a worker on another host, or in another folder, reads the same files.
    inputs = [os.path.abspath(text) for text in input_list(inputs)]
    output = os.path.abspath(check_path("output folder", output))

    def body(reports: dict) -> tuple[ClusterSummary, None]:
        sources, run_options, client, cluster = _list_and_connect(
            inputs, output, options, reports, notify, kind, target, connect_timeout
        )
        try:
            out_dir = prepare_output_dir(Path(output))
            with claimed(out_dir, run_options):  # the tasks' claims, of these options, share it
                summary = _run_tasks(
                    client, inputs, out_dir, run_options, scheduler, kind, sources,
                    progress=progress, warn=warn, stop=stop, backend=backend, started=started,
                )  # fmt: skip
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
        return summary, None

    reports = {"JSON summary": json_summary, "manifest": write_expected}
    return with_reports(output, reports, body)


def _list_and_connect(inputs, output, options, reports, notify, kind, target, connect_timeout):
    """The run's sources (listed and checked) and options (the threshold chosen, once, for
    every task), and a client of the cluster; connected before anything is written, so a
    scheduler that does not answer leaves no trace. A cluster started here starts (and its
    workers warm up) while the sources are listed; an input error is still the one reported."""

    listing = (inputs, output, options, reports, notify)
    if kind == "tcp":
        return *listed_run(*listing), *connect(kind, target, connect_timeout)
    with ThreadPoolExecutor(1, thread_name_prefix="edgecli-listing") as pool:
        listed = pool.submit(listed_run, *listing)
        try:
            client, cluster = connect(
                kind, target, connect_timeout, warmup.settings(options, kind, inputs)
            )
        except BaseException:
            listed.result()  # an input error comes first
            raise
        try:
            return *listed.result(), client, cluster
        except BaseException:
            client.close()
            cluster.close()
            raise


def _run_tasks(
    client, inputs, out_dir, options, scheduler, kind, sources, *, progress, warn, stop,
    backend, started,
) -> ClusterSummary:  # fmt: skip
    """The run's shards as tasks on ``client``'s workers, their summaries merged into one."""
    # Once, before any task: refuses a stale --skip-existing folder, records the options.
    remove_stale_temporaries(out_dir)
    resume.begin(out_dir, options)
    n_workers = max(1, len(client.scheduler_info()["workers"]))
    n = max(1, min(len(sources), TASKS_PER_WORKER[kind] * n_workers))
    # Listed and checked once, here: each task gets its own shard's sources, and lists nothing
    # (were each task to list and check the inputs, every task would pay for all of them).
    shards = partition(sources, n)
    stop_name = f"edgecli-stop-{os.getpid()}-{started}"
    futures = [
        client.submit(
            run_shard,
            inputs,
            str(out_dir),
            task_options(options, kind, n_workers, i, n),
            backend,
            stop_name,
            shards[i],
            key=f"edgecli-shard-{i}-of-{n}-{os.getpid()}-{started}",
            pure=False,
            retries=TASK_RETRIES,
        )
        for i in range(n)
    ]
    results = _gather(client, futures, stop_name, progress=progress, warn=warn, stop=stop)
    interrupted = stop.is_set()
    if not interrupted:
        # Every task has ended: what temporaries remain are a dead worker's.
        remove_stale_temporaries(out_dir)
    return merge(
        results,
        scheduler=scheduler,
        tasks=n,
        wall_s=time.perf_counter() - started,
        output=str(out_dir),
        options=options,
        interrupted=interrupted,
    )


def _gather(client, futures: list, stop_name: str, *, progress, warn, stop) -> list[dict]:
    """The results of the tasks ``futures`` that ran, in shard order, as they finish (with a
    progress bar of tasks and frames); on ``stop``, the tasks running are told to finish
    their frames in flight; on an error, the rest are cancelled."""
    from distributed import Event, as_completed  # optional: connect() found it

    n = len(futures)
    order = {f.key: i for i, f in enumerate(futures)}
    results: dict[int, dict] = {}
    frames = 0
    told_to_stop = False
    bar = tqdm(total=n, disable=not progress, unit="task", dynamic_ncols=True, leave=False)
    try:
        pending = as_completed(futures)
        while not pending.is_empty():
            if stop.is_set() and not told_to_stop:
                # The tasks running finish their frames in flight and report; those not yet
                # started return at once. A second signal exits at once (cli.stop_on_signals).
                Event(stop_name, client=client).set()
                told_to_stop = True
            if not pending.has_ready():
                time.sleep(POLL_S)
                continue
            for future in pending.next_batch(block=False):
                result = _result(future, order[future.key], n)
                bar.update(1)
                if "not_started" in result:
                    continue
                results[order[future.key]] = result
                for failure in result["summary"]["failed"]:
                    warn(f"skipped {failure['source']}: {failure['reason']}")
                frames += result["summary"]["frames"]
                bar.set_postfix(frames=frames, refresh=False)
    finally:
        bar.close()
        unfinished = [f for f in futures if not f.done()]
        if unfinished:  # an error: the tasks running stop as on SIGINT, the rest never start
            Event(stop_name, client=client).set()
            client.cancel(unfinished)
    return [results[i] for i in sorted(results)]


def _result(future, i: int, n: int) -> dict:
    """The task's result; its edgecli error, or Dask's for it (its worker died too often,
    say), raised as the run's."""
    if future.status == "error":
        exc = future.exception()
        raise ClusterError(f"shard {i}/{n}: {type(exc).__name__}: {exc}")
    result = future.result()
    if "error" in result:
        error = ClusterError(result["error"])
        error.exit_code = result["exit_code"]
        raise error
    return result
