"""Multi-node descriptions (fused primitives) compute what the nodes compute one by one.

Returns group: elementwise chains that broadcast mid-chain, values used twice, elementwise
values feeding array operators (and the reverse), views in the middle of a chain, slices,
transposes and reshapes read in place as strided views (an attention head split, negative
steps, broadcasting, merges that need a copy, empty views; copies where an array operator
or float16 reads them), several
results (an intermediate, a repeated value, an input), float16 chains rounded per node as
numpy does, and a deep chain (the code generator walks it without recursion). Chains
with several scalar library calls run block by block: across block edges, with an input
read again in a later block loop, with values of other dtypes crossing between the loops,
and with an operand broadcast at run time (which takes the element-by-element loop).
"""

from __future__ import annotations

import numpy as np

from tests.vm.kernels.harness import SUMS, Program, check
from vm.kernels import codegen, load_kernel
from vm.kernels.description import parse_description

RNG = np.random.default_rng(11)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def test_dense_bias_relu_is_one_kernel() -> None:
    for m, k, n in [(4, 8, 3), (64, 128, 64)]:
        program = Program([f32(m, k), f32(n, k), f32(n)])
        (dense,) = program.add("nn.dense", [0, 1])
        (biased,) = program.add("nn.bias_add", [dense, 2])
        # A k-long dot product: BLAS and numpy may add its terms in different orders.
        check(program, program.add("nn.relu", [biased]), tolerances=SUMS)


def test_chain_broadcasts_in_the_middle() -> None:
    for rows in (3, 1):
        program = Program([f32(4), f32(rows, 4), f32(rows, 1)])
        (e,) = program.add("exp", [0])  # rank 1, broadcast against rank 2 below
        (s,) = program.add("add", [e, 1])
        (t,) = program.add("multiply", [s, 2])
        check(program, program.add("tanh", [t]))


def test_a_value_used_twice_is_read_consistently() -> None:
    program = Program([f32(5, 6)])
    (sq,) = program.add("multiply", [0, 0])
    (total,) = program.add("add", [sq, 0])
    (neg,) = program.add("negative", [total])
    check(program, program.add("maximum", [neg, sq]))


def test_elementwise_values_feed_array_operators_and_back() -> None:
    # A hand-written softmax: max, subtract, exp, sum, divide.
    program = Program([f32(3, 7)])
    (top,) = program.add("max", [0], axis=(1,), keepdims=True)
    (shifted,) = program.add("subtract", [0, top])
    (e,) = program.add("exp", [shifted])
    (total,) = program.add("sum", [e], axis=(1,), keepdims=True)
    check(program, program.add("divide", [e, total]))


def test_a_reshape_in_the_middle_is_a_view() -> None:
    program = Program([f32(2, 6), f32(2, 6), f32(3, 4)])
    (s,) = program.add("add", [0, 1])
    (r,) = program.add("reshape", [s], newshape=(3, 4))
    (m,) = program.add("multiply", [r, 2])
    (t,) = program.add("transpose", [m])
    check(program, program.add("sigmoid", [t]))


def test_an_elementwise_value_reshaped_into_an_output_is_computed_in_place() -> None:
    program = Program([f32(2, 3, 4), np.float32(0.5)])
    (g,) = program.add("multiply", [0, 1])
    (t,) = program.add("tanh", [g])
    (r,) = program.add("reshape", [t], newshape=(6, 4))
    source = _source_of(program, [r])
    assert "rv_" in source and "np.empty" not in source
    check(program, [r])


def test_a_reshaped_value_that_is_also_read_elsewhere_is_computed_once() -> None:
    # The reshaped value feeds a second result too, and a float16 chain rounds on the way in.
    for dtype in ("float32", "float16"):
        program = Program([f32(3, 8).astype(dtype), f32(3, 8).astype(dtype)])
        (s,) = program.add("add", [0, 1])
        (e,) = program.add("exp", [s])
        (r,) = program.add("reshape", [e], newshape=(4, 6))
        (q,) = program.add("squeeze", [e])
        (m,) = program.add("multiply", [e, 0])
        check(program, [r, m, q])


