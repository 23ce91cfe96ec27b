"""Programs in the syntax of TVM's own ``prelude.rly`` parse, type-check and run unchanged.

The library below is written here (it is not TVM's file) but uses every construct that file
uses: block and line comments, ``type`` definitions with type parameters, constructors
without fields written bare (``Empty``, ``Nothing``, ``Zero``: TVM's parser applies them),
``match`` and ``match?`` with nested constructor patterns, a ``match`` on a tuple of
values with tuple patterns, ``def`` with type parameters and without a return type, a
parenthesized function return type, ``fn`` closures in ``let``, constructors with fields
and polymorphic globals passed as function values, projections and tuple types. It also
uses ``fn [A]`` closures with their own type parameters and operator attributes.
"""

from __future__ import annotations

import numpy as np

from compiler import relay
from compiler.ir.structural import structural_equal
from tests.e2e.harness import adt, check, parse

I = np.int32

LIBRARY = """
/*
 * A small sequence library in TVM's prelude style.
 * /* Block comments nest. */
 */
type Seq[T] {
  Push(T, Seq[T]),
  Empty,
}

type Maybe[T] {
  Just(T),
  Nothing,
}

type Peano {
  Zero,
  Succ(Peano),
}

// The constant function, with no return type written.
def @always[T, U](%v: T) {
  fn (%ignored: U) -> T {
    %v
  }
}

def @swap_args[T, U, R](%g: fn(T, U) -> R) -> fn(U, T) -> R {
  fn(%u: U, %t: T) -> R {
    %g(%t, %u)
  }
}

def @first[T](%s: Seq[T]) -> T {
  match? (%s) {
    Push(%h, _) => %h,
  }
}

def @last[T](%s: Seq[T]) -> T {
  match? (%s) {
    Push(%h, Empty) => %h,
    Push(_, %more) => @last(%more),
  }
}

def @fold_left[T, U](%g: fn(U, T) -> U, %init: U, %s: Seq[T]) -> U {
  match (%s) {
    Push(%h, %more) => @fold_left(%g, %g(%init, %h), %more),
    Empty => %init,
  }
}

def @fold_right[T, U](%g: fn(T, U) -> U, %init: U, %s: Seq[T]) -> U {
  match(%s) {
    Push(%h, %more) => {
      %g(%h, @fold_right(%g, %init, %more))
    },
    Empty => %init,
  }
}

// Reversal folds the flipped constructor over the sequence.
def @reverse[T](%s: Seq[T]) -> Seq[T] {
  @fold_left(@swap_args(Push), Empty, %s)
}

def @append[T](%a: Seq[T], %b: Seq[T]) -> Seq[T] {
  @fold_right(Push, %b, %a)
}

// Pairs up two sequences; the result is as long as the shorter one.
def @pairs[T, U](%a: Seq[T], %b: Seq[U]) -> Seq[(T, U)] {
  match (%a, %b) {
    (Push(%x, %xs), Push(%y, %ys)) => Push((%x, %y), @pairs(%xs, %ys)),
    _ => Empty,
  }
}

def @total(%s: Seq[Tensor[(), int32]]) {
  let %plus = fn(%p: Tensor[(), int32], %q: Tensor[(), int32]) -> Tensor[(), int32] {
    %p + %q
  };
  @fold_left(%plus, 0, %s)
}

def @count_down(%n: int32) -> Seq[int32] {
  let %step = fn (%k: int32) -> Maybe[(int32, int32)] {
    if (%k > 0) { Just((%k - 1, %k)) } else { Nothing }
  };
  @unfold(%step, %n)
}

def @unfold[S, T](%step: fn(S) -> Maybe[(S, T)], %seed: S) -> Seq[T] {
  match (%step(%seed)) {
    Just(%next) => Push(%next.1, @unfold(%step, %next.0)),
    Nothing => Empty,
  }
}

def @to_int(%n: Peano) -> int32 {
  match (%n) {
    Succ(Succ(%m)) => 2 + @to_int(%m),
    Succ(Zero) => 1,
    Zero => 0,
  }
}

def @ident[T](%v: T) -> T {
  %v
}

def @then[A, B, C](%f: fn(B) -> C, %g: fn(A) -> B) {
  fn (%v: A) -> C {
    %f(%g(%v))
  }
}

// A polymorphic global is returned as a function value in the base case.
def @repeat[T](%f: fn(T) -> T, %n: Tensor[(), int32]) -> (fn(T) -> T) {
  if (%n == 0) {
    @ident
  } else {
    @then(%f, @repeat(%f, %n - 1))
  }
}
"""


def library(main: str) -> relay.IRModule:
    return parse(LIBRARY + main)


def seq(mod: relay.IRModule, values: list) -> object:
    result = adt(mod, "Empty")
    for v in reversed(values):
        result = adt(mod, "Push", v, result)
    return result


# --- returns ---------------------------------------------------------------------------------


def test_the_library_parses_type_checks_and_round_trips() -> None:
    mod = library("")
    typed = relay.transform.InferType()(mod)
    assert str(typed["pairs"].checked_type.ret_type) == "Seq[(T, U)]"
    assert structural_equal(relay.fromtext(str(mod)), mod)


def test_folds_reverse_append_and_total_over_bare_constructors() -> None:
    mod = library(
        """
def @main(%n: int32) {
  let %s = Push(1, Push(2, Push(%n, Empty)));
  (@first(%s), @last(%s), @reverse(%s), @append(%s, Push(9, Empty)), @total(%s),
   @fold_right(fn (%h: int32, %acc: int32) -> int32 { %acc * 10 + %h }, 0, %s))
}
"""
    )
    check(
        mod,
        I(3),
        expected=(
            I(1),
            I(3),
            seq(mod, [I(3), I(2), I(1)]),
            seq(mod, [I(1), I(2), I(3), I(9)]),
            I(6),
            I(321),
        ),
    )


def test_match_on_a_tuple_of_two_sequences() -> None:
    mod = library("def @main(%n: int32) { @pairs(Push(1, Push(%n, Empty)), Push(True, Empty)) }")
    check(mod, I(5), expected=seq(mod, [(I(1), np.array(True))]))
    shorter_second = library(
        "def @main() { let %none: Seq[bool] = Empty; @pairs(Push(1, Empty), %none) }"
    )
    check(shorter_second, expected=seq(shorter_second, []))


def test_option_unfold_peano_numbers_and_nested_patterns() -> None:
    mod = library(
        """
def @main(%n: int32) {
  (@count_down(%n), @to_int(Succ(Succ(Succ(Zero)))), @to_int(Zero))
}
"""
    )
    check(mod, I(3), expected=(seq(mod, [I(3), I(2), I(1)]), I(3), I(0)))


def test_polymorphic_globals_closures_and_operator_attributes() -> None:
    mod = library(
        """
def @main(%n: int32) {
  let %twice = fn (%v: int32) -> int32 { %v * 2 };
  let %pick = fn [A](%a: A, %b: A) -> A { %b };
  let %minus = fn (%a: int32, %b: int32) { %a - %b };
  (@repeat(%twice, 3)(%n), @always(%n)(True), @swap_args(%minus)(1, %n), %pick(%n, 7),
   cast(%n, dtype="float32"))
}
"""
    )
    check(mod, I(3), expected=(I(24), I(3), I(2), I(7), np.float32(3)))
