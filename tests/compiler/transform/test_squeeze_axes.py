"""explicit_squeeze_axes: squeeze without axis gets the axes its argument's type removes."""

from __future__ import annotations

from compiler import relay
from compiler.transform.squeeze_axes import explicit_squeeze_axes, static_unit_axes
from compiler.typing import infer_types


def lowered_axes(text: str) -> list:
    mod = explicit_squeeze_axes(infer_types(relay.fromtext('#[version = "0.0.5"]\n' + text)))
    found = []
    relay.analysis.post_order_visit(
        mod["main"],
        lambda n: (
            found.append(n.attrs["axis"])
            if isinstance(n, relay.Call) and getattr(n.op, "name", "") == "squeeze"
            else None
        ),
    )
    return found


def test_static_unit_axes_are_written_down_and_dynamic_ones_kept() -> None:
    assert lowered_axes("def @main(%x: Tensor[(?, 1, 3, 1), float32]) { squeeze(%x) }") == [(1, 3)]


def test_explicit_axes_are_left_alone() -> None:
    assert lowered_axes("def @main(%x: Tensor[(1, 1), float32]) { squeeze(%x, axis=[0]) }") == [
        (0,)
    ]


def test_the_rewritten_module_keeps_its_types() -> None:
    mod = infer_types(
        relay.fromtext(
            '#[version = "0.0.5"]\ndef @main(%x: Tensor[(1, ?), float32]) { squeeze(%x) }'
        )
    )
    out = explicit_squeeze_axes(mod)
    assert str(out["main"].body.checked_type) == str(mod["main"].body.checked_type)


def test_static_unit_axes_of_a_non_tensor_is_none() -> None:
    assert static_unit_axes(relay.TupleType([])) is None
