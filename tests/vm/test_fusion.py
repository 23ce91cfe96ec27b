"""Superinstructions: alloc + kernel pairs become steps of one shape, and runs of them chain."""

from __future__ import annotations

import numpy as np

from vm.decoded import Kind
from vm.fusion import fuse


def _entry(*args):
    return None


def _gather(regs):
    return ()


ALLOC = (Kind.ALLOC, 1, (2,), np.dtype(np.float32), 0, 5)


def test_every_alloc_and_kernel_variant_becomes_a_run_step_of_the_same_shape():
    pairs = {
        "one input": (Kind.PACKED2, _entry, 0, 5),
        "two inputs": (Kind.PACKED3, _entry, 0, 3, 5),
        "gathered": (Kind.PACKEDN, _entry, _gather, (0, 3, 4, 5)),
    }
    steps = {}
    for name, call in pairs.items():
        decoded = [ALLOC, call]
        fuse(decoded)
        assert decoded[0][0] == Kind.KERNEL_RUN and decoded[1] is call, name
        (steps[name],) = decoded[0][1]
    head = (1, (2,), np.dtype(np.float32), 0, 5, _entry)
    assert steps["one input"] == (*head, 0, None)
    assert steps["two inputs"] == (*head, 0, 3)
    assert steps["gathered"] == (*head, None, _gather)


def test_a_kernel_writing_another_register_is_not_fused():
    decoded = [ALLOC, (Kind.PACKED2, _entry, 0, 4)]
    fuse(decoded)
    assert decoded[0] is ALLOC


def test_back_to_back_pairs_join_into_one_run_and_keep_their_own_tuples():
    second = (Kind.ALLOC, 1, (2,), np.dtype(np.float32), 8, 6)
    decoded = [ALLOC, (Kind.PACKED2, _entry, 0, 5), second, (Kind.PACKED2, _entry, 5, 6)]
    fuse(decoded)
    assert decoded[0][0] == Kind.KERNEL_RUN and len(decoded[0][1]) == 2
    # A jump to pc 2 (or an error in the second step) finds a run starting there.
    assert decoded[2] == (Kind.KERNEL_RUN, (decoded[0][1][1],))


def test_a_tag_test_becomes_one_match_and_skips_to_the_if_s_targets():
    tag = np.array(3, dtype=np.int64)
    decoded = [
        (Kind.GET_TAG, 0, 1),
        (Kind.SET, tag, 2),
        (Kind.IF, 1, 2, 1, 4),
    ]
    fuse(decoded)
    assert decoded[0] == (Kind.MATCH_TAG, 0, 1, 2, tag, 3, 3, 6)


def test_a_load_const_of_a_float_is_not_taken_for_a_tag():
    decoded = [
        (Kind.GET_TAG, 0, 1),
        (Kind.SET, np.array(3.0), 2),
        (Kind.IF, 1, 2, 1, 4),
    ]
    fuse(decoded)
    assert decoded[0][0] == Kind.GET_TAG
