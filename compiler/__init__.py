"""relayvm's compiler: Relay IR, text format, type inference, passes and lowering to VM bytecode.

Compiler layer; may import ``vm`` and ``serialization``, never the other way round.
Users start with ``from compiler import relay``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.ir import hooks

# The IR is the compiler's lowest layer and imports neither its printer nor the operator table
# (compiler.ir.hooks). They are plugged in here, where every `compiler.*` import passes, as
# stand-ins that load the real function on first use; loading it registers it in their place.
# Loading waits because the operator table loads the kernel library, and with it numba: a
# process that only builds or inspects IR need not pay for it.


def _expr_to_text(node: object, show_meta_data: bool = True) -> str:
    from compiler.text.printer import expr_to_text  # deferred: numba, printing reads the op table

    return expr_to_text(node, show_meta_data)  # type: ignore[arg-type]


def _type_to_text(ty: object) -> str:
    from compiler.text.printer import type_to_text  # deferred: numba, printing reads the op table

    return type_to_text(ty)  # type: ignore[arg-type]


def _module_to_text(mod: object, show_meta_data: bool = True) -> str:
    from compiler.text.printer import module_to_text  # deferred: numba, as printing expressions

    return module_to_text(mod, show_meta_data)


def _get_op(name: str) -> Any:
    from compiler.op.registry import get_op  # deferred: numba, the table loads the kernel library

    return get_op(name)


def _normalize_op_attrs(name: str, attrs: Mapping[str, object]) -> Mapping[str, object]:
    from compiler.op.registry import get_def  # deferred: numba, as the operator lookup

    return get_def(name).normalize_attrs(attrs)


hooks.register_printer(_expr_to_text, _type_to_text, _module_to_text)
hooks.register_operators(_get_op, _normalize_op_attrs)
