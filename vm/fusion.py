"""Superinstructions: common sequences of decoded tuples become one tuple (fast mode).

Runtime layer (``vm``); imports numpy and :mod:`vm.decoded`.

- ``alloc_tensor`` then the kernel call that fills it become one *step* of a
  :attr:`~vm.decoded.Kind.KERNEL_RUN`, and back-to-back pairs become one run of several
  steps (an inner loop of the interpreter);
- ``get_tag; load_consti; if`` comparing the two, which is how a constructor pattern
  is tested, becomes one :attr:`~vm.decoded.Kind.MATCH_TAG` (it still writes both
  registers).

A fused tuple replaces only the first instruction of its sequence and advances ``pc``
past the rest, whose own tuples stay in place for jumps into the middle. A kernel run
advances ``pc`` by two per step, so when a step fails, the tuple at ``pc`` is the run
that starts with the failing step (see :func:`vm.explain.failing_pc`).
"""

from __future__ import annotations

import numpy as np

from vm.decoded import Kind

_INT64 = np.dtype(np.int64)


def fuse(decoded: list[tuple]) -> None:
    """Replace common sequences of ``decoded`` (one function's tuples) by superinstructions."""
    for pc in range(len(decoded) - 1):
        first, second = decoded[pc], decoded[pc + 1]
        if first[0] == Kind.ALLOC:
            step = _kernel_step(first, second)
            if step is not None:
                decoded[pc] = (Kind.KERNEL_RUN, (step,))
        elif first[0] == Kind.GET_TAG and second[0] == Kind.SET and pc + 2 < len(decoded):
            match = _match_tag(first, second, decoded[pc + 2])
            if match is not None:
                decoded[pc] = match
    _chain_kernel_runs(decoded)


def _kernel_step(alloc: tuple, call: tuple) -> tuple | None:
    """The run step doing ``alloc`` then ``call``, if ``call`` is the kernel that fills it.

    The step is ``(storage, shape, dtype, offset, dst, entry, a, b)``: ``b`` is None
    for a kernel of one input ``a``, ``a`` is None when ``b`` gathers every argument.
    """
    _, storage, shape, dtype, offset, dst = alloc
    kind = call[0]
    if kind == Kind.PACKED3 and call[4] == dst:
        return (storage, shape, dtype, offset, dst, call[1], call[2], call[3])
    if kind == Kind.PACKED2 and call[3] == dst:
        return (storage, shape, dtype, offset, dst, call[1], call[2], None)
    if kind == Kind.PACKEDN and dst in call[3]:
        return (storage, shape, dtype, offset, dst, call[1], None, call[2])
    return None


def _match_tag(get_tag: tuple, load: tuple, test: tuple) -> tuple | None:
    """One ``MATCH_TAG`` for ``get_tag; load_consti; if`` comparing the two, else None."""
    _, obj, tag_dst = get_tag
    _, const, const_dst = load
    if test[0] not in (Kind.IF, Kind.IF_CONST) or tag_dst == const_dst:
        return None
    if type(const) is not np.ndarray or const.dtype != _INT64:
        return None  # a load_const, not a load_consti
    target = test[2] if test[0] == Kind.IF else test[5]
    if {test[1], target} != {tag_dst, const_dst}:
        return None
    # The if's offsets are relative to itself, two instructions further on.
    return (Kind.MATCH_TAG, obj, tag_dst, const_dst, const, int(const), 2 + test[3], 2 + test[4])


def _chain_kernel_runs(decoded: list[tuple]) -> None:
    """Join back-to-back kernel runs (at pcs ``pc, pc + 2, ...``) into one run at ``pc``.

    The runs after the first stay in place for jumps into the middle and for naming a
    failing step.
    """
    pc = 0
    while pc < len(decoded):
        steps = []
        at = pc
        while at < len(decoded) and decoded[at][0] == Kind.KERNEL_RUN:
            steps += decoded[at][1]
            at += 2
        if len(steps) >= 2:
            decoded[pc] = (Kind.KERNEL_RUN, tuple(steps))
            pc = at
        else:
            pc += 1
