"""The one frozen options dataclass, shared by the CLI, the library API and both backends.

Everything is validated here, once, with a message that names the bad value; nothing
downstream re-checks.
"""

from __future__ import annotations

import ipaddress
import math
import numbers
import os
import re
from dataclasses import asdict, dataclass
from fractions import Fraction

from ..errors import OptionError
from .numerals import DECIMAL, is_whole_number
from .selection import Selection
from .shards import check_shard

# The edge operator: Sobel and a threshold (the contract's steps 2-4), or Canny (cv2.Canny's
# non-maximum suppression and hysteresis on the same luma: docs/contract.md).
OPERATORS = ("sobel", "canny")
# The threshold when none is given: one number for Sobel; (low, high) for Canny, the pair
# OpenCV's own Canny tutorial uses.
DEFAULT_THRESHOLDS = {"sobel": 100, "canny": (100, 200)}
NORMS = ("l1", "l2")
BORDERS = ("replicate", "reflect101", "constant")
BACKENDS = ("auto", "cuda", "cpu")
# --decode: "auto" decodes on the GPU wherever that gives exactly the CPU decoder's frames,
# "gpu" wherever the GPU can decode at all, "cpu" never (edgecli.decode.plan).
DECODES = ("auto", "cpu", "gpu")


def cpu_if_small(backend: str, decode: str) -> bool:
    """Whether a run of ``--backend`` and ``--decode`` these takes the CPU backend when it is
    too small to be worth CUDA's start (edgecli.pipeline.runner.small_run): under 'auto',
    unless --decode gpu wants the GPU."""
    return backend == "auto" and decode != "gpu"


PNG_BITS = (1, 8)
ON_ERROR = ("fail", "skip")
# Frames larger than this are refused from their header, before any pixel is allocated.
# 16384 x 16384 is twice 8K UHD in each direction.
DEFAULT_MAX_PIXELS = 16384 * 16384

# --batch and --streams above these are refused: each of the streams + 2 slabs of a GPU run
# holds --batch frames, in pinned host and in device memory, and the readers hold --batch
# frames more ahead of them. Past the point where the GPU is kept busy, larger values only hold
# more memory.
MAX_BATCH = 256
MAX_STREAMS = 32
# A CUDA device index is a C int.
MAX_DEVICE = 2**31 - 1

# edgecli preview: the sheet's width, the frames and thresholds it shows, and its pixels at
# most (as a frame's, 16384 x 16384 by default), so that the frames it holds and the sheet it
# draws stay a few GB at worst, whatever the numbers asked for.
MIN_WIDTH, MAX_WIDTH = 200, 16384
MAX_SHOWN = 64
MAX_THRESHOLDS = 16
MAX_SHEET_PIXELS = DEFAULT_MAX_PIXELS

# --workers above this many per usable CPU core is refused: threads past the cores only queue
# for them, while each holds its frames in memory, so an unbounded count could exhaust it.
MAX_WORKERS_PER_CPU = 4


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask (taskset, cgroup cpusets), which
    can be fewer than the machine's cores; the machine's count where there is no mask."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1


def max_workers() -> int:
    return MAX_WORKERS_PER_CPU * usable_cpus()


# The largest magnitude the contract can produce from 8-bit luma: each Sobel gradient is
# at most 4*255 = 1020 in absolute value, so |Gx| + |Gy| <= 2040 and Gx^2 + Gy^2 <= 2*1020^2.
# Any threshold at or above 2040 therefore marks no pixel under either norm, which lets the
# backends clamp T to 2040 (exactly equivalent) and keep T^2 inside int32.
MAX_L1_MAGNITUDE = 2040


# cv2.Canny's L2 thresholds: each clamped to this, then squared (canny.cpp), so that the
# square fits an int32.
CANNY_L2_CLAMP = 32767.0
INT32_MAX = 2**31 - 1

_PERCENT = re.compile(f"({DECIMAL})%")


def parse_rule(value) -> tuple[str, Fraction | None] | None:
    """``("otsu", None)`` for the threshold ``"auto"``, ``("density", P)`` for ``"P%"``, None
    for anything not text (a number, checked as one); OptionError for other text."""
    if not isinstance(value, str):
        return None
    text = str(value).strip().lower()
    if text == "auto":
        return "otsu", None
    match = _PERCENT.fullmatch(text)
    if match is None:
        raise OptionError(
            f"threshold must be a whole number, auto, or a share of edge pixels such as 5%; "
            f"got {value!r}"
        )
    percent = Fraction(match.group(1))
    if percent > 100:
        raise OptionError(f"threshold {value!r}: a share of pixels is at most 100%")
    return "density", percent


