"""FuseOps: operator calls grouped into primitive functions by TVM's fusion rules.

Before/after IR for each rule (elementwise chains, diamonds, anchors with epilogues,
reductions, opaque operators, tuples), the boundaries fusion never crosses (``if``,
``match``, calls of globals and closures, local functions), A-normal and graph form,
the fusion level and the group size cap; every rewrite is also checked to compute what
the original computes, on the reference interpreter.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.ir.expr import Call, Function
from compiler.ir.visitor import post_order
from compiler.transform.fuse_ops import fuse_ops
from compiler.transform.typed_rewrite import is_primitive
from tests.compiler.transform.util import assert_results_match, assert_same, parse

RNG = np.random.default_rng(5)
V4 = "Tensor[(4), float32]"
M34 = "Tensor[(3, 4), float32]"


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def primitives(mod: relay.IRModule) -> list[Function]:
    """The primitive functions of ``mod``, in the order their calls are evaluated."""
    return [
        node.op  # type: ignore[misc]
        for func in mod.functions.values()
        for node in post_order(func)
        if isinstance(node, Call) and is_primitive(node.op)
    ]


def fused_ops(mod: relay.IRModule) -> list[list[str]]:
    """For each primitive function, the operators it calls, in post order."""
    return [
        [n.op.name for n in post_order(p.body) if isinstance(n, Call)]  # type: ignore[attr-defined]
        for p in primitives(mod)
    ]


def check(text: str, expected: str, args: list[np.ndarray], level: int = 1) -> relay.IRModule:
    """Fuse ``text``; assert the result is ``expected`` and computes the same values."""
    before = parse(text)
    after = fuse_ops(before, level)
    assert_same(after, expected)
    assert_results_match(before, after, args)
    return after


# --- returns: what fuses ---------------------------------------------------------------------


def test_elementwise_chain_becomes_one_primitive() -> None:
    check(
        f"def @main(%x: {V4}) {{ add(exp(negative(%x)), 1f) }}",
        f"""
        def @main(%x: {V4}) {{
          %0 = fn (%p0: {V4}, %p1: float32, Primitive=1) {{ add(exp(negative(%p0)), %p1) }};
          %0(%x, 1f)
        }}""",
        [f32(4)],
    )


def test_let_bindings_are_seen_through_and_the_fused_values_unbound() -> None:
    after = check(
        f"""
        def @main(%x: {V4}) {{
          let %a = negative(%x);
          let %b = exp(%a);
          let %c = add(%b, 1f);
          %c
        }}""",
        f"""
        def @main(%x: {V4}) {{
          %0 = fn (%p0: {V4}, %p1: float32, Primitive=1) {{ add(exp(negative(%p0)), %p1) }};
          let %c = %0(%x, 1f);
          %c
        }}""",
        [f32(4)],
    )
    # A-normal and dataflow form fuse the same way.
    graph = fuse_ops(parse(f"def @main(%x: {V4}) {{ add(exp(negative(%x)), 1f) }}"))
    assert fused_ops(after) == fused_ops(graph) == [["negative", "exp", "add"]]


def test_a_diamond_fuses_when_every_path_meets_again_in_the_group() -> None:
    check(
        f"def @main(%x: {V4}) {{ let %e = exp(%x); add(negative(%e), sqrt(%e)) }}",
        f"""
        def @main(%x: {V4}) {{
          %0 = fn (%p0: {V4}, Primitive=1) {{
            %1 = exp(%p0);
            add(negative(%1), sqrt(%1))
          }};
          %0(%x)
        }}""",
        [np.abs(f32(4))],
    )


def test_a_value_needed_outside_the_group_ends_it() -> None:
    # %e is both an input of add and a result: it must exist on its own.
    after = check(
        f"def @main(%x: {V4}) {{ let %e = exp(%x); (add(%e, 1f), %e) }}",
        f"""
        def @main(%x: {V4}) {{
          %0 = fn (%p0: {V4}, Primitive=1) {{ exp(%p0) }};
          let %e = %0(%x);
          %1 = fn (%p0: {V4}, %p1: float32, Primitive=1) {{ add(%p0, %p1) }};
          (%1(%e, 1f), %e)
        }}""",
        [f32(4)],
    )
    assert len(primitives(after)) == 2


def test_paths_through_an_opaque_operator_block_the_diamond() -> None:
    after = check(
        f"def @main(%x: {M34}) {{ let %e = exp(%x); add(nn.softmax(%e), %e) }}",
        f"""
        def @main(%x: {M34}) {{
          %0 = fn (%p0: {M34}, Primitive=1) {{ exp(%p0) }};
          let %e = %0(%x);
          %1 = fn (%p0: {M34}, Primitive=1) {{ nn.softmax(%p0) }};
          %2 = fn (%p0: {M34}, %p1: {M34}, Primitive=1) {{ add(%p0, %p1) }};
          %2(%1(%e), %e)
        }}""",
        [f32(3, 4)],
    )
    assert fused_ops(after) == [["exp"], ["nn.softmax"], ["add"]]


def test_dense_bias_add_relu_is_one_primitive_named_after_its_operators() -> None:
    x, w, b = "Tensor[(2, 4), float32]", "Tensor[(3, 4), float32]", "Tensor[(3), float32]"
    after = check(
        f"def @main(%x: {x}, %w: {w}, %b: {b}) {{ nn.relu(nn.bias_add(nn.dense(%x, %w), %b)) }}",
        f"""
        def @main(%x: {x}, %w: {w}, %b: {b}) {{
          %0 = fn (%p0: {x}, %p1: {w}, %p2: {b}, Primitive=1) {{
            nn.relu(nn.bias_add(nn.dense(%p0, %p1), %p2))
          }};
          %0(%x, %w, %b)
        }}""",
        [f32(2, 4), f32(3, 4), f32(3)],
    )
    from compiler.backend.kernel_desc import describe_primitive
    from compiler.typing import infer_types

    (prim,) = primitives(infer_types(after))
    assert describe_primitive(prim)[0] == "vm_mod_fused_nn_dense_nn_bias_add_nn_relu"


def test_an_anchor_takes_only_elementwise_work_as_its_epilogue() -> None:
    # The dense output is broadcast against a bigger tensor: not read element by element,
    # so the add gets a kernel of its own; so does a second dense meeting the first.
    x, w = "Tensor[(2, 4), float32]", "Tensor[(3, 4), float32]"
    after = check(
        f"""
        def @main(%x: {x}, %w: {w}, %y: Tensor[(5, 2, 3), float32]) {{
          (add(nn.dense(%x, %w), %y), add(nn.dense(%x, %w), nn.dense(%x, %w)))
        }}""",
        f"""
        def @main(%x: {x}, %w: {w}, %y: Tensor[(5, 2, 3), float32]) {{
          %0 = fn (%p0: {x}, %p1: {w}, Primitive=1) {{ nn.dense(%p0, %p1) }};
          %1 = fn (%p0: Tensor[(2, 3), float32], %p1: Tensor[(5, 2, 3), float32],
                   Primitive=1) {{ add(%p0, %p1) }};
          %2 = fn (%p0: {x}, %p1: {w}, Primitive=1) {{ nn.dense(%p0, %p1) }};
          %3 = fn (%p0: {x}, %p1: {w}, %p2: Tensor[(2, 3), float32], Primitive=1) {{
            add(nn.dense(%p0, %p1), %p2)
          }};
          (%1(%0(%x, %w), %y), %3(%x, %w, %2(%x, %w)))
        }}""",
        [f32(2, 4), f32(3, 4), f32(5, 2, 3)],
    )
    assert fused_ops(after) == [["nn.dense"], ["add"], ["nn.dense"], ["nn.dense", "add"]]


def test_a_reduction_takes_its_elementwise_producers_and_epilogue() -> None:
    check(
        f"""
        def @main(%x: {M34}) {{
          let %s = sum(exp(%x), axis=[1]);
          multiply(%s, 0.5f)
        }}""",
        f"""
        def @main(%x: {M34}) {{
          %0 = fn (%p0: {M34}, %p1: float32, Primitive=1) {{
            multiply(sum(exp(%p0), axis=[1]), %p1)
          }};
          %0(%x, 0.5f)
        }}""",
        [f32(3, 4)],
    )


def test_injective_producers_feed_a_reduction_but_two_reductions_stay_apart() -> None:
    after = check(
        f"def @main(%x: {M34}) {{ max(sum(transpose(%x), axis=[1])) }}",
        f"""
        def @main(%x: {M34}) {{
          %0 = fn (%p0: {M34}, Primitive=1) {{ sum(transpose(%p0), axis=[1]) }};
          %1 = fn (%p0: Tensor[(4), float32], Primitive=1) {{ max(%p0) }};
          %1(%0(%x))
        }}""",
        [f32(3, 4)],
    )
    assert fused_ops(after) == [["transpose", "sum"], ["max"]]


def test_softmax_written_out_keeps_its_reductions_in_separate_kernels() -> None:
    after = fuse_ops(
        parse(f"""
        def @main(%x: {M34}) {{
          let %m = max(%x, axis=[1], keepdims=True);
          let %e = exp(subtract(%x, %m));
          divide(%e, sum(%e, axis=[1], keepdims=True))
        }}""")
    )
    assert fused_ops(after) == [["max"], ["subtract", "exp"], ["sum"], ["divide"]]


def test_opaque_softmax_stays_alone_between_fused_neighbours() -> None:
    after = check(
        f"def @main(%x: {M34}) {{ add(nn.softmax(exp(negative(%x))), 1f) }}",
        f"""
        def @main(%x: {M34}) {{
          %0 = fn (%p0: {M34}, Primitive=1) {{ exp(negative(%p0)) }};
          %1 = fn (%p0: {M34}, Primitive=1) {{ nn.softmax(%p0) }};
          %2 = fn (%p0: {M34}, %p1: float32, Primitive=1) {{ add(%p0, %p1) }};
          %2(%1(%0(%x)), 1f)
        }}""",
        [f32(3, 4)],
    )
    assert fused_ops(after)[1] == ["nn.softmax"]


def test_split_and_its_projections_fuse_into_their_consumer() -> None:
    check(
        "def @main(%a: Tensor[(4, 6), float32]) {"
        " let %s = split(%a, indices_or_sections=2, axis=1); add(%s.0, %s.1) }",
        """
        def @main(%a: Tensor[(4, 6), float32]) {
          %0 = fn (%p0: Tensor[(4, 6), float32], Primitive=1) {
            %1 = split(%p0, indices_or_sections=2, axis=1);
            add(%1.0, %1.1)
          };
          %0(%a)
        }""",
        [f32(4, 6)],
    )


def test_injective_fields_join_a_tuple_fused_into_concatenate() -> None:
    m23, m32 = "Tensor[(2, 3), float32]", "Tensor[(6, 2), float32]"
    check(
        f"def @main(%a: {m23}, %b: {m23}) {{"
        " concatenate((transpose(%a), transpose(%b)), axis=0) }",
        f"""
        def @main(%a: {m23}, %b: {m23}) {{
          %0 = fn (%p0: {m23}, %p1: {m23}, Primitive=1) -> {m32} {{
            concatenate((transpose(%p0), transpose(%p1)), axis=0)
          }};
          %0(%a, %b)
        }}""",
        [f32(2, 3), f32(2, 3)],
    )


def test_projections_of_tuples_from_outside_a_kernel_stay_vm_work() -> None:
    # The kernel receives the one field it reads, not the whole tuple.
    t = f"({V4}, {V4}, {V4}, {V4})"
    check(
        f"""
        def @main(%t: {t}, %x: {M34}) {{
          let %bn = nn.batch_norm(%x, %t.0, %t.1, %t.2, %t.3);
          (add(%t.0, 1f), negative(%bn.0))
        }}""",
        f"""
        def @main(%t: {t}, %x: {M34}) {{
          %0 = fn (%p0: {M34}, %p1: {V4}, %p2: {V4}, %p3: {V4}, %p4: {V4}, Primitive=1) {{
            nn.batch_norm(%p0, %p1, %p2, %p3, %p4)
          }};
          let %bn = %0(%x, %t.0, %t.1, %t.2, %t.3);
          %1 = fn (%p0: {V4}, %p1: float32, Primitive=1) {{ add(%p0, %p1) }};
          %2 = fn (%p0: {M34}, Primitive=1) {{ negative(%p0) }};
          (%1(%t.0, 1f), %2(%bn.0))
        }}""",
        [(f32(4), f32(4), f32(4), np.abs(f32(4)) + 0.5), f32(3, 4)],
    )


def test_tuples_and_projections_without_operators_stay_vm_work() -> None:
    before = parse("def @main(%x: float32, %y: float32) { ((%x, %y).1, (%x,)) }")
    after = fuse_ops(before)
    assert not primitives(after)
    assert_same(after, before)


def test_equal_small_constants_share_one_parameter_and_big_ones_are_inputs() -> None:
    weights = relay.const(f32(4, 65))
    x = relay.var("x", shape=(4, 65))
    body = x
    for _ in range(3):
        body = relay.add(relay.multiply(body, relay.const(1.5)), relay.const(0.25))
    body = relay.add(body, weights)
    before = relay.IRModule.from_expr(relay.Function([x], body))
    after = fuse_ops(before)
    (prim,) = primitives(after)
    call = after["main"].body
    assert isinstance(call, Call) and call.op is prim
    assert [p.name_hint for p in prim.params] == ["p0", "p1", "p2", "p3"]
    scalars = [float(a.data) for a in call.args[1:3]]  # type: ignore[attr-defined]
    assert scalars == [1.5, 0.25] and call.args[3] is weights
    assert_results_match(before, after, [f32(4, 65)])


# --- boundaries: what never fuses ----------------------------------------------------------------


def test_fusion_does_not_cross_into_an_if_branch() -> None:
    check(
        f"""
        def @main(%x: {V4}, %c: bool) {{
          let %a = exp(%x);
          if (%c) {{ negative(%a) }} else {{ %a }}
        }}""",
        f"""
        def @main(%x: {V4}, %c: bool) {{
          %0 = fn (%p0: {V4}, Primitive=1) {{ exp(%p0) }};
          let %a = %0(%x);
          if (%c) {{
            %1 = fn (%p0: {V4}, Primitive=1) {{ negative(%p0) }};
            %1(%a)
          }} else {{
            %a
          }}
        }}""",
        [f32(4), np.array(True)],
    )


def test_fusion_does_not_cross_match_clauses_and_fuses_inside_them() -> None:
    text = f"""
        type Opt {{ Some(Tensor[(4), float32]), Empty }}
        def @main(%o: Opt, %x: {V4}) {{
          let %a = exp(%x);
          match (%o) {{
            Some(%v) => add(negative(%v), %a),
            Empty => sqrt(%a),
          }}
        }}"""
    after = fuse_ops(parse(text))
    assert fused_ops(after) == [["exp"], ["negative", "add"], ["sqrt"]]


def test_fusion_does_not_cross_calls_of_globals_or_closures() -> None:
    after = check(
        f"""
        def @f(%y: {V4}) {{ sqrt(%y) }}
        def @main(%x: {V4}) {{
          let %g = fn (%z: {V4}) {{ %z }};
          negative(%g(@f(exp(%x))))
        }}""",
        f"""
        def @f(%y: {V4}) {{
          %0 = fn (%p0: {V4}, Primitive=1) {{ sqrt(%p0) }};
          %0(%y)
        }}
        def @main(%x: {V4}) {{
          let %g = fn (%z: {V4}) {{ %z }};
          %1 = fn (%p0: {V4}, Primitive=1) {{ exp(%p0) }};
          %2 = fn (%p0: {V4}, Primitive=1) {{ negative(%p0) }};
          %2(%g(@f(%1(%x))))
        }}""",
        [np.abs(f32(4))],
    )
    assert len(primitives(after)) == 3


def test_a_local_function_fuses_its_own_body_but_not_what_it_captures() -> None:
    after = fuse_ops(
        parse(f"""
        def @main(%x: {V4}) {{
          let %a = exp(%x);
          let %f = fn (%y: {V4}) {{ add(negative(%a), %y) }};
          %f(%a)
        }}""")
    )
    assert fused_ops(after) == [["exp"], ["negative", "add"]]


def test_fused_primitives_already_in_the_program_are_left_alone() -> None:
    once = fuse_ops(parse(f"def @main(%x: {V4}) {{ exp(negative(%x)) }}"))
    twice = fuse_ops(once)
    assert_same(twice, once)


# --- levels and limits ---------------------------------------------------------------------------


def test_fuse_opt_level_zero_gives_each_operator_its_own_primitive() -> None:
    check(
        f"def @main(%x: {V4}, %y: {V4}) {{ concatenate((exp(%x), %y)) }}",
        f"""
        def @main(%x: {V4}, %y: {V4}) {{
          %0 = fn (%p0: {V4}, Primitive=1) {{ exp(%p0) }};
          %1 = fn (%p0: {V4}, %p1: {V4}, Primitive=1) {{ concatenate((%p0, %p1)) }};
          %1(%0(%x), %y)
        }}""",
        [f32(4), f32(4)],
        level=0,
    )


def test_the_pass_object_takes_its_level_from_the_pass_context() -> None:
    before = parse(f"def @main(%x: {V4}) {{ exp(negative(%x)) }}")
    with relay.transform.PassContext(opt_level=0):
        unfused = relay.transform.FuseOps()(before)
        forced = relay.transform.FuseOps(fuse_opt_level=1)(before)
    assert fused_ops(unfused) == [["negative"], ["exp"]]
    assert fused_ops(forced) == [["negative", "exp"]]
    assert fused_ops(relay.transform.FuseOps()(before)) == [["negative", "exp"]]


def test_max_depth_caps_the_group_size() -> None:
    body = "%x"
    for _ in range(7):
        body = f"negative({body})"
    before = parse(f"def @main(%x: {V4}) {{ {body} }}")
    config = {"relay.FuseOps.max_depth": 3}
    with relay.transform.PassContext(config=config):
        after = relay.transform.FuseOps()(before)
    assert [len(ops) for ops in fused_ops(after)] == [3, 3, 1]
    assert_results_match(before, after, [f32(4)])


def test_a_10000_deep_let_chain_fuses_without_recursion() -> None:
    depth = 10_000
    lines = ["def @main(%x0: float32) {"]
    lines += [f"  let %x{i + 1} = negative(%x{i});" for i in range(depth)]
    lines += [f"  %x{depth}", "}"]
    after = fuse_ops(parse("\n".join(lines)))
    sizes = [len(ops) for ops in fused_ops(after)]
    assert sum(sizes) == depth and max(sizes) == 256 and len(sizes) == 40


# --- invalid -------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -3, True, 2.5])
def test_a_max_depth_that_is_not_a_positive_int_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="max_depth must be a positive int"):
        fuse_ops(parse(f"def @main(%x: {V4}) {{ %x }}"), 1, bad)  # type: ignore[arg-type]


def test_a_fuse_opt_level_that_is_not_an_int_is_refused() -> None:
    with pytest.raises(TypeError, match="fuse_opt_level must be an int"):
        relay.transform.FuseOps(fuse_opt_level="1")  # type: ignore[arg-type]


def test_an_ill_typed_module_raises_a_type_error() -> None:
    with pytest.raises(TypeError):
        fuse_ops(parse("def @main(%x: float32, %i: int32) { %x + %i }"))
