"""The decoded form the interpreter runs: the table of kinds and the decoded program.

Runtime layer (``vm``); imports only the standard library and :mod:`vm.program`.

:mod:`vm.decode` turns each instruction into a flat tuple whose first item is a *kind*
from :class:`Kind`, followed by operands with everything resolvable bound in advance;
:func:`vm.interpreter.run` tests them as ``Kind.NAME`` and is compiled with the numbers
in their place (:func:`with_kind_numbers`). Kinds are plain ints, so the loop's tests
are int-to-int comparisons, which CPython specializes.
"""

from __future__ import annotations
import __future__

import ast
import inspect
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from vm.program import VMFunction

if TYPE_CHECKING:
    import numpy as np

_F = TypeVar("_F", bound=Callable[..., Any])


class Kind:
    """The kinds of decoded tuples, numbered in the order the loop tests them.

    Each comment gives the tuple the decoder makes; ``k`` is the kind. The loop finds
    a kind with a small decision tree: it tests ``op <= Kind.ALLOC``, ``op <= Kind.GET_FIELD``
    and ``op <= Kind.GOTO`` (the last kind of each group), then the rest one by one, so a
    kind's group is part of the loop's design and a new kind goes where the loop
    tests it (a test checks the loop names every kind).
    """

    # Kernels: most instructions of a model.
    KERNEL_RUN = 0  # (k, steps): alloc_tensor + invoke_packed pairs, one inner loop; a step
    # is (storage, shape, dtype, offset, dst, entry, a, b): R[dst] := a new tensor viewing
    # R[storage] (``R[storage][offset]`` of a group's view when shape is None), then
    # entry(R[a], R[dst]) if b is None, entry(*b(R)) if a is None, else entry(R[a], R[b], R[dst])
    PACKED2 = 1  # (k, entry, r0, r1): entry(R[r0], R[r1])
    PACKED3 = 2  # (k, entry, r0, r1, r2): entry(R[r0], R[r1], R[r2])
    PACKEDN = 3  # (k, entry, gather, regs): entry(*gather(R)); gather = itemgetter(*regs)
    ALLOC = 4  # (k, storage, shape, dtype, offset, dst); of a group: (k, slot, None, None,
    # index, dst)
    # Data and matching.
    SET = 5  # (k, value, dst): load_const, load_consti, kill_register
    MATCH_TAG = 6  # (k, object, tag_dst, const_dst, const, tag, true_skip, false_skip)
    IF_CONST = 7  # (k, test, value, true_offset, false_offset, target)
    GET_FIELD = 8  # (k, object, index, dst)
    # Calls and jumps.
    INVOKE = 9  # (k, callee code, args, pad, dst, gather); gather is None for one argument;
    # a tail call has dst None and one more item, where this frame's caller slots begin
    RET = 10  # (k, result, slots of: caller code, return pc, caller registers, result
    # register, caller depth)
    MOVE = 11  # (k, src, dst)
    GOTO = 12  # (k, offset)
    # The rest, tested one by one.
    CALL = 13  # (k, handler): handler(R)
    GET_TAG = 14  # (k, object, dst)
    IF = 15  # (k, test, target, true_offset, false_offset)
    INVOKE_CLOSURE = 16  # (k, closure, args, dst); a tail call has dst None and where this
    # frame's caller slots begin, as for INVOKE
    FATAL = 17  # (k,)
    # Only a machine with an instrument decodes to these.
    INVOKE_HOOKED = 18  # (k, callee code, args, pad, dst, function, hook)
    INVOKE_CLOSURE_HOOKED = 19  # (k, closure, args, dst, hook)
    RET_HOOKED = 20  # (k, result, first caller slot)


def with_kind_numbers(function: _F) -> _F:
    """``function`` compiled again with each ``Kind.NAME`` it reads replaced by its number.

    The interpreter loop is written with the kinds' names; in CPython, comparing an int
    with a literal is cheaper than with ``Kind.NAME`` (a global and an attribute lookup
    per test) or with a local bound at the top of each call, so the loop's code uses the
    numbers. The source, line numbers and tracebacks stay those of ``function``. Without
    its source (a bytecode-only install), ``function`` is returned unchanged: the same
    behaviour, only slower.
    """
    try:
        lines, first = inspect.getsourcelines(function)
        filename = inspect.getsourcefile(function)
    except (OSError, TypeError):
        return function
    tree = ast.parse(textwrap.dedent("".join(lines)))
    (definition,) = tree.body
    assert isinstance(definition, ast.FunctionDef)
    definition.decorator_list = []  # this decorator has been applied already
    tree = _KindsAsNumbers().visit(tree)
    ast.increment_lineno(tree, first - 1)
    namespace: dict[str, Any] = {}
    flags = __future__.annotations.compiler_flag
    exec(compile(tree, filename or "<kinds>", "exec", flags=flags), function.__globals__, namespace)
    return namespace[function.__name__]


class _KindsAsNumbers(ast.NodeTransformer):
    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        value = node.value
        if isinstance(value, ast.Name) and value.id == "Kind" and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(getattr(Kind, node.attr)), node)
        return self.generic_visit(node)


#: Kind number -> its name, in loop order.
KIND_NAMES: dict[int, str] = {
    value: name for name, value in vars(Kind).items() if not name.startswith("_")
}
#: Every kind number, in order.
KINDS: tuple[int, ...] = tuple(KIND_NAMES)
assert tuple(range(len(KINDS))) == KINDS, "kinds are numbered 0, 1, ... in table order"


@dataclass
class Program:
    """An executable decoded for one virtual machine in one mode.

    Attributes
    ----------
    codes : list of list of tuple
        Decoded instructions, one list per function (function-index order).
    arities : list of int
        Each function's parameter count.
    pads : list of list
        Per function, ``[None] * (register_file_size - arity)``: the registers after
        the parameters of a fresh frame.
    max_depth : int
        The call-depth limit.
    functions : sequence of VMFunction
        The original functions, for error messages.
    kernels, primitive_names : sequence
        The compiled kernel and the name of every primitive.
    exe : vm.Executable
        The executable (for naming things in messages).
    tags : dict
        Constructor tag -> the read-only int32 0-d array ``get_tag`` produces.
    owners : dict
        ``id`` of a decoded code list -> its function index (for messages).
    counting : bool
        True in the count mode, where decoded pc ``2i + 1`` runs instruction ``i``.
    fresh_results : list of bool
        Per function, whether every ``ret`` returns a register only ``alloc_tensor`` writes:
        such a result is a new, writable NDArray, and goes to the caller without
        :func:`vm.interpreter.export`'s walk.
    """

    codes: list[list[tuple]]
    arities: list[int]
    pads: list[list[None]]
    max_depth: int
    functions: Sequence[VMFunction]
    kernels: Sequence[Any]
    primitive_names: Sequence[str]
    exe: Any
    tags: dict[int, np.ndarray] = field(default_factory=dict)
    owners: dict[int, int] = field(default_factory=dict)
    counting: bool = False
    fresh_results: list[bool] = field(default_factory=list)
    #: What the interpreter loop reads from the program, in one tuple: unpacked at the
    #: start of a run in one step instead of five attribute lookups. The lists and the
    #: dict are shared with the fields above, which are filled in place, never replaced.
    loop_locals: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.loop_locals = (self.codes, self.arities, self.pads, self.tags, self.max_depth)

    def function_of(self, code: list) -> int:
        """The index of the function whose decoded code is ``code``."""
        return self.owners[id(code)]

    def source_pc(self, pc: int) -> int:
        """The instruction index in the function of decoded position ``pc``."""
        return pc // 2 if self.counting else pc
