"""Differential testing: the reference interpreter, the VM and the VM after save/load must agree.

Every end-to-end program runs three ways: ``relay.create_executor("debug", mod)`` (the
oracle), ``vm.VirtualMachine(relay.vm.compile(mod))``, and a VM over
``vm.Executable.load_exec(exe.save()[0])``. Values are compared structurally: arrays with
``assert_allclose`` and equal dtypes, tuples field by field, ``vm.ADT`` by tag,
constructor name and fields. Programs reuse a few operators and dtypes so the suite
compiles few distinct kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import vm
from compiler import relay
from compiler.ir.module import IRModule
from vm.objects import ADT

HEADER = '#[version = "0.0.5"]\n'


def parse(text: str, prelude: bool = False) -> IRModule:
    """A module from Relay text; with ``prelude`` the text may use the Prelude's definitions."""
    if not prelude:
        return relay.fromtext(HEADER + text)
    base = relay.IRModule()
    relay.Prelude(base)
    return relay.fromtext(HEADER + text, init_module=base)


def run_all(mod: IRModule, *args: Any, func: str = "main") -> tuple[Any, Any, Any]:
    """``func(*args)`` on the interpreter, the VM, and the VM of the reloaded executable."""
    executor = relay.create_executor("debug", mod)
    fn = executor.evaluate() if func == "main" else executor.evaluate(mod.get_global_var(func))
    reference = fn(*args)
    exe = relay.vm.compile(mod)
    direct = vm.VirtualMachine(exe).invoke(func, *args)
    reloaded = vm.Executable.load_exec(exe.save()[0])
    assert reloaded.save()[0] == exe.save()[0], "save(load_exec(save(exe))) changed the bytes"
    after_load = vm.VirtualMachine(reloaded).invoke(func, *args)
    return reference, direct, after_load


def check(mod: IRModule, *args: Any, expected: Any = None, func: str = "main") -> Any:
    """Run three ways, assert all agree (and equal ``expected`` if given); returns the value."""
    reference, direct, after_load = run_all(mod, *args, func=func)
    assert_same_value(direct, reference, "VM vs interpreter")
    assert_same_value(after_load, reference, "VM after save/load vs interpreter")
    if expected is not None:
        assert_same_value(reference, expected, "interpreter vs expected")
    return direct


def assert_same_value(actual: Any, expected: Any, what: str = "values") -> None:
    """Structural comparison of runtime values (iterative: long lists are fine)."""
    stack: list[tuple[Any, Any, str]] = [(actual, expected, "result")]
    while stack:
        a, e, path = stack.pop()
        where = f"{what}: at {path}"
        if isinstance(e, ADT):
            assert isinstance(a, ADT), f"{where}: expected {e.constructor or 'an ADT'}, got {a!r}"
            assert (a.tag, a.constructor, len(a)) == (e.tag, e.constructor, len(e)), (
                f"{where}: expected {e.constructor}/{e.tag} with {len(e)} fields, "
                f"got {a.constructor}/{a.tag} with {len(a)}"
            )
            stack.extend(
                (x, y, f"{path}.{e.constructor}[{i}]") for i, (x, y) in enumerate(zip(a, e))
            )
        elif isinstance(e, (tuple, list)):
            assert isinstance(a, (tuple, list)) and len(a) == len(e), (
                f"{where}: expected {e!r}, got {a!r}"
            )
            stack.extend((x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, e)))
        else:
            want = np.asarray(e)
            got = np.asarray(a)
            assert isinstance(a, np.ndarray) or np.isscalar(a), f"{where}: not a tensor: {a!r}"
            if isinstance(e, np.ndarray):
                assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, expected {want.dtype}"
            assert got.shape == want.shape, f"{where}: shape {got.shape}, expected {want.shape}"
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=where)


def adt(mod: IRModule, name: str, *fields: Any) -> ADT:
    """The expected value ``name(fields...)`` for a constructor of ``mod``."""
    for ctor in mod.constructors:
        if ctor.name_hint == name:
            return ADT(ctor.tag, fields, name)
    raise KeyError(f"module has no constructor {name}")


def int_list(mod: IRModule, values: list[int]) -> ADT:
    """The expected ``Cons(v0, Cons(v1, ... Nil))`` of int32 scalars."""
    result = adt(mod, "Nil")
    for v in reversed(values):
        result = adt(mod, "Cons", np.array(v, dtype="int32"), result)
    return result
