"""``relay.create_executor``: the debug, vm and graph executors, evaluate(), argument conversion
and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.build import check_graph_program
from compiler.executor import convert_arguments
from compiler.interpreter import InterpreterClosure, InterpreterError
from vm.objects import ADT

I32 = relay.scalar_type("int32")
F32 = relay.scalar_type("float32")

TVM_EXAMPLE = """
#[version = "0.0.5"]
def @main(%a: Tensor[(1, 2), uint8], %b: Tensor[(1, 2), float32], %c: Tensor[(1, 2), float32]) {
  %0 = cast(%a, dtype="float32") + %b * %c;
  %0
}
"""


def example_inputs():
    a = np.array([[1, 255]], dtype="uint8")
    b = np.array([[0.5, -1.5]], dtype="float32")
    c = np.array([[2.0, 4.0]], dtype="float32")
    return a, b, c, a.astype("float32") + b * c


def scale_module() -> relay.IRModule:
    """``main(%x: Tensor[(2, 2), float32], %s: float32) = x * s`` plus a tuple-taking helper."""
    x = relay.var("x", shape=(2, 2))
    s = relay.var("s", F32)
    mod = relay.IRModule()
    mod["main"] = relay.Function([x, s], x * s)
    return mod


def convert(types, args=(), kwargs=None, names=None):
    names = names or [f"p{i}" for i in range(len(types))]
    return convert_arguments(
        "main", names, types, args, kwargs or {}, (InterpreterClosure,), {"List": frozenset({1})}
    )


# --- returns -------------------------------------------------------------------------------------


def test_tvm_text_example_evaluates_to_numpys_answer():
    a, b, c, expected = example_inputs()
    f = relay.create_executor(mod=relay.fromtext(TVM_EXAMPLE)).evaluate()
    out = f(a, b, c)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected)


def test_keyword_arguments_by_parameter_name():
    a, b, c, expected = example_inputs()
    f = relay.create_executor("debug", relay.fromtext(TVM_EXAMPLE)).evaluate()
    np.testing.assert_allclose(f(a, c=c, b=b), expected)
    np.testing.assert_allclose(f(c=c, a=a, b=b), expected)


def test_python_scalars_convert_to_the_parameter_dtype():
    f = relay.create_executor(mod=scale_module()).evaluate()
    out = f(np.ones((2, 2), "float32"), 3)
    np.testing.assert_array_equal(out, np.full((2, 2), 3.0, "float32"))
    np.testing.assert_array_equal(f(np.ones((2, 2), "float32"), s=0.5), np.full((2, 2), 0.5))


def test_evaluate_an_expression_immediately():
    ex = relay.create_executor()
    out = ex.evaluate(relay.const(2.0) * relay.const(21.0))
    assert isinstance(out, np.ndarray) and float(out) == 42.0


def test_evaluate_a_function_returns_a_callable():
    x = relay.var("x", I32)
    f = relay.create_executor().evaluate(relay.Function([x], x + relay.const(1)))
    assert int(f(41)) == 42


def test_evaluate_a_global_var_calls_that_global():
    mod = scale_module()
    y = relay.var("y", I32)
    mod["inc"] = relay.Function([y], y + relay.const(1))
    f = relay.create_executor(mod=mod).evaluate(mod.get_global_var("inc"))
    assert int(f(np.array(1, "int32"))) == 2
    assert "inc" in mod and mod["main"].params[0].name_hint == "x"  # mod is not modified


def test_evaluate_with_binds_for_free_variables():
    x = relay.var("x", shape=(2,))
    out = relay.create_executor().evaluate(x + x, binds={x: np.array([1.0, 2.0], "float32")})
    np.testing.assert_array_equal(out, [2.0, 4.0])
    out = relay.create_executor().evaluate(x * x, binds={"x": np.array([3.0, 4.0], "float32")})
    np.testing.assert_array_equal(out, [9.0, 16.0])


def test_params_are_bound_into_main():
    mod = scale_module()
    f = relay.create_executor(mod=mod, params={"s": np.array(2.0, "float32")}).evaluate()
    np.testing.assert_array_equal(f(np.ones((2, 2), "float32")), np.full((2, 2), 2.0))
    assert len(mod["main"].params) == 2  # the caller's module keeps its parameters


def test_tuple_parameters_take_tuples_or_lists_and_results_are_tuples():
    t = relay.var("t", relay.TupleType([I32, relay.TupleType([F32, F32])]))
    body = relay.Tuple([t[1][1], t[0]])
    f = relay.create_executor().evaluate(relay.Function([t], body))
    out = f((1, [2.0, 3.5]))
    assert isinstance(out, tuple) and float(out[0]) == 3.5 and int(out[1]) == 1
    assert out[1].dtype == np.int32


def test_results_are_owned_by_the_caller():
    x = relay.var("x", shape=(3,))
    f = relay.create_executor().evaluate(relay.Function([x], x))
    data = np.zeros(3, "float32")
    out = f(data)
    out[0] = 7.0
    assert data[0] == 0.0
    c = relay.create_executor().evaluate(relay.const(np.zeros(2, "float32")))
    c[0] = 1.0  # a constant's value comes back writable


def test_adt_results_and_arguments():
    mod = relay.IRModule()
    p = relay.Prelude(mod)
    _, cons, nil = p.get_type("List")
    xs = relay.var("xs", relay.TypeCall(p.get_type("List")[0], [I32]))
    mod["main"] = relay.Function([xs], relay.Call(cons, [relay.const(0), xs]))
    f = relay.create_executor(mod=mod).evaluate()
    value = f(ADT(nil.tag, [], "Nil"))
    assert isinstance(value, ADT) and value.constructor == "Cons" and int(value[0]) == 0
    again = f(value)
    assert again[1].constructor == "Cons" and again[1][1].constructor == "Nil"


def test_closure_results_can_be_passed_back_in():
    x, y = relay.var("x", I32), relay.var("y", I32)
    adder = relay.create_executor().evaluate(relay.Function([x], relay.Function([y], x + y)))
    add5 = adder(5)
    g = relay.var("g", relay.FuncType([I32], I32))
    apply = relay.create_executor().evaluate(relay.Function([g], relay.Call(g, [relay.const(1)])))
    assert int(apply(add5)) == 6


# --- traps ---------------------------------------------------------------------------------------


def test_non_exhaustive_match_traps_and_the_callable_keeps_working():
    mod = relay.IRModule()
    p = relay.Prelude(mod)
    _, cons, nil = p.get_type("List")
    f = relay.create_executor(mod=mod).evaluate(p.get_global_var("hd"))
    with pytest.raises(InterpreterError, match="Nil"):
        f(ADT(nil.tag, [], "Nil"))
    assert int(f(ADT(cons.tag, [np.array(4, "int32"), ADT(nil.tag, [], "Nil")], "Cons"))) == 4


def test_debug_executor_runs_ten_thousand_deep_recursion():
    base = relay.IRModule()
    relay.Prelude(base)
    mod = relay.fromtext(
        '#[version = "0.0.5"]\n'
        "def @build(%n: int32) -> List[int32] {\n"
        "  if (%n == 0) { Nil() } else { Cons(%n, @build(%n - 1)) }\n"
        "}\n"
        "def @main(%n: int32) { @length(@rev(@build(%n))) }",
        init_module=base,
    )
    assert int(relay.create_executor(mod=mod).evaluate()(10_000)) == 10_000


# --- invalid: arguments --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((1, 2, 3), {}, TypeError, r"main takes 2 argument\(s\) \(%x, %s\) but received 3"),
        ((), {"x": 1}, TypeError, r"main is missing argument\(s\) for %s"),
        ((np.ones((2, 2), "float32"),), {"z": 1}, TypeError, "no parameter named 'z'"),
        ((np.ones((2, 2), "float32"), 1.0), {"x": 1}, TypeError, "received parameter %x twice"),
    ],
)
def test_argument_grouping_errors(args, kwargs, error, message):
    f = relay.create_executor(mod=scale_module()).evaluate()
    with pytest.raises(error, match=message):
        f(*args, **kwargs)
    np.testing.assert_array_equal(f(np.ones((2, 2), "float32"), 2.0), np.full((2, 2), 2.0))


def test_errors_of_a_callable_for_a_global_name_that_global():
    mod = relay.IRModule()
    p = relay.Prelude(mod)
    f = relay.create_executor(mod=mod).evaluate(p.get_global_var("length"))
    with pytest.raises(TypeError, match=r"length: parameter %xs expects List\[A\] but received"):
        f(np.zeros(3, "int32"))


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (np.ones((2, 2), "float64"), TypeError, r"Tensor\[\(2, 2\), float32\].*dtype float64"),
        (np.ones((2, 3), "float32"), ValueError, r"received an array of shape \(2, 3\)"),
        (np.ones(4, "float32"), ValueError, r"shape \(4,\)"),
        ("text", TypeError, "received a str"),
        ([[1.0, 2.0], [3.0, 4.0]], TypeError, "received a list"),
    ],
)
def test_tensor_argument_errors_name_function_parameter_expected_and_received(
    value, error, message
):
    f = relay.create_executor(mod=scale_module()).evaluate()
    with pytest.raises(error, match=r"main: parameter %x expects .*" + message):
        f(value, 1.0)


def test_numpy_scalars_convert_like_python_scalars():
    f = relay.create_executor(mod=scale_module()).evaluate()
    np.testing.assert_array_equal(
        f(np.ones((2, 2), "float32"), np.float64(2.0)), np.full((2, 2), 2)
    )
    with pytest.raises(ValueError, match=r"parameter %s expected a float32 scalar.*overflows"):
        f(np.ones((2, 2), "float32"), np.float64(1e300))
    with pytest.raises(ValueError, match=r"parameter %x expects Tensor\[\(2, 2\), float32\]"):
        f(np.float32(1.0), 1.0)


@pytest.mark.parametrize(
    ("dtype", "value", "error", "message"),
    [
        ("uint8", 256, ValueError, "out of range for uint8"),
        ("int8", -129, ValueError, "out of range for int8"),
        ("int32", 1.5, ValueError, "1.5 is not an integer"),
        ("bool", 2, ValueError, "not 0 or 1"),
        ("float16", 1e6, ValueError, "overflows float16"),
        ("float32", 10**400, ValueError, "overflows float32"),
        ("int32", "7", TypeError, r"expects Tensor\[\(\), int32\] but received a str"),
    ],
)
def test_python_scalars_that_do_not_fit_are_rejected(dtype, value, error, message):
    with pytest.raises(error, match=r"main: parameter %p0 .*" + message):
        convert([relay.scalar_type(dtype)], [value])


@pytest.mark.parametrize(
    ("dtype", "value", "expected"),
    [
        ("uint8", 255, 255),
        ("int64", 2**40, 2**40),
        ("float32", 0.1, np.float32(0.1)),
        ("float64", 3, 3.0),
        ("float32", True, 1.0),
        ("int32", False, 0),
        ("int32", 2.0, 2),
        ("bool", True, True),
        ("bool", 1, True),
    ],
)
def test_python_scalars_that_fit_are_converted(dtype, value, expected):
    (out,) = convert([relay.scalar_type(dtype)], [value])
    assert isinstance(out, np.ndarray) and out.dtype == np.dtype(dtype) and out.shape == ()
    assert out == expected


def test_dynamic_dimensions_accept_any_size():
    ty = relay.TensorType([relay.Any(), 3])
    for rows in (0, 1, 5):
        (out,) = convert([ty], [np.zeros((rows, 3), "float32")])
        assert out.shape == (rows, 3)
    with pytest.raises(ValueError, match=r"expects Tensor\[\(\?, 3\), float32\]"):
        convert([ty], [np.zeros((2, 4), "float32")])


def test_tuple_argument_errors_name_the_field():
    ty = relay.TupleType([I32, relay.TupleType([F32, F32])])
    with pytest.raises(ValueError, match=r"a tuple of 2 field\(s\).*a tuple of 3"):
        convert([ty], [(1, 2.0, 3.0)])
    with pytest.raises(TypeError, match=r"parameter %p0 field 1 field 0 expects Tensor"):
        convert([ty], [(1, ("a", 2.0))])
    with pytest.raises(TypeError, match=r"expects \(int32|expects \(Tensor"):
        convert([ty], [np.zeros(2, "int32")])


def test_adt_and_function_arguments_are_checked():
    list_ty = relay.TypeCall(relay.GlobalTypeVar("List"), [I32])
    with pytest.raises(TypeError, match=r"expects List\[Tensor\[\(\), int32\]\] but received"):
        convert([list_ty], [np.zeros(2)])
    with pytest.raises(TypeError, match="not a constructor of List"):
        convert([list_ty], [ADT(99, [], "Other")])
    assert convert([list_ty], [ADT(1, [], "Nil")])[0].tag == 1
    with pytest.raises(TypeError, match=r"expects fn \(Tensor\[\(\), int32\]\) -> .* received"):
        convert([relay.FuncType([I32], I32)], [len])


def test_polymorphic_parameters_accept_any_value_and_follow_const_rules():
    a = relay.TypeVar("A")
    out = convert([a, a, a, a], [1, 2.5, True, (1, [2])])
    assert out[0].dtype == np.int32 and out[1].dtype == np.float32 and out[2].dtype == np.bool_
    assert isinstance(out[3], tuple) and isinstance(out[3][1], tuple)


# --- invalid: programs and executors -------------------------------------------------------------


def test_ill_typed_programs_fail_before_running():
    x = relay.var("x", shape=(2,))
    mod = relay.IRModule()
    mod["main"] = relay.Function([x], x + relay.const(np.ones(3, "float32")))
    with pytest.raises(TypeError):
        relay.create_executor(mod=mod).evaluate()


@pytest.mark.parametrize("kind", ["debug", "vm", "graph", "aot"])
def test_every_kind_takes_tvms_cpu_targets(kind):
    from compiler.relay.target import Target

    x = relay.var("x", shape=(2,))
    mod = relay.IRModule.from_expr(relay.Function([x], x + x))
    for target in ("llvm", "llvm -mcpu=skylake", "c", Target("llvm")):
        got = relay.create_executor(kind, mod, vm.cpu(), target).evaluate()(np.ones(2, "float32"))
        np.testing.assert_array_equal(got, [2.0, 2.0])


def test_unknown_kind_target_and_free_variables_are_rejected():
    with pytest.raises(ValueError, match="unknown executor kind 'tensorrt'"):
        relay.create_executor("tensorrt")
    with pytest.raises(ValueError, match="cuda device: relayvm generates code for the host CPU"):
        relay.create_executor(target="cuda")
    with pytest.raises(ValueError, match="unknown target kind 'x86'"):
        relay.create_executor(target="x86")
    x = relay.var("x", shape=())
    with pytest.raises(ValueError, match=r"free variables \(%x\)"):
        relay.create_executor().evaluate(x + x)
    with pytest.raises(ValueError, match="not a free variable"):
        relay.create_executor().evaluate(x + x, binds={"y": 1.0})
    with pytest.raises(ValueError, match="no @main"):
        relay.create_executor().evaluate()


def test_graph_check_rejects_control_flow_naming_the_construct():
    n = relay.var("n", I32)
    mod = relay.IRModule()
    mod["main"] = relay.Function([n], relay.If(relay.equal(n, relay.const(0)), n, n + n))
    with pytest.raises(ValueError, match="graph executor cannot run @main: it uses an if"):
        check_graph_program(mod)
    with pytest.raises(ValueError, match="an if expression"):
        relay.create_executor("graph", mod).evaluate()


def test_graph_check_rejects_recursion_adts_and_closures():
    mod = relay.IRModule()
    f, g = relay.GlobalVar("f"), relay.GlobalVar("g")
    n = relay.var("n", I32)
    mod[f] = relay.Function([n], relay.Call(g, [n]))
    mod[g] = relay.Function([n], relay.Call(f, [n]))
    mod["main"] = relay.Function([n], relay.Call(f, [n]))
    with pytest.raises(ValueError, match="recursive functions: @f -> @g -> @f"):
        check_graph_program(mod)

    mod = relay.IRModule()
    p = relay.Prelude(mod)
    xs = relay.var("xs", relay.TypeCall(p.get_type("List")[0], [I32]))
    mod["main"] = relay.Function([xs], xs)
    with pytest.raises(ValueError, match=r"algebraic data type List\[Tensor"):
        check_graph_program(mod)

    y = relay.var("y", I32)
    mod = relay.IRModule()
    mod["main"] = relay.Function([n], relay.Call(relay.Function([y], y + n), [n]))
    with pytest.raises(ValueError, match="a local function"):
        check_graph_program(mod)


def test_graph_check_accepts_dataflow_programs():
    mod = relay.fromtext(TVM_EXAMPLE)
    check_graph_program(mod)


# --- the vm and graph executors agree with the debug executor ---------------------------------

VM_PROGRAMS = {
    "tuple": (
        "def @main(%t: (Tensor[(), int32], (Tensor[(2), float32], Tensor[(2), float32]))) {\n"
        "  (%t.1.1, %t.0)\n"
        "}",
        [(1, [np.ones(2, "float32"), np.arange(2, dtype="float32")])],
    ),
    "closure": (
        "def @main(%x: Tensor[(), float32]) {\n"
        "  let %f = fn (%y: Tensor[(), float32]) { %x * %y };\n"
        "  %f(%x)\n"
        "}",
        [3.0],
    ),
    "recursion": (
        "def @fact(%n: Tensor[(), int32]) -> Tensor[(), int32] {\n"
        "  if (%n == 0) { 1 } else { %n * @fact(%n - 1) }\n"
        "}\n"
        "def @main(%n: Tensor[(), int32]) { @fact(%n) }",
        [6],
    ),
    "prelude": (
        "def @main(%xs: List[Tensor[(), int32]]) {\n"
        "  @sum(@map(fn (%x: Tensor[(), int32]) { %x * %x }, %xs))\n"
        "}",
        ["list"],
    ),
}


def assert_same_value(a, b):
    """Compare results of two executors: arrays, tuples and ADTs, iteratively."""
    work = [(a, b)]
    while work:
        x, y = work.pop()
        if isinstance(x, ADT):
            assert isinstance(y, ADT) and x.tag == y.tag and x.constructor == y.constructor
            assert len(x) == len(y)
            work.extend(zip(x, y))
        elif isinstance(x, tuple):
            assert isinstance(y, tuple) and len(x) == len(y)
            work.extend(zip(x, y))
        else:
            assert isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(x, y)


def prelude_module(text):
    base = relay.IRModule()
    relay.Prelude(base)
    return relay.fromtext('#[version = "0.0.5"]\n' + text, init_module=base)


@pytest.mark.parametrize("kind", ["vm", "graph"])
def test_tvm_text_example_on_the_vm_kinds(kind):
    a, b, c, expected = example_inputs()
    f = relay.create_executor(kind, relay.fromtext(TVM_EXAMPLE)).evaluate()
    np.testing.assert_allclose(f(a, b=b, c=c), expected)


@pytest.mark.parametrize("name", sorted(VM_PROGRAMS))
def test_vm_executor_agrees_with_the_debug_executor(name):
    text, args = VM_PROGRAMS[name]
    mod = prelude_module(text)
    if args == ["list"]:
        _, cons, nil = mod.get_type("List")
        value = ADT(nil.tag, [], "Nil")
        for i in range(5):
            value = ADT(cons.tag, [np.array(i, "int32"), value], "Cons")
        args = [value]
    expected = relay.create_executor("debug", mod).evaluate()(*args)
    assert_same_value(expected, relay.create_executor("vm", mod).evaluate()(*args))


def test_vm_executor_binds_params_and_checks_arguments_like_the_debug_executor():
    f = relay.create_executor("vm", scale_module(), params={"s": np.float32(3.0)}).evaluate()
    np.testing.assert_array_equal(f(x=np.ones((2, 2), "float32")), np.full((2, 2), 3.0))
    for kind in ("debug", "vm"):
        g = relay.create_executor(kind, scale_module()).evaluate()
        with pytest.raises(ValueError, match=r"main: parameter %x expects Tensor\[\(2, 2\)"):
            g(np.ones(3, "float32"), 1.0)


def test_graph_executor_rejects_a_prelude_program():
    mod = prelude_module(VM_PROGRAMS["prelude"][0])
    with pytest.raises(ValueError, match="graph executor cannot run"):
        relay.create_executor("graph", mod).evaluate()
