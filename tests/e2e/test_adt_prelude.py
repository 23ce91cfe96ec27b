"""Algebraic data types end to end with the Prelude: List, Option, nat and Tree programs."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from tests.e2e.harness import adt, check, int_list, parse

I = np.int32
LIST = "Cons(1, Cons(2, Cons(3, Cons(4, Nil()))))"


def prelude_main(body: str, params: str = "", ret: str = "int32") -> relay.IRModule:
    return parse(f"def @main({params}) -> {ret} {{ {body} }}", prelude=True)


def test_list_constructed_in_the_program_is_returned_as_adts() -> None:
    mod = prelude_main("Cons(%x, Cons(2, Nil()))", "%x: int32", "List[int32]")
    check(mod, I(1), expected=int_list(mod, [1, 2]))


def test_hd_and_tl() -> None:
    mod = prelude_main(f"(@hd({LIST}), @tl({LIST}))", ret="(int32, List[int32])")
    check(mod, expected=(I(1), int_list(mod, [2, 3, 4])))


def test_nth_and_length() -> None:
    mod = prelude_main(f"@nth({LIST}, %i) * 10 + @length({LIST})", "%i: int32")
    check(mod, I(2), expected=I(34))


def test_update_replaces_one_element() -> None:
    mod = prelude_main(f"@update({LIST}, %i, 9)", "%i: int32", "List[int32]")
    check(mod, I(1), expected=int_list(mod, [1, 9, 3, 4]))


def test_map_foldl_foldr_and_sum() -> None:
    mod = prelude_main(
        f"""
      let %xs = @map(fn (%x: int32) -> int32 {{ %x * %x }}, {LIST});
      let %left = @foldl(fn (%acc: int32, %x: int32) -> int32 {{ %acc * 10 + %x }}, 0, {LIST});
      let %right = @foldr(fn (%x: int32, %acc: int32) -> int32 {{ %acc * 10 + %x }}, 0, {LIST});
      (%xs, %left, %right, @sum(%xs))""",
        ret="(List[int32], int32, int32, int32)",
    )
    check(mod, expected=(int_list(mod, [1, 4, 9, 16]), I(1234), I(4321), I(30)))


def test_filter_keeps_the_elements_the_predicate_accepts() -> None:
    mod = prelude_main(
        f"@filter(fn (%x: int32) -> bool {{ %x > %k }}, {LIST})", "%k: int32", "List[int32]"
    )
    check(mod, I(2), expected=int_list(mod, [3, 4]))


def test_rev_concat_and_zip() -> None:
    mod = prelude_main(
        f"(@rev({LIST}), @concat(Cons(7, Nil()), Cons(8, Nil())),"
        " @zip(Cons(1, Nil()), Cons(True, Nil())))",
        ret="(List[int32], List[int32], List[(int32, bool)])",
    )
    pair = adt(mod, "Cons", (I(1), np.bool_(True)), adt(mod, "Nil"))
    check(mod, expected=(int_list(mod, [4, 3, 2, 1]), int_list(mod, [7, 8]), pair))


def test_option_values_are_matched() -> None:
    mod = parse(
        """
        def @get(%o: Option[int32], %default: int32) -> int32 {
          match (%o) { Some(%v) => %v, None => %default }
        }
        def @main(%x: int32) -> (int32, int32, Option[int32]) {
          (@get(Some(%x), 0), @get(None(), -1), Some(%x))
        }""",
        prelude=True,
    )
    check(mod, I(5), expected=(I(5), I(-1), adt(mod, "Some", I(5))))


def test_nat_arithmetic() -> None:
    mod = parse(
        """
        def @main(%n: int32) -> int32 {
          let %two = s(s(z()));
          let %three = s(%two);
          @nat_to_int(@nat_double(@nat_add(%two, %three))) + %n
        }""",
        prelude=True,
    )
    check(mod, I(100), expected=I(110))


def test_nat_value_is_returned_as_nested_adts() -> None:
    mod = prelude_main("s(s(z()))", ret="nat")
    check(mod, expected=adt(mod, "s", adt(mod, "s", adt(mod, "z"))))


def test_tree_size_and_tmap() -> None:
    mod = parse(
        """
        def @main(%x: int32) -> (int32, Tree[int32]) {
          let %leaf = Rose(%x, Nil());
          let %tree = Rose(1, Cons(%leaf, Cons(Rose(3, Cons(%leaf, Nil())), Nil())));
          (@size(%tree), @tmap(fn (%v: int32) -> int32 { %v + 1 }, Rose(%x, Nil())))
        }""",
        prelude=True,
    )
    check(mod, I(2), expected=(I(4), adt(mod, "Rose", I(3), adt(mod, "Nil"))))


def test_nested_constructor_and_tuple_patterns_with_wildcards() -> None:
    mod = parse(
        """
        def @classify(%xs: List[(int32, int32)]) -> int32 {
          match (%xs) {
            Cons((%a, _), Cons((_, %b), _)) => %a * 10 + %b,
            Cons((%a, %b), Nil) => %a - %b,
            _ => 0,
          }
        }
        def @main(%x: int32) -> (int32, int32, int32) {
          (@classify(Cons((%x, 1), Cons((2, 3), Nil()))),
           @classify(Cons((%x, 1), Nil())),
           @classify(Nil()))
        }""",
        prelude=True,
    )
    check(mod, I(5), expected=(I(53), I(4), I(0)))


def test_a_list_of_a_thousand_elements_round_trips() -> None:
    mod = parse(
        """
        def @upto(%n: int32, %acc: List[int32]) -> List[int32] {
          if (%n == 0) { %acc } else { @upto(%n - 1, Cons(%n, %acc)) }
        }
        def @main(%n: int32) -> (int32, List[int32]) {
          let %xs = @upto(%n, Nil());
          (@sum(%xs), %xs)
        }""",
        prelude=True,
    )
    n = 1000
    check(mod, I(n), expected=(I(n * (n + 1) // 2), int_list(mod, list(range(1, n + 1)))))


# --- traps -----------------------------------------------------------------------------------


def test_non_exhaustive_match_traps_and_the_vm_stays_usable() -> None:
    mod = prelude_main("@hd(@tl(Cons(%x, Nil())))", "%x: int32")
    with pytest.raises(vm.VMError):
        relay.create_executor("debug", mod).evaluate()(I(1))
    exe = relay.vm.compile(mod)
    for executable in (exe, vm.Executable.load_exec(exe.save()[0])):
        machine = vm.VirtualMachine(executable)
        with pytest.raises(vm.VMError):
            machine.invoke("main", I(1))
        assert int(machine.invoke("hd", int_list(mod, [8, 9]))) == 8
