"""Expression nodes' own methods: ``Function.with_attr`` (TVM's spelling) returns a copy with
the attribute set, leaving the original alone, and prints and parses back (returns); a key
that is not a string is refused (invalid)."""

from __future__ import annotations

import pytest

from compiler import relay


def test_with_attr_returns_a_copy_with_the_attribute_and_keeps_the_original() -> None:
    x = relay.var("x", shape=(2,))
    plain = relay.Function([x], relay.negative(x))
    marked = plain.with_attr("Inline", 1).with_attr("global_symbol", "neg")
    assert dict(marked.attrs) == {"Inline": 1, "global_symbol": "neg"}
    assert not plain.attrs and marked.body is plain.body and marked.params == plain.params
    text = relay.IRModule.from_expr(marked).astext()
    assert "Inline=1" in text
    assert relay.fromtext(text)["main"].attrs["Inline"] == 1


def test_with_attr_refuses_a_key_that_is_not_a_string() -> None:
    x = relay.var("x", shape=(2,))
    with pytest.raises(TypeError, match="attr_key must be a str"):
        relay.Function([x], x).with_attr(3, 1)
