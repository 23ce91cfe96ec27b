"""The AOT executor: ``create_executor("aot")``, ``relay.build(executor="aot")`` and
``vm.aot.AotModule``.

Returns: agrees with the VM and the reference interpreter on an elementwise chain, an MLP,
a small conv net whose memory plan reuses storage, tuple outputs and inlined calls; the
TVM-style factory, stateful and timing APIs. Traps: bad inputs and failing kernels raise
clear errors and the module keeps working. Invalid: control flow, ADTs, closures and
dynamic shapes are refused, naming the construct and suggesting the VM. Results are never
aliased across calls.
"""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from vm.aot import AotModule, AotUnsupportedError

RNG = np.random.default_rng(7)


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


def chain_module():
    x = relay.var("x", shape=(3, 4))
    y = relay.var("y", shape=(3, 4))
    body = relay.sigmoid(relay.exp(x) * y + x) - relay.tanh(y)
    return relay.IRModule.from_expr(relay.Function([x, y], body)), [_f32(3, 4), _f32(3, 4)]


def mlp_module():
    x = relay.var("x", shape=(2, 8))
    w1 = relay.var("w1", shape=(16, 8))
    b1 = relay.var("b1", shape=(16,))
    w2 = relay.var("w2", shape=(4, 16))
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1))
    out = relay.nn.softmax(relay.nn.dense(h, w2))
    mod = relay.IRModule.from_expr(relay.Function([x, w1, b1, w2], out))
    return mod, [_f32(2, 8), _f32(16, 8), _f32(16), _f32(4, 16)]


def conv_module():
    x = relay.var("x", shape=(1, 3, 8, 8))
    w1 = relay.const(_f32(4, 3, 3, 3))
    w2 = relay.const(_f32(4, 4, 3, 3))
    h = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1)))
    h = relay.nn.relu(relay.nn.conv2d(h, w2, padding=(1, 1)))
    h = relay.nn.relu(relay.nn.conv2d(h, w2, padding=(1, 1)))
    h = relay.nn.max_pool2d(h, pool_size=(2, 2), strides=(2, 2))
    out = relay.nn.softmax(relay.nn.batch_flatten(h))
    return relay.IRModule.from_expr(relay.Function([x], out)), [_f32(1, 3, 8, 8)]


def tuple_module():
    x = relay.var("x", shape=(2, 3))
    c = relay.const(np.arange(6, dtype="float32").reshape(2, 3))
    body = relay.Tuple([x + c, relay.Tuple([x * x, x, c]), relay.reshape(x + x, (3, 2))])
    return relay.IRModule.from_expr(relay.Function([x], body)), [_f32(2, 3)]


def call_module():
    return (
        relay.fromtext(
            """
            #[version = "0.0.5"]
            def @double(%a: Tensor[(4), float32]) -> Tensor[(4), float32] { %a + %a }
            def @main(%x: Tensor[(4), float32]) -> (Tensor[(4), float32], Tensor[(4), float32]) {
              %0 = @double(%x);
              (@double(%0), exp(%0))
            }
            """
        ),
        [_f32(4)],
    )


PROGRAMS = {
    "elementwise chain": chain_module,
    "mlp": mlp_module,
    "conv net": conv_module,
    "tuple outputs": tuple_module,
    "inlined calls": call_module,
}


def assert_same(expected, got):
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for e, g in zip(expected, got):
            assert_same(e, g)
        return
    assert isinstance(got, np.ndarray)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


# ---- returns ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_aot_agrees_with_the_vm_and_the_reference_interpreter(name):
    mod, args = PROGRAMS[name]()
    expected = relay.create_executor("debug", mod).evaluate()(*args)
    assert_same(expected, relay.create_executor("vm", mod).evaluate()(*args))
    assert_same(expected, relay.create_executor("aot", mod).evaluate()(*args))


def test_conv_net_runs_on_an_arena_the_memory_plan_made_smaller_than_its_tensors():
    mod, args = conv_module()
    exe = relay.vm.compile(mod)
    module = AotModule(exe)
    plan = module._shared.trace
    allocated = sum(t.nbytes for t in plan.tensors if t.kind == "alloc")
    assert sum(plan.storages) < allocated  # storages are reused between tensors
    assert_same(vm.VirtualMachine(exe).run(*args), module.run(*args))
    # The main function is one generated function: kernel calls in order, no loop.
    assert module.source.count("(t") >= 5 and "while" not in module.source


def test_an_executable_loaded_from_bytes_runs_the_same():
    mod, args = mlp_module()
    exe = relay.vm.compile(mod)
    code, lib = exe.save()
    loaded = vm.Executable.load_exec(code, lib)
    assert_same(AotModule(exe).run(*args), AotModule(loaded).run(*args))


