"""Regular expressions the brokers will apply, restricted to syntax every dialect reads alike.

Pure. A KIP-848 ``SubscribedTopicRegex`` is compiled by the group coordinator with RE2J,
ListTransactions' pattern with ``java.util.regex``, and the gateway reasons about both
in Python. The three dialects disagree at the edges (``\\Q…\\E`` quoting, inline flags,
nested and intersected character classes, possessive quantifiers, ``{`` as a literal,
``]`` first in a class, named groups, look-arounds), and any disagreement could let a
pattern the gateway believes is confined (``acme\\.(?:R)``) match outside it on the
brokers. So a pattern is *parsed* here against a small grammar whose every construct
means the same in all three, and *re-emitted* from the parse tree (``canonical``):
what reaches the brokers is text the gateway wrote, never the client's.

The grammar (anything else is refused with a reason):

* literals: the characters of Kafka names (``A-Z a-z 0-9 . _ -``, ``.`` being "any
  character" unescaped) and the escapes ``\\.`` ``\\-`` ``\\_`` ``\\\\`` and of the
  metacharacters ``\\* \\+ \\? \\( \\) \\[ \\] \\{ \\} \\| \\^ \\$``; the classes ``\\d \\D \\w
  \\W`` (ASCII in RE2J and Java; ``\\s`` is not, Java's includes ``\\x0B``);
* character classes ``[...]`` / ``[^...]`` of those literals and ranges ``a-z``;
* groups ``(R)`` and ``(?:R)``; alternation ``|``;
* quantifiers ``* + ? {n} {n,} {n,m}`` (n, m ≤ 1000), optionally lazy (``?``);
* ``^`` only where a match starts, ``$`` only where it ends (the brokers match whole
  names, so they are dropped), never under a quantifier.

A match is always of a whole name (RE2J ``matches()``), so ``literal_prefix`` is text
every matching name starts with.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_LENGTH = 1000
MAX_DEPTH = 32
MAX_COUNT = 1000
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ESCAPABLE = frozenset(".-_\\*+?()[]{}|^$")
_CLASS_ESCAPES = frozenset("dDwW")  # \s differs (\x0B in Java, not RE2J)


class RegexRefused(ValueError):
    """A pattern outside the shared grammar; the message says what and where."""


@dataclass(frozen=True, slots=True)
class Literal:
    char: str


@dataclass(frozen=True, slots=True)
class AnyChar:
    pass


@dataclass(frozen=True, slots=True)
class Shorthand:
    letter: str  # d D w W


@dataclass(frozen=True, slots=True)
class CharClass:
    negated: bool
    items: tuple[str | tuple[str, str], ...]  # single characters, shorthand "\\d", ranges


@dataclass(frozen=True, slots=True)
class Anchor:
    start: bool  # ^ (True) or $ (False)


@dataclass(frozen=True, slots=True)
class Group:
    alternatives: tuple[tuple[Node, ...], ...]


@dataclass(frozen=True, slots=True)
class Repeat:
    node: Node
    low: int
    high: int | None
    lazy: bool


Node = Literal | AnyChar | Shorthand | CharClass | Anchor | Group | Repeat


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, why: str) -> RegexRefused:
        return RegexRefused(f"{why} at position {self.pos} of {self.text!r}")

    def peek(self) -> str | None:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def take(self) -> str:
        char = self.text[self.pos]
        self.pos += 1
        return char

    def alternatives(self, depth: int) -> tuple[tuple[Node, ...], ...]:
        if depth > MAX_DEPTH:
            raise self.fail(f"groups nested deeper than {MAX_DEPTH}")
        branches = [self.sequence(depth)]
        while self.peek() == "|":
            self.take()
            branches.append(self.sequence(depth))
        return tuple(branches)

    def sequence(self, depth: int) -> tuple[Node, ...]:
        items: list[Node] = []
        while (char := self.peek()) is not None and char not in "|)":
            if char in "*+?{":
                if not items or isinstance(items[-1], Repeat | Anchor):
                    raise self.fail(f"quantifier {char!r} with nothing to repeat")
                items[-1] = self.quantifier(items[-1])
            else:
                items.append(self.atom(depth))
        return tuple(items)

    def atom(self, depth: int) -> Node:
        char = self.take()
        if char == "(":
            if self.peek() == "?":
                if self.text[self.pos : self.pos + 2] != "?:":
                    raise self.fail("inline flags, named groups and look-arounds are refused")
                self.pos += 2
            inner = self.alternatives(depth + 1)
            if self.peek() != ")":
                raise self.fail("unbalanced parenthesis")
            self.take()
            return Group(inner)
        if char == "[":
            return self.char_class()
        if char == ".":
            return AnyChar()
        if char in "^$":
            return Anchor(char == "^")
        if char == "\\":
            escaped = self.escape()
            return Shorthand(escaped[1]) if len(escaped) == 2 else Literal(escaped)
        if char in _NAME_CHARS:
            return Literal(char)
        self.pos -= 1
        raise self.fail(
            f"character {char!r} is refused (not in Kafka names; escape metacharacters)"
        )

    def escape(self) -> str:
        """After a backslash: one literal character, or ``\\d``-style shorthand."""
        if self.peek() is None:
            raise self.fail("trailing backslash")
        char = self.take()
        if char in _ESCAPABLE:
            return char
        if char in _CLASS_ESCAPES:
            return "\\" + char
        self.pos -= 1
        raise self.fail(f"escape \\{char} is refused (\\Q, \\E, \\p, \\x, \\b … differ by dialect)")

    def quantifier(self, node: Node) -> Repeat:
        char = self.take()
        low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(char, (0, None))
        if char == "{":
            low, high = self.counts()
        lazy = self.peek() == "?"
        if lazy:
            self.take()
        following = self.peek()
        if following is not None and following in "*+?{":
            raise self.fail("possessive or repeated quantifiers are refused")
        return Repeat(node, low, high, lazy)

    def counts(self) -> tuple[int, int | None]:
        end = self.text.find("}", self.pos)
        body = self.text[self.pos : end] if end >= 0 else ""
        low_text, comma, high_text = body.partition(",")
        if not low_text.isdigit() or (high_text and not high_text.isdigit()):
            raise self.fail("'{' must start a count {n}, {n,} or {n,m} (escape it: \\{)")
        low = int(low_text)
        high = (int(high_text) if high_text else None) if comma else low
        if low > MAX_COUNT or (high is not None and (high > MAX_COUNT or high < low)):
            raise self.fail(f"counts must be ordered and at most {MAX_COUNT}")
        self.pos = end + 1
        return low, high

    def char_class(self) -> CharClass:
        negated = self.peek() == "^"
        if negated:
            self.take()
        items: list[str | tuple[str, str]] = []
        while (char := self.peek()) != "]":
            if char is None:
                raise self.fail("unterminated character class")
            single = self.class_char()
            if self.peek() == "-" and self.text[self.pos + 1 : self.pos + 2] not in ("]", ""):
                self.take()
                upper = self.class_char()
                if len(single) > 1 or len(upper) > 1 or upper < single:
                    raise self.fail("a range must go from one character up to another")
                items.append((single, upper))
            else:
                items.append(single)
        self.take()
        if not items:
            raise self.fail("empty character class")
        return CharClass(negated, tuple(items))

    def class_char(self) -> str:
        char = self.take()
        if char == "\\":
            return self.escape()
        if char in _NAME_CHARS or char == ".":
            return char
        self.pos -= 1
        raise self.fail(f"character {char!r} in a class is refused (escape it or leave it out)")


def parse(pattern: str) -> tuple[tuple[Node, ...], ...]:
    """The alternatives of ``pattern``, or ``RegexRefused``."""
    if len(pattern) > MAX_LENGTH:
        raise RegexRefused(f"patterns longer than {MAX_LENGTH} characters are refused")
    parser = _Parser(pattern)
    tree = parser.alternatives(0)
    if parser.peek() is not None:
        raise parser.fail("unbalanced parenthesis")
    return tree


def _escape_char(char: str) -> str:
    return char if char in _NAME_CHARS else "\\" + char


def _class_char(char: str) -> str:
    return char if char.isascii() and char.isalnum() else "\\" + char  # \- never a range


def _emit_class_item(item: str | tuple[str, str]) -> str:
    if isinstance(item, tuple):
        return f"{_class_char(item[0])}-{_class_char(item[1])}"
    return item if len(item) == 2 else _class_char(item)


def _emit(node: Node, at_start: bool, at_end: bool) -> str:
    if isinstance(node, Literal):
        return _escape_char(node.char)
    if isinstance(node, AnyChar):
        return "."
    if isinstance(node, Shorthand):
        return "\\" + node.letter
    if isinstance(node, CharClass):
        body = "".join(_emit_class_item(i) for i in node.items)
        return f"[{'^' if node.negated else ''}{body}]"
    if isinstance(node, Anchor):
        if at_start if node.start else at_end:
            return ""  # the brokers match whole names: the anchor holds there anyway
        where = "the start" if node.start else "the end"
        raise RegexRefused(f"{'^' if node.start else '$'} is accepted only at {where} of a match")
    if isinstance(node, Group):
        return "(?:" + _emit_alternatives(node.alternatives, at_start, at_end) + ")"
    count = _SHORT_COUNTS.get((node.low, node.high))
    if count is None:
        high = "" if node.high is None else str(node.high)
        count = f"{{{node.low}}}" if node.high == node.low else f"{{{node.low},{high}}}"
    return _emit(node.node, False, False) + count + ("?" if node.lazy else "")


_SHORT_COUNTS = {(0, None): "*", (1, None): "+", (0, 1): "?"}


def _zero_width(node: Node) -> bool:
    return isinstance(node, Anchor)


def _emit_alternatives(tree: tuple[tuple[Node, ...], ...], at_start: bool, at_end: bool) -> str:
    out = []
    for branch in tree:
        parts = []
        for i, node in enumerate(branch):
            start = at_start and all(_zero_width(n) for n in branch[:i])
            end = at_end and all(_zero_width(n) for n in branch[i + 1 :])
            parts.append(_emit(node, start, end))
        out.append("".join(parts))
    return "|".join(out)


def canonical(pattern: str) -> str:
    """``pattern`` re-emitted from its parse: the same language in every dialect,
    groups non-capturing, edge anchors dropped. ``RegexRefused`` outside the grammar."""
    return _emit_alternatives(parse(pattern), True, True)


def literal(text: str) -> str:
    """A regular expression matching exactly ``text`` (characters of Kafka names)."""
    return "".join(_escape_char(c) for c in text)


def confine(prefix: str, pattern: str) -> str:
    """A pattern matching exactly the names ``prefix + n`` where ``pattern`` matches ``n``."""
    return f"{literal(prefix)}(?:{canonical(pattern)})"


def literal_prefix(pattern: str) -> str:
    """Text every name matched by ``pattern`` starts with ('' when none is certain)."""
    tree = parse(pattern)
    found, _ = _literal_run(tree)
    return found


def _literal_run(tree: tuple[tuple[Node, ...], ...]) -> tuple[str, bool]:
    """The literal text every match of ``tree`` starts with, and whether that is all of it."""
    if len(tree) != 1:
        return "", False
    text = []
    for node in tree[0]:
        if isinstance(node, Anchor):
            continue
        if isinstance(node, Literal):
            text.append(node.char)
            continue
        if isinstance(node, Group):
            inner, whole = _literal_run(node.alternatives)
            text.append(inner)
            if whole:
                continue
        return "".join(text), False
    return "".join(text), True
