"""Canonical plain-data forms of type specs and kernel descriptions.

Runtime layer (``vm``); imports numpy and ``serialization.limits`` only. Both the
executable (:mod:`vm.executable`, which canonicalizes what it is built from) and its codec
(:mod:`vm.executable_codec`, which canonicalizes what it reads) use these, so they live
below both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from serialization.limits import MAX_NESTING
from vm.program import TypeSpec


def canonical_type_spec(spec: Any) -> TypeSpec:
    """``spec`` with every list turned into a tuple, at any depth up to ``MAX_NESTING``.

    Other values are kept as they are; :func:`vm.verify.verify` checks the spec's shape.

    Raises
    ------
    ValueError
        If lists nest deeper than :data:`serialization.limits.MAX_NESTING` (or form a cycle).
    """
    if not isinstance(spec, (list, tuple)):
        return spec
    # Post-order rebuild with an explicit stack of (source, converted children, position).
    stack: list[tuple[Any, list[Any], int]] = [(spec, [], 0)]
    while True:
        source, built, position = stack[-1]
        if position < len(source):
            stack[-1] = (source, built, position + 1)
            item = source[position]
            if isinstance(item, (list, tuple)):
                if len(stack) >= MAX_NESTING:
                    raise ValueError(f"a type spec is nested deeper than {MAX_NESTING}")
                stack.append((item, [], 0))
            else:
                built.append(item)
            continue
        stack.pop()
        if not stack:
            return tuple(built)
        stack[-1][1].append(tuple(built))


_PLAIN_SCALARS = (type(None), bool, str, float, int)


def canonical_description(description: Any) -> dict[str, Any]:
    """A kernel description as canonical plain data.

    Dicts get sorted string keys, tuples become lists, numpy scalars become Python
    scalars; the result is a fresh copy (iteratively built, any depth).

    Raises
    ------
    TypeError
        If ``description`` is not a dict, a key is not a string, or a value is not
        None, bool, int, float, str, a list, a tuple or a dict.
    """
    if not isinstance(description, dict):
        raise TypeError(f"a kernel description must be a dict, got {type(description).__name__}")
    result: dict[str, Any] = {}
    # Each work item copies one container's children into an already created copy.
    stack: list[tuple[Any, Any, int]] = [(description, result, 1)]
    while stack:
        source, target, depth = stack.pop()
        if depth > MAX_NESTING:
            raise TypeError(f"a kernel description is nested deeper than {MAX_NESTING}")
        if isinstance(source, dict):
            keys = []
            for key in source:
                if type(key) is not str:
                    raise TypeError(f"kernel description keys must be strings, found {key!r}")
                keys.append(key)
            for key in sorted(keys):
                target[key] = _copy_value(source[key], stack, depth + 1)
        else:
            target.extend(_copy_value(item, stack, depth + 1) for item in source)
    return result


def _copy_value(value: Any, stack: list[tuple[Any, Any, int]], depth: int) -> Any:
    kind = type(value)
    if kind in _PLAIN_SCALARS:
        return value
    if isinstance(value, dict):
        copy: Any = {}
    elif isinstance(value, (list, tuple)):
        copy = []
    elif isinstance(value, np.bool_):
        return bool(value)
    elif isinstance(value, (int, np.integer)):
        return int(value)
    elif isinstance(value, (float, np.floating)):
        return float(value)
    elif isinstance(value, str):
        return str(value)
    else:
        raise TypeError(
            "kernel description values must be None, bool, int, float, str, lists or dicts, "
            f"found {type(value).__name__}"
        )
    stack.append((value, copy, depth))
    return copy
