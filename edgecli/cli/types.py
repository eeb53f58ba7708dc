"""The command line's own value types: whole numbers, sizes in bytes, a threshold or its rule,
a list of thresholds; each bad value a usage error (exit 2) naming the option. Every number
is read by :mod:`edgecli.options.numerals`' rule: ASCII digits only."""

from __future__ import annotations

from fractions import Fraction

import click

from ..errors import OptionError
from ..options.numerals import is_decimal, is_whole_number
from ..options.params import parse_pair, parse_rule


class WholeNumber(click.ParamType):
    """A whole number from ``minimum`` to ``maximum`` (None: no upper limit), in ASCII digits:
    every integer option takes this type, not click's, whose ``int()`` reads other scripts'
    digits and underscores."""

    name = "integer"

    def __init__(self, minimum: int, maximum: int | None = None):
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):  # a default
            number = value
        else:
            text = str(value).strip()
            if not is_whole_number(text.removeprefix("-")):
                self.fail(f"{value!r} is not a whole number in the digits 0-9", param, ctx)
            number = int(text)
        if number < self.minimum or (self.maximum is not None and number > self.maximum):
            bounds = f"{self.minimum}<=x<={self.maximum}" if self.maximum else f"x>={self.minimum}"
            self.fail(f"{number} is not in the range {bounds}.", param, ctx)
        return number


class ByteSize(click.ParamType):
    """A number of bytes, with an optional K, M, G or T suffix (powers of 1024): 512M, 1.5G."""

    name = "SIZE"
    UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("B")
        unit = text[-1:] if text[-1:] in self.UNITS else ""
        number = text[: len(text) - len(unit)]
        size = int(Fraction(number) * self.UNITS[unit]) if is_decimal(number) else 0
        if size < 1:
            self.fail(f"{value!r} is not a size in bytes (e.g. 2000000000, 512M, 4G)", param, ctx)
        return size


class Threshold(click.ParamType):
    """``-t``: a whole number >= 0, ``auto`` or a share of edge pixels such as ``5%``; or
    Canny's ``LOW,HIGH`` (:func:`edgecli.options.params.parse_pair`). Which operator takes which is
    :class:`edgecli.options.params.Options`' to say."""

    name = "T|LOW,HIGH|auto|P%"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, tuple)):
            return value
        text = str(value).strip()
        try:
            if "," in text:
                return parse_pair(text)
            if is_whole_number(text.removeprefix("-")):
                if int(text) < 0:
                    self.fail(f"{text} is not in the range x>=0.", param, ctx)
                return int(text)
            parse_rule(text)
        except OptionError as exc:
            self.fail(str(exc), param, ctx)
        return text.lower()


def preview_thresholds(values: tuple[str, ...], operator: str, ctx) -> list | None:
    """``preview -t``, given once or more, as a list of thresholds, each once, in the order
    given (None where it is not given). Sobel: each ``-t`` comma-separated thresholds as
    ``run -t`` takes them (a whole number >= 0, ``auto`` or ``P%``), such as ``60,100,auto``.
    Canny: each ``-t`` one pair ``LOW,HIGH`` or ``auto`` (``-t 50,150 -t 100,200``)."""
    if not values:
        return None
    param = next(p for p in ctx.command.params if p.name == "thresholds")
    one = Threshold()
    if operator != "canny":
        parts = [one.convert(t, param, ctx) for value in values for t in value.split(",")]
        return list(dict.fromkeys(parts))
    try:
        parts = [one.convert(value, param, ctx) for value in values]
    except click.BadParameter as exc:
        exc.message += " (canny: one pair a -t, as in -t 50,150 -t 100,200)"
        raise
    return list(dict.fromkeys(parts))
