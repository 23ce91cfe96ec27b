"""``gather``, ``gather_nd``, ``scatter_elements`` and ``scatter_nd``: output types from
known and ``?`` sizes, the references on cases worked by hand (returns), compiled
functions with sizes known only at run time against the references, and arguments of the
wrong rank, dtype or size named in the error (invalid, traps)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.op.registry import OpTypeError
from tests.compiler.op._helpers import T, ref, rel

# --- returns -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "attrs", "expected"),
    [
        ("gather", (T((4, 5)), T((2, 5), "int64")), {"axis": 0}, T((2, 5))),
        ("gather", (T((None, 5)), T((3, None), "int32")), {"axis": -1}, T((3, None))),
        ("gather_nd", (T((3, 4, 5)), T((2, 6), "int64")), {}, T((6, 5))),
        ("gather_nd", (T((2, 4, 5)), T((1, 2, 7), "int64")), {"batch_dims": 1}, T((2, 7, 5))),
        ("gather_nd", (T((3, 4)), T((None, 6), "int64")), {"index_rank": 2}, T((6,))),
        ("scatter_elements", (T((None, 3)), T((5, 3), "int64"), T((5, None))), {}, T((None, 3))),
        ("scatter_nd", (T((4, 3)), T((1, None), "int64"), T((None, 3))), {}, T((4, 3))),
    ],
)
def test_types(name, args, attrs, expected):
    assert rel(name, *args, **attrs) == expected


def test_gather_reads_along_the_axis_counting_negatives_from_the_end():
    data = np.arange(12).reshape(3, 4)
    out = ref("gather", data, np.array([[0, -1], [2, 1]]), axis=1)
    assert out.tolist() == [[0, 3], [6, 5]]


def test_gather_nd_takes_index_tuples_from_the_first_axis():
    data = np.arange(24).reshape(2, 3, 4)
    out = ref("gather_nd", data, np.array([[1, 0], [2, -3]]))  # tuples (1, 2) and (0, -3)
    assert out.tolist() == [data[1, 2].tolist(), data[0, 0].tolist()]
    per_batch = ref("gather_nd", data, np.array([[[2], [0]]]), batch_dims=1)
    assert per_batch.tolist() == [[data[0, 2].tolist()], [data[1, 0].tolist()]]


def test_scatter_elements_applies_repeats_in_order():
    data = np.array([10.0, 20.0, 30.0], "float32")
    idx, upd = np.array([0, 2, 0]), np.array([1.0, 2.0, 3.0], "float32")
    assert ref("scatter_elements", data, idx, upd).tolist() == [3, 20, 2]
    assert ref("scatter_elements", data, idx, upd, reduction="add").tolist() == [14, 20, 32]
    # mean of the old value and every update: (10 + 1 + 3) / 3, (30 + 2) / 2
    assert ref("scatter_elements", data, idx, upd, reduction="mean").tolist() == [
        pytest.approx(14 / 3),
        20,
        16,
    ]


def test_scatter_nd_writes_whole_rows():
    data = np.zeros((3, 2), "int32")
    out = ref("scatter_nd", data, np.array([[2, 0]]), np.array([[1, 2], [3, 4]], "int32"))
    assert out.tolist() == [[3, 4], [0, 0], [1, 2]]


def test_compiled_gathers_and_scatters_take_sizes_known_only_at_run_time():
    x = relay.var("x", shape=(relay.Any(), 3))
    i = relay.var("i", shape=(relay.Any(), 3), dtype="int64")
    u = relay.var("u", shape=(relay.Any(), 3))
    pairs = relay.var("p", shape=(2, relay.Any()), dtype="int64")
    func = relay.Function(
        [x, i, u, pairs],
        relay.Tuple([
            relay.gather(x, 0, i),
            relay.scatter_add(x, i, u),
            relay.gather_nd(x, pairs),
            relay.scatter_nd(x, pairs, relay.gather_nd(x, pairs), mode="mul"),
        ]),
    )  # fmt: skip
    mod = relay.IRModule.from_expr(func)
    run = relay.create_executor("vm", mod=mod).evaluate()
    rng = np.random.default_rng(3)
    for rows, count in [(4, 2), (7, 5)]:
        xv = rng.standard_normal((rows, 3)).astype("float32")
        iv = rng.integers(-rows, rows, (count, 3))
        uv = rng.standard_normal((count, 3)).astype("float32")
        pv = np.stack([rng.integers(0, rows, 6), rng.integers(0, 3, 6)])
        got = [r.numpy() for r in run(xv, iv, uv, pv)]
        want = [
            ref("gather", xv, iv, axis=0),
            ref("scatter_elements", xv, iv, uv, reduction="add"),
            ref("gather_nd", xv, pv),
            ref("scatter_nd", xv, pv, ref("gather_nd", xv, pv), mode="mul"),
        ]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


# --- traps ---------------------------------------------------------------------------------------


def test_an_index_out_of_range_at_run_time_names_it_and_the_machine_goes_on():
    x = relay.var("x", shape=(relay.Any(), 2))
    i = relay.var("i", shape=(1, 2), dtype="int32")
    mod = relay.IRModule.from_expr(relay.Function([x, i], relay.gather(x, 0, i)))
    run = relay.create_executor("vm", mod=mod).evaluate()
    xv = np.arange(6, dtype="float32").reshape(3, 2)
    with pytest.raises(Exception, match="index 3 is out of range for an axis of size 3"):
        run(xv, np.array([[0, 3]], "int32"))
    assert run(xv, np.array([[2, -3]], "int32")).numpy().tolist() == [[4, 1]]


# --- invalid -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args", "attrs", "message"),
    [
        ("gather", (T((4, 5)), T((2,), "int64")), {}, "must have the rank of data"),
        ("gather", (T((4, 5)), T((2, 6), "int64")), {}, "longer than data .* on axis 1"),
        ("gather", (T((4, 5)), T((2, 5))), {}, "indices"),
        ("gather_nd", (T((3, 4)), T((3, 6), "int64")), {}, "between 1 and the 2 axes"),
        ("gather_nd", (T((3, 4)), T((None, 6), "int64")), {}, "give index_rank"),
        ("scatter_elements", (T((4, 3)), T((2, 3), "int64"), T((2, 3), "int32")), {},
         "dtype of data"),
        ("scatter_elements", (T((4, 3)), T((2, 3), "int64"), T((2, 2))), {}, "axis 1"),
        ("scatter_elements", (T((4, 3), "int32"), T((2, 3), "int64"), T((2, 3), "int32")),
         {"reduction": "mean"}, "float"),
        ("scatter_nd", (T((4, 3)), T((1, 2), "int64"), T((2, 4))), {}, "axis 1 of updates"),
    ],
)  # fmt: skip
def test_invalid_arguments_are_named(name, args, attrs, message):
    with pytest.raises(OpTypeError, match=message):
        rel(name, *args, **attrs)


def test_unknown_reduction_is_refused_listing_the_choices():
    x = relay.var("x", shape=(2,))
    with pytest.raises(Exception, match="'update', 'add', 'mul', 'mean', 'min', 'max'"):
        relay.scatter_elements(x, relay.const(np.array([0])), relay.const(np.ones(1, "f4")),
                               reduction="sum")  # fmt: skip
