"""Sizes and bandwidths with units (stagecut.units), as every subcommand's --memory/--bandwidth read them."""

import math

import pytest

from stagecut.errors import InvalidArgumentError
from stagecut.units import format_bytes, parse_bandwidth, parse_bytes


@pytest.mark.parametrize("text, value", [
    ("16GiB", 16 * 2**30), ("17179869184", 16 * 2**30), ("16 GiB", 16 * 2**30), ("16gIB", 16 * 2**30),
    ("512MB", 512e6), ("16e9", 16e9), ("1.5KiB", 1536.0), ("2TB", 2e12), ("7B", 7.0), ("0", 0.0),
    ("1kB", 1e3), ("1KB", 1e3), (".5MiB", 2**19),
])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["inf", "none", "Unlimited"])
def test_no_limit(text):
    assert parse_bytes(text) == math.inf
    with pytest.raises(InvalidArgumentError, match="--reserved"):
        parse_bytes(text, flag="--reserved", allow_unlimited=False)


@pytest.mark.parametrize("text, words", [
    ("16Gb", ["--memory", "bits", "16GB", "16GiB"]),
    ("abc", ["--memory", "not a size"]),
    ("-1GiB", ["--memory", "non-negative"]),
    ("16 parsecs", ["--memory", "unknown unit 'parsecs'"]),
    ("16GiB/s", ["--memory", "bandwidth, not a size"]),
    ("1e999", ["--memory", "not finite"]),
    ("nan", ["--memory"]),
])
def test_bad_size_names_the_flag(text, words):
    with pytest.raises(InvalidArgumentError) as e:
        parse_bytes(text, flag="--memory")
    assert isinstance(e.value, ValueError)
    for w in words:
        assert w in str(e.value)


def test_parse_bandwidth():
    assert parse_bandwidth("25GB/s") == 25e9
    assert parse_bandwidth("25 GiB / s") == 25 * 2**30
    assert parse_bandwidth("25GiB/s", time_unit_s=1e-3) == pytest.approx(25 * 2**30 / 1000)
    assert parse_bandwidth("100MB/ms") == pytest.approx(1e11)
    assert parse_bandwidth("1e8", time_unit_s=1e-3) == 1e8  # a plain number is per time unit of the input
    assert parse_bandwidth(2) == 2.0


@pytest.mark.parametrize("text, words", [
    ("25GB", ["--bandwidth", "size, not a bandwidth", "25GB/s"]),
    ("25Gb/s", ["--bandwidth", "bits", "25GB/s"]),
    ("25GB/h", ["--bandwidth", "unknown time unit 'h'"]),
    ("0", ["--bandwidth", "positive"]),
    ("fast", ["--bandwidth", "not a bandwidth"]),
])
def test_bad_bandwidth_names_the_flag(text, words):
    with pytest.raises(InvalidArgumentError) as e:
        parse_bandwidth(text, flag="--bandwidth")
    for w in words:
        assert w in str(e.value)


def test_format_bytes():
    assert format_bytes(16 * 2**30) == "16 GiB" and format_bytes(4e9) == "4 GB" and format_bytes(None) == "unlimited"


@pytest.mark.parametrize("parse", [parse_bytes, parse_bandwidth])
def test_an_integer_too_large_for_a_float_is_an_argument_error(parse):
    with pytest.raises(InvalidArgumentError, match=r"\(401 digits\) is too large"):
        parse(10**400, flag="--x")
