"""The Prelude: loading into a module, type-checking, and the behaviour of every function
(evaluated with the debug executor, which type-checks each program before running it)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.interpreter import Interpreter, InterpreterError
from compiler.prelude import prelude_text
from compiler.typing import infer_types
from vm.objects import ADT

I32 = relay.scalar_type("int32")


@pytest.fixture(scope="module")
def p() -> relay.Prelude:
    return relay.Prelude(relay.IRModule())


def gv(p, name):
    return p.get_global_var(name)


def run(p, expr):
    """Type-check and evaluate ``expr`` over the Prelude module."""
    return relay.create_executor("debug", mod=p.mod).evaluate(expr)


def make_list(p, items, make=relay.const, elem_type=I32):
    list_t, cons, nil = p.get_type("List")
    if not items:
        # An empty list says nothing about its element type: annotate it.
        empty = relay.var("empty", relay.TypeCall(list_t, [elem_type]))
        return relay.Let(empty, relay.Call(nil, []), empty)
    out = relay.Call(nil, [])
    for item in reversed(items):
        out = relay.Call(cons, [make(item), out])
    return out


def list_value(p, items):
    _, cons, nil = p.get_type("List")
    out = ADT(nil.tag, [], "Nil")
    for item in reversed(items):
        out = ADT(cons.tag, [np.array(item, "int32"), out], "Cons")
    return out


def to_list(value):
    out = []
    while value.constructor == "Cons":
        out.append(value[0])
        value = value[1]
    assert value.constructor == "Nil"
    return out


def ints(value):
    return [int(v) for v in to_list(value)]


def make_nat(p, n):
    _, z, s = p.get_type("nat")
    out = relay.Call(z, [])
    for _ in range(n):
        out = relay.Call(s, [out])
    return out


def nat_value_to_int(value):
    count = 0
    while value.constructor == "s":
        count += 1
        value = value[0]
    assert value.constructor == "z"
    return count


def lam(body_fn, *dtypes):
    params = [relay.var(f"x{i}", relay.scalar_type(d)) for i, d in enumerate(dtypes)]
    return relay.Function(params, body_fn(*params))


def call(p, name, *args):
    return relay.Call(gv(p, name), list(args))


# --- loading -------------------------------------------------------------------------------------


def test_prelude_defines_the_standard_types_and_constructors(p):
    list_t, cons, nil = p.get_type("List")
    assert list_t.name_hint == "List" and (cons.name_hint, nil.name_hint) == ("Cons", "Nil")
    assert [c.name_hint for c in p.get_type("Option")[1:]] == ["Some", "None"]
    assert [c.name_hint for c in p.get_type("nat")[1:]] == ["z", "s"]
    assert [c.name_hint for c in p.get_type("Tree")[1:]] == ["Rose"]
    assert p.get_ctor("Option", "Some") is p.get_type("Option")[1]
    tags = [c.tag for name in p.type_names for c in p.get_type(name)[1:]]
    assert len(set(tags)) == len(tags) and min(tags) >= 1


def test_prelude_defines_the_documented_functions(p):
    expected = {
        "id", "compose", "hd", "tl", "nth", "update", "length", "map", "foldl", "foldr",
        "foldr1", "sum", "concat", "filter", "zip", "rev", "iterate", "map_accuml",
        "map_accumr", "unfoldl", "unfoldr", "size", "tmap", "nat_add", "nat_double",
        "nat_to_int", "nat_iterate",
    }  # fmt: skip
    assert expected <= set(p.function_names)
    for name in expected:
        assert p.mod[gv(p, name)] is p.mod[name]


def test_every_prelude_function_type_checks(p):
    typed = infer_types(p.mod)
    for name in p.function_names:
        assert isinstance(typed[name].checked_type, relay.FuncType), name


def test_prelude_is_written_in_the_text_format():
    text = prelude_text()
    assert text.startswith('#[version = "0.0.5"]')
    assert "type List[A]" in text and "def @map[A, B]" in text and "match?" in text


def test_lookups_of_unknown_names_say_what_exists(p):
    with pytest.raises(KeyError, match=r"no type 'Vector'.*List"):
        p.get_type("Vector")
    with pytest.raises(KeyError, match=r"no function 'mapp'.*map"):
        p.get_global_var("mapp")
    with pytest.raises(KeyError, match=r"no constructor 'Empty'.*Cons, Nil"):
        p.get_ctor("List", "Empty")


def test_prelude_into_a_module_that_defines_a_prelude_name_is_rejected():
    mod = relay.IRModule()
    x = relay.var("x", I32)
    mod["map"] = relay.Function([x], x)
    with pytest.raises(ValueError, match="already defines global function @map"):
        relay.Prelude(mod)
    assert list(mod.type_definitions) == [] and len(mod) == 1  # left unchanged

    mod = relay.IRModule()
    own = relay.GlobalTypeVar("Option")
    mod.add_type_def(own, relay.TypeData(own, [], [relay.Constructor("Nothing", [], own)]))
    with pytest.raises(ValueError, match="type Option"):
        relay.Prelude(mod)


def test_prelude_twice_on_one_module_reuses_the_first_load():
    mod = relay.IRModule()
    first = relay.Prelude(mod)
    second = relay.Prelude(mod)
    assert second.get_global_var("map") is first.get_global_var("map")
    assert second.get_type("List") == first.get_type("List")


def test_prelude_adopts_an_identical_prelude_already_in_the_module():
    base = relay.IRModule()
    relay.Prelude(base)
    derived = relay.fromtext(
        '#[version = "0.0.5"]\ndef @main(%xs: List[int32]) { @length(%xs) }', init_module=base
    )
    p = relay.Prelude(derived)
    assert p.get_global_var("length") is derived.get_global_var("length")
    assert "main" in p.mod and len(p.mod) == len(base) + 1


def test_prelude_into_a_module_with_a_changed_prelude_function_is_rejected():
    mod = relay.fromtext(prelude_text().replace("%n - 1, %v", "%n - 2, %v"))
    with pytest.raises(ValueError, match=r"differ from the Prelude's: global function @update$"):
        relay.Prelude(mod)


def test_prelude_keeps_user_definitions_and_a_new_module_gets_its_own_copy():
    mod = relay.IRModule()
    x = relay.var("x", I32)
    mod["main"] = relay.Function([x], x)
    p1 = relay.Prelude(mod)
    p2 = relay.Prelude()
    assert "main" in p1.mod and "main" not in p2.mod
    assert p1.get_ctor("List", "Cons") is not p2.get_ctor("List", "Cons")


# --- list functions ------------------------------------------------------------------------------


def test_id_and_compose(p):
    assert int(run(p, call(p, "id", relay.const(7)))) == 7
    inc = lam(lambda x: x + relay.const(1), "int32")
    dbl = lam(lambda x: x * relay.const(2), "int32")
    composed = relay.Call(call(p, "compose", dbl, inc), [relay.const(5)])
    assert int(run(p, composed)) == 12  # dbl(inc(5))


def test_hd_tl_nth_and_length(p):
    xs = make_list(p, [10, 20, 30])
    assert int(run(p, call(p, "hd", xs))) == 10
    assert ints(run(p, call(p, "tl", xs))) == [20, 30]
    assert [int(run(p, call(p, "nth", xs, relay.const(i)))) for i in range(3)] == [10, 20, 30]
    assert int(run(p, call(p, "length", xs))) == 3
    assert int(run(p, call(p, "length", make_list(p, [])))) == 0


def test_partial_functions_trap_on_short_lists(p):
    with pytest.raises(InterpreterError, match=r"match\?.*prelude\.rly.*constructor Nil"):
        run(p, call(p, "nth", make_list(p, [1, 2]), relay.const(2)))
    with pytest.raises(InterpreterError, match="Nil"):
        run(p, call(p, "tl", make_list(p, [])))


def test_update_replaces_one_element(p):
    out = run(p, call(p, "update", make_list(p, [1, 2, 3]), relay.const(1), relay.const(9)))
    assert ints(out) == [1, 9, 3]


def test_map_filter_and_sum(p):
    sq = lam(lambda x: x * x, "int32")
    assert ints(run(p, call(p, "map", sq, make_list(p, [1, 2, 3])))) == [1, 4, 9]
    even = lam(lambda x: relay.equal(relay.mod(x, relay.const(2)), relay.const(0)), "int32")
    assert ints(run(p, call(p, "filter", even, make_list(p, [1, 2, 3, 4, 6])))) == [2, 4, 6]
    assert int(run(p, call(p, "sum", make_list(p, [5, 6, 7])))) == 18
    assert int(run(p, call(p, "sum", make_list(p, [])))) == 0


def test_foldl_and_foldr_associate_differently(p):
    sub = lam(lambda a, b: a - b, "int32", "int32")
    xs = make_list(p, [1, 2, 3])
    assert int(run(p, call(p, "foldl", sub, relay.const(10), xs))) == ((10 - 1) - 2) - 3
    assert int(run(p, call(p, "foldr", sub, relay.const(10), xs))) == 1 - (2 - (3 - 10))
    assert int(run(p, call(p, "foldr1", sub, xs))) == 1 - (2 - 3)
    with pytest.raises(InterpreterError, match="Nil"):
        run(p, call(p, "foldr1", sub, make_list(p, [])))


def test_concat_rev_and_zip(p):
    out = run(p, call(p, "concat", make_list(p, [1, 2]), make_list(p, [3, 4, 5])))
    assert ints(out) == [1, 2, 3, 4, 5]
    assert ints(run(p, call(p, "rev", make_list(p, [1, 2, 3])))) == [3, 2, 1]
    floats = make_list(p, [0.5, 1.5, 2.5], make=lambda v: relay.const(v, "float32"))
    pairs = to_list(run(p, call(p, "zip", make_list(p, [1, 2]), floats)))
    assert [(int(a), float(b)) for a, b in pairs] == [(1, 0.5), (2, 1.5)]


def test_iterate_composes_a_function_n_times(p):
    dbl = lam(lambda x: x * relay.const(2), "int32")
    f = call(p, "iterate", dbl, relay.const(5))
    assert int(run(p, relay.Call(f, [relay.const(3)]))) == 3 * 2**5
    zero = call(p, "iterate", dbl, relay.const(0))
    assert int(run(p, relay.Call(zero, [relay.const(3)]))) == 3


def test_map_accuml_and_map_accumr(p):
    # f(acc, x) = (acc + x, acc * x): running sums paired with products.
    acc, x = relay.var("acc", I32), relay.var("x", I32)
    f = relay.Function([acc, x], relay.Tuple([acc + x, acc * x]))
    total, out = run(p, call(p, "map_accuml", f, relay.const(1), make_list(p, [1, 2, 3])))
    assert int(total) == 7 and ints(out) == [1 * 1, 2 * 2, 4 * 3]
    total, out = run(p, call(p, "map_accumr", f, relay.const(1), make_list(p, [1, 2, 3])))
    assert int(total) == 7 and ints(out) == [6 * 1, 4 * 2, 1 * 3]


def test_unfoldr_and_unfoldl_build_lists_from_a_seed(p):
    # f(n) = if n == 0 { None } else { Some((n - 1, n)) }
    _, some, none = p.get_type("Option")
    n = relay.var("n", I32)
    f = relay.Function(
        [n],
        relay.If(
            relay.equal(n, relay.const(0)),
            relay.Call(none, []),
            relay.Call(some, [relay.Tuple([n - relay.const(1), n])]),
        ),
    )
    assert ints(run(p, call(p, "unfoldr", f, relay.const(4)))) == [4, 3, 2, 1]
    assert ints(run(p, call(p, "unfoldl", f, relay.const(4)))) == [1, 2, 3, 4]


# --- trees and naturals --------------------------------------------------------------------------


def make_tree(p, value, children):
    tree_t, rose = p.get_type("Tree")
    subtrees = make_list(p, children, make=lambda c: c, elem_type=relay.TypeCall(tree_t, [I32]))
    return relay.Call(rose, [relay.const(value), subtrees])


def test_tree_size_and_tmap(p):
    leaf = lambda v: make_tree(p, v, [])  # noqa: E731
    tree = make_tree(p, 1, [leaf(2), make_tree(p, 3, [leaf(4), leaf(5)]), leaf(6)])
    assert int(run(p, call(p, "size", tree))) == 6
    neg = lam(lambda x: relay.negative(x), "int32")
    mapped = run(p, call(p, "tmap", neg, tree))
    assert mapped.constructor == "Rose" and int(mapped[0]) == -1
    children = to_list(mapped[1])
    assert [int(c[0]) for c in children] == [-2, -3, -6]
    assert [int(g[0]) for g in to_list(children[1][1])] == [-4, -5]


def test_nat_arithmetic(p):
    assert nat_value_to_int(run(p, call(p, "nat_add", make_nat(p, 3), make_nat(p, 4)))) == 7
    assert nat_value_to_int(run(p, call(p, "nat_double", make_nat(p, 5)))) == 10
    assert int(run(p, call(p, "nat_to_int", make_nat(p, 6)))) == 6
    inc = lam(lambda x: x + relay.const(1), "int32")
    f = call(p, "nat_iterate", inc, make_nat(p, 3))
    assert int(run(p, relay.Call(f, [relay.const(10)]))) == 13


# --- depth ---------------------------------------------------------------------------------------


def test_prelude_functions_over_ten_thousand_element_lists(p):
    items = list(range(10_000))
    interp = Interpreter(p.mod)
    xs = list_value(p, items)
    assert int(interp.call("length", xs)) == 10_000
    add = interp.evaluate(lam(lambda a, b: a + b, "int32", "int32"))
    assert int(interp.call("foldr", add, np.array(0, "int32"), xs)) == sum(items)
    assert int(interp.call("sum", xs)) == sum(items)
    assert ints(interp.call("rev", xs))[:3] == [9_999, 9_998, 9_997]


# --- the oracle: the VM agrees on every Prelude function ----------------------------------------

EVERYTHING = """#[version = "0.0.5"]
def @main(%xs: List[Tensor[(), int32]], %n: nat) {
  let %sq = fn (%x: Tensor[(), int32]) -> Tensor[(), int32] { %x * %x };
  let %add = fn (%a: Tensor[(), int32], %b: Tensor[(), int32]) -> Tensor[(), int32] { %a + %b };
  let %sub = fn (%a: Tensor[(), int32], %b: Tensor[(), int32]) -> Tensor[(), int32] { %a - %b };
  let %odd = fn (%x: Tensor[(), int32]) -> Tensor[(), bool] { mod(%x, 2) == 1 };
  let %step = fn (%acc: Tensor[(), int32], %x: Tensor[(), int32]) { (%acc + %x, %acc * %x) };
  let %down = fn (%s: Tensor[(), int32]) {
    if (%s == 0) { None() } else { Some((%s - 1, %s)) }
  };
  let %leaf = Rose(7, Nil());
  let %tree = Rose(1, Cons(%leaf, Cons(Rose(2, Cons(%leaf, Nil())), Nil())));
  (@map(%sq, %xs), @foldl(%sub, 100, %xs), @foldr(%sub, 100, %xs), @filter(%odd, %xs),
   @nth(%xs, 2), @length(%xs), @update(%xs, 1, 42), @zip(%xs, @rev(%xs)), @concat(%xs, %xs),
   @iterate(%sq, 2)(3), @nat_to_int(@nat_double(@nat_add(%n, %n))), @size(%tree),
   @compose(%sq, @id)(5), @foldr1(%add, %xs), @hd(@tl(%xs)), @map_accuml(%step, 1, %xs),
   @map_accumr(%step, 1, %xs), @unfoldr(%down, 3), @unfoldl(%down, 3), @tmap(%sq, %tree),
   @sum(%xs), @nat_iterate(%sq, %n)(2))
}
"""


def test_prelude_functions_agree_on_the_vm_and_the_debug_executor():
    from tests.compiler.test_executor import assert_same_value

    base = relay.IRModule()
    relay.Prelude(base)
    mod = relay.fromtext(EVERYTHING, init_module=base)
    _, z, s = mod.get_type("nat")
    n = ADT(z.tag, [], "z")
    for _ in range(3):
        n = ADT(s.tag, [n], "s")
    args = (list_value(relay.Prelude(mod), [0, 1, 2, 3, 4, 5]), n)
    expected = relay.create_executor("debug", mod).evaluate()(*args)
    assert ints(expected[0]) == [0, 1, 4, 9, 16, 25]
    assert [int(v) for v in expected[9:13]] == [81, 12, 4, 25]
    assert int(expected[21]) == 2**8
    assert_same_value(expected, relay.create_executor("vm", mod).evaluate()(*args))
