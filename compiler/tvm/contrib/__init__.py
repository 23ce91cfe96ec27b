"""``tvm.contrib`` over relayvm: the graph executor and TVM's temporary-directory helper.

Compiler layer (``compiler.tvm``); a facade (see :mod:`compiler.tvm`).
``tvm.contrib.graph_executor`` is :mod:`vm.graph_executor` itself.
"""

from __future__ import annotations

from typing import Any

from compiler.tvm._names import resolve

_EXPORTS = {
    "graph_executor": "vm.graph_executor",
    "utils": "compiler.tvm.contrib.utils",
}

_MISSING = {
    "graph_runtime": "TVM renamed it graph_executor in 0.8; use tvm.contrib.graph_executor",
    "debugger": "profile a graph with GraphModule.profile() or read any node with "
    "GraphModule.debug_get_output(node)",
    "cblas": "dense layers run relayvm's own packed kernels (or BLAS through numpy)",
    "cudnn": "relayvm runs on the host CPU only",
    "cublas": "relayvm runs on the host CPU only",
    "download": "relayvm downloads nothing; fetch files with urllib",
    "cc": "relayvm uses no C compiler; export_library writes one self-contained file",
    "ndk": "relayvm uses no C compiler; export_library writes one self-contained file",
    "emcc": "relayvm uses no C compiler; export_library writes one self-contained file",
    "aot": "the AOT executor is vm.aot.AotModule: relay.build(mod, executor='aot') or "
    "relay.create_executor('aot', mod)",
}


def __getattr__(name: str) -> Any:
    value = resolve("tvm.contrib", name, _EXPORTS, _MISSING)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
