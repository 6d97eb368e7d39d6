"""Java's reading of a config string, the way Kafka's ``ConfigDef.parseType`` does it.

The broker, not Python, decides what a tenant's config value means, so the
gateway must read it the same way: ``String.trim()`` drops every char up to
U+0020 at both ends (control characters included); ``Long.parseLong`` takes an
optional sign and decimal digits of any script (``Character.digit``: the BMP's
Unicode ``Nd`` characters, never a surrogate pair), with no ``_`` or space inside;
``Double.parseDouble`` has its own grammar (``NaN``, ``Infinity``, hex floats, an
``f``/``d`` suffix); booleans are ``true``/``false`` by ``equalsIgnoreCase``.
Nothing here does I/O; every failure is a :class:`JavaParseError`.
"""

from __future__ import annotations

import math
import re
import unicodedata

LONG_BITS, INT_BITS = 64, 32
_JAVA_BLANKS = "".join(chr(code) for code in range(0x21))  # String.trim(): <= U+0020
_ASCII_DIGITS = "[0-9]"
_DECIMAL = re.compile(
    rf"[+-]?(?:NaN|Infinity|(?:{_ASCII_DIGITS}+\.?{_ASCII_DIGITS}*|\.{_ASCII_DIGITS}+)"
    rf"(?:[eE][+-]?{_ASCII_DIGITS}+)?[fFdD]?)"
)
_HEX = re.compile(
    r"([+-]?0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")  # Java's \s*,\s*


class JavaParseError(ValueError):
    """The value is not what its Java type accepts; the message names the type."""


def java_trim(value: str) -> str:
    """``String.trim()``: strip every char <= U+0020 (not Unicode spaces) at both ends."""
    return value.strip(_JAVA_BLANKS)


def java_digit(char: str) -> int:
    """``Character.digit(char, 10)`` for one UTF-16 code unit; -1 when not a digit.

    Java sees a char outside the BMP as two surrogates, neither of them a digit."""
    if ord(char) > 0xFFFF or unicodedata.category(char) != "Nd":
        return -1
    return unicodedata.decimal(char, -1)


def parse_integer(text: str, bits: int = LONG_BITS) -> int:
    """``Long.parseLong`` (``bits`` 64) or ``Integer.parseInt`` (32) of ``text`` as given."""
    kind = "LONG" if bits == LONG_BITS else "INT"
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits:
        raise JavaParseError(f"not a number of type {kind}")
    value = 0
    for char in digits:
        digit = java_digit(char)
        if digit < 0:
            raise JavaParseError(f"not a number of type {kind}")
        value = value * 10 + digit
    if text[:1] == "-":
        value = -value
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise JavaParseError(f"out of the range of type {kind}")
    return value


def parse_double(text: str) -> float:
    """``Double.parseDouble``: Java's grammar (ASCII digits only), then IEEE rounding."""
    text = java_trim(text)
    hexadecimal = _HEX.fullmatch(text)
    if hexadecimal is not None:
        return float.fromhex(hexadecimal.group(1))
    if _DECIMAL.fullmatch(text) is None:
        raise JavaParseError("not a number of type DOUBLE")
    value = float(text[:-1] if text[-1] in "fFdD" else text)  # Python rounds it as Java does
    return math.nan if math.isnan(value) else value  # Java's -NaN is NaN


def java_equals_ignore_case(left: str, right: str) -> bool:
    """``String.equalsIgnoreCase``: char by char, through upper then lower case."""
    if len(left) != len(right):
        return False
    return all(_same_ignoring_case(a, b) for a, b in zip(left, right, strict=True))


def _simple_upper(char: str) -> str:
    upper = char.upper()
    return upper if len(upper) == 1 else char  # Character.toUpperCase maps one char to one


def _simple_lower(char: str) -> str:
    lower = char.lower()
    return lower if len(lower) == 1 else char


def _same_ignoring_case(a: str, b: str) -> bool:
    if a == b:
        return True
    upper_a, upper_b = _simple_upper(a), _simple_upper(b)
    return upper_a == upper_b or _simple_lower(upper_a) == _simple_lower(upper_b)


def parse_boolean(text: str) -> bool:
    """ConfigDef's BOOLEAN: the trimmed text is ``true`` or ``false``, in any case."""
    if java_equals_ignore_case(text, "true"):
        return True
    if java_equals_ignore_case(text, "false"):
        return False
    raise JavaParseError("expected value to be either true or false")


def parse_list(text: str) -> tuple[str, ...]:
    """ConfigDef's LIST of a trimmed text: empty, or split at commas with Java's ``\\s``."""
    return () if not text else tuple(_LIST_SEPARATOR.split(text))
