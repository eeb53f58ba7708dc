"""Options are validated once, with messages that name the bad value."""

from __future__ import annotations

import os

import pytest

from edgecli import OptionError, Options


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("threshold", -1, "threshold must be >= 0, got -1"),
        ("threshold", 1.5, "threshold must be an integer, got 1.5"),
        ("threshold", True, "threshold must be an integer, got True"),
        ("norm", "l3", "norm must be one of 'l1', 'l2', got 'l3'"),
        (
            "border",
            "wrap",
            "border must be one of 'replicate', 'reflect101', 'constant', got 'wrap'",
        ),
        ("backend", "opencl", "backend must be one of 'auto', 'cuda', 'cpu', got 'opencl'"),
        ("png_bits", 4, "png_bits must be one of 1, 8, got 4"),
        ("workers", 0, "workers must be >= 1, got 0"),
        ("batch", 0, "batch must be >= 1, got 0"),
        ("streams", 0, "streams must be >= 1, got 0"),
        ("device", -1, "device must be >= 0, got -1"),
        ("max_memory", 0, "max_memory must be >= 1, got 0"),
    ],
)
def test_bad_values_are_named(field, value, message):
    """Each bad option raises OptionError quoting the value."""
    with pytest.raises(OptionError) as caught:
        Options(**{field: value})
    assert str(caught.value) == message


def test_workers_are_capped_at_four_per_usable_core():
    """More than 4 workers per CPU this process may use is refused, naming the limit and the
    value; 4 per core is allowed."""
    limit = 4 * len(os.sched_getaffinity(0))
    assert Options(workers=limit).worker_count == limit
    with pytest.raises(OptionError) as caught:
        Options(workers=99999999999)
    assert str(caught.value).startswith(f"workers must be <= {limit} (4 per usable CPU core")
    assert str(caught.value).endswith(", got 99999999999")


def test_threshold_is_clamped_where_it_stops_mattering():
    """Above 2040 no l1 or l2 magnitude can pass, so the backends may clamp T to 2040."""
    assert Options(threshold=10**9).effective_threshold == 2040
    assert Options(threshold=7).effective_threshold == 7


def test_options_are_frozen():
    """Options cannot change after validation."""
    with pytest.raises(AttributeError):
        Options().threshold = 5
