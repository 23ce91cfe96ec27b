"""relayvm's runtime: executables, the verifier, the interpreter and its numba kernels.

Runtime layer; imports ``serialization``, numpy and numba, never ``compiler``.

The public names (``vm.Executable``, ``vm.VirtualMachine``, ``vm.ADT``, ``vm.Closure``,
``vm.NDArray`` (the tensor type results come back as; ``vm.nd`` has TVM's ``array``
and ``empty``),
the errors, ``vm.BenchmarkResult``, ``vm.Report``, ``vm.VMInstrumentReturnKind``,
``vm.cpu``, ``vm.Device``) are resolved on first use from the modules that define
them, so ``import vm`` stays cheap; numba is imported only when a virtual machine
first loads kernels. Submodules (``vm.builder``, ``vm.graph_executor``, ...) are
importable as usual and also load on attribute access.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "Executable": "vm.executable",
    "VirtualMachine": "vm.interpreter",
    "ADT": "vm.objects",
    "Closure": "vm.objects",
    "NDArray": "vm.ndarray",
    "ExecutableLoadError": "vm.errors",
    "MalformedExecutableError": "vm.errors",
    "InvalidExecutableError": "vm.errors",
    "UnknownFunctionError": "vm.errors",
    "VMError": "vm.errors",
    "BenchmarkResult": "vm.timing",
    "Report": "vm.profiling",
    "VMInstrumentReturnKind": "vm.instrument",
    "cpu": "vm.device",
    "Device": "vm.device",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(module_name), name)
    else:
        try:
            value = importlib.import_module(f"vm.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"vm.{name}":
                raise
            raise AttributeError(f"module 'vm' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
