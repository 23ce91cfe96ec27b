"""Source text bookkeeping and the syntax error raised by the Relay text parser.

Compiler layer (``compiler.text``). :class:`Source` maps character offsets to 1-based
lines and columns; :class:`RelaySyntaxError` is a :class:`SyntaxError` whose ``str()``
shows ``name:line:col: message`` followed by the offending source line and a caret
under the column, so a user sees where the problem is without counting characters.
"""

from __future__ import annotations

import bisect


class RelaySyntaxError(SyntaxError):
    """A malformed or unresolvable Relay program.

    ``lineno`` and ``offset`` are 1-based, ``text`` is the source line and ``filename``
    the source name (as for Python's own ``SyntaxError``); ``msg`` says what was expected
    and what was found.
    """

    def __init__(
        self,
        message: str,
        source_name: str = "<string>",
        lineno: int = 1,
        offset: int = 1,
        text: str = "",
    ) -> None:
        super().__init__(message, (source_name, lineno, offset, text))

    def __str__(self) -> str:
        text = self.text or ""
        offset = max(1, self.offset or 1)
        # Keep tabs in the caret line so the caret lines up under tab-indented source.
        pad = "".join("\t" if ch == "\t" else " " for ch in text[: offset - 1])
        location = f"{self.filename}:{self.lineno}:{offset}"
        return f"{location}: {self.msg}\n    {text}\n    {pad}^"


class Source:
    """The text being parsed, with its name, for turning offsets into positions."""

    __slots__ = ("_line_starts", "name", "text")

    def __init__(self, text: str, name: str = "<string>") -> None:
        self.text = text
        self.name = name
        starts = [0]
        index = text.find("\n")
        while index >= 0:
            starts.append(index + 1)
            index = text.find("\n", index + 1)
        self._line_starts = starts

    def location(self, pos: int) -> tuple[int, int]:
        """The 1-based ``(line, column)`` of character offset ``pos``."""
        line = bisect.bisect_right(self._line_starts, pos) - 1
        return line + 1, pos - self._line_starts[line] + 1

    def line_text(self, line: int) -> str:
        """The text of 1-based ``line`` without its newline."""
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        line_text = self.text[start:] if end < 0 else self.text[start:end]
        return line_text.rstrip("\r")

    def error(self, pos: int, message: str) -> RelaySyntaxError:
        """A :class:`RelaySyntaxError` at character offset ``pos``."""
        line, column = self.location(pos)
        return RelaySyntaxError(message, self.name, line, column, self.line_text(line))
