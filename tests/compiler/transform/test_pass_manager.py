"""The pass manager: Sequential, PassContext, opt levels, instruments and timing."""

from __future__ import annotations

import re
import threading

import pytest

from compiler import relay
from compiler.ir.module import IRModule
from tests.compiler.transform.util import assert_same, parse

T = relay.transform

SOURCE = """
    def @main(%x: Tensor[(2), float32]) {
      let %unused = exp(%x);
      let %a = add(%x, add(1f, 1f));
      let %b = add(%x, add(1f, 1f));
      multiply(%a, %b)
    }"""


def _recorder(log: list[str], name: str, opt_level: int = 0, required=None):
    """A module pass named ``name`` that appends its name to ``log``."""

    @T.module_pass(opt_level=opt_level, name=name, required=required)
    def record(mod: IRModule, ctx: T.PassContext) -> IRModule:
        log.append(name)
        return mod

    return record


# --- built-in passes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "name", "opt_level"),
    [
        (T.InferType, "InferType", 0),
        (T.SimplifyInference, "SimplifyInference", 0),
        (T.DeadCodeElimination, "DeadCodeElimination", 1),
        (T.RemoveUnusedFunctions, "RemoveUnusedFunctions", 1),
        (T.FoldConstant, "FoldConstant", 2),
        (T.EliminateCommonSubexpr, "EliminateCommonSubexpr", 3),
    ],
)
def test_builtin_passes_have_tvms_names_and_opt_levels(make, name, opt_level):
    p = make()
    assert isinstance(p, T.Pass)
    assert p.name == name and p.info.name == name and p.info.opt_level == opt_level
    assert isinstance(T.get_pass(name), make)


def test_tvm_style_pipeline_runs_every_pass_at_opt_level_3():
    seq = T.Sequential(
        [T.FoldConstant(), T.EliminateCommonSubexpr(), T.DeadCodeElimination(inline_once=True)]
    )
    with T.PassContext(opt_level=3):
        after = seq(parse(SOURCE))
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = add(%x, 2f);
          multiply(%a, %a)
        }""",
    )


def test_default_context_is_opt_level_2_and_skips_level_3_passes():
    assert T.PassContext.current().opt_level == 2
    seq = T.Sequential([T.FoldConstant(), T.EliminateCommonSubexpr(), T.DeadCodeElimination()])
    after = seq(parse(SOURCE))
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = add(%x, 2f);
          let %b = add(%x, 2f);
          multiply(%a, %b)
        }""",
    )


# --- Sequential filtering ------------------------------------------------------------------------


def test_sequential_runs_passes_in_order():
    log: list[str] = []
    seq = T.Sequential([_recorder(log, "first"), _recorder(log, "second"), _recorder(log, "third")])
    mod = parse(SOURCE)
    assert seq(mod) is mod
    assert log == ["first", "second", "third"]


def test_passes_above_the_context_opt_level_are_skipped():
    log: list[str] = []
    seq = T.Sequential([_recorder(log, f"level{i}", opt_level=i) for i in range(5)])
    for level, expected in [(0, 1), (2, 3), (4, 5)]:
        log.clear()
        with T.PassContext(opt_level=level):
            seq(parse(SOURCE))
        assert log == [f"level{i}" for i in range(expected)]


def test_disabled_passes_are_skipped_and_required_passes_forced():
    log: list[str] = []
    seq = T.Sequential([_recorder(log, "a"), _recorder(log, "b", opt_level=4), _recorder(log, "c")])
    with T.PassContext(opt_level=2, disabled_pass=["a"], required_pass=["b"]):
        seq(parse(SOURCE))
    assert log == ["b", "c"]
    log.clear()
    with T.PassContext(opt_level=4, disabled_pass={"b"}, required_pass=("b",)):
        seq(parse(SOURCE))
    assert log == ["a", "c"]  # disabled wins over required


def test_disabling_a_builtin_pass_by_name():
    seq = T.Sequential([T.FoldConstant()])
    with T.PassContext(disabled_pass=["FoldConstant"]):
        after = seq(parse(SOURCE))
    assert "add(1f, 1f)" in after.astext()


