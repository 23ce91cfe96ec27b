"""``PrintIR``: a pass that prints the module it is given and returns it unchanged.

Compiler layer (``compiler.transform``). TVM scripts put ``tvm.transform.PrintIR()`` between
the passes of a ``Sequential`` to see the program at that point; the text goes to standard
error, as TVM's log does, so that it does not mix with a script's own output.
"""

from __future__ import annotations

import sys
from typing import TextIO

from compiler.ir.module import IRModule
from compiler.transform.pass_manager import Pass, PassContext

__all__ = ["PrintIR"]


class PrintIR(Pass):
    """Print the module, then return it unchanged (TVM's ``PrintIR``, ``opt_level=0``).

    Parameters
    ----------
    header : str
        Printed first, to tell several ``PrintIR`` of one pipeline apart.
    show_meta_data : bool
        Include the ``#[metadata]`` section of large constants (TVM's default leaves it out).
    stream : file, optional
        Where to print; standard error when None.
    """

    def __init__(
        self, header: str = "", show_meta_data: bool = False, stream: TextIO | None = None
    ) -> None:
        super().__init__("PrintIR", opt_level=0)
        self.header = str(header)
        self.show_meta_data = bool(show_meta_data)
        self.stream = stream

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = self.stream if self.stream is not None else sys.stderr
        print(f"PrintIR({self.header}):", file=out)
        print(mod.astext(show_meta_data=self.show_meta_data), file=out)
        return mod

    def __repr__(self) -> str:
        return f"PrintIR(header={self.header!r})"
