"""``reshape``'s ``newshape`` rule, written once: TVM's special values read into a plan.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

``newshape`` may hold, besides sizes, ``0`` (copy the input dimension at this position),
``-1`` (infer from the element count), ``-2`` (copy every remaining input dimension),
``-3`` (merge the next two input dimensions) and ``-4`` (split the next input dimension
into the two values that follow, one of which may be ``-1``). :func:`newshape_plan` reads
it once into :class:`Piece` records; the kernel rule takes the output rank from the plan
(:func:`newshape_rank`) and emits its run-time size code from it, while
:func:`newshape_dims` evaluates it on concrete sizes (the run-time shape functions of
:mod:`vm.shape_funcs`) or on sizes partly unknown before run time (``None``; the
compiler's type relation of ``reshape`` and ``dyn.reshape``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from vm.kernels.rules import RuleError


class Piece(NamedTuple):
    """Where output dimensions come from.

    ``kind`` is ``size`` (``value`` itself), ``copy`` (input dimension ``src``), ``infer``
    (the ``-1``), ``merge`` (input dimensions ``src`` and ``src + 1`` multiplied) or
    ``split`` (input dimension ``src`` as the two output dimensions ``parts``, one of
    which may be ``-1``: the input dimension divided by the other).
    """

    kind: str
    value: int = 0
    src: int = 0
    parts: tuple[int, int] = (0, 0)

    @property
    def width(self) -> int:
        """How many output dimensions the piece makes."""
        return 2 if self.kind == "split" else 1


def target(newshape: Sequence[int]) -> str:
    """``newshape (2, -1)``, as messages name it."""
    return f"newshape {tuple(newshape)}"


def newshape_plan(newshape: Sequence[int], ndim: int) -> tuple[Piece, ...]:
    """``newshape`` applied to an input of rank ``ndim``, as pieces in output order.

    Raises
    ------
    RuleError
        If ``newshape`` is malformed or does not fit the rank; the message starts with
        :func:`target`.
    """
    where = target(newshape)
    pieces: list[Piece] = []
    src = 0
    inferred = False
    i = 0
    while i < len(newshape):
        value = newshape[i]
        if value > 0:
            pieces.append(Piece("size", value=value))
            src += 1
        elif value == 0:
            if src >= ndim:
                raise RuleError(
                    f"{where}: 0 at position {i} copies input dimension {src}, but the input "
                    f"has rank {ndim}"
                )
            pieces.append(Piece("copy", src=src))
            src += 1
        elif value == -1:
            if inferred:
                raise RuleError(f"{where} may contain -1 only once")
            inferred = True
            pieces.append(Piece("infer"))
            src += 1
        elif value == -2:
            pieces.extend(Piece("copy", src=j) for j in range(src, ndim))
            src = ndim
        elif value == -3:
            if src + 1 >= ndim:
                raise RuleError(
                    f"{where}: -3 at position {i} merges input dimensions {src} and {src + 1}, "
                    f"but the input has rank {ndim}"
                )
            pieces.append(Piece("merge", src=src))
            src += 2
        elif value == -4:
            if i + 2 >= len(newshape) or src >= ndim:
                raise RuleError(
                    f"{where}: -4 at position {i} must be followed by two dimensions and split "
                    "an existing input dimension"
                )
            d1, d2 = newshape[i + 1], newshape[i + 2]
            if d1 == -1 and d2 == -1:
                raise RuleError(f"{where}: -4 may be followed by at most one -1")
            if (d1 <= 0 and d1 != -1) or (d2 <= 0 and d2 != -1):
                raise RuleError(
                    f"{where}: the two dimensions after -4 must be > 0 or -1, found {d1}, {d2}"
                )
            pieces.append(Piece("split", src=src, parts=(d1, d2)))
            src += 1
            i += 2
        else:
            raise RuleError(
                f"{where} has invalid value {value} at position {i}; expected a size > 0 or "
                "one of 0, -1, -2, -3, -4"
            )
        i += 1
    return tuple(pieces)


def newshape_rank(newshape: Sequence[int], ndim: int) -> int:
    """The output rank of ``reshape``; :class:`RuleError` as :func:`newshape_plan`."""
    return sum(piece.width for piece in newshape_plan(newshape, ndim))


Dim = int | None


def _product(dims: Sequence[Dim]) -> Dim:
    total: int = 1
    for d in dims:
        if d is None:
            return None
        total *= d
    return total


def newshape_dims(dims: Sequence[Dim], newshape: Sequence[int], what: str) -> tuple[Dim, ...]:
    """The output shape of ``reshape`` for input dimensions ``dims`` (``None``: unknown).

    An output dimension is ``None`` when it cannot be known from ``dims``; element counts
    are checked whenever they are known.

    Parameters
    ----------
    dims : sequence of int or None
        The input shape.
    newshape : sequence of int
        The ``newshape`` attribute.
    what : str
        The input as messages name it (its shape or its type).

    Raises
    ------
    RuleError
        If ``newshape`` is malformed (see :func:`newshape_plan`) or the element counts do
        not match; the latter message reads ``cannot reshape <what> to newshape ...: ...``.
    """
    plan = newshape_plan(newshape, len(dims))
    where = f"cannot reshape {what} to {target(newshape)}"
    out: list[Dim] = []
    # Dimensions copied through (0, -2, -3, -4) pair up one-to-one, so the -1 is inferred
    # from the others alone: (?, 3, 4) with (0, -1) gives (?, 12), as TVM does.
    used_in: set[int] = set()
    used_out: set[int] = set()
    infer_at = -1
    for piece in plan:
        if piece.kind == "size":
            out.append(piece.value)
            continue
        if piece.kind == "infer":
            infer_at = len(out)
            out.append(None)
            continue
        used_out.update(range(len(out), len(out) + piece.width))
        if piece.kind == "copy":
            used_in.add(piece.src)
            out.append(dims[piece.src])
        elif piece.kind == "merge":
            used_in.update((piece.src, piece.src + 1))
            out.append(_product(dims[piece.src : piece.src + 2]))
        else:
            used_in.add(piece.src)
            out.extend(_split(dims[piece.src], *piece.parts, where))
    total = _product(dims)
    if infer_at >= 0:
        rest_in = _product([d for j, d in enumerate(dims) if j not in used_in])
        # rest_out > 0: the dimensions left are explicit sizes, all positive.
        rest_out = _product([d for j, d in enumerate(out) if j != infer_at and j not in used_out])
        if rest_in is not None and rest_out is not None:
            if rest_in % rest_out:
                others = _product([d for j, d in enumerate(out) if j != infer_at])
                raise RuleError(f"{where}: {total} elements do not divide into parts of {others}")
            out[infer_at] = rest_in // rest_out
    known = _product(out)
    if total is not None and known is not None and total != known:
        raise RuleError(f"{where}: {total} elements vs {known}")
    return tuple(out)


def _split(dim: Dim, d1: int, d2: int, where: str) -> list[Dim]:
    """Input dimension ``dim`` split into ``d1`` x ``d2`` (one of them may be ``-1``)."""
    if dim is None:
        return [None if d1 == -1 else d1, None if d2 == -1 else d2]
    if d1 == -1 or d2 == -1:
        known = d2 if d1 == -1 else d1
        if dim % known:
            raise RuleError(f"{where}: -4 cannot split dimension {dim} into parts of {known}")
        other = dim // known
        return [other, d2] if d1 == -1 else [d1, other]
    if d1 * d2 != dim:
        raise RuleError(f"{where}: -4 splits dimension {dim} into {d1} x {d2} = {d1 * d2}")
    return [d1, d2]
