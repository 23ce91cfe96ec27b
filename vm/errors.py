"""The runtime's error types: loading failures (malformed, invalid) and run-time failures.

Runtime layer (``vm``); standard library only.

Loading mirrors WebAssembly's split: bytes that do not decode are *malformed*,
programs that decode but break a rule of the verifier are *invalid*. Both are
:class:`ExecutableLoadError`, a ``ValueError``, and both say where the problem is.
"""

from __future__ import annotations


class ExecutableLoadError(ValueError):
    """A file or byte string could not be loaded as an executable.

    Attributes
    ----------
    section : str or None
        The section of the executable where the problem is (``"code"``, ``"constant"``...).
    """

    def __init__(self, message: str, section: str | None = None) -> None:
        super().__init__(message)
        self.section = section


class MalformedExecutableError(ExecutableLoadError):
    """The bytes do not decode as an executable (bad magic, version, msgpack or schema)."""


class InvalidExecutableError(ExecutableLoadError):
    """The executable decodes but fails verification.

    The message reads like ``"invalid executable: code section, function 'main',
    instruction 17 (If): jump target 42 is outside the function (0..30)"``.

    Attributes
    ----------
    section : str
        The section the rule belongs to.
    function : str or None
        The function's name, when the problem is inside one.
    pc : int or None
        The instruction's index in that function, when the problem is one instruction.
    """

    def __init__(
        self,
        message: str,
        section: str,
        function: str | None = None,
        pc: int | None = None,
    ) -> None:
        super().__init__(message, section)
        self.function = function
        self.pc = pc


class UnknownFunctionError(KeyError, ValueError):
    """A function name that the executable does not define.

    Both a ``KeyError`` (a failed lookup by name) and a ``ValueError`` (a bad argument),
    so either ``except`` catches it. The message lists the known functions.
    """

    def __init__(self, name: object, known: list[str]) -> None:
        shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
        self.name = name
        self.known = known
        self.message = f"unknown function {name!r}; the executable defines: {shown or 'nothing'}"
        super().__init__(self.message)

    def __str__(self) -> str:
        # KeyError would print the repr of its argument, with extra quotes.
        return self.message


class VMError(RuntimeError):
    """A failure while running a valid program (no match clause, a kernel's bad index,
    call depth exceeded). The virtual machine stays usable afterwards.

    ``function`` and ``pc`` name where it happened, when that is known.
    """

    function: str | None = None
    pc: int | None = None
