"""relayvm's compiler: Relay IR, text format, type inference, passes and lowering to VM bytecode.

Compiler layer; may import ``vm`` and ``serialization``, never the other way round.
Users start with ``from compiler import relay``.
"""

# The IR is the compiler's lowest layer and imports neither its printer nor the operator table;
# these modules plug themselves into compiler.ir.hooks when loaded. Importing them here, where
# every `compiler.*` import passes, means no one can hold a node that cannot print itself.
from compiler.op import registry as _registry
from compiler.text import printer as _printer
