"""The executable: functions, constants, primitives and constructors, immutable and shareable.

Runtime layer (``vm``); imports ``serialization``, numpy, the plain-data modules of ``vm``
and what reads and checks an executable (its codec, text listing and verifier).

An :class:`Executable` is what the compiler produces, what is saved to one file and
what a :class:`vm.VirtualMachine` runs. It never changes after construction, so one
instance can serve many virtual machines on many threads. Construction puts the
pieces in canonical form (tuples for type specs, sorted plain data for kernel
descriptions, read-only little-endian constants) so that saving is deterministic and
``load_exec(exe.save()[0])`` is equal to ``exe`` section by section. Construction does
not verify; :func:`vm.verify.verify` does, and :meth:`Executable.load_exec` always
runs it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from serialization.atomic import atomic_write
from serialization.errors import FormatError
from serialization.formats import KERNEL_LIBRARY_FORMAT
from serialization.framing import read_document, write_document
from serialization.model_library import ModelLibraryParts
from serialization.ndarray import allowed_dtype
from vm import text
from vm.canonical import canonical_description, canonical_type_spec
from vm.errors import InvalidExecutableError, MalformedExecutableError, UnknownFunctionError
from vm.executable_codec import decode, encode
from vm.program import ConstructorInfo, Primitive, VMFunction
from vm.verify import verify


class Executable:
    """A compiled program: what ``relay.vm.compile`` returns and ``save``/``load_exec`` move.

    Parameters
    ----------
    functions : iterable of vm.program.VMFunction
        The functions, in function-index order.
    constants : iterable of numpy.ndarray
        The constant pool, in constant-index order.
    primitives : iterable of vm.program.Primitive
        The kernels, in primitive-index order.
    constructors : iterable of vm.program.ConstructorInfo
        The ADT constructors the program builds or matches.

    Raises
    ------
    TypeError
        If a piece has the wrong type (the message names which one).
    """

    __slots__ = ("_by_tag", "_constants", "_constructors", "_functions", "_index", "_primitives")
    _functions: tuple[VMFunction, ...]
    _constants: tuple[np.ndarray, ...]
    _primitives: tuple[Primitive, ...]
    _constructors: tuple[ConstructorInfo, ...]
    _index: dict[str, int]
    _by_tag: Mapping[int, ConstructorInfo]

    def __init__(
        self,
        functions: Iterable[VMFunction],
        constants: Iterable[np.ndarray],
        primitives: Iterable[Primitive],
        constructors: Iterable[ConstructorInfo] = (),
    ) -> None:
        funcs = tuple(_canonical_function(i, f) for i, f in enumerate(functions))
        consts = tuple(_canonical_constant(i, c) for i, c in enumerate(constants))
        prims = tuple(_canonical_primitive(i, p) for i, p in enumerate(primitives))
        ctors = tuple(constructors)
        for i, c in enumerate(ctors):
            if not isinstance(c, ConstructorInfo):
                raise TypeError(
                    f"constructors[{i}] must be a vm.program.ConstructorInfo, "
                    f"got {type(c).__name__}"
                )
        index: dict[str, int] = {}
        for i, f in enumerate(funcs):
            index.setdefault(f.name, i)
        by_tag: dict[int, ConstructorInfo] = {}
        for c in ctors:
            by_tag.setdefault(c.tag, c)
        setter = object.__setattr__
        setter(self, "_functions", funcs)
        setter(self, "_constants", consts)
        setter(self, "_primitives", prims)
        setter(self, "_constructors", ctors)
        setter(self, "_index", index)
        setter(self, "_by_tag", MappingProxyType(by_tag))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an Executable is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("an Executable is immutable")

    def __repr__(self) -> str:
        return (
            f"<Executable: {len(self._functions)} functions, {len(self._constants)} constants, "
            f"{len(self._primitives)} primitives, {len(self._constructors)} constructors>"
        )

    # ---- the plain data -------------------------------------------------------------

    @property
    def functions(self) -> tuple[VMFunction, ...]:
        """The functions, in function-index order."""
        return self._functions

    @property
    def constant_values(self) -> tuple[np.ndarray, ...]:
        """The constant pool as read-only arrays, in constant-index order."""
        return self._constants

    @property
    def primitives(self) -> tuple[Primitive, ...]:
        """The kernels (name and structured description), in primitive-index order."""
        return self._primitives

    @property
    def constructors(self) -> tuple[ConstructorInfo, ...]:
        """The ADT constructors (tag, name, field count, type name)."""
        return self._constructors

    @property
    def constructor_by_tag(self) -> Mapping[int, ConstructorInfo]:
        """Tag -> constructor, read-only."""
        return self._by_tag

    # ---- TVM-style introspection --------------------------------------------------------

    @property
    def globals(self) -> list[str]:
        """The function names in function-index order."""
        return [f.name for f in self._functions]

    @property
    def primitive_ops(self) -> list[str]:
        """The kernel names in primitive-index order."""
        return [p.name for p in self._primitives]

    @property
    def bytecode(self) -> str:
        """A text listing of every function's instructions (see :mod:`vm.text`)."""
        return text.disassemble(self)

    @property
    def stats(self) -> str:
        """TVM-style statistics: constant shapes, globals, primitive ops, constructors."""
        return text.stats(self)

    @property
    def constants(self) -> str:
        """A text listing of the constant pool, one ``VM Const[i]: ...`` line each."""
        return text.constants_text(self)

    def function_index(self, name: str) -> int:
        """The index of the function called ``name``.

        Raises
        ------
        vm.errors.UnknownFunctionError
            (a ``KeyError`` and a ``ValueError``) naming ``name`` and the known functions.
        """
        try:
            return self._index[name]
        except (KeyError, TypeError):
            raise UnknownFunctionError(name, self.globals) from None

    def get_function(self, name: str) -> VMFunction:
        """The function called ``name`` (raises like :meth:`function_index`)."""
        return self._functions[self.function_index(name)]

    def get_function_params(self, func_name: str) -> list[str]:
        """The parameter names of ``func_name``, in order."""
        return list(self.get_function(func_name).params)

    def get_function_arity(self, func_name: str) -> int:
        """The number of parameters of ``func_name``."""
        return len(self.get_function(func_name).params)

    # ---- saving and loading -------------------------------------------------------------

    @property
    def lib(self) -> KernelLibrary:
        """The library half of TVM's ``code, lib`` pair (see :class:`KernelLibrary`)."""
        return KernelLibrary.of(self)

    def save(self, path: str | os.PathLike[str] | None = None) -> tuple[bytearray, KernelLibrary]:
        """TVM's pair ``code, lib``; the code is also written to ``path`` if given.

        ``code`` is the one self-contained executable file (header, global, constant,
        primitive-name, kernel and code sections) as a bytearray: it is all that
        :meth:`load_exec` needs. ``lib`` is :attr:`lib`, kept for TVM's two-part
        flow: kernels are generated from the descriptions inside ``code``, so the
        library carries nothing ``code`` lacks; passed back to :meth:`load_exec`, it
        is checked to belong to ``code``.

        The same executable always gives the same bytes, in any process. The file is
        written atomically: a reader sees the old file or the new one, never part.

        Raises
        ------
        ValueError, TypeError
            If a piece cannot be written (the message names it); verified
            executables always can.
        OSError
            If ``path`` cannot be written; the old file, if any, is unchanged.

        Examples
        --------
        >>> code, lib = exe.save()                      # doctest: +SKIP
        >>> again = vm.Executable.load_exec(code, lib)  # doctest: +SKIP
        """
        data = encode(self)
        if path is not None:
            atomic_write(path, data)
        return bytearray(data), self.lib

    def model_library_parts(self) -> ModelLibraryParts:
        """What a Model Library Format archive holds for this executable
        (``serialization.export_model_library_format``): its file, no parameters (weights
        are constants), and one storage entry per constant, the only memory fixed before
        running since the VM plans the rest while it runs."""
        return ModelLibraryParts(
            model_name="default",
            runtime="vm",
            executable=bytes(encode(self)),
            params={},
            memory=[
                {"storage_id": index, "size_bytes": int(value.nbytes)}
                for index, value in enumerate(self._constants)
            ],
        )

    @staticmethod
    def load_exec(
        code: bytes | bytearray | memoryview | str | os.PathLike[str],
        lib: KernelLibrary | None = None,
    ) -> Executable:
        """Load and verify an executable saved by :meth:`save`.

        Parameters
        ----------
        code : bytes-like, str or os.PathLike
            The saved code (``save()[0]``), or the path of a saved file.
        lib : KernelLibrary, optional
            The library saved with it (``save()[1]``, or what
            ``tvm.runtime.load_module`` read back); checked against ``code``. Not needed:
            the kernels are built from the descriptions in ``code``.

        Returns
        -------
        Executable
            The verified executable. Nothing from the file is ever run as code.

        Raises
        ------
        vm.MalformedExecutableError
            If the bytes do not decode (the message names the section).
        vm.InvalidExecutableError
            If the program decodes but fails verification (names function and
            instruction), or ``lib`` is the library of another executable.
        TypeError
            If ``code`` is neither bytes-like nor a path (a ``(code, lib)`` pair is named
            as such), or ``lib`` is not a library.
        OSError
            If the path cannot be read.
        """
        if isinstance(code, (bytes, bytearray, memoryview)):
            data = bytes(code)
        elif isinstance(code, (str, os.PathLike)):
            with open(code, "rb") as handle:
                data = handle.read()
        elif isinstance(code, tuple):
            raise TypeError(
                "load_exec takes the code and the library as two arguments: "
                "code, lib = exe.save(); Executable.load_exec(code, lib)"
            )
        else:
            raise TypeError(
                f"load_exec needs the saved bytes or a file path, got {type(code).__name__}"
            )
        if lib is not None and not isinstance(lib, KernelLibrary):
            raise TypeError(
                "lib must be the library saved with the code (exe.save()[1] or "
                f"tvm.runtime.load_module of its file) or None, got {type(lib).__name__}"
            )
        exe = Executable(*decode(data))
        verify(exe)
        if lib is not None:
            lib.check(exe)
        return exe


