"""Kernel descriptions of primitive functions: value numbering, attributes, names."""

from __future__ import annotations

import pytest

from compiler.backend.kernel_desc import (
    KernelDescriptionError,
    PrimitiveNames,
    describe_primitive,
    drop_unused_inputs,
)
from compiler.ir.expr import Function
from compiler.typing import infer_types
from tests.compiler.transform.util import parse
from vm.kernels import check_description


def primitive(text: str) -> Function:
    """The (type-checked) primitive function ``%0`` of a one-call ``main``."""
    main = infer_types(parse(text))["main"]
    callee = main.body.op
    assert isinstance(callee, Function)
    return callee


def test_single_operator_primitive() -> None:
    name, desc = describe_primitive(
        primitive("""
        def @main(%x: Tensor[(2, 3), float32], %y: float32) {
          %0 = fn (%a: Tensor[(2, 3), float32], %b: float32, Primitive=1) { add(%a, %b) };
          %0(%x, %y)
        }""")
    )
    assert name == "vm_mod_fused_add"
    assert desc == {
        "inputs": [["float32", 2], ["float32", 0]],
        "outputs": [["float32", 2]],
        "nodes": [{"op": "add", "args": [0, 1], "attrs": {}, "outputs": [["float32", 2]]}],
        "results": [2],
    }
    check_description(desc)


def test_fused_graph_numbers_values_inputs_first_then_node_outputs() -> None:
    name, desc = describe_primitive(
        primitive("""
        def @main(%x: Tensor[(4), float32]) {
          %0 = fn (%p: Tensor[(4), float32], Primitive=1) {
            let %n = negative(%p);
            (sum(exp(%n), axis=[0], keepdims=True), %n)
          };
          %0(%x)
        }""")
    )
    assert name == "vm_mod_fused_negative_exp_sum"
    assert [(n["op"], n["args"]) for n in desc["nodes"]] == [
        ("negative", [0]),
        ("exp", [1]),
        ("sum", [2]),
    ]
    assert desc["results"] == [3, 1]
    assert desc["outputs"] == [["float32", 1], ["float32", 1]]
    assert desc["nodes"][2]["attrs"]["axis"] == [0]  # tuples become lists
    check_description(desc)


def test_tuple_parameters_are_flattened_into_inputs() -> None:
    _, desc = describe_primitive(
        primitive("""
        def @main(%t: (Tensor[(2), int32], (Tensor[(3), int32], Tensor[(1), int32]))) {
          %0 = fn (%p: (Tensor[(2), int32], (Tensor[(3), int32], Tensor[(1), int32])),
                   Primitive=1) {
            concatenate((%p.1.1, %p.0, %p.1.0), axis=0)
          };
          %0(%t)
        }""")
    )
    assert desc["inputs"] == [["int32", 1]] * 3
    assert desc["nodes"][0]["args"] == [2, 0, 1]
    check_description(desc)


def test_multi_output_operator_numbers_each_output() -> None:
    _, desc = describe_primitive(
        primitive("""
        def @main(%x: Tensor[(6), float32]) {
          %0 = fn (%p: Tensor[(6), float32], Primitive=1) {
            %1 = split(%p, indices_or_sections=3);
            add(%1.2, %1.0)
          };
          %0(%x)
        }""")
    )
    assert desc["nodes"][0]["outputs"] == [["float32", 1]] * 3
    assert desc["nodes"][1]["args"] == [3, 1]
    assert desc["results"] == [4]
    check_description(desc)


def test_constants_and_foreign_variables_cannot_be_part_of_a_kernel() -> None:
    with pytest.raises(KernelDescriptionError, match="constant"):
        describe_primitive(
            primitive("""
            def @main(%x: float32) {
              %0 = fn (%p: float32, Primitive=1) { add(%p, 1f) };
              %0(%x)
            }""")
        )


def test_names_are_unique_per_description_in_order_of_first_appearance() -> None:
    names = PrimitiveNames()
    a = {"inputs": [["float32", 1]]}
    b = {"inputs": [["int32", 1]]}
    assert names.name("vm_mod_fused_add", a) == "vm_mod_fused_add"
    assert names.name("vm_mod_fused_add", b) == "vm_mod_fused_add_1"
    assert names.name("vm_mod_fused_add", dict(a)) == "vm_mod_fused_add"
    assert names.name("vm_mod_fused_exp", b) == "vm_mod_fused_exp"


# ---- unread inputs ------------------------------------------------------------------------


def test_inputs_no_node_reads_are_dropped_and_values_renumbered() -> None:
    _, desc = describe_primitive(
        primitive("""
        def @main(%t: (Tensor[(4), float32], Tensor[(4), float32], Tensor[(4), float32])) {
          %0 = fn (%p: (Tensor[(4), float32], Tensor[(4), float32], Tensor[(4), float32]),
                   Primitive=1) {
            multiply(sigmoid(%p.2), %p.2)
          };
          %0(%t)
        }""")
    )
    assert len(desc["inputs"]) == 3
    pruned, kept = drop_unused_inputs(desc)
    assert kept == [2]
    assert pruned == {
        "inputs": [["float32", 1]],
        "outputs": [["float32", 1]],
        "nodes": [
            {"op": "sigmoid", "args": [0], "attrs": {}, "outputs": [["float32", 1]]},
            {"op": "multiply", "args": [1, 0], "attrs": {}, "outputs": [["float32", 1]]},
        ],
        "results": [2],
    }
    check_description(pruned)


def test_a_description_reading_every_input_is_returned_unchanged() -> None:
    _, desc = describe_primitive(
        primitive("""
        def @main(%x: Tensor[(2, 3), float32], %y: float32) {
          %0 = fn (%a: Tensor[(2, 3), float32], %b: float32, Primitive=1) { add(%a, %b) };
          %0(%x, %y)
        }""")
    )
    assert drop_unused_inputs(desc) == (desc, [0, 1])


def test_an_input_returned_as_it_is_counts_as_read() -> None:
    _, desc = describe_primitive(
        primitive("""
        def @main(%x: Tensor[(4), float32], %y: Tensor[(4), float32]) {
          %0 = fn (%a: Tensor[(4), float32], %b: Tensor[(4), float32], Primitive=1) {
            (negative(%b), %a)
          };
          %0(%x, %y)
        }""")
    )
    assert drop_unused_inputs(desc)[1] == [0, 1]
