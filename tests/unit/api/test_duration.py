import pytest

from hyperjob.api import DurationError, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (30, 30.0),
        ("30", 30.0),
        ("500ms", 0.5),
        ("10s", 10.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("1m30s", 90.0),
        (1.5, 1.5),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "10x", "-5", "5 m", -1])
def test_bad_durations(text):
    with pytest.raises(DurationError):
        parse_duration(text)