def test_nested_sequential_is_filtered_by_its_own_opt_level():
    log: list[str] = []
    inner = T.Sequential([_recorder(log, "inner")], opt_level=3, name="inner_seq")
    outer = T.Sequential([_recorder(log, "before"), inner, _recorder(log, "after")])
    outer(parse(SOURCE))
    assert log == ["before", "after"]
    log.clear()
    with T.PassContext(opt_level=3):
        outer(parse(SOURCE))
    assert log == ["before", "inner", "after"]


def test_calling_a_pass_directly_ignores_opt_level_and_disabled_pass():
    log: list[str] = []
    with T.PassContext(opt_level=0, disabled_pass=["direct"]):
        _recorder(log, "direct", opt_level=3)(parse(SOURCE))
    assert log == ["direct"]


def test_required_passes_run_first():
    seen: list[bool] = []

    @T.module_pass(opt_level=0, name="NeedsTypes", required=["InferType"])
    def needs_types(mod: IRModule, ctx: T.PassContext) -> IRModule:
        seen.append(mod["main"].body._checked_type is not None)
        return mod

    T.Sequential([needs_types])(parse(SOURCE))
    assert seen == [True]
    assert needs_types.info.required == ("InferType",)


# --- PassContext ---------------------------------------------------------------------------------


def test_current_context_nests_and_is_restored_on_exit_and_on_error():
    outer_ctx = T.PassContext(opt_level=3, config={"relay.test.option": 7})
    with outer_ctx as entered:
        assert entered is outer_ctx and T.PassContext.current() is outer_ctx
        with pytest.raises(RuntimeError, match="boom"), T.PassContext(opt_level=1) as inner:
            assert T.PassContext.current() is inner
            raise RuntimeError("boom")
        assert T.PassContext.current() is outer_ctx
        assert T.PassContext.current().config["relay.test.option"] == 7
    assert T.PassContext.current().opt_level == 2


def test_each_thread_has_its_own_current_context():
    seen: list[int] = []
    with T.PassContext(opt_level=4):
        thread = threading.Thread(target=lambda: seen.append(T.PassContext.current().opt_level))
        thread.start()
        thread.join()
    assert seen == [2]


def test_passes_see_the_current_context():
    levels: list[int] = []

    @T.module_pass(opt_level=0)
    def look(mod: IRModule, ctx: T.PassContext) -> IRModule:
        levels.append(ctx.opt_level)
        return mod

    with T.PassContext(opt_level=1):
        look(parse(SOURCE))
    assert levels == [1] and look.info.name == "look"


# --- user-defined passes -------------------------------------------------------------------------


def test_function_pass_rewrites_every_global_function():
    @T.function_pass(opt_level=1, name="Renamer")
    def wrap_in_negative(func, mod, ctx):
        return relay.Function(func.params, relay.negative(func.body), func.ret_type)

    before = parse(
        """
        def @f(%a: Tensor[(), float32]) { %a }
        def @main(%x: Tensor[(), float32]) { @f(%x) }"""
    )
    after = wrap_in_negative(before)
    assert_same(
        after,
        """
        def @f(%a: Tensor[(), float32]) { negative(%a) }
        def @main(%x: Tensor[(), float32]) { negative(@f(%x)) }""",
    )
    assert before["f"].body is before["f"].params[0]


def test_class_decorated_module_pass_takes_constructor_arguments():
    @T.module_pass(opt_level=2)
    class AddFunction:
        def __init__(self, fname: str) -> None:
            self.fname = fname

        def transform_module(self, mod, ctx):
            out = mod.copy()
            x = relay.var("x", shape=())
            out[self.fname] = relay.Function([x], x)
            return out

    p = AddFunction("extra")
    assert isinstance(p, T.ModulePass) and p.info.name == "AddFunction" and p.fname == "extra"
    mod = parse(SOURCE)
    assert [g.name_hint for g in p(mod).get_global_vars()] == ["main", "extra"]
    assert len(mod) == 1


