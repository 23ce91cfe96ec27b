"""Scalar literals print as the shortest text that reads back to the same bits, and the
lexer splits names, numbers and projections the way the grammar needs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.text.errors import Source
from compiler.text.lexer import tokenize
from compiler.text.literals import LiteralError, format_scalar, parse_scalar


def read_back(text: str) -> np.ndarray:
    """Lex ``text`` as the parser does (a leading '-' is a separate token) and evaluate it."""
    number = tokenize(Source(text.lstrip("-")))[0]
    digits, suffix = number.value
    return parse_scalar(digits, suffix, negative=text.startswith("-"))


@pytest.mark.parametrize(
    ("width", "dtype", "uint"),
    [(16, "float16", "uint16"), (32, "float32", "uint32"), (64, "float64", "uint64")],
)
@settings(max_examples=200, deadline=None)
@given(bits=st.integers(0, 2**64 - 1))
def test_every_finite_float_round_trips_bit_for_bit(width, dtype, uint, bits):
    value = np.asarray(bits % (2**width), dtype=uint).view(dtype)
    text = format_scalar(value)
    if not np.isfinite(value):
        assert text is None  # non-finite values go to the meta section
        return
    back = read_back(text)
    assert back.dtype == value.dtype and back.tobytes() == value.tobytes(), text


INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_extremes_round_trip(dtype):
    info = np.iinfo(dtype)
    for item in (info.min, info.max, 0):
        value = np.asarray(item, dtype=dtype)
        back = read_back(format_scalar(value))
        assert back.dtype == value.dtype and back == value


def test_out_of_range_and_malformed_literals_are_rejected():
    with pytest.raises(LiteralError, match="does not fit int8"):
        parse_scalar("128", "i8")
    assert parse_scalar("128", "i8", negative=True) == -128
    with pytest.raises(LiteralError, match="out of range for float16"):
        parse_scalar("65520", "f16")
    assert parse_scalar("65519", "f16") == np.float16(65504)
    with pytest.raises(LiteralError, match="invalid literal suffix 'x'"):
        parse_scalar("1", "x")
    with pytest.raises(LiteralError, match="does not fit int64"):
        parse_scalar("9" * 400, "i64")


def test_tiny_decimals_underflow_to_signed_zero():
    assert np.signbit(parse_scalar("1e-400", "f", negative=True))
    assert parse_scalar("1e-400", "f") == 0


def kinds(text: str) -> list[tuple[str, object]]:
    return [(t.kind, t.value) for t in tokenize(Source(text))][:-1]


def test_dotted_operator_names_versus_projections():
    assert kinds("nn.dense") == [("ident", "nn.dense")]
    dot, zero, one = ("punct", "."), ("number", ("0", "")), ("number", ("1", ""))
    assert kinds("%t.0.1") == [("local", "t"), dot, zero, dot, one]
    assert kinds("%0.1") == [("local", "0"), ("punct", "."), ("number", ("1", ""))]
    assert kinds("0.1f") == [("number", ("0.1", "f"))]
    assert kinds("1e-3f16") == [("number", ("1e-3", "f16"))]


def test_two_character_punctuation_and_quoted_names():
    assert [v for _, v in kinds("-> => == != <= >= - =")] == [
        "->", "=>", "==", "!=", "<=", ">=", "-", "=",
    ]  # fmt: skip
    assert kinds('%"a b" @"c\\"d"') == [("local", "a b"), ("global", 'c"d')]


def test_metadata_section_is_one_raw_token():
    tokens = tokenize(Source('1 #[metadata]\n{"x": [1, 2]}'))
    assert tokens[1].kind == "metadata" and tokens[1].value == '\n{"x": [1, 2]}'
