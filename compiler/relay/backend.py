"""``relay.backend``: TVM's ``Executor`` and ``Runtime`` options for ``relay.build``.

Compiler layer (``compiler.relay``). A TVM script writes
``relay.build(mod, target, executor=Executor("aot"), runtime=Runtime("cpp"))``; these are
the objects it builds. :func:`compiler.build.build` reads their ``name`` and checks it, so
an executor or runtime relayvm lacks is refused there with the list of those it has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["Executor", "Runtime"]


class _Option:
    """A named choice with TVM's free-form options (kept, and shown, but not interpreted:
    relayvm's executors and runtime have one behaviour each)."""

    kind = "option"

    def __init__(self, name: str, options: Mapping[str, Any] | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{type(self).__name__} needs a name such as 'graph' or 'aot'")
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(
                f"{type(self).__name__} options must be a dict, got {type(options).__name__}"
            )
        self.name = name
        self.options = dict(options or {})

    def __getitem__(self, key: str) -> Any:
        return self.options[key]

    def __repr__(self) -> str:
        extra = f", {self.options!r}" if self.options else ""
        return f"{type(self).__name__}({self.name!r}{extra})"


class Executor(_Option):
    """TVM's ``relay.backend.Executor``: ``"graph"`` or ``"aot"`` for ``relay.build``."""


class Runtime(_Option):
    """TVM's ``relay.backend.Runtime``: ``"cpp"`` or ``"crt"``, both relayvm's runtime."""