def test_generated_code_is_cached_and_shared_between_modules():
    from vm.kernels import cache_dir

    mod, _ = chain_module()
    exe = relay.vm.compile(mod)
    first, second = AotModule(exe), AotModule(exe)
    assert first.run.__code__ is second.run.__code__
    cached = [p for p in (cache_dir() / "aot").glob("a_*.py") if p.read_text() == first.source]
    assert len(cached) == 1


def test_keyword_positional_and_stateful_calls():
    mod, (x, w1, b1, w2) = mlp_module()
    module = AotModule(relay.vm.compile(mod))
    expected = module.run(x, w1, b1, w2)
    assert_same(expected, module.run(x, w1, w2=w2, b1=b1))
    assert_same(expected, module(x=x, w1=w1, b1=b1, w2=w2))
    assert_same(expected, module.invoke("main", x, w1, b1, w2))
    module.set_input("x", x)
    module.set_input(1, w1)
    module.set_input(b1=b1, w2=w2)
    again = module.run()
    assert_same(expected, again)
    assert module.get_num_inputs() == 4 and module.get_num_outputs() == 1
    assert module.get_input_index("w2") == 3 and module.get_input_index("nope") == -1
    assert module.get_output(0) is again
    out = np.empty((2, 4), "float32")
    assert module.get_output(0, out) is out
    np.testing.assert_array_equal(out, again)


def test_build_with_tvms_aot_executor_makes_a_factory():
    class Executor:  # TVM's relay.backend.Executor("aot", {...}) as relay.build reads it
        name = "aot"

    mod, args = tuple_module()
    expected = relay.create_executor("vm", mod).evaluate()(*args)
    for executor in ("aot", Executor()):
        factory = relay.build(mod, target="llvm", executor=executor)
        module = AotModule(factory["default"](vm.cpu()))
        module.set_input("x", args[0])
        module.run()
        leaves = [expected[0], *expected[1], expected[2]]
        assert module.get_num_outputs() == len(leaves)
        for i, leaf in enumerate(leaves):
            np.testing.assert_allclose(module.get_output(i), leaf, rtol=1e-6)
    with pytest.raises(KeyError, match="use factory\\['default'\\]"):
        factory["other"]


def test_benchmark_and_time_evaluator_return_benchmark_results():
    mod, args = chain_module()
    module = AotModule(relay.vm.compile(mod))
    result = module.benchmark(vm.cpu(), *args, repeat=2, number=3)
    assert isinstance(result, vm.BenchmarkResult) and len(result.results) == 2
    timer = module.time_evaluator("main", vm.cpu(), number=2, repeat=3)
    assert len(timer(*args).results) == 3
    assert len(module.benchmark(None, *args, end_to_end=True, repeat=1, number=1).results) == 1


# ---- results are not aliased --------------------------------------------------------------------


def test_results_are_owned_by_the_caller_across_calls():
    mod, (x,) = tuple_module()
    module = AotModule(relay.vm.compile(mod))
    first = module.run(x)
    kept = [np.array(a) for a in (first[0], *first[1], first[2])]
    second = module.run(x * 3)
    for before, now in zip(kept, (first[0], *first[1], first[2])):
        np.testing.assert_array_equal(before, now)
    assert first[0] is not second[0]
    # The input comes back as a view of the caller's own array, a constant as a writable
    # copy; every result is a vm.NDArray.
    assert not np.shares_memory(second[1][1], x) and np.shares_memory(first[1][1], x)
    assert {type(a) for a in (first[0], *first[1], first[2])} == {vm.NDArray}
    assert first[1][2].flags.writeable and first[1][2] is not second[1][2]


def test_intermediate_arena_never_leaks_into_results():
    mod, args = conv_module()
    exe = relay.vm.compile(mod)
    module = AotModule(exe)
    first = module.run(*args)
    copy = first.copy()
    module.run(_f32(1, 3, 8, 8))
    np.testing.assert_array_equal(first, copy)
    assert first.base is None or first.base.nbytes == first.nbytes


# ---- traps --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (np.zeros((3, 4), "float64"), TypeError, "expected a tensor float32"),
        (np.zeros((4, 3), "float32"), ValueError, "invalid dimensions"),
        (np.zeros((3,), "float32"), ValueError, "expected 2 dimensions"),
        ([1.0, 2.0], TypeError, "pass a numpy array"),
    ],
)
def test_bad_inputs_are_clear_errors_and_the_module_stays_usable(bad, error, message):
    mod, (x, y) = chain_module()
    module = AotModule(relay.vm.compile(mod))
    expected = module.run(x, y)
    with pytest.raises(error, match=message):
        module.run(x, bad)
    with pytest.raises(error, match=message):
        module.set_input("y", bad)
    assert_same(expected, module.run(x, y))


