"""Framing and versioning: magic bytes, a (major, minor) format version, then msgpack sections.

Lowest layer (``serialization``); imports numpy and msgpack (through the codecs) only.

Every relayvm file is a *document*::

    magic      8 bytes, e.g. b"\\x89RVM\\r\\n\\x1a\\n"  (a non-ASCII byte, then CR LF ^Z LF
               as in PNG and Lua: a text-mode copy or a truncating transfer breaks it)
    major      uint16, little-endian
    minor      uint16, little-endian
    body       msgpack list of [section_name, section_bytes] pairs, in a fixed order;
               the first section is "header" (metadata for diagnostics only), and each
               section's bytes are one msgpack value of their own

The version is the *format* version, independent of the package version. A reader
accepts the same major version with a minor version up to its own, and otherwise
names both versions and what to do. Decoding each section separately lets every
error name the section it is in and bounds each section's limits by its own size.
Writing is deterministic: the same content gives the same bytes in any process.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from serialization.codec import check_nesting, pack, reject_ext, unpack
from serialization.errors import FormatError, VersionError
from serialization.ndarray import NDARRAY_EXT_CODE, decode_ndarray, encode_ndarray

_PREFIX = struct.Struct("<8sHH")

#: Bytes before the msgpack body: magic and version.
PREFIX_SIZE = _PREFIX.size

HEADER_SECTION = "header"


@dataclass(frozen=True)
class DocumentFormat:
    """One kind of file: its name, magic, version and body sections.

    Attributes
    ----------
    name : str
        What the file is, for messages (``"relayvm executable"``).
    magic : bytes
        Exactly 8 bytes that start every file of this kind.
    version : tuple[int, int]
        The (major, minor) format version this code writes and reads.
    sections : tuple[str, ...]
        The body's section names after ``"header"``, in order.
    array_sections : frozenset[str]
        The sections that may contain ndarray extension values.
    """

    name: str
    magic: bytes
    version: tuple[int, int]
    sections: tuple[str, ...]
    array_sections: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if len(self.magic) != 8:
            raise ValueError(f"{self.name}: the magic must be 8 bytes, got {len(self.magic)}")


@dataclass(frozen=True)
class Document:
    """A decoded document: its version, header metadata and decoded sections."""

    version: tuple[int, int]
    metadata: dict[str, Any]
    sections: dict[str, Any]


@cache
def producer_version() -> str:
    """The installed relayvm package version (``"unknown"`` when not installed)."""
    from importlib import metadata

    try:
        return metadata.version("relayvm")
    except metadata.PackageNotFoundError:
        return "unknown"


def _default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return encode_ndarray(value)
    return _no_arrays(value)


def _no_arrays(value: Any) -> Any:
    # msgpack hands over what it cannot pack, including ints beyond 64 bits.
    if isinstance(value, int):
        raise ValueError(f"the integer {value} does not fit in 64 bits")
    raise TypeError(f"a value of type {type(value).__name__} cannot be written in this section")


def write_document(fmt: DocumentFormat, sections: Sequence[tuple[str, Any]]) -> bytes:
    """The bytes of a document holding ``sections`` (name, plain-data value) in order.

    Parameters
    ----------
    fmt : DocumentFormat
        The kind of document; ``sections`` must name exactly ``fmt.sections`` in order.
    sections : sequence of (str, object)
        Each value is plain data: None, bool, int, float, str, bytes, lists, dicts
        with string keys, and numpy arrays in ``fmt.array_sections``.

    Raises
    ------
    ValueError, TypeError
        If the sections do not match the format or a value cannot be written; the
        message names the section.
    """
    names = tuple(name for name, _ in sections)
    if names != fmt.sections:
        raise ValueError(f"{fmt.name}: sections {names} given, expected {fmt.sections}")
    metadata = {
        "format": fmt.name,
        "producer": "relayvm",
        "producer_version": producer_version(),
    }
    body: list[list[Any]] = [[HEADER_SECTION, pack(metadata)]]
    for name, value in sections:
        default = _default if name in fmt.array_sections else _no_arrays
        try:
            body.append([name, pack(value, default=default)])
        except (TypeError, ValueError) as err:
            raise type(err)(f"{fmt.name}, {name} section: {err}") from None
    return _PREFIX.pack(fmt.magic, *fmt.version) + pack(body)


def _array_hook() -> Any:
    """An ext hook decoding ndarrays; errors name the array's position in the section."""
    count = 0

    def hook(code: int, data: bytes) -> Any:
        nonlocal count
        count += 1
        if code != NDARRAY_EXT_CODE:
            raise FormatError(f"array {count - 1}: unknown msgpack extension type code {code}")
        try:
            return decode_ndarray(data)
        except FormatError as err:
            raise FormatError(f"array {count - 1}: {err.detail}") from None

    return hook


