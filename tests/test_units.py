import math

import pytest

from kvplan.errors import KvplanError
from kvplan.inputs.units import format_bytes, parse_rate, parse_size, parse_tokens


@pytest.mark.parametrize("text,expected", [
    ("30000", 30_000),
    ("30k", 30_000),          # the workload document's "30K decode" is 30,000 tokens
    ("30K", 30_000),
    ("1.5M", 1_500_000),
    ("128Ki", 131_072),       # 128 x 1024
    ("1,000", 1_000),
    ("1,000,000", 1_000_000),   # thousands separators in groups of three
    ("30,000k", 30_000_000),
])
def test_parse_tokens(text, expected):
    assert parse_tokens(text) == expected


@pytest.mark.parametrize("text", ["-5", "0", "nan", "inf", "abc", "1.5", "2e9", "12 tokens",
                                  # a comma that is not a thousands separator (it read as 100, 1k, 10,000 before)
                                  "1,00", "1k,", ",1", "1,0000", "10,00,000"])
def test_parse_tokens_rejects(text):
    with pytest.raises(KvplanError):
        parse_tokens(text)


def test_parse_tokens_zero_allowed_when_asked():
    assert parse_tokens("0", allow_zero=True) == 0


@pytest.mark.parametrize("text,expected", [
    ("80GiB", 80 * 2**30),
    ("141GB", 141 * 10**9),
    ("512 MiB", 512 * 2**20),
    ("1.5TB", 1_500_000_000_000),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["80", "80 gigs", "-1GiB", "0GB", "nanGB", "5000TB"])
def test_parse_size_rejects_missing_or_bad_units(text):
    with pytest.raises(KvplanError):
        parse_size(text)


def test_parse_rate():
    assert parse_rate("64GB/s") == 64e9
    assert math.isclose(parse_rate("1GiB/s"), 2**30)
    with pytest.raises(KvplanError):
        parse_rate("64")


def test_format_bytes_names_its_unit():
    assert format_bytes(3 * 2**30) == "3.00 GiB"
    assert format_bytes(3_747_840_000, "si") == "3.75 GB"   # 124,928 B x 30,000 tokens
    assert format_bytes(512) == "512 B"


@pytest.mark.parametrize("raw", ["30000", "30k", "30K", "128Ki", "128KI", "2mi", "2Mi", "7m", "0", "007k", "1ki",
                                 "k", "Ki", "", "1.5k", "+5", "-5", "1e3", "12 k", "12kk", "12kib", "1i", "nan",
                                 "\u0661\u0662", "12\u212a", "30k ", " 30k", "5_0", "1,000"])
def test_plain_counts_read_as_the_pattern_reads_them(raw):
    import re

    from kvplan.inputs.units import _TOKENS, _plain_count

    m = re.fullmatch(_TOKENS, raw, flags=re.IGNORECASE)
    plain = _plain_count(raw)
    if plain is not None:                         # the shortcut captures exactly what the pattern does
        assert m is not None and plain == (m.group(1), m.group(2) or "")
    elif raw in ("30000", "30k", "128Ki", "0", "7m"):
        pytest.fail(f"{raw!r} is a plain count")
