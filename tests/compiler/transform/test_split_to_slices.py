"""SplitToSlices: projections of a split become slices that fuse into their consumers."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from tests.compiler.transform.util import assert_results_match, assert_same, calls, parse

split_to_slices = relay.transform.SplitToSlices()
RNG = np.random.default_rng(11)


# ---- returns: rewritten ------------------------------------------------------------------------


def test_projections_of_an_equal_split_become_slices() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(2, 12), float32]) {
          %0 = split(%x, indices_or_sections=3, axis=1);
          add(sigmoid(%0.0), tanh(%0.2))
        }
        """
    )
    after = split_to_slices(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2, 12), float32]) {
          %0 = split(%x, indices_or_sections=3, axis=1);
          add(sigmoid(strided_slice(%x, begin=[0], end=[4], strides=[1], axes=[1])),
              tanh(strided_slice(%x, begin=[8], end=[12], strides=[1], axes=[1])))
        }
        """,
    )
    assert_results_match(before, after, [RNG.standard_normal((2, 12)).astype("float32")])
    # The split is left unused, for DeadCodeElimination.
    cleaned = relay.transform.DeadCodeElimination()(after)
    assert not calls(cleaned["main"], "split")


def test_projections_of_a_split_at_indices_and_a_negative_axis() -> None:
    x = relay.var("x", shape=(3, 10), dtype="float32")
    parts = relay.split(x, (2, 7), axis=-1)
    body = relay.Tuple([relay.TupleGetItem(parts, i) * relay.const(2.0) for i in range(3)])
    before = relay.IRModule.from_expr(relay.Function([x], body))
    after = split_to_slices(before)
    slices = calls(after["main"], "strided_slice")
    assert sorted((s.attrs["begin"][0], s.attrs["end"][0]) for s in slices) == [
        (0, 2),
        (2, 7),
        (7, 10),
    ]
    assert {tuple(s.attrs["axes"]) for s in slices} == {(1,)}
    assert not calls(after["main"], "split")
    assert_results_match(before, after, [RNG.standard_normal((3, 10)).astype("float32")])


def test_the_vm_reads_the_pieces_inside_the_consumer_kernels() -> None:
    mod = parse(
        """
        def @main(%g: Tensor[(1, 8), float32], %c: Tensor[(1, 2), float32]) {
          %0 = split(%g, indices_or_sections=4, axis=1);
          %1 = add(multiply(sigmoid(%0.1), %c), multiply(sigmoid(%0.0), tanh(%0.2)));
          (multiply(sigmoid(%0.3), tanh(%1)), %1)
        }
        """
    )
    exe = relay.vm.compile(mod)
    assert not any(p.name.endswith("_split") for p in exe.primitives)
    args = [RNG.standard_normal(s).astype("float32") for s in ((1, 8), (1, 2))]
    want = relay.create_executor("debug", mod).evaluate()(*args)
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", *args)
    for w, g in zip(want, got):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


# ---- returns: left alone -----------------------------------------------------------------------


def test_a_split_used_as_a_whole_tuple_keeps_running() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(4, 6), float32]) {
          %0 = split(%x, indices_or_sections=2);
          (%0, exp(%0.1))
        }
        """
    )
    after = split_to_slices(before)
    assert len(calls(after["main"], "split")) == 1
    assert len(calls(after["main"], "strided_slice")) == 1
    assert_results_match(before, after, [RNG.standard_normal((4, 6)).astype("float32")])


def test_a_split_of_an_unknown_size_stays() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(?, 6), float32]) {
          %0 = split(%x, indices_or_sections=2, axis=0);
          exp(%0.0)
        }
        """
    )
    after = split_to_slices(before)
    assert not calls(after["main"], "strided_slice")
    assert_results_match(before, after, [RNG.standard_normal((4, 6)).astype("float32")])


@pytest.mark.parametrize("opt_level", [0, 1])
def test_the_pass_runs_from_opt_level_1(opt_level: int) -> None:
    mod = parse(
        """
        def @main(%x: Tensor[(2, 4), float32]) {
          %0 = split(%x, indices_or_sections=2, axis=1);
          exp(%0.0)
        }
        """
    )
    with relay.transform.PassContext(opt_level=opt_level):
        exe = relay.vm.compile(mod)
    names = [p.name for p in exe.primitives]
    assert any("split" in n for n in names) == (opt_level == 0)
