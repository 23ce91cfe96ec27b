"""Several threads, one virtual machine each, sharing one Executable."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import vm
from tests.vm.interpreter_programs import kernel_programs, nat, nat_programs, nat_value

THREADS = 4


def run_in_threads(work):
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def target(i):
        try:
            barrier.wait()
            work(i)
        except BaseException as err:  # reported below, with the thread's index
            errors.append(err)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@pytest.fixture(scope="module")
def kernels_exe():
    return kernel_programs()


def test_machines_in_threads_share_one_executable_and_get_their_own_results(kernels_exe):
    results: dict[int, list[np.ndarray]] = {}

    def work(i):
        machine = vm.VirtualMachine(kernels_exe)
        x = np.full((10, 10), float(i), np.float32)
        results[i] = [machine.invoke("twice", x) for _ in range(200)]

    run_in_threads(work)
    for i, outputs in results.items():
        for out in outputs:
            np.testing.assert_array_equal(out, np.full((10, 10), 4.0 * i, np.float32))


def test_traps_in_one_thread_do_not_disturb_the_others():
    exe = nat_programs()

    def work(i):
        machine = vm.VirtualMachine(exe, max_call_depth=2000)
        for round_ in range(20):
            if i % 2:
                with pytest.raises(vm.VMError):
                    machine.invoke("forever", nat(0))
                with pytest.raises(vm.VMError):
                    machine.invoke("only_zero", nat(1))
            assert nat_value(machine.invoke("copy", nat(100 + round_))) == 100 + round_

    run_in_threads(work)


def test_stateful_calls_keep_per_machine_state(kernels_exe):
    def work(i):
        machine = vm.VirtualMachine(kernels_exe)
        x = np.full((10, 10), float(i), np.float32)
        machine.set_input("main", x)
        for _ in range(100):
            machine.invoke_stateful("main")
            (out,) = machine.get_outputs()
            assert out[0, 0] == 2.0 * i

    run_in_threads(work)


def test_the_shared_executable_is_unchanged(kernels_exe):
    before = kernels_exe.save()[0]

    def work(i):
        machine = vm.VirtualMachine(kernels_exe)
        machine.set_instrument(lambda *args: None)
        machine.profile("twice", np.ones((10, 10), np.float32))
        with pytest.raises(vm.VMError):
            machine.invoke("into_const", np.ones((10, 10), np.float32))

    run_in_threads(work)
    assert kernels_exe.save()[0] == before