def _head_split(program: Program, part: int, heads: int, perm: tuple[int, ...]) -> int:
    """Slice ``part`` of a joint (1, seq, 3 * heads * dim) projection, split it into heads
    and move them in front: an attention layer's query, key or value."""
    _, seq, width = program.inputs[0].shape
    size = width // 3
    (q,) = program.add("strided_slice", [0], begin=[part * size], end=[(part + 1) * size],
                       strides=[1], axes=[2])  # fmt: skip
    (r,) = program.add("reshape", [q], newshape=(1, seq, heads, -1))
    (t,) = program.add("transpose", [r], axes=perm)
    return t


def test_a_head_split_reads_the_projection_in_place() -> None:
    # Query (scaled, heads by positions), key (scaled, transposed: its last axis moves)
    # and value: slices, reshapes and transposes that keep the last axis are views.
    for seq in (5, 1):
        sources = {}
        for part, perm, scaled, shape in [
            (0, (0, 2, 1, 3), True, (2, seq, 4)),
            (1, (0, 2, 3, 1), True, (2, 4, seq)),
            (2, (0, 2, 1, 3), False, (2, seq, 4)),
        ]:
            program = Program([f32(1, seq, 3 * 2 * 4), np.float32(0.5)])
            (head,) = [_head_split(program, part, 2, perm)]
            if scaled:
                (head,) = program.add("multiply", [head, 1])
            (head,) = program.add("reshape", [head], newshape=shape)
            check(program, [head])
            sources[part] = _source_of(program, [head])
        for part in (0, 2):  # no temporary: one loop into the output
            assert "np.empty" not in sources[part] and "as_strided" in sources[part]
            assert "h.restride" in sources[part]
        assert "as_strided" in sources[1]


def test_strided_views_take_steps_back_and_broadcast() -> None:
    program = Program([f32(4, 6, 5), f32(1, 3, 5), f32(6, 4, 5)])
    # Every other row, backwards: negative steps and an offset start.
    (a,) = program.add("strided_slice", [0], begin=[3, 5], end=[0, 0], strides=[-2, -2],
                       axes=[0, 1])  # fmt: skip
    (b,) = program.add("add", [a, 1])  # (2, 3, 5) with (1, 3, 5): the view broadcasts
    # A transposed view whose merge needs a copy, then one that merges in place.
    (t,) = program.add("transpose", [2], axes=(1, 0, 2))
    (merged,) = program.add("reshape", [t], newshape=(24, 5))
    (c,) = program.add("negative", [merged])
    (one,) = program.add("strided_slice", [0], begin=[1], end=[2], strides=[1], axes=[0])
    (flat,) = program.add("reshape", [one], newshape=(30,))
    (d,) = program.add("exp", [flat])
    check(program, [b, c, d])
    assert _source_of(program, [b, c, d]).count("sv_") >= 8


def _gate_update(program: Program, width: int) -> int:
    """An LSTM cell update, ``sigmoid(f) * c + sigmoid(i) * tanh(g)``, with the gates
    ``i, f, g`` sliced from input 0 and the cell state ``c`` input 1."""
    gates = []
    for k in range(3):
        (gate,) = program.add("strided_slice", [0], begin=[k * width], end=[(k + 1) * width],
                              strides=[1], axes=[1])  # fmt: skip
        gates.append(gate)
    (i,) = program.add("sigmoid", [gates[0]])
    (f,) = program.add("sigmoid", [gates[1]])
    (g,) = program.add("tanh", [gates[2]])
    (keep,) = program.add("multiply", [f, 1])
    (new,) = program.add("multiply", [i, g])
    return program.add("add", [keep, new])[0]


def test_views_with_a_unit_last_stride_are_read_by_rows() -> None:
    # Batches of 1 and 3 rows, the cell state per row or broadcast from one, widths that
    # end in a partial vector: each row of each gate is read where it lies.
    for batch, state_rows, width in [(1, 1, 128), (3, 3, 37), (3, 1, 16), (2, 2, 1)]:
        program = Program([f32(batch, 4 * width), f32(state_rows, width)])
        result = _gate_update(program, width)
        check(program, [result])
        assert _source_of(program, [result]).count("h.unit_row(") == 3


