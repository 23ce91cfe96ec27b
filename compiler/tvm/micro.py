"""``tvm.micro`` over relayvm: Model Library Format export.

Compiler layer (``compiler.tvm``); a facade of re-exports (see :mod:`compiler.tvm`).
"""

from __future__ import annotations

from typing import Any

from compiler.tvm._names import resolve

_EXPORTS = {
    "export_model_library_format": "serialization:export_model_library_format",
    "UnsupportedInModelLibraryFormatError": (
        "serialization.model_library:UnsupportedInModelLibraryFormatError"
    ),
}

_MISSING = {
    "Session": "relayvm runs on the host CPU, not on microcontrollers",
    "project": "relayvm generates no C projects; the archive holds the executable",
    "get_standalone_crt_dir": "relayvm has no C runtime; the Python runtime (vm) runs archives",
}


def __getattr__(name: str) -> Any:
    value = resolve("tvm.micro", name, _EXPORTS, _MISSING)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
