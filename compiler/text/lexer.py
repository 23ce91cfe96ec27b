"""Tokenizer for the Relay text format.

Compiler layer (``compiler.text``). Turns source text into a list of :class:`Token`s:
identifiers (``add``, ``nn.dense``, ``Tensor``), locals (``%x``, ``%0``, ``%"input.1"``),
globals (``@main``), numbers with their suffix (``2i64``, ``1.5f``), strings,
punctuation, and the raw text of a trailing ``#[metadata]`` section. ``//`` and nested
``/* */`` comments are skipped. Errors are :class:`RelaySyntaxError` at the offending
character.
"""

from __future__ import annotations

import re

from compiler.text.errors import RelaySyntaxError, Source
from compiler.text.literals import LiteralError, literal_dtype

KEYWORDS = frozenset(
    {"def", "fn", "let", "if", "else", "match", "type", "True", "False", "meta", "free_var"}
)

_TWO_CHAR = frozenset({"->", "=>", "==", "!=", "<=", ">="})
_ONE_CHAR = frozenset("()[]{},;:.=<>+-*/?#")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "0": "\0"}
METADATA_MARK = "#[metadata]"

_SPACE = re.compile(r"[ \t\r\n\f]+")
# Dotted operator names (nn.dense); a dot before a digit is a projection, not part of a name.
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_NAME = re.compile(r"[A-Za-z0-9_]+")


class Token:
    """One token: ``kind`` is ``ident``, ``local``, ``global``, ``number``, ``string``,
    ``punct``, ``metadata`` or ``eof``; ``pos`` is the offset of its first character.

    For numbers ``value`` is ``(digits, suffix)``; for ``metadata`` it is the raw text
    after the ``#[metadata]`` mark (``end`` is where that text starts).
    """

    __slots__ = ("end", "kind", "pos", "value")

    def __init__(self, kind: str, value: object, pos: int, end: int) -> None:
        self.kind = kind
        self.value = value
        self.pos = pos
        self.end = end

    def is_punct(self, text: str) -> bool:
        return self.kind == "punct" and self.value == text

    def is_word(self, text: str) -> bool:
        return self.kind == "ident" and self.value == text

    def describe(self) -> str:
        """How an error message names this token (``')'``, ``identifier 'foo'`` ...)."""
        kind, value = self.kind, self.value
        if kind == "punct":
            return f"'{value}'"
        if kind == "ident":
            word = "keyword" if value in KEYWORDS else "identifier"
            return f"{word} '{value}'"
        if kind == "local":
            return f"local variable '%{value}'"
        if kind == "global":
            return f"global '@{value}'"
        if kind == "number":
            digits, suffix = value  # type: ignore[misc]
            return f"number '{digits}{suffix}'"
        if kind == "string":
            text = str(value)
            return f'string "{text if len(text) < 30 else text[:27] + "..."}"'
        if kind == "metadata":
            return "the #[metadata] section"
        return "end of input"

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.value!r}, {self.pos})"


def _is_name_start(ch: str) -> bool:
    return ch.isascii() and (ch.isalpha() or ch == "_")


def _is_digit(ch: str) -> bool:
    return "0" <= ch <= "9"


def _is_name_char(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


def tokenize(source: Source) -> list[Token]:
    """All tokens of ``source``, ending with an ``eof`` token."""
    text = source.text
    n = len(text)
    i = 0
    tokens: list[Token] = []

    def err(pos: int, message: str) -> RelaySyntaxError:
        return source.error(pos, message)

    while i < n:
        ch = text[i]
        if ch in " \t\r\n\f":
            i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            continue
        if ch == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if ch == "/" and text.startswith("/*", i):
            i = _skip_block_comment(source, i)
            continue
        start = i
        if ch == "%" or ch == "@":
            kind = "local" if ch == "%" else "global"
            i += 1
            if i < n and text[i] == '"':
                name, i = _read_string(source, i)
                if not name:
                    raise err(start, f"expected a name after '{ch}', found an empty string")
            else:
                match = _NAME.match(text, i)
                if match is None:
                    found = repr(text[i]) if i < n else "end of input"
                    what = "variable" if ch == "%" else "global"
                    raise err(start, f"expected a {what} name after '{ch}', found {found}")
                name, i = match.group(), match.end()
            tokens.append(Token(kind, name, start, i))
            continue
        if _is_name_start(ch):
            j = _IDENT.match(text, i).end()  # type: ignore[union-attr]
            tokens.append(Token("ident", text[i:j], start, j))
            i = j
            continue
        if _is_digit(ch):
            after_dot = bool(tokens) and tokens[-1].is_punct(".")
            i = _read_number(source, i, tokens, after_dot)
            continue
        if ch == '"':
            value, i = _read_string(source, i)
            tokens.append(Token("string", value, start, i))
            continue
        if ch == "#" and text.startswith(METADATA_MARK, i):
            body_start = i + len(METADATA_MARK)
            tokens.append(Token("metadata", text[body_start:], start, body_start))
            i = n
            break
        pair = text[i : i + 2]
        if pair in _TWO_CHAR:
            tokens.append(Token("punct", pair, start, i + 2))
            i += 2
            continue
        if ch in _ONE_CHAR:
            tokens.append(Token("punct", ch, start, i + 1))
            i += 1
            continue
        raise err(i, f"unexpected character {ch!r}")
    tokens.append(Token("eof", None, n, n))
    return tokens


def _skip_block_comment(source: Source, start: int) -> int:
    text = source.text
    depth = 0
    i = start
    n = len(text)
    while i < n:
        if text.startswith("/*", i):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise source.error(start, "unterminated comment: expected '*/' to close this '/*'")


def _read_string(source: Source, start: int) -> tuple[str, int]:
    text = source.text
    out: list[str] = []
    i = start + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            return "".join(out), i + 1
        if ch == "\n":
            break
        if ch == "\\":
            nxt = text[i + 1] if i + 1 < n else ""
            if nxt in _ESCAPES and nxt:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            if nxt == "u":
                digits = text[i + 2 : i + 6]
                if len(digits) == 4 and all(c in "0123456789abcdefABCDEF" for c in digits):
                    out.append(chr(int(digits, 16)))
                    i += 6
                    continue
            raise source.error(
                i,
                f"invalid escape '\\{nxt}' in string; expected one of \\\" \\\\ \\n \\t "
                "\\r \\0 or \\u and four hex digits",
            )
        out.append(ch)
        i += 1
    raise source.error(start, "unterminated string: expected '\"' before the end of the line")


def _read_number(source: Source, start: int, tokens: list[Token], after_dot: bool) -> int:
    text = source.text
    n = len(text)
    i = start
    while i < n and _is_digit(text[i]):
        i += 1
    # After a '.', digits are a tuple index (%t.0.1), never the fraction of a float.
    if not after_dot:
        if i + 1 < n and text[i] == "." and _is_digit(text[i + 1]):
            i += 1
            while i < n and _is_digit(text[i]):
                i += 1
        if i < n and text[i] in "eE":
            j = i + 1
            if j < n and text[j] in "+-":
                j += 1
            if j < n and _is_digit(text[j]):
                while j < n and _is_digit(text[j]):
                    j += 1
                i = j
    body = text[start:i]
    suffix_start = i
    while i < n and _is_name_char(text[i]):
        i += 1
    suffix = text[suffix_start:i]
    try:
        literal_dtype(body, suffix)
    except LiteralError as exc:
        raise source.error(suffix_start, str(exc)) from None
    tokens.append(Token("number", (body, suffix), start, i))
    return i
