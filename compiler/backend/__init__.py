"""The VM back end: a lowered IRModule becomes a ``vm.Executable``.

Compiler layer (``compiler.backend``). :mod:`.codegen` generates bytecode through
``vm.builder``; :mod:`.match_compiler` emits pattern tests, :mod:`.kernel_desc` turns
primitive functions into kernel descriptions and :mod:`.type_specs` describes Relay
types to the VM. The pipeline that lowers a module first is :mod:`compiler.relay.vm`.
:mod:`.graph_codegen` reads a graph-executor graph off straight-line bytecode for
``relay.build``.
"""
