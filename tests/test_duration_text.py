"""Durations as people type them (rein.core.durations): one parser for --since, --every, --catchup and backfill."""

from datetime import timedelta

import pytest

from rein.core.durations import parse_duration
from rein.durable.schedules import ScheduleError, every


@pytest.mark.parametrize(("text", "expected"), [
    ("30s", timedelta(seconds=30)), ("10m", timedelta(minutes=10)), ("7d", timedelta(days=7)),
    ("1h30m", timedelta(minutes=90)), (" 2h ", timedelta(hours=2)), ("1d2h3m4s", timedelta(days=1, seconds=7384)),
])
def test_durations_people_type(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "soon", "10", "m10", "1.5h", "30m1h"])
def test_what_is_not_a_duration_is_named(text):
    with pytest.raises(ValueError, match="is not a duration like 30s, 10m, 2h or 1h30m"):
        parse_duration(text)


def test_a_schedule_option_names_itself_and_wants_a_second_at_least():
    assert every("1h30m") == timedelta(minutes=90)
    with pytest.raises(ScheduleError, match="^--catchup 'soon' is not a duration"):
        every("soon", "--catchup")
    with pytest.raises(ScheduleError, match="shorter than a second"):
        every("0s")