def test_argument_count_and_name_errors():
    mod, (x, y) = chain_module()
    module = AotModule(relay.vm.compile(mod))
    with pytest.raises(ValueError, match="no outputs yet"):
        module.get_output(0)
    with pytest.raises(TypeError, match=r"main\(\) takes .*2 positional arguments but 3"):
        module.run(x, y, y)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        module.run(x, z=y)
    with pytest.raises(TypeError, match="without argument 'x', and no input was set"):
        module.run()
    module.set_input("x", x)
    with pytest.raises(TypeError, match="without argument 'y', and no input was set"):
        module.run()
    assert_same(module.run(x, y), module.run(y=y))  # x comes from set_input
    with pytest.raises(TypeError, match="no input named 'z'"):
        module.set_input("z", y)
    with pytest.raises(KeyError, match="unknown function 'other'"):
        module.invoke("other", x, y)
    with pytest.raises(TypeError, match=r"needs a vm\.Executable"):
        AotModule("main")


@pytest.mark.parametrize("names", [("input.1", "y"), ("k0", "t1"), ("x", "x_")])
def test_any_parameter_names_bind_by_position_and_keyword(names):
    a = relay.var(names[0], shape=(2,))
    b = relay.var(names[1], shape=(2,))
    module = AotModule(relay.vm.compile(relay.IRModule.from_expr(relay.Function([a, b], a - b))))
    one, two = np.ones(2, "float32"), np.full(2, 2.0, "float32")
    np.testing.assert_array_equal(module.run(one, two), [-1, -1])
    np.testing.assert_array_equal(module.run(**{names[1]: one, names[0]: two}), [1, 1])
    np.testing.assert_array_equal(module(two, **{names[1]: one}), [1, 1])
    with pytest.raises(TypeError, match="'nope'"):
        module.run(one, nope=two)
    with pytest.raises(TypeError):
        module.run(one)


def test_a_failing_kernel_is_a_vm_error_naming_it_and_the_module_keeps_working():
    a = relay.var("a", shape=(3,), dtype="int32")
    b = relay.var("b", shape=(3,), dtype="int32")
    mod = relay.IRModule.from_expr(relay.Function([a, b], relay.floor_divide(a, b)))
    module = AotModule(relay.vm.compile(mod))
    ones = np.ones(3, "int32")
    with pytest.raises(vm.VMError, match=r"kernel vm_mod_fused_floor_divide .*@main"):
        module.run(ones, np.array([1, 0, 1], "int32"))
    np.testing.assert_array_equal(module.run(ones * 6, ones * 3), [2, 2, 2])


# ---- invalid ------------------------------------------------------------------------------------


def _prelude(text):
    base = relay.IRModule()
    relay.Prelude(base)
    return relay.fromtext('#[version = "0.0.5"]\n' + text, init_module=base)


@pytest.mark.parametrize(
    "text, construct",
    [
        (
            "def @main(%c: bool, %x: Tensor[(2), float32]) { if (%c) { %x } else { %x + %x } }",
            "control flow",
        ),
        (
            "def @main(%x: Tensor[(2), float32]) { Cons(%x, Nil()) }",
            "algebraic data types (constructor",
        ),
        (
            "def @main(%x: Tensor[(2), float32]) { let %f = fn (%y: Tensor[(2), float32]) "
            "{ %y + %x }; %f(%x) }",
            "closures",
        ),
        ("def @main(%x: Tensor[(?, 2), float32]) { %x + %x }", "Tensor[(?, 2), float32]"),
        ("def @main(%l: List[int32]) { @length(%l) }", "type ADT List"),
    ],
)
def test_programs_the_aot_executor_cannot_run_are_refused_naming_the_construct(text, construct):
    mod = _prelude(text)
    with pytest.raises(AotUnsupportedError, match=r"create_executor\('vm'\)") as info:
        relay.create_executor("aot", mod).evaluate()
    assert construct in str(info.value)
    assert isinstance(info.value, ValueError)
    with pytest.raises(AotUnsupportedError, match="cannot run this program"):
        relay.build(mod, executor="aot")


def test_modules_of_one_executable_run_in_threads_on_their_own_arenas():
    import threading

    mod, (x,) = conv_module()
    exe = relay.vm.compile(mod)
    machine = vm.VirtualMachine(exe)
    inputs = [x, _f32(1, 3, 8, 8)]
    expected = [machine.run(a) for a in inputs]
    failures = []

    def work(module, index):
        for _ in range(50):
            got = module.run(inputs[index])
            if not np.allclose(got, expected[index], rtol=1e-5, atol=1e-6):
                failures.append(index)

    modules = [AotModule(exe), AotModule(exe)]
    threads = [threading.Thread(target=work, args=(m, i)) for i, m in enumerate(modules)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
