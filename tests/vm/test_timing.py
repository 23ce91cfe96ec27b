"""time_evaluator's loop (TVM's semantics), BenchmarkResult, and the VM's timing entry points."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from tests.vm.interpreter_programs import nat, nat_programs
from vm.timing import BenchmarkResult, check_settings, measure


class FakeTime:
    """A nanosecond clock that only moves when the timed function says so."""

    def __init__(self, per_call_ns: int) -> None:
        self.now = 0
        self.per_call_ns = per_call_ns
        self.calls = 0
        self.sleeps: list[float] = []

    def clock(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def fn(self) -> None:
        self.calls += 1
        self.now += self.per_call_ns


def run(fake: FakeTime, **settings):
    return measure(fake.fn, (), None, clock=fake.clock, sleep=fake.sleep, **settings)


# ---- BenchmarkResult ---------------------------------------------------------------------------


def test_benchmark_result_statistics():
    result = BenchmarkResult([1, 2, 2, 5])
    assert (result.mean, result.median, result.max, result.min, result.std) == (2.5, 2.0, 5, 1, 1.5)
    assert result.results == [1.0, 2.0, 2.0, 5.0]


def test_benchmark_result_prints_tvm_s_summary_in_milliseconds():
    text = str(BenchmarkResult([1, 2, 2, 5]))
    assert text == (
        "Execution time summary:\n"
        " mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)  \n"
        " 2500.0000    2000.0000    5000.0000    1000.0000    1500.0000  \n"
        "               "
    )


def test_benchmark_result_repr_lists_every_statistic():
    assert repr(BenchmarkResult([1, 3])) == (
        "BenchmarkResult(min=1.0, mean=2.0, median=2.0, max=3.0, std=1.0, results=[1.0, 3.0])"
    )


def test_benchmark_result_needs_times():
    with pytest.raises(ValueError, match="non-empty"):
        BenchmarkResult([])


# ---- the timing loop ---------------------------------------------------------------------------


def test_one_warm_up_call_then_number_times_repeat_calls():
    fake = FakeTime(per_call_ns=1000)
    result = run(fake, number=4, repeat=3)
    assert fake.calls == 1 + 4 * 3
    assert result.results == [1e-6] * 3


def test_number_grows_until_a_batch_lasts_min_repeat_ms_and_stays_grown():
    fake = FakeTime(per_call_ns=1_000_000)  # 1 ms per call
    result = run(fake, number=1, repeat=2, min_repeat_ms=10)
    # Batch of 1 (1 ms) is too short: number = max(10 / 1 + 1, 1 * 1.618) = 11. The
    # second repeat starts with 11 and is long enough at once.
    assert fake.calls == 1 + 1 + 11 + 11
    assert result.results == pytest.approx([1e-3, 1e-3])


def test_growth_by_the_golden_ratio_when_it_is_larger():
    fake = FakeTime(per_call_ns=1_000_000)
    run(fake, number=100, repeat=1, min_repeat_ms=101)
    # 100 ms is too short: number = int(max(101 / 1 + 1, 100 * 1.618)) = 161.
    assert fake.calls == 1 + 100 + 161


def test_batches_measured_as_zero_stop_at_the_limit():
    fake = FakeTime(per_call_ns=0)
    result = run(fake, number=2, repeat=1, min_repeat_ms=5, limit_zero_time_iterations=7)
    assert fake.calls == 1 + 7 * 2
    assert result.results == [0.0]


def test_cooldown_sleeps_after_every_repeats_to_cooldown_th_repeat_from_the_first():
    fake = FakeTime(per_call_ns=1)
    run(fake, number=1, repeat=5, cooldown_interval_ms=20, repeats_to_cooldown=2)
    assert fake.sleeps == [0.02, 0.02, 0.02]  # after repeats 0, 2 and 4


def test_no_cooldown_by_default():
    fake = FakeTime(per_call_ns=1)
    run(fake, number=1, repeat=3)
    assert fake.sleeps == []


def test_f_preproc_runs_before_each_repeat_with_the_arguments():
    fake = FakeTime(per_call_ns=1)
    seen = []
    measure(fake.fn, ("a", 1), lambda *args: seen.append(args), number=2, repeat=3,
            clock=fake.clock, sleep=fake.sleep)  # fmt: skip
    assert seen == [("a", 1)] * 3


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"number": 0}, ValueError, "number must be at least 1"),
        ({"repeat": 0}, ValueError, "repeat must be at least 1"),
        ({"repeats_to_cooldown": 0}, ValueError, "repeats_to_cooldown must be at least 1"),
        ({"number": 1.5}, TypeError, "number must be an int"),
        ({"min_repeat_ms": -1}, ValueError, "min_repeat_ms must be non-negative"),
        ({"cooldown_interval_ms": "1"}, TypeError, "cooldown_interval_ms must be a number"),
    ],
)
def test_settings_are_checked(settings, error, message):
    values = {
        "number": 10,
        "repeat": 1,
        "min_repeat_ms": 0,
        "cooldown_interval_ms": 0,
        "repeats_to_cooldown": 1,
        "limit_zero_time_iterations": 100,
    }
    values.update(settings)
    with pytest.raises(error, match=message):
        check_settings(**values)


# ---- through the virtual machine ---------------------------------------------------------------


@pytest.fixture
def counted():
    """A machine whose instrument counts the calls main makes to copy: one per run on zero."""
    machine = vm.VirtualMachine(nat_programs())
    calls = []

    def count(func, symbol, before, ret, *args):
        if before and symbol == "copy":
            calls.append(symbol)

    machine.set_instrument(count)
    return machine, calls


def test_time_evaluator_of_a_function_runs_warm_up_plus_number_times_repeat(counted):
    machine, calls = counted
    result = machine.time_evaluator("main", vm.cpu(), number=3, repeat=2)(nat(0))
    assert isinstance(result, vm.BenchmarkResult) and len(result.results) == 2
    assert len(calls) == 1 + 3 * 2
    assert all(t > 0 for t in result.results)


def test_time_evaluator_without_arguments_uses_the_inputs_set(counted):
    machine, calls = counted
    machine.set_input("main", nat(0))
    machine.time_evaluator("main", number=2)()
    assert len(calls) == 1 + 2


def test_time_evaluator_of_a_saved_function(counted):
    machine, calls = counted
    machine.save_function("main", "saved", nat(0))
    machine.time_evaluator("saved", number=4, repeat=1)()
    assert len(calls) == 5


def test_time_evaluator_of_invoke_stateful_takes_the_function_name(counted):
    machine, calls = counted
    machine.set_input("main", nat(0))
    result = machine.time_evaluator("invoke_stateful", number=2, repeat=3)("main")
    assert len(result.results) == 3 and len(calls) == 1 + 6
    assert machine.get_outputs()[0].constructor == "zero"


def test_time_evaluator_checks_its_settings_and_names():
    machine = vm.VirtualMachine(nat_programs())
    with pytest.raises(ValueError, match="repeat must be at least 1"):
        machine.time_evaluator("main", repeat=0)
    with pytest.raises(ValueError, match="number must be at least 1"):
        machine.time_evaluator("main", number=0)
    with pytest.raises(KeyError, match="unknown function 'nope'"):
        machine.time_evaluator("nope")
    with pytest.raises(TypeError, match="device"):
        machine.time_evaluator("main", dev="cpu")


def test_benchmark_sets_inputs_once_and_times_repeat_rounds(counted):
    machine, calls = counted
    result = machine.benchmark(vm.cpu(), nat(0), func_name="main", repeat=3, number=2)
    assert len(result.results) == 3 and len(calls) == 1 + 6
    assert machine.invoke("main").constructor == "zero"  # the inputs stay set


def test_benchmark_end_to_end_passes_the_arguments_every_call(counted):
    machine, calls = counted
    result = machine.benchmark(None, nat(0), repeat=2, number=2, end_to_end=True)
    assert len(result.results) == 2 and len(calls) == 5


def test_benchmark_wants_the_device_first():
    machine = vm.VirtualMachine(nat_programs())
    with pytest.raises(TypeError, match="benchmark's first argument is the device"):
        machine.benchmark(nat(1))


# ---- TVM's f_preproc names ---------------------------------------------------------------------


@pytest.mark.parametrize("f_preproc", ["", "cache_flush_cpu_non_first_arg", None])
def test_time_evaluator_takes_tvms_f_preproc_names(counted, f_preproc):
    machine, calls = counted
    result = machine.time_evaluator("main", vm.cpu(), number=1, repeat=2, f_preproc=f_preproc)(
        nat(0)
    )
    assert len(result.results) == 2 and len(calls) == 1 + 2


def test_preprocessor_names_map_to_what_they_run():
    from vm.timing import cache_flush_cpu_non_first_arg, preprocessor

    assert preprocessor("") is None
    assert preprocessor("cache_flush_cpu_non_first_arg") is cache_flush_cpu_non_first_arg
    f = print
    assert preprocessor(f) is f


def test_cache_flush_keeps_the_arguments_unchanged():
    from vm.timing import cache_flush_cpu_non_first_arg

    a, b = np.arange(4.0), np.arange(3)
    cache_flush_cpu_non_first_arg(a, (b, [a]), "other")
    np.testing.assert_array_equal(a, np.arange(4.0))
    np.testing.assert_array_equal(b, np.arange(3))


def test_an_unknown_f_preproc_name_lists_tvms_names():
    machine = vm.VirtualMachine(nat_programs())
    with pytest.raises(
        ValueError, match=r"unknown f_preproc 'flush'.*'cache_flush_cpu_non_first_arg'"
    ):
        machine.time_evaluator("main", f_preproc="flush")
    with pytest.raises(TypeError, match="f_preproc must be a callable, a str or None, got int"):
        machine.time_evaluator("main", f_preproc=3)
