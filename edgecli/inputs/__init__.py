"""What a run reads: :mod:`.sources` turns INPUTs into ordered sources and their output names
(decoding is :mod:`edgecli.decode`'s), :mod:`.overwrites` refuses outputs that would overwrite
an input, :mod:`.sampling` picks the frames ``--threshold auto`` and ``preview`` look at.
"""
