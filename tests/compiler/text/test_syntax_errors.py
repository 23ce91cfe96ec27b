"""Bad Relay text raises RelaySyntaxError at the right line and column, saying what was
expected and what was found.

``malformed`` cases cannot be read at all (characters, tokens, grammar); ``invalid``
cases read but name something that does not exist or does not fit (names, operators,
attributes, literal ranges, the meta section).
"""

from __future__ import annotations

import pytest

from compiler.text.errors import RelaySyntaxError
from compiler.text.parser import fromtext, parse_expr, parse_type

# (source, line, column, fragments the message must contain)
MALFORMED = {
    "missing_close_paren": (
        "def @main(%x: float32) {\n  add(%x, %x;\n}",
        2, 13, ["expected ')'", "arguments of add", "opened at 2:6", "found ';'"],
    ),
    "bad_literal_suffix": (
        "def @main() {\n  1q\n}",
        2, 4, ["invalid literal suffix 'q'", "expected one of i8"],
    ),
    "integer_suffix_on_float": (
        "def @main() { 1.5i32 }", 1, 18, ["integer suffix 'i32'"],
    ),
    "unterminated_comment": (
        "def @main() { 1 }\n/* never closed\n", 2, 1, ["unterminated comment", "'*/'"],
    ),
    "stray_token_at_top_level": (
        "def @main() { 1 }\n)", 2, 1, ["expected 'def', 'type' or end of input", "found ')'"],
    ),
    "stray_identifier_at_top_level": (
        "def @main() { 1 }\nfoo", 2, 1, ["found identifier 'foo'"],
    ),
    "missing_close_brace": (
        "def @main(%x: float32) {\n  %x\n", 3, 1,
        ["expected '}'", "body of @main opened at 1:24", "found end of input"],
    ),
    "extra_token_in_body": (
        "def @main(%x: float32) { %x %x }", 1, 29,
        ["expected '}'", "found local variable '%x'"],
    ),
    "unexpected_character": ("def @main() { 1 $ 2 }", 1, 17, ["unexpected character '$'"]),
    "missing_local_name": ("def @main() { % }", 1, 15, ["expected a variable name after '%'"]),
    "unterminated_string": (
        'def @main() { cast(1, dtype="float32 }', 1, 29, ["unterminated string"],
    ),
    "bad_escape": ('def @main() { cast(1, dtype="\\q") }', 1, 30, ["invalid escape"]),
    "let_without_equals": (
        "def @main() { let %x = 1; let %x }", 1, 34, ["expected '=' after 'let %x'", "found '}'"],
    ),
    "let_in_expression_position": (
        "def @main() { add(let %x = 1; %x, 1) }", 1, 19, ["found keyword 'let'", "parentheses"],
    ),
    "string_as_expression": ('def @main() { "s" }', 1, 15, ["expected an expression"]),
    "bad_dimension": (
        "def @main(%x: Tensor[(1, a), float32]) { 1 }", 1, 26,
        ["expected a dimension (an integer or ?)", "identifier 'a'"],
    ),
    "bad_dtype_in_tensor_type": (
        "def @main(%x: Tensor[(1, 2), float31]) { 1 }", 1, 30, ["expected a dtype"],
    ),
    "bad_projection": ("def @main(%x) { %x.a }", 1, 20, ["expected a tuple index"]),
    "if_without_else": (
        "def @main(%c: bool) { if (%c) { 1 } }", 1, 37, ["expected 'else'", "found '}'"],
    ),
    "if_without_parentheses": (
        "def @main(%c: bool) { if %c { 1 } else { 2 } }", 1, 26, ["expected '(' after 'if'"],
    ),
    "missing_arrow_in_clause": (
        "def @main(%t) { match (%t) { _ 1 } }", 1, 32, ["expected '=>'"],
    ),
    "def_without_global_name": ("def main() { 1 }", 1, 5, ["expected a global name"]),
    "unsupported_version": (
        '#[version = "0.1.0"]\ndef @main() { 1 }', 1, 13, ['unsupported', '"0.0.5"'],
    ),
    "bad_metadata_json": (
        'def @main() { 1 }\n#[metadata]\n{"relay.Constant": [', 3, 21,
        ["malformed #[metadata] section"],
    ),
}  # fmt: skip

