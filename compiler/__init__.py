"""relayvm's compiler: Relay IR, text format, type inference, passes and lowering to VM bytecode.

Compiler layer; may import ``vm`` and ``serialization``, never the other way round.
Users start with ``from compiler import relay``.
"""