def canny_limits(low: float, high: float, l2: bool) -> tuple[int, int]:
    """The integers cv2.Canny compares magnitudes with (``m > low``: a candidate, ``m >
    high``: strong), from its two thresholds as given: swapped if low > high; under L2 each
    clamped to 32767 and squared (in double precision, as canny.cpp); both floored. Above
    2^31 - 1 (where canny.cpp's floor to an int overflows) a limit is 2^31 - 1: no magnitude
    reaches either, under either norm."""
    low, high = sorted((low, high))
    if l2:
        low, high = (min(CANNY_L2_CLAMP, t) for t in (low, high))  # exact for any int
        low, high = (t * t if t > 0 else t for t in (low, high))
    return min(math.floor(low), INT32_MAX), min(math.floor(high), INT32_MAX)


def _check_canny_threshold(value) -> tuple:
    """``value`` (two real numbers, NumPy's too, as a tuple or a list) as a tuple of Python
    ints and floats, or OptionError naming it."""
    usage = "canny threshold must be two numbers (low, high) such as (100, 200), or 'auto'"
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise OptionError(f"{usage}; got {value!r}")
    if any(isinstance(t, bool) or not isinstance(t, numbers.Real) for t in value):
        raise OptionError(f"{usage}; got {value!r}")
    pair = tuple(int(t) if isinstance(t, numbers.Integral) else float(t) for t in value)
    if not all(isinstance(t, int) or math.isfinite(t) for t in pair):  # an int is exact
        raise OptionError(f"{usage}; got {value!r}")
    if min(pair) < 0:
        # cv2 takes a negative threshold, and marks as much as with 0: a pixel of magnitude
        # 0 never survives non-maximum suppression.
        raise OptionError(f"canny thresholds must be >= 0, got {value!r}")
    return pair


_PAIR = re.compile(f"(-?)({DECIMAL}),(-?)({DECIMAL})")


def parse_pair(text: str) -> tuple[int | float, int | float]:
    """``-t LOW,HIGH`` for Canny: two numbers >= 0 in ASCII digits, decimals allowed (cv2.Canny
    takes doubles). OptionError for other text."""
    match = _PAIR.fullmatch(text.replace(" ", ""))
    if match is None:
        raise OptionError(f"{text!r} is not LOW,HIGH: two numbers >= 0 such as 100,200")
    low, high = (_number(t) for t in match.group(2, 4))
    if (match.group(1) and low) or (match.group(3) and high):  # -0 is 0, as -t -0 is
        raise OptionError(f"canny thresholds must be >= 0, got {text!r}")
    return low, high


def _number(text: str) -> int | float:
    """A decimal as an int where it is whole, else the nearest double; past the largest
    double, its whole part (a limit past every magnitude either way)."""
    if is_whole_number(text):
        return int(text)
    value = float(text)
    return value if math.isfinite(value) else int(text.partition(".")[0])


def threshold_text(threshold) -> str:
    """A threshold as -t takes it: ``100``, ``auto``, ``5%``, or Canny's ``50,150``."""
    if isinstance(threshold, (tuple, list)):
        return ",".join(map(str, threshold))
    return str(threshold)


def _check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise OptionError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise OptionError(f"{name} must be <= {maximum}, got {value}")


def _check_choice(name: str, value: object, choices: tuple) -> None:
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise OptionError(f"{name} must be one of {listed}, got {value!r}")


def check_path(name: str, value: str | os.PathLike) -> str | os.PathLike:
    """``value``, unless it is empty: ``Path("")`` means the current folder, which an empty
    argument (an unset shell variable, say) never meant."""
    if not os.fspath(value):
        raise OptionError(f"{name} is empty (''); name a path ('.' for the current folder)")
    return value


