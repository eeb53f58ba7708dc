"""What a run writes and keeps: :mod:`.png` (edge maps to PNG bytes), :mod:`.sinks` (atomic
writes, the output folder, the reports), :mod:`.resume` (the folder's record of the options
that made it), :mod:`.claims` (who writes into a folder now), :mod:`.golden` (``--expect``
manifests), :mod:`.timing` (stage clocks and the summary), :mod:`.sheet` (``preview``'s contact
sheet) and :mod:`.cache` (edgecli's cache folder and the verdicts kept there).
"""
