"""TVM's namespace over relayvm: a TVM script runs after changing its import lines only.

Compiler layer (``compiler.tvm``); a facade that defines no concept of its own. Every name
is the real relayvm object, looked up when first used, so there is one object per concept::

    import tvm                              ->  from compiler import tvm
    from tvm import relay                   ->  from compiler.tvm import relay
    from tvm.contrib import graph_executor  ->  from compiler.tvm.contrib import graph_executor

========================================  ===================================================
TVM name                                  relayvm object
========================================  ===================================================
``tvm.relay``                             :mod:`compiler.relay`
``tvm.IRModule``                          :class:`compiler.ir.module.IRModule`
``tvm.parser``                            :mod:`compiler.text.parser` (``fromtext``, ``parse``)
``tvm.transform``                         :mod:`compiler.transform` (``PassContext``, ...)
``tvm.target``                            :mod:`compiler.relay.target` (``Target``)
``tvm.ir``                                :mod:`compiler.tvm.ir` (``IRModule``, ``op.Op``)
``tvm.nd``                                ``vm.nd`` (``array``, ``empty``, ``NDArray``)
``tvm.cpu``, ``tvm.device``               :func:`vm.device.cpu`, :func:`vm.device.device`
``tvm.runtime``                           :mod:`compiler.tvm.runtime` (``vm``, ``relax_vm``,
                                          ``load_module``, ``enabled``, param dicts, ...)
``tvm.contrib``                           :mod:`compiler.tvm.contrib` (``graph_executor``,
                                          ``utils.tempdir``)
``tvm.micro``                             :mod:`compiler.tvm.micro` (Model Library Format)
``tvm.tir``                               :mod:`compiler.tvm.tir` (``IntImm``, ``FloatImm``,
                                          ``StringImm`` for attributes; no TIR)
``tvm.testing``                           :mod:`compiler.tvm.testing` (``assert_allclose``,
                                          ``enabled_targets``)
========================================  ===================================================

TVM names relayvm does not implement (``tvm.te``, the rest of ``tvm.tir``, ``tvm.cuda``...) raise an
``AttributeError`` that says so and names the nearest relayvm feature.
"""

from __future__ import annotations

from typing import Any

from compiler.tvm._names import install_finder, resolve

install_finder()

_EXPORTS = {
    "relay": "compiler.relay",
    "IRModule": "compiler.ir.module:IRModule",
    "parser": "compiler.text.parser",
    "transform": "compiler.transform",
    "target": "compiler.relay.target",
    "ir": "compiler.tvm.ir",
    "nd": "vm:nd",
    "cpu": "vm.device:cpu",
    "device": "vm.device:device",
    "Device": "vm.device:Device",
    "runtime": "compiler.tvm.runtime",
    "contrib": "compiler.tvm.contrib",
    "micro": "compiler.tvm.micro",
    "tir": "compiler.tvm.tir",
    "testing": "compiler.tvm.testing",
}

_CPU_ONLY = "relayvm runs on the host CPU only: use tvm.cpu() (or tvm.device('cpu'))"

_MISSING = {
    "te": "relayvm has no tensor expression language; operators are numba kernels described "
    "by compiler.op, so write programs with tvm.relay (or tvm.parser.fromtext)",
    "topi": "relayvm's operators (tvm.relay.nn, tvm.relay.add, ...) come with their kernels",
    "autotvm": "there is nothing to tune: kernels size their tiles from the running CPU",
    "auto_scheduler": "there is nothing to tune: kernels size their tiles from the running CPU",
    "meta_schedule": "there is nothing to tune: kernels size their tiles from the running CPU",
    "relax": "relayvm compiles Relay programs (tvm.relay); the Relax VM's runtime API "
    "(invoke_closure, save_function, set_instrument, time_evaluator) is tvm.runtime.relax_vm",
    "build": "tvm.build compiles TIR; use tvm.relay.build (graph executor) or "
    "tvm.relay.vm.compile (virtual machine)",
    "lower": "there is no TIR to lower to; tvm.relay.vm.compile lowers Relay to VM bytecode",
    "rpc": "relayvm runs in-process; to run elsewhere, move the saved executable "
    "(exe.save()) and load it there with tvm.runtime.vm.Executable.load_exec",
    "cuda": _CPU_ONLY,
    "gpu": _CPU_ONLY,
    "rocm": _CPU_ONLY,
    "opencl": _CPU_ONLY,
    "cl": _CPU_ONLY,
    "vulkan": _CPU_ONLY,
    "metal": _CPU_ONLY,
    "vpi": _CPU_ONLY,
    "ext_dev": _CPU_ONLY,
    "hexagon": _CPU_ONLY,
    "webgpu": _CPU_ONLY,
}


def __getattr__(name: str) -> Any:
    value = resolve("tvm", name, _EXPORTS, _MISSING)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