# --- instruments ---------------------------------------------------------------------------------


class _Events(T.PassInstrument):
    def __init__(self, skip: str | None = None) -> None:
        self.events: list[str] = []
        self.skip = skip

    def enter_pass_ctx(self) -> None:
        self.events.append("enter")

    def exit_pass_ctx(self) -> None:
        self.events.append("exit")

    def should_run(self, mod, info) -> bool:
        return info.name != self.skip

    def run_before_pass(self, mod, info) -> None:
        self.events.append(f"before {info.name}")

    def run_after_pass(self, mod, info) -> None:
        self.events.append(f"after {info.name}")

    def on_pass_error(self, mod, info, error) -> None:
        self.events.append(f"error {info.name}: {error}")


def test_instruments_see_every_pass_including_nested_ones():
    events = _Events()
    log: list[str] = []
    seq = T.Sequential([_recorder(log, "one"), _recorder(log, "two")], name="pipeline")
    with T.PassContext(instruments=[events]):
        seq(parse(SOURCE))
    assert events.events == [
        "enter",
        "before pipeline",
        "before one",
        "after one",
        "before two",
        "after two",
        "after pipeline",
        "exit",
    ]


def test_should_run_false_skips_the_pass_unless_it_is_required():
    events = _Events(skip="two")
    log: list[str] = []
    seq = T.Sequential([_recorder(log, "one"), _recorder(log, "two")])
    with T.PassContext(instruments=[events]):
        seq(parse(SOURCE))
    assert log == ["one"] and "before two" not in events.events
    log.clear()
    with T.PassContext(instruments=[events], required_pass=["two"]):
        seq(parse(SOURCE))
    assert log == ["one", "two"]


def test_failing_pass_is_reported_to_instruments():
    events = _Events()

    @T.module_pass(opt_level=0, name="Broken")
    def broken(mod, ctx):
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"), T.PassContext(instruments=[events]):
        broken(parse(SOURCE))
    assert events.events == ["enter", "before Broken", "error Broken: bad input", "exit"]


def test_duck_typed_instruments_and_the_decorator_work():
    @T.pass_instrument
    class OnlyBefore:
        def __init__(self) -> None:
            self.names: list[str] = []

        def run_before_pass(self, mod, info) -> None:
            self.names.append(info.name)

    inst = OnlyBefore()
    assert isinstance(inst, T.PassInstrument)
    with T.PassContext(instruments=[inst]):
        T.FoldConstant()(parse(SOURCE))
    assert inst.names == ["FoldConstant"]


def test_timing_instrument_renders_each_pass_nested_under_its_caller():
    timing = T.PassTimingInstrument()
    seq = T.Sequential([T.SimplifyInference(), T.FoldConstant()], name="opt")
    bn = parse(
        """
        def @main(%x: Tensor[(1, 2), float32], %v: Tensor[(2), float32]) {
          %0 = nn.batch_norm(%x, %v, %v, %v, %v); %0.0
        }"""
    )
    with T.PassContext(instruments=[timing]):
        seq(bn)
        T.DeadCodeElimination()(bn)
    text = timing.render()
    lines = text.splitlines()
    assert lines[0] == "Printing results of timing profile..."
    names = [(line.count("\t"), line.strip().split(":")[0]) for line in lines[1:]]
    # SimplifyInference type-checks the module with the InferType pass: it nests too.
    assert names == [
        (0, "opt"),
        (1, "SimplifyInference"),
        (2, "InferType"),
        (1, "FoldConstant"),
        (0, "DeadCodeElimination"),
    ]
    line = re.compile(r"^\t*\w+: \d+us \[\d+us\] \(\d+\.\d\d%; \d+\.\d\d%\)$")
    assert all(line.match(entry) for entry in lines[1:]), text
    depths = [d for d, _, _ in timing.timings()]
    assert depths == [0, 1, 2, 1, 0]
    assert all(seconds >= 0 for _, _, seconds in timing.timings())