def parse_scheduler(text: str) -> tuple[str, int | str]:
    """``--scheduler``: ``("local", N)`` for ``local:N`` (a LocalCluster of N worker
    processes, at most as many as --workers allows threads) or ``("tcp", "tcp://HOST:PORT")``
    for a running Dask scheduler (HOST a name, an IPv4 address or an IPv6 one in brackets;
    PORT 1 to 65535)."""
    usage = f"scheduler must be local:N (N >= 1) or tcp://HOST:PORT, got {text!r}"
    kind, _, rest = text.partition(":")
    if kind == "local" and is_whole_number(rest) and int(rest) >= 1:
        if int(rest) > max_workers():
            raise OptionError(
                f"scheduler {text}: at most {max_workers()} worker processes "
                f"({MAX_WORKERS_PER_CPU} per usable CPU core, {usable_cpus()} here)"
            )
        return "local", int(rest)
    if kind != "tcp" or not rest.startswith("//"):
        raise OptionError(usage)
    address = rest[2:]
    if address.startswith("["):  # an IPv6 address: its colons are not the port's
        host, bracket, after = address.partition("]")
        host, colon, port = host + bracket, after[:1], after[1:]
    else:
        host, colon, port = address.rpartition(":")
    if colon != ":" or not host:
        raise OptionError(usage)
    if not _is_host(host):
        raise OptionError(
            f"scheduler {text}: {host!r} is not a host name or address (an IPv6 address goes "
            "in brackets: tcp://[::1]:8786)"
        )
    if not is_whole_number(port) or not 1 <= int(port) <= 65535:
        raise OptionError(f"scheduler {text}: the port must be a number from 1 to 65535")
    return "tcp", text


_HOST_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?")


def _is_host(host: str) -> bool:
    """Whether ``host`` is a host name, an IPv4 address or an IPv6 address in brackets."""
    if host.startswith("[") and host.endswith("]"):
        try:
            return ipaddress.ip_address(host[1:-1]).version == 6
        except ValueError:
            return False
    labels = host.removesuffix(".").split(".")
    return len(host) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels)


def parse_devices(text: str) -> list[int] | None:
    """``--device``: ``N`` or ``N,M,...`` (CUDA device indices, each once) as a list, or None
    for ``all``."""
    if text.strip().lower() == "all":
        return None
    parts = [part.strip() for part in text.split(",")]
    if not parts or not all(is_whole_number(part) for part in parts):
        raise OptionError(f"device must be an index, a list such as 0,2, or all; got {text!r}")
    devices = [int(part) for part in parts]
    if max(devices) > MAX_DEVICE:
        raise OptionError(f"device index must be <= {MAX_DEVICE}, got {max(devices)}")
    if len(set(devices)) != len(devices):
        raise OptionError(f"device lists a GPU more than once: {text!r}")
    return devices


