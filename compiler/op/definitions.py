"""Imports every operator definition module so that all operators are registered.

Compiler layer (``compiler.op``). :func:`compiler.op.registry._ensure_loaded` imports this
module the first time the registry is consulted; the definition modules register their
operators as a side effect of being imported.
"""

from compiler.op import (  # noqa: F401  (registration on import)
    defs_activation,
    defs_conv,
    defs_dynamic,
    defs_elemwise,
    defs_nn,
    defs_norm,
    defs_packed,
    defs_pool,
    defs_reduce,
    defs_spatial,
    defs_transform,
    defs_winograd,
)
