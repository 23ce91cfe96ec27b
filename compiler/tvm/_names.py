"""How the ``compiler.tvm`` facade resolves names: lazily, from the modules that define them.

Compiler layer (``compiler.tvm``). Each namespace of the facade (``tvm``, ``tvm.runtime``,
``tvm.contrib``...) is a module whose ``__getattr__`` calls :func:`resolve` with two
tables: the names relayvm implements (where the real object lives) and TVM names it does
not (what to use instead). A name in neither table raises an ``AttributeError`` listing
what the namespace offers.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
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

    Raises
    ------
    AttributeError
        For a name relayvm does not implement, naming what to use instead.
    """
    if name in exports:
        return locate(exports[name])
    if name in missing:
        raise AttributeError(f"relayvm does not implement {namespace}.{name}: {missing[name]}")
    if name.startswith("__"):
        raise AttributeError(name)
    offered = ", ".join(sorted(exports))
    raise AttributeError(f"relayvm's {namespace} has no attribute {name!r}; it offers {offered}")


class FacadeModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Lets ``import`` statements reach the facade's lazily resolved namespaces.

    TVM scripts write ``from tvm.runtime.vm import VirtualMachine`` and ``from
    tvm.relay.backend import Executor``; after the import-line change these name
    ``compiler.tvm.runtime.vm`` and ``compiler.tvm.relay.backend``, which are attributes of
    the facade, not files. For such a name this finder registers the very module the
    attribute leads to under the facade's name, so no second copy is ever made (a file
    finder would load ``compiler/relay/backend.py`` again as ``compiler.tvm.relay.backend``).
    """

    prefix = "compiler.tvm."

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(self.prefix):
            return None
        parent_name, _, last = fullname.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is None:
            return None
        if parent.__name__ == parent_name:
            # A facade module of its own: its files come first, then its attributes.
            search = getattr(parent, "__path__", None)
            if search and importlib.machinery.PathFinder.find_spec(fullname, search):
                return None
            real = None
        else:
            real = f"{parent.__name__}.{last}"  # inside a module the facade re-exports
        module = None
        if real is not None and importlib.util.find_spec(real) is not None:
            module = importlib.import_module(real)
        else:
            module = getattr(parent, last, None)
        if not isinstance(module, types.ModuleType):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, origin=module.__name__)

    def __init__(self) -> None:
        self._own_specs: dict[str, Any] = {}

    def create_module(self, spec: Any) -> types.ModuleType:
        module = importlib.import_module(spec.origin)
        self._own_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # The module ran under its own name already; the import system has just given it
        # the facade's spec, and it keeps its own (reload and pickling go by it).
        module.__spec__ = self._own_specs.pop(module.__spec__.name)


def install_finder() -> None:
    """Put :class:`FacadeModuleFinder` first on ``sys.meta_path``, once."""
    if not any(isinstance(f, FacadeModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, FacadeModuleFinder())
