"""What edgecli reads as a number in an option's text: ASCII digits only, one rule for every
option of every command (counts, sizes, thresholds, shares, frame indices, times, shards,
ports, devices).

``int()``, ``float()`` and the regular expression ``\\d`` also read other scripts' digits
(``١٠``, ``４``), ``str.isdigit`` superscripts (``²``), and ``int()`` underscores (``1_0``):
text that reads as one number to a user and as another, or as none, to a reader of it. Each
parser of an option's number matches these patterns first, and converts only what matched.
"""

from __future__ import annotations

import re

# A whole number >= 0, and a decimal one (90, 90., 90.5, .5), in ASCII digits, for patterns.
WHOLE = "[0-9]+"
DECIMAL = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"

_WHOLE = re.compile(WHOLE)
_DECIMAL = re.compile(DECIMAL)


def is_whole_number(text: str) -> bool:
    """Whether ``text`` is ASCII digits only: what edgecli reads as a whole number >= 0."""
    return isinstance(text, str) and _WHOLE.fullmatch(text) is not None


def is_decimal(text: str) -> bool:
    """Whether ``text`` is a decimal number >= 0 in ASCII digits (``1``, ``1.5``, ``.5``)."""
    return isinstance(text, str) and _DECIMAL.fullmatch(text) is not None