def test_timing_survives_context_exit_and_resets_on_reentry():
    timing = T.PassTimingInstrument()
    ctx = T.PassContext(instruments=[timing])
    with ctx:
        T.FoldConstant()(parse(SOURCE))
    assert [name for _, name, _ in timing.timings()] == ["FoldConstant"]
    with ctx:
        assert timing.timings() == []
        T.InferType()(parse(SOURCE))
    assert [name for _, name, _ in timing.timings()] == ["InferType"]


def test_timing_marks_a_failed_pass_and_keeps_the_tree_balanced():
    timing = T.PassTimingInstrument()

    @T.module_pass(opt_level=0, name="Broken")
    def broken(mod, ctx):
        raise ValueError("bad")

    with T.PassContext(instruments=[timing]):
        with pytest.raises(ValueError):
            broken(parse(SOURCE))
        T.FoldConstant()(parse(SOURCE))
    assert [(d, n) for d, n, _ in timing.timings()] == [(0, "Broken"), (0, "FoldConstant")]
    assert "Broken (failed):" in timing.render()


# --- invalid use ---------------------------------------------------------------------------------


def test_sequential_rejects_items_that_are_not_passes():
    with pytest.raises(TypeError, match="item 1 must be a pass, got function"):
        T.Sequential([T.FoldConstant(), lambda m: m])


def test_pass_called_on_something_other_than_a_module_is_an_error():
    with pytest.raises(
        TypeError, match=r"pass FoldConstant expects a relay\.IRModule, got Function"
    ):
        T.FoldConstant()(parse(SOURCE)["main"])


def test_pass_returning_something_other_than_a_module_is_an_error():
    @T.module_pass(opt_level=0, name="Bad")
    def bad(mod, ctx):
        return mod["main"]

    with pytest.raises(TypeError, match="pass Bad returned Function"):
        bad(parse(SOURCE))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"opt_level": "3"}, "opt_level must be an int"),
        ({"disabled_pass": "FoldConstant"}, "disabled_pass must be a list"),
        ({"required_pass": [1]}, "must hold pass names"),
        ({"instruments": [object()]}, "defines none of the instrument hooks"),
        ({"instruments": T.PassTimingInstrument()}, "must be a list or tuple"),
        ({"config": {1: 2}}, "config keys must be strings"),
    ],
)
def test_pass_context_rejects_malformed_settings(kwargs, message):
    with pytest.raises(TypeError, match=message):
        T.PassContext(**kwargs)


def test_module_pass_needs_an_opt_level_and_unknown_required_pass_is_an_error():
    with pytest.raises(ValueError, match="needs an opt_level"):
        T.module_pass(lambda mod, ctx: mod)

    @T.module_pass(opt_level=0, required=["NoSuchPass"])
    def needs_missing(mod, ctx):
        return mod

    with pytest.raises(ValueError, match="no pass named 'NoSuchPass'"):
        T.Sequential([needs_missing])(parse(SOURCE))


def test_builtin_passes_do_not_modify_their_input():
    mod = parse(
        """
        def @unused(%a: Tensor[(), float32]) { %a }
        def @main(%x: Tensor[(1, 2), float32], %v: Tensor[(2), float32]) {
          let %dead = exp(%x);
          %0 = nn.batch_norm(%x, %v, %v, %v, %v);
          %1 = add(%0.0, add(1f, 1f));
          %2 = add(%0.0, add(1f, 1f));
          multiply(%1, %2)
        }"""
    )
    text = mod.astext()
    nodes = {g.name_hint: f for g, f in mod.functions.items()}
    for p in [
        T.InferType(),
        T.SimplifyInference(),
        T.FoldConstant(),
        T.EliminateCommonSubexpr(),
        T.DeadCodeElimination(inline_once=True),
        T.RemoveUnusedFunctions(),
    ]:
        out = p(mod)
        assert out is not mod
        assert mod.astext() == text, p
        assert {g.name_hint: f for g, f in mod.functions.items()} == nodes