INVALID = {
    "undeclared_variable": (
        "def @main(%x: float32) {\n  add(%x, %y)\n}", 2, 11, ["undeclared local variable '%y'"],
    ),
    "variable_used_before_its_let": (
        "def @main() { let %a = %b; let %b = 1; %a }", 1, 24, ["undeclared local variable '%b'"],
    ),
    "variable_out_of_scope": (
        "def @main(%c: bool) { %0 = if (%c) { let %v = 1; %v } else { 2 }; %v }", 1, 67,
        ["undeclared local variable '%v'"],
    ),
    "unknown_operator": (
        "def @main(%x: float32) { ad(%x, %x) }", 1, 26,
        ["unknown operator or constructor 'ad'", "did you mean 'add'"],
    ),
    "unknown_attribute": (
        "def @main(%x: float32) { sum(%x, axes=[1]) }", 1, 34,
        ["operator sum has no attribute 'axes'", "did you mean 'axis'", "keepdims"],
    ),
    "bad_attribute_value": (
        'def @main(%x: float32) { cast(%x, dtype="float33") }', 1, 35,
        ["attribute dtype of operator cast", "'float33'"],
    ),
    "missing_required_attribute": (
        "def @main(%x: float32) { cast(%x) }", 1, 30, ["cast requires attribute dtype"],
    ),
    "wrong_operator_arity": (
        "def @main(%x: float32) { add(%x) }", 1, 29, ["add takes 2 arguments", "found 1"],
    ),
    "attributes_on_a_function_call": (
        "def @f(%x: int32) { %x }\ndef @main() { @f(1, axis=1) }", 2, 21,
        ["attributes are only allowed in operator calls", "@f"],
    ),
    "unknown_global": (
        "def @main() { @mian() }", 1, 15, ["unknown global function '@mian'", "'@main'"],
    ),
    "unknown_constructor": (
        "type List[A] { Cons(A, List[A]), Nil }\ndef @main() { Con(1, Nil()) }", 2, 15,
        ["unknown operator or constructor 'Con'", "'Cons'"],
    ),
    "unknown_constructor_in_pattern": (
        "type List[A] { Cons(A, List[A]), Nil }\n"
        "def @main(%x: List[int32]) { match (%x) { Conss(_, _) => 1 } }", 2, 43,
        ["unknown constructor 'Conss' in pattern", "'Cons'"],
    ),
    "unknown_type": (
        "def @main(%x: flaot32) { 1 }", 1, 15, ["unknown type 'flaot32'", "'float32'"],
    ),
    "unknown_type_variable": ("def @main(%x: A) { 1 }", 1, 15, ["unknown type 'A'"]),
    "local_written_without_percent": (
        "def @main(%x) { x }", 1, 17, ["local variables are written '%x'"],
    ),
    "type_used_as_expression": (
        "type T { A }\ndef @main() { T }", 2, 15, ["'T' is a type, not an expression"],
    ),
    "integer_literal_out_of_range": (
        "def @main() { 300i8 }", 1, 15, ["300i8 does not fit int8"],
    ),
    "int32_literal_needs_suffix": (
        "def @main() { 3000000000 }", 1, 15, ["does not fit int32", "i64"],
    ),
    "negative_unsigned_literal": ("def @main() { -1u8 }", 1, 16, ["-1u8 does not fit uint8"]),
    "float_literal_out_of_range": ("def @main() { 1e39f }", 1, 15, ["out of range for float32"]),
    "duplicate_definition": (
        "def @main() { 1 }\ndef @main() { 2 }", 2, 5, ["@main is defined twice"],
    ),
    "duplicate_parameter": ("def @main(%x, %x) { %x }", 1, 15, ["%x of @main is declared twice"]),
    "duplicate_constructor": ("type T { A, A }", 1, 13, ["constructor A is defined twice"]),
    "constructor_named_like_an_operator": (
        "type T { add }", 1, 10, ["clashes with the operator"],
    ),
    "duplicate_pattern_variable": (
        "def @main(%t) { match (%t) { (%a, %a) => 1 } }", 1, 35, ["%a is bound twice"],
    ),
    "meta_without_section": (
        "def @main() { meta[relay.Constant][0] }", 1, 15, ["no #[metadata] section"],
    ),
    "meta_index_out_of_bounds": (
        "def @main() { meta[relay.Constant][1] }\n#[metadata]\n"
        '{"relay.Constant": [{"dtype": "int32", "shape": [1], "data": "AQAAAA=="}]}',
        1, 36, ["node index 1 is out of bounds for relay.Constant", "has 1"],
    ),
    "meta_data_size_mismatch": (
        "def @main() { meta[relay.Constant][0] }\n#[metadata]\n"
        '{"relay.Constant": [{"dtype": "int32", "shape": [2], "data": "AQAAAA=="}]}',
        2, 12, ["has 4 bytes of data", "needs 8"],
    ),
}  # fmt: skip


def parse_error(text: str) -> RelaySyntaxError:
    with pytest.raises(RelaySyntaxError) as info:
        fromtext(text)
    return info.value


def check(case: tuple, error: RelaySyntaxError) -> None:
    text, line, column, fragments = case
    message = str(error)
    assert (error.lineno, error.offset) == (line, column), message
    for fragment in fragments:
        assert fragment in error.msg, message
    # str() shows name:line:col, the source line and a caret under the column.
    header, source_line, caret_line = message.split("\n")
    assert header.startswith(f"<string>:{line}:{column}: ")
    assert source_line == "    " + text.split("\n")[line - 1]
    assert caret_line == "    " + " " * (column - 1) + "^"
    assert error.text == text.split("\n")[line - 1]


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed(name):
    check(MALFORMED[name], parse_error(MALFORMED[name][0]))


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid(name):
    check(INVALID[name], parse_error(INVALID[name][0]))


def test_error_is_a_syntax_error_with_source_name():
    with pytest.raises(SyntaxError) as info:
        fromtext("def @main() { 1q }", source_name="model.rly")
    assert info.value.filename == "model.rly"
    assert str(info.value).startswith("model.rly:1:16: ")


def test_caret_lines_up_under_tab_indented_source():
    error = parse_error("def @main() {\n\t\t%nope\n}")
    assert error.offset == 3
    assert str(error).split("\n")[2] == "    \t\t^"


def test_windows_line_endings_parse_and_errors_show_the_line():
    assert fromtext("def @main() {\r\n  1\r\n}\r\n")["main"].body.data == 1
    error = parse_error("def @main() {\r\n  1q\r\n}")
    assert (error.lineno, error.offset, error.text) == (2, 4, "  1q")


def test_parse_expr_rejects_trailing_tokens():
    with pytest.raises(RelaySyntaxError) as info:
        parse_expr("1 2")
    assert info.value.offset == 3 and "expected end of input" in info.value.msg


def test_parse_expr_requires_declared_free_variables():
    with pytest.raises(RelaySyntaxError) as info:
        parse_expr("%x + 1f")
    assert "undeclared local variable '%x'" in info.value.msg


def test_parse_type_rejects_unknown_names():
    with pytest.raises(RelaySyntaxError) as info:
        parse_type("Tensor[(2), float32] extra")
    assert "expected end of input after the type" in info.value.msg
