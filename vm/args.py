"""Argument conversion and checking: user values -> register values, against type specs.

Runtime layer (``vm``); imports numpy and the plain-data modules of ``vm``.

Every function gets a precomputed :class:`Signature` whose converters check each
argument against its parameter's type spec (see :mod:`vm.program`) and return the
value the VM keeps in a register:

- a tensor parameter takes a numpy array of exactly its dtype and shape (``-1``
  dimensions match anything), made C-contiguous if it is not, or a numpy or Python
  scalar (``bool``/``int``/``float``) for a scalar parameter, converted to the
  parameter's dtype when the value is representable there (an ``int`` must fit the
  range of an integer dtype and a ``float`` must be integral to become one; a value
  that would overflow a float dtype to infinity is rejected);
- a tuple parameter takes a tuple or list with the right number of fields;
- ADT, function and type-variable parameters (and tuples holding them) are checked
  deeply by :mod:`vm.value_types`: constructor and field types, closure signatures,
  captured values;
- an ``("any",)`` position (format 1.0/1.1 files) takes any VM value; an untyped
  Python scalar becomes a 0-d array the way ``relay.const`` types one (``bool`` ->
  bool, ``int`` -> int32, or int64 when it does not fit, ``float`` -> float32).

The fast path for a tensor that already matches costs a few attribute reads. Errors
are ``TypeError`` (wrong count, kind or dtype) or ``ValueError`` (wrong shape, a value
out of range), and name the function, the parameter, what was expected and what was
found, e.g. ``main(): argument 0 ('x') has invalid dimensions for the following
indices: index 1 got 5, expected 10 (expected float32[10, 10], got float32[10, 5])``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from vm.ndarray import TENSOR_TYPES as _TENSOR_TYPES
from vm.ndarray import NDArray as _NDArray
from vm.objects import ADT, Closure
from vm.program import ConstructorInfo, TypeSpec, VMFunction

Converter = Callable[[Any], Any]

_ndarray = np.ndarray
#: Dtype kinds a register may hold: bool, signed, unsigned, float.
_VALUE_KINDS = frozenset("biuf")
_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)
_FLOAT32 = np.dtype(np.float32)
_BOOL = np.dtype(np.bool_)
#: The native-order dtypes a register may hold, for a quick membership test.
_GOOD_DTYPES = frozenset(
    np.dtype(name)
    for name in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64",
    )
)  # fmt: skip
#: Containers the quick validity pass visits before leaving the value to the full pass.
_QUICK_VISITS = 1 << 22


# ---- descriptions for messages --------------------------------------------------------------


def describe_shape(dims: Sequence[int]) -> str:
    """``[10, ?]`` for dims ``(10, -1)``."""
    return "[" + ", ".join("?" if d < 0 else str(d) for d in dims) + "]"


def describe_spec(spec: TypeSpec) -> str:
    """A type spec in words: ``float32[10, ?]``, ``(float32[2], int32[])``, ``List``."""
    # Iterative so a deeply nested tuple type cannot exhaust Python's stack.
    out: list[str] = []
    stack: list[Any] = [spec]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        kind = item[0] if isinstance(item, tuple) and item else None
        if kind == "tensor":
            out.append(f"{item[2]}{describe_shape(item[1])}")
        elif kind == "tuple":
            pieces: list[Any] = ["("]
            for i, field in enumerate(item[1]):
                if i:
                    pieces.append(", ")
                pieces.append(field)
            pieces.append(",)" if len(item[1]) == 1 else ")")
            stack.extend(reversed(pieces))
        elif kind == "adt" and len(item) == 3:
            if item[2]:
                stack.extend(reversed([f"{item[1]}[", *_joined(item[2]), "]"]))
            else:
                out.append(item[1])
        elif kind == "adt":
            out.append(f"{item[1]} (an ADT)")
        elif kind == "func" and len(item) == 3:
            stack.extend(reversed(["fn(", *_joined(item[1]), ") -> ", item[2]]))
        elif kind == "func":
            out.append("a function (vm.Closure)")
        elif kind == "var":
            out.append(f"T{item[1]}")
        elif kind == "ivar":
            out.append("?")
        elif kind == "any":
            out.append("any value")
        else:
            out.append(repr(item))
    return "".join(out)


def _joined(specs: Sequence[Any]) -> list[Any]:
    pieces: list[Any] = []
    for i, spec in enumerate(specs):
        if i:
            pieces.append(", ")
        pieces.append(spec)
    return pieces


def describe_value(value: Any) -> str:
    """What the caller passed, in words: ``a numpy array float64[10, 5]``."""
    if isinstance(value, np.ndarray):
        return f"a numpy array {value.dtype}{describe_shape(value.shape)}"
    if isinstance(value, np.generic):
        return f"a numpy {value.dtype} scalar"
    if isinstance(value, bool):
        return f"the Python bool {value}"
    if isinstance(value, (int, float)):
        return f"the Python {type(value).__name__} {value!r}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} values"
    if isinstance(value, list):
        return f"a list of {len(value)} values"
    if isinstance(value, ADT):
        return f"a vm.ADT ({value.constructor or f'tag {value.tag}'})"
    if isinstance(value, Closure):
        return "a vm.Closure"
    if value is None:
        return "None"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


# ---- scalars ------------------------------------------------------------------------------------


def scalar_to_array(value: Any, dtype: np.dtype, where: str) -> np.ndarray:
    """A Python or numpy scalar as a 0-d array of ``dtype``, if the value is representable.

    Raises
    ------
    TypeError
        If ``value`` is not a bool, int or float (Python or numpy).
    ValueError
        If the value does not fit ``dtype`` (out of range, or a fraction for an integer).
    """
    kind = dtype.kind
    if isinstance(value, (bool, np.bool_)):
        number: int | float = int(bool(value))
    elif isinstance(value, (int, np.integer)):
        number = int(value)
    elif isinstance(value, (float, np.floating)):
        number = float(value)
    else:
        raise TypeError(f"{where} expected a {dtype} scalar, got {describe_value(value)}")
    found = describe_value(value)
    if kind == "b":
        if number not in (0, 1):
            raise ValueError(f"{where} expected a bool scalar; {found} is not 0 or 1")
        return np.array(bool(number), dtype=dtype)
    if kind in "iu":
        if isinstance(number, float):
            if not number.is_integer():
                raise ValueError(
                    f"{where} expected a {dtype} scalar; {found} is not an integer, "
                    f"convert it explicitly if truncation is intended"
                )
            number = int(number)
        info = np.iinfo(dtype)
        if not info.min <= number <= info.max:
            raise ValueError(
                f"{where} expected a {dtype} scalar; {found} is out of range for {dtype} "
                f"({info.min} to {info.max})"
            )
        return np.array(number, dtype=dtype)
    if kind == "f":
        limit = float(np.finfo(dtype).max)
        if isinstance(number, int):
            overflows = abs(number) > limit
        else:
            overflows = math.isfinite(number) and abs(number) > limit
        if overflows:
            raise ValueError(
                f"{where} expected a {dtype} scalar; {found} overflows {dtype} "
                f"(largest finite value {limit:g})"
            )
        return np.array(number, dtype=dtype)
    raise TypeError(f"{where}: parameters of dtype {dtype} cannot take Python scalars")


def _untyped_scalar(value: Any, where: str) -> np.ndarray:
    """A Python scalar in an untyped position, typed like ``relay.const`` types it."""
    if isinstance(value, bool):
        return np.array(value, dtype=_BOOL)
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return np.array(value, dtype=_INT32)
        if -(2**63) <= value < 2**63:
            return np.array(value, dtype=_INT64)
        raise ValueError(f"{where}: the Python int {value} does not fit in int64")
    return np.array(value, dtype=_FLOAT32)


# ---- tensors ----------------------------------------------------------------------------------


def _fix_array(array: np.ndarray, where: str) -> np.ndarray:
    """``array`` as a plain, native-order, aligned, C-contiguous ndarray of a value dtype."""
    if type(array) not in _TENSOR_TYPES:
        array = array.view(_ndarray)
    dtype = array.dtype
    if dtype.kind not in _VALUE_KINDS:
        raise TypeError(
            f"{where}: arrays of dtype {dtype} cannot be VM values "
            "(use bool, integer or floating-point dtypes)"
        )
    if not dtype.isnative:
        array = array.astype(dtype.newbyteorder("="))
    flags = array.flags
    if not (flags.c_contiguous and flags.aligned):
        array = array.copy(order="C")
    return array


def convert_tensor(value: Any, spec: TypeSpec, where: str) -> np.ndarray:
    """``value`` as an array of tensor spec ``spec`` (dtype, rank, static dimensions).

    Raises
    ------
    TypeError
        If ``value`` is not an array or scalar, or has another dtype.
    ValueError
        If its rank or a static dimension differs, or a scalar does not fit the dtype.
    """
    _, dims, dtype_name = spec
    dtype = np.dtype(dtype_name)
    kind = type(value)
    if (
        (kind is _ndarray or kind is _NDArray)
        and value.dtype is dtype
        and value.shape == dims
        and value.flags.c_contiguous
    ):
        return value
    return _convert_tensor(value, dtype, tuple(dims), where)


def _convert_tensor(value: Any, dtype: np.dtype, dims: tuple[int, ...], where: str) -> np.ndarray:
    ndim = len(dims)
    expected = f"{dtype}{describe_shape(dims)}"
    if isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, (bool, int, float, np.generic)):
        if ndim != 0:
            raise TypeError(f"{where} expected a tensor {expected}, got {describe_value(value)}")
        return scalar_to_array(value, dtype, where)
    else:
        hint = ""
        if isinstance(value, (list, tuple)):
            hint = "; pass a numpy array (lists and tuples are for tuple parameters)"
        raise TypeError(f"{where} expected a tensor {expected}, got {describe_value(value)}{hint}")
    got = f"{array.dtype}{describe_shape(array.shape)}"
    if array.dtype != dtype:
        same_type = array.dtype.kind == dtype.kind and array.dtype.itemsize == dtype.itemsize
        if not same_type:
            raise TypeError(f"{where} expected a tensor {expected}, got a numpy array {got}")
    if array.ndim != ndim:
        raise ValueError(
            f"{where} expected {ndim} dimension{'s' * (ndim != 1)} ({expected}), "
            f"got {array.ndim} ({got})"
        )
    bad = [
        f"index {i} got {got_dim}, expected {want}"
        for i, (got_dim, want) in enumerate(zip(array.shape, dims))
        if want >= 0 and got_dim != want
    ]
    if bad:
        raise ValueError(
            f"{where} has invalid dimensions for the following indices: {'; '.join(bad)} "
            f"(expected {expected}, got {got})"
        )
    array = _fix_array(array, where)
    if array.dtype != dtype:  # a byte-swapped or otherwise equivalent dtype
        array = array.astype(dtype)
    return array


def _tensor_converter(spec: TypeSpec, where: str) -> Converter:
    _, dims, dtype_name = spec
    dtype = np.dtype(dtype_name)
    dims = tuple(dims)
    is_static = all(d >= 0 for d in dims)

    def slow(value: Any) -> np.ndarray:
        return _convert_tensor(value, dtype, dims, where)

    if not is_static:
        return slow

    def convert(value: Any) -> Any:
        # The common case costs four attribute reads; everything else goes the slow way.
        kind = type(value)
        if (
            (kind is _ndarray or kind is _NDArray)
            and value.dtype is dtype
            and value.shape == dims
            and value.flags.c_contiguous
        ):
            return value
        return slow(value)

    return convert


# ---- values without a precise type: ADT fields, closure captures, ("any",) ------------------


class ValueChecker:
    """Deep conversion of values whose type the signature does not pin down.

    Parameters
    ----------
    constructors : mapping of int to vm.program.ConstructorInfo
        The executable's constructors by tag (for tag and field-count checks).
    num_functions : int
        How many functions the executable has (for closure indices).
    """

    def __init__(self, constructors: Mapping[int, ConstructorInfo], num_functions: int) -> None:
        self.constructors = constructors
        self.num_functions = num_functions
        self._arity = {tag: info.arity for tag, info in constructors.items()}

    def _needs_no_work(self, value: Any) -> bool:
        """Whether ``value`` is already a valid VM value (the common case), quickly.

        One pass over the structure with only type checks: no memo, no rebuilding.
        False sends the value to :meth:`convert`'s full pass, which converts what
        needs converting and reports errors precisely. The pass gives up after
        :data:`_QUICK_VISITS` containers, so a cyclic value or a heavily shared one
        (whose tree is exponentially larger than its graph) also goes the full way.
        """
        arity = self._arity
        check_tags = bool(arity)
        num_functions = self.num_functions
        ndarray, adt, closure, tuple_ = _ndarray, ADT, Closure, tuple
        good_dtypes = _GOOD_DTYPES
        stack = [value]
        pop, push = stack.pop, stack.append
        budget = _QUICK_VISITS
        while stack:
            budget -= 1
            if not budget:
                return False
            item = pop()
            kind = type(item)
            if kind is adt:
                children = item.fields
                if check_tags and arity.get(item.tag) != len(children):
                    return False
            elif kind is tuple_:
                children = item
            elif kind is closure:
                index = item.func_index
                if type(index) is not int or not 0 <= index < num_functions:
                    return False
                children = item.captured
            else:
                return False
            for child in children:
                kind = type(child)
                if kind is adt or kind is tuple_ or kind is closure:
                    push(child)
                elif kind is ndarray or kind is _NDArray:
                    if child.dtype not in good_dtypes or not child.flags.c_contiguous:
                        return False
                else:
                    return False
        return True

    def leaf(self, value: Any, where: str, path: Any = None) -> Any:
        """Convert a non-container value (array or scalar); ``path`` leads to it from ``where``."""
        if type(value) in _TENSOR_TYPES:
            flags = value.flags
            dtype = value.dtype
            if (
                flags.c_contiguous
                and flags.aligned
                and dtype.isnative
                and dtype.kind in _VALUE_KINDS
            ):
                return value
            return _fix_array(value, path_text(where, path))
        if isinstance(value, np.ndarray):
            return _fix_array(value, path_text(where, path))
        if isinstance(value, np.generic):
            return _fix_array(np.asarray(value), path_text(where, path))
        if isinstance(value, (bool, int, float)):
            return _untyped_scalar(value, path_text(where, path))
        raise TypeError(
            f"{path_text(where, path)} is {describe_value(value)}; VM values are numpy arrays, "
            "tuples, vm.ADT and vm.Closure"
        )

    def _check_container(self, value: Any, where: str, path: Any) -> tuple[Any, ...]:
        """The children of a container, after checking its tag, field count or function."""
        if isinstance(value, (tuple, list)):
            return tuple(value)
        if isinstance(value, ADT):
            if self.constructors:
                info = self.constructors.get(value.tag)
                if info is None:
                    known = ", ".join(f"{c.name}={t}" for t, c in sorted(self.constructors.items()))
                    raise TypeError(
                        f"{path_text(where, path)} is a vm.ADT with tag {value.tag}, which is "
                        f"not a constructor of this executable (known tags: {known})"
                    )
                if len(value.fields) != info.arity:
                    raise TypeError(
                        f"{path_text(where, path)} is a {info.name} value with "
                        f"{len(value.fields)} fields; {info.name} takes {info.arity}"
                    )
            return value.fields
        index = value.func_index
        if (
            isinstance(index, bool)
            or not isinstance(index, (int, np.integer))
            or not (0 <= index < self.num_functions)
        ):
            raise TypeError(
                f"{path_text(where, path)} is a vm.Closure of function index {index!r}; "
                f"this executable has functions 0 to {self.num_functions - 1}"
            )
        return value.captured

    def convert(self, value: Any, where: str) -> Any:
        """``value`` with every leaf converted; containers rebuilt only where a leaf changed.

        Iterative (explicit stack), so a 100,000-long list converts without recursion;
        shared sub-values stay shared.
        """
        if not isinstance(value, (tuple, list, ADT, Closure)):
            return self.leaf(value, where)
        if self._needs_no_work(value):
            return value
        done: dict[int, Any] = {}
        active: set[int] = set()
        # Entries: (value, path, expanded). A path is (parent path, field index) or None.
        stack: list[tuple[Any, Any, bool]] = [(value, None, False)]
        while stack:
            item, path, expanded = stack.pop()
            key = id(item)
            if not expanded:
                if key in done:
                    continue
                if key in active:
                    raise TypeError(f"{path_text(where, path)} contains itself (a cyclic value)")
                children = self._check_container(item, where, path)
                active.add(key)
                stack.append((item, path, True))
                for i, child in enumerate(children):
                    if isinstance(child, (tuple, list, ADT, Closure)) and id(child) not in done:
                        stack.append((child, (path, i), False))
                continue
            active.discard(key)
            children = (
                item.fields
                if isinstance(item, ADT)
                else (item.captured if isinstance(item, Closure) else tuple(item))
            )
            converted = []
            changed = type(item) is list
            for i, child in enumerate(children):
                if isinstance(child, (tuple, list, ADT, Closure)):
                    new = done[id(child)]
                else:
                    new = self.leaf(child, where, (path, i))
                changed = changed or new is not child
                converted.append(new)
            if not changed:
                done[key] = item
            elif isinstance(item, ADT):
                done[key] = ADT(item.tag, converted, item.constructor)
            elif isinstance(item, Closure):
                done[key] = Closure(item.func_index, converted, item.name)
            else:
                done[key] = tuple(converted)
        return done[id(value)]


def path_text(where: str, path: Any) -> str:
    """``where`` followed by the path to a sub-value: ``(parent path, field index or label)``."""
    labels: list[Any] = []
    while path is not None:
        path, label = path
        labels.append(label)
    return where + "".join(
        label if isinstance(label, str) else f" field {label}" for label in reversed(labels)
    )


# ---- signatures --------------------------------------------------------------------------------


def make_converter(spec: TypeSpec, where: str) -> Converter:
    """A converter for a parameter of a tensor or tuple-of-tensors ``spec``; ``where`` names it.

    Other specs need the executable's functions and constructors, and a call's type
    variables: :class:`Signature` checks them with its :class:`vm.value_types.TypeContext`.
    """
    kind = spec[0]
    if kind == "tensor":
        return _tensor_converter(spec, where)
    if kind != "tuple":
        raise ValueError(f"make_converter takes tensor and tuple specs, got {describe_spec(spec)}")
    fields = [make_converter(field, f"{where} field {i}") for i, field in enumerate(spec[1])]
    count = len(fields)
    expected = describe_spec(spec)

    def convert_tuple(value: Any) -> tuple[Any, ...]:
        if not isinstance(value, (tuple, list)):
            raise TypeError(f"{where} expected a tuple {expected}, got {describe_value(value)}")
        if len(value) != count:
            raise TypeError(
                f"{where} expected a tuple of {count} fields {expected}, got {len(value)} fields"
            )
        return tuple(convert(field) for convert, field in zip(fields, value))

    return convert_tuple


def spec_is_simple(spec: TypeSpec) -> bool:
    """Whether ``spec`` is a tensor or a (nested) tuple of tensors: checkable on its own."""
    stack = [spec]
    while stack:
        item = stack.pop()
        if item[0] == "tuple":
            stack.extend(item[1])
        elif item[0] != "tensor":
            return False
    return True


class Signature:
    """The precomputed argument checker of one function.

    Tensor and tuple-of-tensor parameters get a converter each (the fast path); the
    others (ADTs, closures, type variables) are checked together by ``context``, so the
    type variables they share are bound consistently.

    Parameters
    ----------
    function : vm.program.VMFunction
        The function.
    context : vm.value_types.TypeContext
        The executable's functions and constructors, for checking the other parameters.
    label : str
        How messages name the function, e.g. ``"main()"``.
    """

    __slots__ = ("_converters", "_typed", "arity", "context", "convert_all", "label", "names")

    def __init__(self, function: VMFunction, context: Any, label: str | None = None) -> None:
        self.label = label or f"{function.name}()"
        self.names = function.params
        self.context = context
        specs = function.param_types
        self.arity = len(self.names)
        wheres = [f"{self.label}: argument {i} ({name!r})" for i, name in enumerate(self.names)]
        self._converters: list[Converter | None] = []
        self._typed: list[tuple[int, TypeSpec, str]] = []
        for i, spec in enumerate(specs):
            if spec_is_simple(spec):
                self._converters.append(make_converter(spec, wheres[i]))
            else:
                self._converters.append(None)
                self._typed.append((i, spec, wheres[i]))
        self.convert_all = self._build()

    def _build(self) -> Callable[[Sequence[Any]], list[Any]]:
        converters = self._converters
        arity = self.arity
        count_error = self.count_error
        if self._typed:
            typed = self._typed
            check = self.context.check
            simple = [(i, c) for i, c in enumerate(converters) if c is not None]

            def convert_typed(args: Sequence[Any]) -> list[Any]:
                if len(args) != arity:
                    raise count_error(len(args))
                out = list(args)
                for i, convert in simple:
                    out[i] = convert(args[i])
                checked = check([(args[i], spec, where) for i, spec, where in typed])
                for (i, _, _), value in zip(typed, checked):
                    out[i] = value
                return out

            return convert_typed
        if arity == 0:

            def convert0(args: Sequence[Any]) -> list[Any]:
                if args:
                    raise count_error(len(args))
                return []

            return convert0
        if arity == 1:
            (first,) = converters

            def convert1(args: Sequence[Any]) -> list[Any]:
                if len(args) != 1:
                    raise count_error(len(args))
                return [first(args[0])]

            return convert1
        if arity == 2:
            first, second = converters

            def convert2(args: Sequence[Any]) -> list[Any]:
                if len(args) != 2:
                    raise count_error(len(args))
                return [first(args[0]), second(args[1])]

            return convert2

        def convert_n(args: Sequence[Any]) -> list[Any]:
            if len(args) != arity:
                raise count_error(len(args))
            return [convert(arg) for convert, arg in zip(converters, args)]

        return convert_n

    def count_error(self, given: int) -> TypeError:
        """The error for ``given`` arguments where ``arity`` are needed."""
        names = ", ".join(self.names)
        plural = "s" * (self.arity != 1)
        return TypeError(
            f"{self.label} takes {self.arity} argument{plural} ({names}) but {given} "
            f"{'was' if given == 1 else 'were'} given"
        )

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
        """Positional and keyword arguments in parameter order (not yet converted).

        Keyword arguments fill the parameters they name; positional ones fill the
        remaining slots in order.

        Raises
        ------
        TypeError
            For an unknown keyword, or too few or too many arguments.
        """
        slots: list[Any] = [_MISSING] * self.arity
        for name, value in kwargs.items():
            try:
                index = self.names.index(name)
            except ValueError:
                raise TypeError(
                    f"{self.label} got an unexpected keyword argument {name!r}; "
                    f"its parameters are {', '.join(self.names) or 'none'}"
                ) from None
            slots[index] = value
        free = [i for i, slot in enumerate(slots) if slot is _MISSING]
        if len(args) != len(free):
            missing = [self.names[i] for i in free]
            raise TypeError(
                f"{self.label} takes {self.arity} argument{'s' * (self.arity != 1)} "
                f"({', '.join(self.names)}); {len(kwargs)} given by keyword, so "
                f"{len(free)} positional ({', '.join(missing) or 'none'}) are needed, "
                f"but {len(args)} were given"
            )
        for index, value in zip(free, args):
            slots[index] = value
        return tuple(slots)


_MISSING = object()
