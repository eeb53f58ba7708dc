"""The command line's own value types: sizes in bytes, a threshold or its rule, a list of
thresholds; each bad value a usage error (exit 2) naming the option."""

from __future__ import annotations

import click

from ..errors import OptionError
from ..params import is_whole_number, parse_rule


class ByteSize(click.ParamType):
    """A number of bytes, with an optional K, M, G or T suffix (powers of 1024): 512M, 1.5G."""

    name = "SIZE"
    UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("B")
        unit = text[-1:] if text[-1:] in self.UNITS else ""
        try:
            size = int(float(text[: len(text) - len(unit)]) * self.UNITS[unit])
        except (ValueError, OverflowError):  # "x", "inf"
            size = 0
        if size < 1:
            self.fail(f"{value!r} is not a size in bytes (e.g. 2000000000, 512M, 4G)", param, ctx)
        return size


class Threshold(click.ParamType):
    """``-t``: a whole number >= 0, ``auto`` or a share of edge pixels such as ``5%``."""

    name = "T|auto|P%"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if is_whole_number(text.removeprefix("-")):
            if int(text) < 0:
                self.fail(f"{text} is not in the range x>=0.", param, ctx)
            return int(text)
        try:
            parse_rule(text)
        except OptionError as exc:
            self.fail(str(exc), param, ctx)
        return text.lower()


class Thresholds(click.ParamType):
    """``preview -t``: comma-separated thresholds, each as ``run -t`` takes it (a whole number
    >= 0, ``auto`` or ``P%``), such as ``60,100,auto,5%``; each once, in the order given."""

    name = "T,T,..."

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        one = Threshold()
        parts = [one.convert(part, param, ctx) for part in str(value).split(",")]
        return list(dict.fromkeys(parts))
