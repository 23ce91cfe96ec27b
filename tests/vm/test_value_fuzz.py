"""Fuzz: caller-made closures, ADTs and tuples of random dtypes, ranks, shapes and arity.

Every generated value either runs and gives the answer an independent oracle computes,
or is refused with TypeError/ValueError; it never crashes the process or answers wrongly
(issue 13, "Keep": fuzz targets for caller-made values). The suite runs a small count;
``RELAYVM_VALUE_FUZZ=<cases per program>`` runs more.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from functools import partial

import numpy as np
import pytest

import vm
from compiler import relay
from tests.vm.test_value_types import CLOSURES

CASES = int(os.environ.get("RELAYVM_VALUE_FUZZ", "150"))
#: Outcomes of every case run, printed with ``pytest -s`` (the probe's figures).
OUTCOMES: Counter[str] = Counter()
DTYPES = ["float32", "int32", "float64", "int64", "uint8", "bool", "float16"]


@pytest.fixture(scope="module")
def machines():
    closures = vm.VirtualMachine(relay.vm.compile(relay.fromtext(CLOSURES), "llvm"))
    mod = relay.IRModule()
    p = relay.Prelude(mod)
    list_of_int = relay.TypeCall(p.get_type("List")[0], [relay.TensorType((), "int32")])
    xs = relay.var("xs", list_of_int)
    mod["main"] = relay.Function([xs], relay.Call(p.get_global_var("sum"), [xs]))
    prelude = vm.VirtualMachine(relay.vm.compile(mod, "llvm"))
    return closures, prelude


def random_array(rng: random.Random, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if rng.random() < 0.7:  # mostly the expected kind, mutated one way at a time
        dtype = dtype if rng.random() < 0.7 else rng.choice(DTYPES)
        if rng.random() < 0.3:
            shape = tuple(rng.randint(0, 3) for _ in range(rng.choice([0, 1, 2, 3, 16])))
    else:
        dtype = rng.choice(DTYPES)
        shape = tuple(rng.randint(1, 2) for _ in range(rng.randint(0, 17)))
    array = (np.arange(int(np.prod(shape)), dtype=np.int64) % 5).astype(dtype).reshape(shape)
    if rng.random() < 0.2 and array.ndim:
        array = np.asfortranarray(array)
    return array


def is_tensor(value, dtype: str, shape: tuple[int, ...]) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == np.dtype(dtype) and value.shape == shape


# ---- closures ---------------------------------------------------------------------------------


def random_closure(rng, machine):
    names = machine.executable.globals
    name = rng.choice(["g", "g", "g", "h", "k", "main"])
    index = names.index(name)
    if rng.random() < 0.1:
        index = rng.choice([-1, len(names), True, np.int64(index), None])
        if not isinstance(index, np.int64):
            name = None  # no function of the executable
    count = rng.choice([0, 1, 1, 1, 2])
    captured = [random_array(rng, "float32", (1,)) for _ in range(count)]
    return vm.Closure(index, captured), name


def oracle_main(closure, name):
    """``main(f)`` runs ``f()``: only a closure of g with one float32[1] captured value fits."""
    if name != "g" or len(closure.captured) != 1:
        return None
    (y,) = closure.captured
    return y + y if is_tensor(y, "float32", (1,)) else None


def oracle_apply(closure, name, x):
    if name != "g" or closure.captured or not is_tensor(x, "float32", (1,)):
        return None
    return x + x


def check(call, expected):
    try:
        result = call()
    except (TypeError, ValueError):
        assert expected is None, "a valid value was refused"
        OUTCOMES["clean error"] += 1
        return
    assert expected is not None, f"an invalid value ran and returned {result!r}"
    np.testing.assert_array_equal(result, expected)
    OUTCOMES["right answer"] += 1


@pytest.fixture(scope="module", autouse=True)
def report_outcomes():
    yield
    print(f"\ncaller-made value fuzz: {sum(OUTCOMES.values())} cases, {dict(OUTCOMES)}")


def test_fuzzed_closures_run_right_or_are_refused(machines):
    machine = machines[0]
    rng = random.Random(13)
    for _ in range(CASES):
        closure, name = random_closure(rng, machine)
        check(partial(machine.invoke, "main", closure), oracle_main(closure, name))
        x = random_array(rng, "float32", (1,))
        closure, name = random_closure(rng, machine)
        closure = vm.Closure(closure.func_index, closure.captured[:1] if rng.random() < 0.2 else [])
        check(partial(machine.invoke, "apply", closure, x), oracle_apply(closure, name, x))


# ---- ADTs ---------------------------------------------------------------------------------------


def oracle_sum(items, tags):
    """The int32 sum of a well-formed List[int32] of 0-d int32 arrays, or None."""
    total = np.int32(0)
    while True:
        if not isinstance(items, vm.ADT):
            return None
        if items.tag == tags["Nil"]:
            return total if not items.fields else None
        if items.tag != tags["Cons"] or len(items.fields) != 2:
            return None
        head, items = items.fields
        if not is_tensor(head, "int32", ()):
            return None
        total = np.int32(total + head)


def test_fuzzed_lists_sum_right_or_are_refused(machines):
    machine = machines[1]
    tags = {c.name: c.tag for c in machine.executable.constructors}
    rng = random.Random(14)
    for _ in range(CASES):
        items = vm.ADT(tags["Nil"], [], "Nil")
        if rng.random() < 0.05:
            items = vm.ADT(tags["Some"], [np.int32(1)], "Some")
        for _ in range(rng.randint(0, 6)):
            fields = [random_array(rng, "int32", ()), items]
            tag = tags["Cons"]
            if rng.random() < 0.05:
                fields = fields[: rng.randint(0, 1)]
            if rng.random() < 0.05:
                tag = rng.choice([tags["Nil"], tags["Some"], 0, 99])
            items = vm.ADT(tag, fields, "Cons")
        check(partial(machine.invoke, "main", items), oracle_sum(items, tags))


# ---- tuples -------------------------------------------------------------------------------------


def test_fuzzed_tuples_run_right_or_are_refused(machines):
    machine = machines[0]
    rng = random.Random(15)
    for _ in range(CASES):
        first = random_array(rng, "float32", (2,))
        inner = [random_array(rng, "int32", ()), random_array(rng, "float32", (1,))]
        if rng.random() < 0.1:
            inner.append(random_array(rng, "int32", ()))
        value: object = (first, tuple(inner) if rng.random() < 0.9 else inner[0])
        if rng.random() < 0.1:
            value = (first,)
        valid = (
            len(value) == 2
            and is_tensor(first, "float32", (2,))
            and isinstance(value[1], tuple)
            and len(value[1]) == 2
            and is_tensor(inner[0], "int32", ())
            and is_tensor(inner[1], "float32", (1,))
        )
        expected = inner[1] + inner[1] if valid else None
        check(partial(machine.invoke, "pair", value), expected)
