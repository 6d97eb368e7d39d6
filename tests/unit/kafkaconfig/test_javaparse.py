"""Java's parsing of config strings: trim, parseLong/parseInt, parseDouble, booleans, lists."""

from __future__ import annotations

import math
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.kafkaconfig.javaparse import (
    INT_BITS,
    JavaParseError,
    java_digit,
    java_equals_ignore_case,
    java_trim,
    parse_boolean,
    parse_double,
    parse_integer,
    parse_list,
)

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
JAVA_BLANKS = st.text(st.characters(max_codepoint=0x20), max_size=4)
BMP_DIGITS = [chr(c) for c in range(0x10000) if java_digit(chr(c)) >= 0]


def test_trim_strips_control_characters_but_not_unicode_spaces() -> None:
    assert java_trim("\x01-1") == "-1"
    assert java_trim("\t-1 \x00\x1f") == "-1"
    assert java_trim("\xa0-1\u2003") == "\xa0-1\u2003"  # > U+0020: kept, as Java's trim does
    assert java_trim("\x7f1") == "\x7f1"  # DEL is above U+0020


@pytest.mark.parametrize(
    ("text", "value"),
    [("+5", 5), ("-0", 0), ("\u0663", 3), ("\uff11\uff12", 12), ("007", 7),
     (str(LONG_MIN), LONG_MIN)],
)  # fmt: skip
def test_parse_long_accepts_what_java_accepts(text: str, value: int) -> None:
    assert parse_integer(text) == value


@pytest.mark.parametrize(
    "text",
    ["", "+", "-", "1_000", "1e3", "1.0", "0x10", "- 1", "1 ", "\x011", "\U0001d7cf",
     "9223372036854775808", "-9223372036854775809", "++1", "1-"],
)  # fmt: skip
def test_parse_long_refuses_what_java_refuses(text: str) -> None:
    with pytest.raises(JavaParseError):
        parse_integer(text)


def test_parse_int_is_range_checked_at_32_bits() -> None:
    assert parse_integer("2147483647", INT_BITS) == 2**31 - 1
    assert parse_integer("-2147483648", INT_BITS) == -(2**31)
    with pytest.raises(JavaParseError, match="range of type INT"):
        parse_integer("2147483648", INT_BITS)


def test_bmp_decimal_digits_are_javas() -> None:
    """Java 17's Character.digit(c, 10) >= 0 for exactly 370 BMP chars (checked against
    the JVM); a Python whose Unicode tables differ must fail here, not in production."""
    assert len(BMP_DIGITS) == 370
    assert all(unicodedata.category(d) == "Nd" for d in BMP_DIGITS)
    assert java_digit("\U0001d7ce") == -1  # outside the BMP: two surrogates to Java


@given(st.integers(LONG_MIN, LONG_MAX), JAVA_BLANKS, JAVA_BLANKS, st.booleans())
def test_any_long_survives_blanks_and_an_explicit_sign(
    number: int, before: str, after: str, plus: bool
) -> None:
    text = ("+" if plus and number >= 0 else "") + str(number)
    assert parse_integer(java_trim(before + text + after)) == number


@given(st.integers(0, LONG_MAX), st.data())
def test_digits_of_any_script_read_as_their_value(number: int, data: st.DataObject) -> None:
    scripts = [d for d in BMP_DIGITS if java_digit(d) == 0]
    zero = ord(data.draw(st.sampled_from(scripts)))
    text = "".join(chr(zero + int(d)) for d in str(number))
    assert parse_integer(text) == number


@given(st.text(max_size=12))
def test_parse_long_either_reads_or_refuses(text: str) -> None:
    try:
        value = parse_integer(text)
    except JavaParseError:
        return
    assert LONG_MIN <= value <= LONG_MAX
    assert "_" not in text and text == text.strip()


@pytest.mark.parametrize(
    ("text", "value"),
    [("0.5", 0.5), (".5f", 0.5), ("1.", 1.0), ("+.5e-0D", 0.5), ("1e0", 1.0),
     ("0x1p-1", 0.5), ("-0X.8P1d", -1.0), ("Infinity", math.inf), ("-Infinity", -math.inf),
     (" \x010.25\t", 0.25)],
)  # fmt: skip
def test_parse_double_follows_javas_grammar(text: str, value: float) -> None:
    assert parse_double(text) == value


@pytest.mark.parametrize(
    "text",
    ["", ".", "e1", "1e", "inf", "nan", "Infinityd", "NaNf", "\u0660.5", "0_5", "0x1", "0x1.8",
     "1ee1", "1.0ff", "\xa01"],
)  # fmt: skip
def test_parse_double_refuses_what_java_refuses(text: str) -> None:
    with pytest.raises(JavaParseError):
        parse_double(text)


def test_nan_parses_and_has_no_sign() -> None:
    assert math.isnan(parse_double("-NaN")) and math.copysign(1, parse_double("-NaN")) == 1


def test_booleans_are_true_or_false_in_any_case_only() -> None:
    assert parse_boolean("TRUE") is True and parse_boolean("fAlSe") is False
    assert parse_boolean("fal\u017fe") is False  # Java upper-cases the long s to 'S'
    for text in ("tru", "yes", "1", "true ", "t rue", ""):
        with pytest.raises(JavaParseError):
            parse_boolean(text)
    assert not java_equals_ignore_case("\u00df", "ss")  # one char maps to one char in Java


def test_lists_split_at_commas_with_java_whitespace() -> None:
    assert parse_list("") == ()
    assert parse_list("compact , delete") == ("compact", "delete")
    assert parse_list("a,,b,") == ("a", "", "b", "")
    assert parse_list("a\xa0,b") == ("a\xa0", "b")  # \s in Java is ASCII whitespace only
