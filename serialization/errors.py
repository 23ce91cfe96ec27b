"""The one error type of the serialization layer: bytes that do not decode as the format says.

Lowest layer (``serialization``); standard library only.

Every failure while reading a file (bad magic, unsupported version, truncated or
invalid msgpack, an array payload that breaks the codec's rules, a broken schema)
is a :class:`FormatError` that names the section it happened in, so callers in
higher layers can rewrap it into their own error types without parsing messages.
"""

from __future__ import annotations


class FormatError(ValueError):
    """Bytes that do not decode as the format requires.

    Parameters
    ----------
    detail : str
        What was wrong, as a sentence fragment (``"dtype '|O' is not allowed"``).
    section : str or None
        The section of the document being read (``"header"``, ``"constant"``...),
        or None when the failure is in the framing before any section.

    Attributes
    ----------
    detail, section
        As given; ``str(err)`` is ``"<section> section: <detail>"``.
    """

    def __init__(self, detail: str, section: str | None = None) -> None:
        self.detail = detail
        self.section = section
        super().__init__(self._compose())

    def _compose(self) -> str:
        return f"{self.section} section: {self.detail}" if self.section else self.detail

    def in_section(self, section: str) -> FormatError:
        """This error, attributed to ``section`` unless it already names one."""
        if self.section is None:
            self.section = section
            self.args = (self._compose(),)
        return self

    def __str__(self) -> str:
        return self._compose()


class VersionError(FormatError):
    """The file's format version is not one this reader understands.

    Attributes
    ----------
    found : tuple[int, int]
        The (major, minor) version stored in the file.
    supported : tuple[int, int]
        The newest (major, minor) version this reader reads.
    producer : str or None
        The package version that wrote the file, when it could be read.
    """

    def __init__(
        self,
        detail: str,
        found: tuple[int, int],
        supported: tuple[int, int],
        producer: str | None = None,
    ) -> None:
        self.found = found
        self.supported = supported
        self.producer = producer
        super().__init__(detail, "header")
