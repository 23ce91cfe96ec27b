"""``tvm.runtime`` over relayvm: the virtual machine, module files, devices, param dicts.

Compiler layer (``compiler.tvm``); a facade of re-exports (see :mod:`compiler.tvm`).
``tvm.runtime.vm`` and ``tvm.runtime.relax_vm`` are both the :mod:`vm` package: relayvm
has one virtual machine, which follows the Relay VM's API and the Relax VM's additions
(``vm[name]``, ``invoke_closure``, ``save_function``, ``set_instrument`` with
``VMInstrumentReturnKind``, ``time_evaluator``).
"""

from __future__ import annotations

from typing import Any

from compiler.tvm._names import resolve

#: A package without files: ``import compiler.tvm.runtime.vm`` reaches its attributes
#: through :class:`compiler.tvm._names.FacadeModuleFinder`.
__path__: list[str] = []

_EXPORTS = {
    "vm": "vm",
    "relax_vm": "vm",
    "Executable": "vm:Executable",
    "Device": "vm.device:Device",
    "device": "vm.device:device",
    "cpu": "vm.device:cpu",
    "enabled": "compiler.relay.target:enabled",
    "load_module": "vm.graph_executor:load_module",
    "save_param_dict": "serialization:save_param_dict",
    "load_param_dict": "serialization:load_param_dict",
    "ndarray": "vm:nd",
    "NDArray": "vm:NDArray",
    # TVM's tvm.runtime.executor holds AotModule (and the graph executor's module).
    "executor": "vm.aot",
}

_MISSING = {
    "profiler_vm": "every relayvm VirtualMachine profiles: machine.profile(func_name, *args)",
    "Module": "relayvm's modules are vm.Executable, the graph executor factory and the "
    "kernel library; tvm.runtime.load_module reads any of their files",
    "PackedFunc": "relayvm calls Python functions directly: machine[func_name] is a callable",
    "convert": "pass Python and numpy values directly",
    "String": "pass Python str values directly",
    "ObjectRef": "relayvm values are numpy arrays, tuples, vm.ADT and vm.Closure",
    "disco": "relayvm runs one process; see DESIGN.md 'Scale' for batch engines",
}


def __getattr__(name: str) -> Any:
    value = resolve("tvm.runtime", name, _EXPORTS, _MISSING)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
