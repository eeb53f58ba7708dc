"""A run spread over a Dask cluster (``--scheduler``, ``--device`` with several GPUs):
:mod:`.run` (:func:`~.run.run_on_cluster`: the shards as tasks, imports Dask), :mod:`.warmup`
(what a worker starts before its first task) and :mod:`.summary` (the tasks' summaries merged
into one). Importing this package imports nothing.
"""