def read_prefix(fmt: DocumentFormat, data: bytes) -> tuple[int, int]:
    """Check the magic and return the file's (major, minor) version, without checking it.

    Raises
    ------
    FormatError
        If ``data`` is too short or does not start with ``fmt.magic``.
    """
    head = bytes(data[: len(fmt.magic)])
    if head != fmt.magic[: len(head)]:
        if len(head) >= 5 and head[:4] == fmt.magic[:4]:
            raise FormatError(
                f"not a {fmt.name}: the magic bytes {head!r} differ from {fmt.magic!r} after "
                "the first four, as happens when a file is copied in text mode "
                "(line endings converted); copy it in binary mode"
            )
        raise FormatError(
            f"not a {fmt.name}: it must start with the magic bytes {fmt.magic!r}, found {head!r}"
        )
    if len(data) < PREFIX_SIZE:
        raise FormatError(
            f"the {fmt.name} is truncated: {len(data)} bytes, but the magic and version "
            f"alone take {PREFIX_SIZE}"
        )
    _, major, minor = _PREFIX.unpack_from(data)
    return major, minor


def _check_version(fmt: DocumentFormat, found: tuple[int, int], data: bytes) -> None:
    major, minor = fmt.version
    if found[0] == major and found[1] <= minor:
        return
    producer = _peek_producer(data)
    written = f" (written by relayvm {producer})" if producer else ""
    mine = f"relayvm {producer_version()}"
    if found > fmt.version:
        advice = "upgrade relayvm to a version that reads it"
    else:
        advice = (
            "load it with the relayvm version that wrote it, or save the program again "
            "with this version"
        )
    raise VersionError(
        f"this {fmt.name} has format version {found[0]}.{found[1]}{written}, but {mine} "
        f"reads format {major}.0 to {major}.{minor}; {advice}",
        found,
        fmt.version,
        producer,
    )


def _peek_producer(data: bytes) -> str | None:
    """The producer version stored in a file's header, if it can be read at all."""
    try:
        body = unpack(data[PREFIX_SIZE:])
        name, payload = body[0]
        metadata = unpack(payload) if name == HEADER_SECTION else None
        version = metadata.get("producer_version") if isinstance(metadata, dict) else None
    except (FormatError, TypeError, ValueError, IndexError, KeyError):
        return None
    return version if isinstance(version, str) and len(version) <= 64 else None


def read_document(fmt: DocumentFormat, data: bytes) -> Document:
    """Decode a document of kind ``fmt``: check the prefix, then decode every section.

    Raises
    ------
    VersionError
        If the format version is not one this reader accepts.
    FormatError
        For anything else that does not decode; ``err.section`` names the section.
    """
    found = read_prefix(fmt, data)
    _check_version(fmt, found, data)
    try:
        body = unpack(data[PREFIX_SIZE:])
    except FormatError as err:
        raise FormatError(f"the {fmt.name} body does not decode: {err.detail}") from None
    expected = (HEADER_SECTION, *fmt.sections)
    if type(body) is not list:
        raise FormatError(f"the {fmt.name} body must be a list of sections")
    names: list[Any] = []
    for item in body:
        if type(item) is not list or len(item) != 2 or type(item[0]) is not str:
            raise FormatError(f"the {fmt.name} body must hold [name, bytes] section pairs")
        names.append(item[0])
    if tuple(names) != expected:
        raise FormatError(
            f"the {fmt.name} has the sections {_names(names)}, expected {_names(expected)}"
        )
    sections: dict[str, Any] = {}
    for name, payload in body:
        if type(payload) is not bytes:
            raise FormatError("the section's contents must be bytes", name)
        hook = _array_hook() if name in fmt.array_sections else reject_ext
        try:
            value = unpack(payload, ext_hook=hook)
            check_nesting(value)
        except FormatError as err:
            raise err.in_section(name) from None
        sections[name] = value
    metadata = sections.pop(HEADER_SECTION)
    _check_metadata(fmt, metadata)
    return Document(found, metadata, sections)


def _check_metadata(fmt: DocumentFormat, metadata: Any) -> None:
    # Metadata is for diagnostics only: its required keys are checked, extra keys are
    # ignorable by specification, and no value gates loading except the format name.
    if type(metadata) is not dict:
        raise FormatError("the header must be a map", HEADER_SECTION)
    for key in ("format", "producer", "producer_version"):
        if type(metadata.get(key)) is not str:
            raise FormatError(f"the header needs a string {key!r}", HEADER_SECTION)
    if metadata["format"] != fmt.name:
        raise FormatError(
            f"the header says this is a {metadata['format'][:60]!r}, expected a {fmt.name!r}",
            HEADER_SECTION,
        )


def _names(names: Sequence[Any]) -> str:
    shown = ", ".join(repr(n)[:40] for n in names[:12])
    return f"[{shown}{', ...' if len(names) > 12 else ''}]"