@dataclass(frozen=True)
class Options:
    """Every option of a run. The first three and the operator define the edge contract
    (docs/contract.md)."""

    # Sobel: a number, or a rule that picks one for the whole run (edgecli.pipeline.threshold):
    # "auto" (Otsu) or "P%" (at most P percent of pixels are edges); the run replaces it with the
    # number and keeps the rule in threshold_rule. Canny: (low, high), or "auto". None: the
    # operator's default (DEFAULT_THRESHOLDS).
    threshold: int | str | tuple | None = None
    norm: str = "l1"
    border: str = "replicate"
    backend: str = "auto"
    decode: str = "auto"
    png_bits: int = 1
    recursive: bool = False
    workers: int | None = None  # None: one per usable CPU core
    # Small batches: a frame waits less for its batch to fill before it is encoded, and larger
    # ones do not raise the throughput (measured: docs/performance.md).
    batch: int = 4
    streams: int = 4
    device: int = 0
    on_error: str = "fail"
    skip_existing: bool = False
    max_pixels: int = DEFAULT_MAX_PIXELS
    # Bytes of frames in flight at once (edgecli.pipeline.budget); None: half the memory available.
    max_memory: int | None = None
    # (i, n): run only shard i of n (edgecli.options.shards); None: the whole run.
    shard: tuple[int, int] | None = None
    # Frames of each video and multi-frame file (edgecli.options.selection): --start and --end are
    # frame indices or times (text, as given), --every N keeps every Nth, --frames N at most N.
    start: str | None = None
    end: str | None = None
    every: int = 1
    max_frames: int | None = None
    # The rule a run's threshold was chosen by ("auto", "5%"), once it is chosen; None: given.
    threshold_rule: str | None = None
    operator: str = "sobel"

    def __post_init__(self) -> None:
        _check_choice("operator", self.operator, OPERATORS)
        if self.threshold is None:
            object.__setattr__(self, "threshold", DEFAULT_THRESHOLDS[self.operator])
        self._check_threshold()
        _check_choice("norm", self.norm, NORMS)
        _check_choice("border", self.border, BORDERS)
        if self.operator == "canny" and self.border != "replicate":
            raise OptionError(
                f"border {self.border!r} does not apply to canny: its Sobel always uses the "
                "replicate border, as cv2.Canny's"
            )
        _check_choice("backend", self.backend, BACKENDS)
        _check_choice("decode", self.decode, DECODES)
        _check_choice("png_bits", self.png_bits, PNG_BITS)
        if self.workers is not None:
            _check_int("workers", self.workers, 1)
            if self.workers > max_workers():
                raise OptionError(
                    f"workers must be <= {max_workers()} ({MAX_WORKERS_PER_CPU} per usable CPU "
                    f"core, {usable_cpus()} here), got {self.workers}"
                )
        _check_int("batch", self.batch, 1, MAX_BATCH)
        _check_int("streams", self.streams, 1, MAX_STREAMS)
        _check_int("device", self.device, 0, MAX_DEVICE)
        _check_choice("on_error", self.on_error, ON_ERROR)
        _check_int("max_pixels", self.max_pixels, 1)
        if self.max_memory is not None:
            _check_int("max_memory", self.max_memory, 1)
        if self.shard is not None:
            if isinstance(self.shard, list):  # as JSON gives it
                object.__setattr__(self, "shard", tuple(self.shard))
            check_shard(self.shard)
        _check_int("every", self.every, 1)
        if self.max_frames is not None:
            _check_int("max_frames", self.max_frames, 1)
        self.selection  # noqa: B018 -- checks --start and --end

    def _check_threshold(self) -> None:
        pair = isinstance(self.threshold, (tuple, list))
        if self.operator == "sobel":
            if pair:
                raise OptionError(
                    f"threshold {threshold_text(self.threshold)} is a pair (low, high), which "
                    "only the canny operator takes; sobel takes one number"
                )
            if parse_rule(self.threshold) is None:
                _check_int("threshold", self.threshold, 0)
            return
        if pair:
            object.__setattr__(self, "threshold", _check_canny_threshold(self.threshold))
            return
        rule = parse_rule(self.threshold)
        if rule is None:
            raise OptionError(
                f"canny takes two thresholds, low and high, such as 100,200 (or auto); "
                f"got {self.threshold!r}"
            )
        if rule[0] != "otsu":
            raise OptionError(
                f"threshold {self.threshold!r}: a share of edge pixels chooses a Sobel "
                "threshold; Canny's share depends on its hysteresis, so give low,high or auto"
            )

    @property
    def canny_limits(self) -> tuple[int, int]:
        """Canny's (low, high) as the integers its magnitudes are compared with
        (:func:`canny_limits`), under this norm."""
        if not isinstance(self.threshold, tuple):
            raise OptionError(
                f"threshold {self.threshold!r} is chosen from a run's frames "
                "(edgecli.pipeline.threshold.resolve); give two numbers here"
            )
        return canny_limits(*self.threshold, self.norm == "l2")

    @property
    def effective_threshold(self) -> int:
        """The threshold clamped to where it stops mattering (see MAX_L1_MAGNITUDE)."""
        if self.operator != "sobel":
            raise OptionError(
                f"the {self.operator} operator has no single threshold; its magnitudes are "
                "compared with canny_limits"
            )
        if not isinstance(self.threshold, int):
            raise OptionError(
                f"threshold {self.threshold!r} is chosen from a run's frames "
                "(edgecli.pipeline.threshold.resolve); give a number here"
            )
        return min(self.threshold, MAX_L1_MAGNITUDE)

    @property
    def selection(self) -> Selection | None:
        """The frames kept of each multi-frame file (None: all of them)."""
        return Selection.from_options(self.start, self.end, self.every, self.max_frames)

    @property
    def worker_count(self) -> int:
        return self.workers or usable_cpus()

    def edge_params(self) -> dict:
        """The options that decide output pixels (what a summary or cache key records). The
        operator is recorded where it is not the default, Sobel, so that the records and
        manifests of Sobel runs made before Canny existed still match theirs."""
        threshold = list(self.threshold) if isinstance(self.threshold, tuple) else self.threshold
        params = {"threshold": threshold, "norm": self.norm, "border": self.border}
        return params if self.operator == "sobel" else {"operator": self.operator} | params

    def as_dict(self) -> dict:
        return asdict(self)
