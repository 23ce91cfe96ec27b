"""Run generator-based recursive code on an explicit stack.

Compiler layer (``compiler.text``). The parser and printer are written as ordinary
recursive descent, except that a "recursive call" is ``result = yield self.sub(...)``:
the generator hands the sub-generator to :func:`run`, which keeps every pending
generator on a Python list instead of the interpreter's call stack. Nesting depth is
then limited only by memory, never by ``sys.getrecursionlimit()``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

T = TypeVar("T")

#: A generator that yields sub-generators and returns a ``T``.
Task = Generator[Any, Any, T]


def run(task: Task[T]) -> T:
    """Drive ``task`` to completion and return its result.

    Every value the task (or any sub-task) yields must itself be a generator; its
    return value is sent back to the yielder. Exceptions propagate to the caller.
    """
    stack: list[Generator[Any, Any, Any]] = [task]
    value: Any = None
    while True:
        try:
            request = stack[-1].send(value)
        except StopIteration as stop:
            stack.pop()
            value = stop.value
            if not stack:
                return value  # type: ignore[no-any-return]
            continue
        stack.append(request)
        value = None
