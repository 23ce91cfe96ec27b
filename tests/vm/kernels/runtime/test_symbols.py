"""The names compiled code reaches the runtime by are listed in one place
(``vm.kernels.runtime.symbols``).

Returns: once every runtime module is imported and every C entry point linked, the LLVM
symbols the runtime exported are exactly :data:`SYMBOLS`, each C entry point is one of them,
and the bridge handlers the runtime registered are exactly :data:`BRIDGE_HANDLERS`.
"""

from __future__ import annotations

import importlib
import pkgutil

import vm.kernels.runtime
from vm.kernels.runtime import bridge, callbacks, symbols


def _import_the_runtime() -> None:
    for module in pkgutil.iter_modules(vm.kernels.runtime.__path__, "vm.kernels.runtime."):
        importlib.import_module(module.name)


def _runtime_entries() -> list[str]:
    return [
        symbol
        for symbol in callbacks.entries()
        if callbacks.entry_function(symbol).__module__.startswith("vm.kernels.runtime.")
    ]


def test_the_runtime_exports_exactly_the_listed_symbols():
    _import_the_runtime()
    entries = _runtime_entries()
    assert set(entries) <= set(symbols.SYMBOLS)
    callbacks.link(*entries)
    ours = {name for name in symbols.exported() if name in symbols.SYMBOLS}
    assert ours == set(symbols.SYMBOLS)
    assert len(set(symbols.SYMBOLS)) == len(symbols.SYMBOLS)


def test_the_runtime_registers_exactly_the_listed_bridge_handlers():
    _import_the_runtime()
    ours = {
        name
        for name, function in bridge.handlers().items()
        if function.__module__.startswith("vm.kernels.runtime.")
    }
    assert ours == set(symbols.BRIDGE_HANDLERS)
