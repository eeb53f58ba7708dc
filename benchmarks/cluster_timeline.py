"""Where a ``--scheduler local:N`` run's time goes (issue 20): one run, in this process as
the client, with the moments printed in seconds from the start (the listing, the cluster's
start, the tasks submitted and their results in, the cluster closed) and each Dask worker's
tasks, frames and busy seconds; and, with ``--costs``, what a fresh worker pays first.

    python benchmarks/cluster_timeline.py INPUT OUT [--workers 2] [--backend cuda]
        [--tasks-per-worker K] [--costs]

``--tasks-per-worker`` overrides edgecli's choice for the cluster kind. ``--costs`` times, on
a LocalCluster of the same size: importing Dask, starting the cluster, and on each worker
importing the pipeline, starting CuPy, loading the kernel and opening the JPEG engines.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

T0 = time.perf_counter()


def mark(what: str) -> None:
    print(f"{time.perf_counter() - T0:7.3f}  {what}", flush=True)


def timeline(args) -> None:
    import edgecli.cluster as cluster
    from edgecli.params import Options

    mark("edgecli.cluster imported")
    connect, listing, gather = cluster.connect, cluster.listed_run, cluster._gather

    def timed(name, function):
        def wrapper(*a, **k):
            mark(f"{name} begins")
            result = function(*a, **k)
            mark(f"{name} ends")
            return result

        return wrapper

    cluster.connect = timed("connecting (the cluster's start)", connect)
    cluster.listed_run = timed("listing", listing)
    cluster._gather = timed("tasks (submitted to results in)", gather)
    if args.tasks_per_worker:
        cluster.TASKS_PER_WORKER = dict.fromkeys(cluster.TASKS_PER_WORKER, args.tasks_per_worker)
    shutil.rmtree(args.out, ignore_errors=True)
    options = Options(backend=args.backend)
    summary = cluster.run_on_cluster([args.input], args.out, options, f"local:{args.workers}")
    mark("run_on_cluster returned (the cluster closed)")
    data = summary.as_json()
    keys = ("tasks", "frames", "busy_s")
    workers = [{k: w[k] for k in keys} for w in data["workers_detail"]]
    print(json.dumps({"wall_s": data["wall_s"], "workers": workers}))


def costs(args) -> None:
    import dask  # noqa: F401
    from distributed import Client, LocalCluster

    mark("dask and distributed imported")
    local = LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
        silence_logs=50,
    )  # fmt: skip
    mark(f"LocalCluster({args.workers}) up")
    client = Client(local)

    def first_work() -> list[float]:
        began = time.perf_counter()
        import edgecli.pipeline  # noqa: F401

        steps = [time.perf_counter() - began]
        import cupy

        cupy.cuda.Device(0).use()
        cupy.zeros(1)
        steps.append(time.perf_counter() - began)
        from edgecli.cuda.build import load_kernel
        from edgecli.cuda.kernel import Variant

        load_kernel(0, Variant())
        steps.append(time.perf_counter() - began)
        from edgecli.decode import engines

        engines.jpeg_unusable_reason("hardware")
        steps.append(time.perf_counter() - began)
        return [round(step, 3) for step in steps]

    result = client.run(first_work)
    mark(f"each worker, cumulative s (pipeline, CuPy, kernel, JPEG engines): {result}")
    began = time.perf_counter()
    client.close()
    local.close()
    mark(f"closed in {time.perf_counter() - began:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("out")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backend", default="cuda", choices=("cuda", "cpu", "auto"))
    parser.add_argument("--tasks-per-worker", type=int, default=None)
    parser.add_argument("--costs", action="store_true")
    args = parser.parse_args()
    (costs if args.costs else timeline)(args)


if __name__ == "__main__":
    main()