class KernelLibrary:
    """The library half of TVM's ``code, lib = exe.save()``: which kernels the code calls.

    TVM keeps compiled kernels in a shared library beside the bytecode. relayvm builds
    every kernel from the structured description stored in the code itself, so this
    object only names the kernels (primitive name and a SHA-256 digest of its
    description, in primitive-index order). ``load_exec(code, lib)`` uses it to refuse
    a library saved with another executable, as a mismatched TVM library would fail.

    Parameters
    ----------
    kernels : iterable of (str, str)
        ``(primitive name, description digest)`` pairs, in primitive-index order.

    Examples
    --------
    >>> code, lib = exe.save()                              # doctest: +SKIP
    >>> lib.export_library("lib.rvl")                       # doctest: +SKIP
    >>> lib = vm.graph_executor.load_module("lib.rvl")      # doctest: +SKIP
    """

    __slots__ = ("_kernels",)
    _kernels: tuple[tuple[str, str], ...]

    def __init__(self, kernels: Iterable[tuple[str, str]]) -> None:
        pairs: tuple[Any, ...] = tuple(tuple(k) for k in kernels)
        for i, pair in enumerate(pairs):
            if len(pair) != 2 or not all(isinstance(p, str) for p in pair):
                raise TypeError(f"kernels[{i}] must be a (name, digest) pair of str, got {pair!r}")
        object.__setattr__(self, "_kernels", pairs)  # each checked above to be a pair

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a KernelLibrary is immutable")

    @classmethod
    def of(cls, exe: Executable) -> KernelLibrary:
        """The library of ``exe``."""
        import hashlib
        import json

        return cls(
            (
                p.name,
                hashlib.sha256(
                    json.dumps(p.description, sort_keys=True, allow_nan=True).encode()
                ).hexdigest(),
            )
            for p in exe.primitives
        )

    @property
    def kernels(self) -> tuple[tuple[str, str], ...]:
        """``(primitive name, description digest)`` pairs, in primitive-index order."""
        return self._kernels

    @property
    def primitive_ops(self) -> list[str]:
        """The kernel names, in primitive-index order."""
        return [name for name, _ in self._kernels]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KernelLibrary) and other._kernels == self._kernels

    def __hash__(self) -> int:
        return hash(self._kernels)

    def __repr__(self) -> str:
        return f"<KernelLibrary: {len(self._kernels)} kernels>"

    def check(self, exe: Executable) -> None:
        """Raise unless this is the library of ``exe``.

        Raises
        ------
        vm.InvalidExecutableError
            Naming the first kernel that differs (section ``"kernel"``).
        """
        own = KernelLibrary.of(exe)._kernels
        if own == self._kernels:
            return
        for i, (mine, theirs) in enumerate(zip(own, self._kernels)):
            if mine != theirs:
                detail = (
                    f"kernel {i} of the code is {mine[0]!r}, the library's is {theirs[0]!r}"
                    if mine[0] != theirs[0]
                    else f"kernel {i} ({mine[0]!r}) has another description in the library"
                )
                break
        else:
            detail = f"the code calls {len(own)} kernels, the library holds {len(self._kernels)}"
        raise InvalidExecutableError(
            f"invalid executable: the library was not saved with this code: {detail}", "kernel"
        )

    def save(self) -> bytes:
        """The library as a file's bytes (see :meth:`export_library`)."""
        return write_document(
            KERNEL_LIBRARY_FORMAT, [("kernels", [list(k) for k in self._kernels])]
        )

    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Write the library to ``path`` (atomically), as TVM's ``lib.export_library``.

        ``vm.graph_executor.load_module(path)`` (``tvm.runtime.load_module``) reads it back.
        """
        atomic_write(path, self.save())

    @staticmethod
    def load(data: bytes | bytearray | memoryview) -> KernelLibrary:
        """The library in ``data`` (what :meth:`save` returned).

        Raises
        ------
        vm.MalformedExecutableError
            If the bytes are not a kernel library (naming the section).
        """
        try:
            document = read_document(KERNEL_LIBRARY_FORMAT, bytes(data))
        except FormatError as err:
            raise MalformedExecutableError(
                f"malformed kernel library: {err}", err.section
            ) from None
        kernels = document.sections["kernels"]
        if type(kernels) is not list or not all(
            type(k) is list and len(k) == 2 and all(type(p) is str for p in k) for k in kernels
        ):
            raise MalformedExecutableError(
                "malformed kernel library: kernels section, expected a list of "
                "[name, digest] string pairs",
                "kernels",
            )
        return KernelLibrary(tuple(k) for k in kernels)


# ---- canonical forms ---------------------------------------------------------------------


def _canonical_function(index: int, function: Any) -> VMFunction:
    if not isinstance(function, VMFunction):
        raise TypeError(
            f"functions[{index}] must be a vm.program.VMFunction, got {type(function).__name__}"
        )
    params = tuple(function.params)
    param_types = tuple(canonical_type_spec(t) for t in function.param_types)
    ret_type = canonical_type_spec(function.ret_type)
    instructions = tuple(function.instructions)
    if (
        params == function.params
        and param_types == function.param_types
        and ret_type == function.ret_type
        and instructions == function.instructions
        and type(function.params) is tuple
        and type(function.instructions) is tuple
    ):
        return function
    return VMFunction(
        function.name, params, param_types, ret_type, function.register_file_size, instructions
    )


def _canonical_primitive(index: int, primitive: Any) -> Primitive:
    if not isinstance(primitive, Primitive):
        raise TypeError(
            f"primitives[{index}] must be a vm.program.Primitive, got {type(primitive).__name__}"
        )
    try:
        description = canonical_description(primitive.description)
    except TypeError as err:
        raise TypeError(f"primitive {index} ({primitive.name!r}): {err}") from None
    return Primitive(primitive.name, description)


def _canonical_constant(index: int, value: Any) -> np.ndarray:
    if not isinstance(value, (np.ndarray, np.generic)):
        raise TypeError(f"constant {index} must be a numpy array, got {type(value).__name__}")
    array = np.asarray(value)
    try:
        dtype = allowed_dtype(array.dtype)
    except TypeError as err:
        raise TypeError(f"constant {index}: {err}") from None
    if (
        array.flags.writeable
        or not _memory_is_frozen(array)
        or not array.flags.c_contiguous
        or array.dtype != dtype
    ):
        # Our own copy: nobody else can write to the constant's memory afterwards.
        array = np.array(array, dtype=dtype, order="C", copy=True)
        array.flags.writeable = False
    return array


def _memory_is_frozen(array: np.ndarray) -> bool:
    """Whether no writable array or buffer can reach ``array``'s memory (views included)."""
    base: Any = array
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return base is None or isinstance(base, bytes)
