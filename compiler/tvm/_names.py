"""How the ``compiler.tvm`` facade resolves names: lazily, from the modules that define them.

Compiler layer (``compiler.tvm``). Each namespace of the facade (``tvm``, ``tvm.runtime``,
``tvm.contrib``...) is a module whose ``__getattr__`` calls :func:`resolve` with two
tables: the names relayvm implements (where the real object lives) and TVM names it does
not (what to use instead). A name in neither table raises an ``AttributeError`` listing
what the namespace offers.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

#: A name's location: ``"module"`` (the module itself) or ``"module:attribute"``.
Location = str


def locate(location: Location) -> Any:
    """The object at ``location`` (``"package.module"`` or ``"package.module:name"``)."""
    module_name, _, attribute = location.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module


def resolve(
    namespace: str,
    name: str,
    exports: Mapping[str, Location],
    missing: Mapping[str, str],
    waiting: Mapping[str, str] | None = None,
) -> Any:
    """The object ``namespace.name`` stands for.

    Parameters
    ----------
    namespace : str
        The TVM spelling of the namespace, for messages (``"tvm.runtime"``).
    name : str
        The attribute asked for.
    exports : mapping of str to Location
        The names relayvm implements.
    missing : mapping of str to str
        TVM names relayvm does not implement, each with the nearest relayvm feature.
    waiting : mapping of str to str, optional
        Names whose object may not exist in this build: if looking it up fails, the
        message says what it is waiting for.

    Raises
    ------
    AttributeError
        For a name relayvm does not implement, naming what to use instead.
    """
    if name in exports:
        try:
            return locate(exports[name])
        except (AttributeError, ModuleNotFoundError):
            if waiting is None or name not in waiting:
                raise
            raise AttributeError(
                f"{namespace}.{name} is not available in this build of relayvm: {waiting[name]}"
            ) from None
    if name in missing:
        raise AttributeError(f"relayvm does not implement {namespace}.{name}: {missing[name]}")
    if name.startswith("__"):
        raise AttributeError(name)
    offered = ", ".join(sorted(exports))
    raise AttributeError(f"relayvm's {namespace} has no attribute {name!r}; it offers {offered}")
