"""Imports every operator definition module so that all operators are registered.

Compiler layer (``compiler.op``). The package (``compiler/op/__init__.py``) imports this
module, so any import of a ``compiler.op`` module leaves every operator registered; the
definition modules register their operators as a side effect of being imported.
"""

from compiler.op import (  # noqa: F401  (registration on import)
    defs_activation,
    defs_conv,
    defs_dynamic,
    defs_elemwise,
    defs_image,
    defs_index,
    defs_nn,
    defs_norm,
    defs_packed,
    defs_pool,
    defs_reduce,
    defs_spatial,
    defs_transform,
    defs_vision,
    defs_winograd,
)
