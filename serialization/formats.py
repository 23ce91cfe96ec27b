"""The kinds of relayvm files, each with its own magic and format version.

Lowest layer (``serialization``); standard library only (plus the framing module).

Bump a format's minor version for additions an older reader may ignore, and its
major version for anything else (a new opcode, a changed section layout). Keep a
frozen file of every released format in the tests and load it forever.
"""

from __future__ import annotations

from serialization.framing import DocumentFormat

#: A saved ``vm.Executable``. Sections (after the header): the global table
#: (function names in index order and the constructor table), the constant pool,
#: the primitive names, the kernel descriptions and the code of every function.
#:
#: History: 1.0 the first release; 1.1 adds shape-function primitives to the kernel
#: section (outputs with ``?`` dimensions), which a 1.0 reader could not run, so it
#: refuses 1.1 files by their version instead of failing verification; 1.2 adds type
#: arguments to ADT specs, signatures to function specs, ``("var", n)`` type variables and
#: constructor field types, with which the VM checks caller-made closures and ADT values.
EXECUTABLE_FORMAT = DocumentFormat(
    name="relayvm executable",
    magic=b"\x89RVM\r\n\x1a\n",
    version=(1, 2),
    sections=("global", "constant", "primitive", "kernel", "code"),
    array_sections=frozenset({"constant"}),
)

#: A parameter dictionary from ``save_param_dict``: [name, array] pairs sorted by name.
PARAMS_FORMAT = DocumentFormat(
    name="relayvm parameter dictionary",
    magic=b"\x89RVP\r\n\x1a\n",
    version=(1, 0),
    sections=("params",),
    array_sections=frozenset({"params"}),
)

#: The library half of TVM's ``code, lib = exe.save()`` pair, as ``lib.export_library``
#: writes it: the name and description digest of every kernel the executable calls, so
#: that ``load_exec(code, lib)`` can tell a library from another executable.
KERNEL_LIBRARY_FORMAT = DocumentFormat(
    name="relayvm kernel library",
    magic=b"\x89RVL\r\n\x1a\n",
    version=(1, 0),
    sections=("kernels",),
)

#: A graph executor factory from ``factory.export_library``: the module's name and
#: target, the graph JSON, the executable's file bytes and the parameter-dictionary bytes
#: (each verified by its own reader when loaded).
GRAPH_FACTORY_FORMAT = DocumentFormat(
    name="relayvm graph executor factory",
    magic=b"\x89RVG\r\n\x1a\n",
    version=(1, 0),
    sections=("module", "graph", "executable", "params"),
)
