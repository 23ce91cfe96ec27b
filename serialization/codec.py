"""msgpack with limits: the only place the serialization layer calls msgpack's pack/unpack.

Lowest layer (``serialization``); imports msgpack only.

Reading uses ``unpackb`` with every ``max_*_len`` limit set from the input's own
length (a tiny input cannot declare a 4 GB list), string map keys only, duplicate
map keys rejected, and every msgpack exception rewrapped as a
:class:`~serialization.errors.FormatError` with a one-line reason, so no msgpack
internals reach users. Writing uses ``use_bin_type=True`` so bytes stay bytes, and
packs maps in the order given, so callers control the bytes exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from serialization.errors import FormatError
from serialization.limits import MAX_NESTING

ExtHook = Callable[[int, bytes], Any]


def reject_ext(code: int, data: bytes) -> Any:
    """An ``ext_hook`` that allows no extension types at all."""
    raise FormatError(f"unexpected msgpack extension value (code {code})")


def _pairs_to_dict(pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise FormatError(f"a map has the key {key!r} twice")
        result[key] = value
    return result


def pack(value: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """``value`` as msgpack bytes (bin type for bytes, maps in insertion order).

    Raises
    ------
    TypeError
        If ``value`` holds something msgpack cannot represent and ``default`` does
        not convert.
    ValueError
        If an integer does not fit in 64 bits or a length exceeds msgpack's 2**32-1.
    """
    try:
        return msgpack.packb(value, use_bin_type=True, default=default, strict_types=False)
    except OverflowError as err:
        raise ValueError(f"cannot write {err}: integers must fit in 64 bits") from None


def unpack(data: bytes, ext_hook: ExtHook = reject_ext) -> Any:
    """Decode one msgpack value that fills ``data`` exactly.

    Raises
    ------
    FormatError
        Whatever is wrong: truncated data, trailing bytes, an invalid byte, invalid
        UTF-8, a non-string or duplicate map key, a length larger than the input,
        nesting deeper than msgpack's stack, or an error from ``ext_hook``.
    """
    limit = len(data)
    try:
        return msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            use_list=True,
            ext_hook=ext_hook,
            object_pairs_hook=_pairs_to_dict,
            max_str_len=limit,
            max_bin_len=limit,
            max_array_len=limit,
            max_map_len=limit,
            max_ext_len=limit,
        )
    except FormatError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as err:
        raise FormatError(describe_unpack_error(err)) from None


def describe_unpack_error(err: BaseException) -> str:
    """A one-line reason for an exception raised by ``msgpack.unpackb``."""
    if isinstance(err, msgpack.ExtraData):
        return (
            f"unexpected bytes after the end of the data ({len(err.extra)} left over after "
            "one complete value)"
        )
    if isinstance(err, msgpack.StackError):
        return "lists or maps are nested too deeply"
    if isinstance(err, msgpack.FormatError):
        return "a byte that does not start any msgpack value"
    if isinstance(err, UnicodeDecodeError):
        return "a string that is not valid UTF-8"
    text = str(err)
    if isinstance(err, msgpack.OutOfData) or "incomplete input" in text:
        return "the data is truncated"
    if "exceeds max_" in text:
        return "a declared length exceeds the data (truncated or corrupt data)"
    if "map key" in text:
        return "a map key that is not a string"
    if "timestamp" in text:
        return "an invalid timestamp extension value"
    return f"invalid msgpack data ({text or type(err).__name__})"


_CONTAINERS = (list, dict)


def check_nesting(value: Any, limit: int = MAX_NESTING) -> None:
    """Raise :class:`FormatError` if lists/maps in ``value`` nest deeper than ``limit``.

    Iterative, so a deeply nested value cannot exhaust Python's stack.
    """
    if type(value) not in _CONTAINERS:
        return
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item
        if depth + 1 > limit:
            raise FormatError(f"lists or maps are nested deeper than {limit} (MAX_NESTING)")
        # Only containers go on the stack: long code lists are mostly ints.
        stack.extend((child, depth + 1) for child in children if type(child) in _CONTAINERS)
