"""What a run is asked to do, checked once: :mod:`.params` (:class:`~.params.Options`, the
frozen options both backends share, and the parsers of their texts), :mod:`.selection`
(``--start``, ``--end``, ``--every``, ``--frames``), :mod:`.shards` (``--shard i/n``) and
:mod:`.numerals` (what a number may look like). Nothing here reads a file or imports NumPy.
"""