def test_rows_follow_every_leading_axis_of_a_view() -> None:
    # A rank-4 head split read by rows (offsets from three leading axes), a rank-2 view
    # read along the leading axis of a rank-3 loop, and one of a single row broadcast
    # along its own first axis (the rows repeat).
    program = Program([f32(2, 5, 3 * 2 * 8), np.float32(0.5)])
    (head,) = [_head_split(program, 1, 2, (0, 2, 1, 3))]
    (scaled,) = program.add("multiply", [head, 1])
    check(program, [scaled])
    assert "h.unit_row(" in _source_of(program, [scaled])
    for shapes in [((4, 12), (3, 4, 6)), ((1, 12), (3, 6))]:
        program = Program([f32(*shape) for shape in shapes])
        (part,) = program.add("strided_slice", [0], begin=[3], end=[9], strides=[1], axes=[1])
        (total,) = program.add("add", [part, 1])
        check(program, [total])
        assert "h.unit_row(" in _source_of(program, [total])


def test_views_without_a_unit_last_stride_are_read_element_by_element() -> None:
    # Steps of 2 and -1 along the last axis and a last axis of one broadcast against 6:
    # the rows' condition fails at run time and the element loop computes the same.
    for begin, end, step in [(0, 12, 2), (11, 5, -1), (4, 5, 1)]:
        program = Program([f32(3, 12), f32(3, 6)])
        (part,) = program.add("strided_slice", [0], begin=[begin], end=[end], strides=[step],
                              axes=[1])  # fmt: skip
        (total,) = program.add("add", [part, 1])
        check(program, [total])


def test_an_empty_strided_view_gives_an_empty_result() -> None:
    program = Program([f32(3, 4)])
    (a,) = program.add("strided_slice", [0], begin=[2], end=[2], strides=[1], axes=[1])
    (r,) = program.add("reshape", [a], newshape=(-1,))
    check(program, program.add("abs", [r]))


def test_a_slice_read_by_an_array_operator_is_copied() -> None:
    # A reduction reads its input as numba holds it contiguous: no view then, and float16
    # slices (converted through flat copies) stay copies too.
    for dtype in ("float32", "float16"):
        program = Program([f32(4, 6).astype(dtype)])
        (a,) = program.add("strided_slice", [0], begin=[1], end=[5], strides=[2], axes=[1])
        (s,) = program.add("sum", [a], axis=(1,))
        (e,) = program.add("exp", [a])
        check(program, [s, e])
        assert "sv_" not in _source_of(program, [s, e])


def test_split_pieces_feed_elementwise_operators() -> None:
    program = Program([f32(4, 6)])
    a, b = program.add("split", [0], indices_or_sections=2, axis=1)
    (p,) = program.add("multiply", [a, b])
    check(program, [p, b, a], ["product", "second piece", "first piece"])


def test_several_results_intermediates_repeats_and_inputs() -> None:
    program = Program([f32(3, 4), f32(3, 4)])
    (s,) = program.add("add", [0, 1])
    (e,) = program.add("exp", [s])
    (c,) = program.add("cast", [e], dtype="float16")
    check(program, [e, s, e, 1, c], ["exp", "sum", "exp again", "input 1", "cast"])


def test_float16_chains_round_after_every_node() -> None:
    x = RNG.uniform(-3, 3, (4, 5)).astype("float16")
    y = RNG.uniform(0.5, 2, (5,)).astype("float16")
    program = Program([x, y])
    (a,) = program.add("divide", [0, 1])
    (b,) = program.add("exp", [a])
    (c,) = program.add("multiply", [b, 0])
    (d,) = program.add("sum", [c], axis=(1,))
    (e,) = program.add("subtract", [c, 1])
    check(program, [d, e])


def test_a_long_chain_is_one_loop() -> None:
    program = Program([RNG.uniform(0, 1, (2, 3)).astype("float64")])
    value = 0
    for k in range(30):
        (value,) = program.add("add" if k % 2 else "multiply", [value, 0])
        (value,) = program.add("sin", [value])
    check(program, [value])


