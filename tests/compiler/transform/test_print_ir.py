"""PrintIR prints the module between two passes and hands it on unchanged; InferTypeLocal
types one expression (returns), or names what is ill-typed (invalid)."""

from __future__ import annotations

import io

import pytest

from compiler import relay
from compiler.typing import RelayTypeError
from tests.compiler.transform.util import parse

PROGRAM = """
def @main(%x: Tensor[(2), float32]) {
  nn.relu(%x)
}"""


def test_print_ir_prints_its_header_and_the_module_and_returns_it_unchanged():
    mod = parse(PROGRAM)
    stream = io.StringIO()
    assert relay.transform.PrintIR("after parsing", stream=stream)(mod) is mod
    text = stream.getvalue()
    assert text.startswith("PrintIR(after parsing):\n")
    assert mod.astext(show_meta_data=False) in text


def test_print_ir_in_a_sequential_writes_to_standard_error(capsys):
    seq = relay.transform.Sequential(
        [relay.transform.InferType(), relay.transform.PrintIR(), relay.transform.FoldConstant()]
    )
    with relay.transform.PassContext(opt_level=3):
        seq(parse(PROGRAM))
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "PrintIR():" in captured.err and "-> Tensor[(2), float32]" in captured.err


def test_infer_type_local_gives_an_expression_its_type():
    x = relay.var("x", shape=(2, 3))
    expr = relay.sum(x + x, axis=1)
    assert str(relay.transform.InferTypeLocal(expr)) == "Tensor[(2), float32]"
    assert str(expr.checked_type) == "Tensor[(2), float32]"


def test_infer_type_local_names_what_is_ill_typed():
    x = relay.var("x", shape=(2, 3))
    y = relay.var("y", shape=(3, 2))
    with pytest.raises(RelayTypeError, match="add"):
        relay.transform.InferTypeLocal(x + y)