def _calls_chain(program: Program, first: int, scale: int, calls: int) -> int:
    """sin, multiply by input ``scale``, cos, ... with ``calls`` library calls after ``first``."""
    value = first
    for k in range(calls):
        (value,) = program.add("cos" if k % 2 else "sin", [value])
        (value,) = program.add("multiply", [value, scale])
    return value


def _source_of(program: Program, results: list[int]) -> str:
    return codegen.generate(parse_description(program.description(results)), "blocked")


def test_a_chain_of_library_calls_runs_block_by_block_across_block_edges() -> None:
    # 1, 128 and 900 elements: part of a block, exactly one, and seven and a bit.
    for shape in [(1,), (128,), (3, 300)]:
        program = Program([f32(*shape), np.float32(1.5)])
        value = _calls_chain(program, 0, 1, codegen.BLOCK_MIN_CALLS + 1)
        # The input again, read in the last block loop only.
        (value,) = program.add("add", [value, 0])
        source = _source_of(program, [value])
        assert f"range(0, n0, {codegen.BLOCK_SIZE})" in source
        check(program, [value])


def test_a_chain_with_fewer_calls_stays_one_loop_per_element() -> None:
    program = Program([f32(4, 5), np.float32(1.5)])
    value = _calls_chain(program, 0, 1, codegen.BLOCK_MIN_CALLS - 1)
    assert f"range(0, n0, {codegen.BLOCK_SIZE})" not in _source_of(program, [value])
    check(program, [value])


def test_blocked_chains_pass_booleans_and_float64_between_loops() -> None:
    program = Program([RNG.uniform(0.5, 2.0, (5, 70)), f32(5, 70)])
    (positive,) = program.add("greater", [1, 1])  # all False: x > x
    (logs,) = program.add("log", [0])
    (e,) = program.add("exp", [logs])
    (p,) = program.add("power", [e, 0])
    (t,) = program.add("tanh", [p])
    (t,) = program.add("cos", [t])
    assert codegen.BLOCK_MIN_CALLS <= 5
    # The comparison, made before the first call, is read after the last one.
    (w,) = program.add("where", [positive, 0, t])
    assert "range(0, n0," in _source_of(program, [w])
    check(program, [w, positive], ["where", "comparison"])


def test_a_blocked_chain_broadcast_at_run_time_takes_the_element_loop() -> None:
    for rows in (3, 1):  # the kernel is the same; rows == 1 broadcasts input 1
        program = Program([f32(3, 4), f32(rows, 4), np.float32(0.5)])
        value = _calls_chain(program, 0, 2, codegen.BLOCK_MIN_CALLS)
        (value,) = program.add("add", [value, 1])
        check(program, [value])


def test_code_generation_walks_deep_chains_without_recursion() -> None:
    # 5,000 nested expressions: far past Python's recursion limit. Generating the source is
    # enough to show the walk is iterative; compiling it would only cost time.
    nodes = [{"op": "exp", "args": [k], "attrs": {}, "outputs": [["float32", 1]]}
             for k in range(5000)]  # fmt: skip
    description = {
        "inputs": [["float32", 1]],
        "outputs": [["float32", 1]],
        "nodes": nodes,
        "results": [5000],
    }
    source = codegen.generate(parse_description(description), "deep")
    assert source.count("vx.exp_f32(") == 5000
    compile(source, "deep.py", "exec")


def test_shared_structure_gives_one_cached_kernel() -> None:
    # Two descriptions that differ only in shapes of their inputs are one kernel.
    first = Program([f32(2, 3), f32(2, 3)])
    first_results = first.add("add", [0, 1])
    second = Program([f32(7, 1), f32(1, 9)])
    second_results = second.add("add", [0, 1])
    a = load_kernel(first.description(first_results))
    b = load_kernel(second.description(second_results))
    assert a is b


def test_high_rank_tensors_use_bounded_loop_nesting() -> None:
    # Rank 32 would need more nested loops than CPython allows blocks in a function; past
    # a few dimensions the outer loops are flattened into one.
    shape = (2, 1, 3, 1, 2, 2, 3, 2)
    program = Program([f32(*shape), f32(*shape[5:])])
    results = [program.add("add", [0, 1])[0], program.add("sum", [0], axis=(3, 5))[0]]
    check(program, results, ["add", "sum"])
