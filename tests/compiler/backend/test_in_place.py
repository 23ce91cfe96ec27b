"""Outputs written over a dying argument (compiler.backend.in_place) and the memory plan
that places them.

Returns group: a residual block's last 1x1 convolution writes its output over the
residual, in whole pixel panels and with a short last one, and computes what the
reference interpreter computes, through the VM's interpreter, its straight-line tier and
the AOT executor alike. Not written over (and still right): a residual needed after the
call or bound to another of the call's parameters, an output the function returns, a 3x3
window, a plane whose pixels are the tiles' rows, a product in blocks of k.
"""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.backend.in_place import in_place_argument
from compiler.backend.memory_plan import plan_body, plan_function
from compiler.ir.visitor import let_chain
from compiler.relay.vm import optimize

RNG = np.random.default_rng(5)


def _const(*shape: int) -> relay.Constant:
    scale = 1.0 / np.sqrt(np.prod(shape[1:]))
    return relay.const((RNG.standard_normal(shape) * scale).astype("float32"))


def residual_block(
    channels: int, depth: int, size: int, kernel: int = 1, keep: bool = False, pool: bool = True
) -> relay.IRModule:
    """``x -> r = relu(conv(x)); t = relu(conv(r)); y = relu(bias_add(conv(t)) + r)``, then a
    global average pool (so ``y`` does not escape); ``keep`` also returns ``r``, ``pool``
    False returns ``y`` itself."""
    x = relay.var("x", shape=(1, channels, size, size), dtype="float32")
    r = relay.nn.relu(relay.nn.conv2d(x, _const(channels, channels, 1, 1)))
    t = relay.nn.relu(relay.nn.conv2d(r, _const(depth, channels, 1, 1)))
    pad = (kernel // 2,) * 4
    last = relay.nn.conv2d(t, _const(channels, depth, kernel, kernel), padding=pad)
    y = relay.nn.relu(relay.nn.bias_add(last, _const(channels)) + r)
    out = relay.nn.global_avg_pool2d(y) if pool else y
    mod = relay.IRModule()
    mod["main"] = relay.Function([x], relay.Tuple([out, r]) if keep else out)
    return mod


def _plan(mod: relay.IRModule):  # type: ignore[no-untyped-def]
    with relay.transform.PassContext(opt_level=3):
        lowered, _ = optimize(mod)
    return plan_function(lowered["main"])


def _written_over(mod: relay.IRModule) -> list[tuple[int, int]]:
    """(output, residual) buffer pairs the plan writes over each other, checking that they
    share their bytes."""
    plan = _plan(mod)
    pairs = []
    for o in plan.buffers:
        if o.over is not None:
            source = plan.objects[o.over]
            assert (o.storage, o.offset) == (source.storage, source.offset)
            pairs.append((o.index, o.over))
    return pairs


def _run(mod: relay.IRModule, x: np.ndarray) -> list[np.ndarray]:
    """``main`` on ``x`` by the VM's interpreter, by the straight-line tier it runs from the
    second call and by the AOT executor, which share the plan's offsets: the values of
    the first, checked equal to the others."""
    from vm.aot import AotModule

    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod)
    machine = vm.VirtualMachine(exe)
    runs = [machine.invoke("main", x), machine.invoke("main", x), AotModule(exe).run(x)]
    flat = [
        [np.asarray(v.numpy()) for v in (r if isinstance(r, (list, tuple)) else [r])] for r in runs
    ]
    for other in flat[1:]:
        for got, want in zip(other, flat[0], strict=True):
            np.testing.assert_array_equal(got, want)
    return flat[0]


def _reference(mod: relay.IRModule, x: np.ndarray) -> list[np.ndarray]:
    result = relay.create_executor("debug", mod).evaluate()(x)
    values = result if isinstance(result, (list, tuple)) else [result]
    return [np.asarray(v.numpy() if hasattr(v, "numpy") else v) for v in values]


# --- returns -----------------------------------------------------------------------------------

# (channels, depth, size): 64 pixels in two whole panels; 100 pixels, the last 4 short.
WRITTEN_OVER = [(32, 16, 8), (24, 40, 10)]


@pytest.mark.parametrize(("channels", "depth", "size"), WRITTEN_OVER)
def test_a_residual_blocks_last_convolution_is_written_over_its_residual(
    channels: int, depth: int, size: int
) -> None:
    mod = residual_block(channels, depth, size)
    assert len(_written_over(mod)) == 1
    x = RNG.standard_normal((1, channels, size, size)).astype("float32")
    (got,), (want,) = _run(mod, x), _reference(mod, x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_the_argument_written_over_is_the_residual_parameter_of_the_kernel() -> None:
    with relay.transform.PassContext(opt_level=3):
        lowered, _ = optimize(residual_block(32, 16, 8))
    found = []
    stack = [lowered["main"].body]
    while stack:
        node = stack.pop()
        if isinstance(node, relay.Let):
            stack += [node.value, node.body]
        elif isinstance(node, relay.Call):
            at = in_place_argument(node)
            if at is not None:
                found.append((node, at))
    ((call, at),) = found
    assert call.op.params[at].checked_type == call.checked_type
    assert at >= 2  # after the data and the packed weight


# --- not written over --------------------------------------------------------------------------


def test_a_residual_still_needed_after_the_call_is_not_written_over() -> None:
    mod = residual_block(32, 16, 8, keep=True)
    assert _written_over(mod) == []
    x = RNG.standard_normal((1, 32, 8, 8)).astype("float32")
    for got, want in zip(_run(mod, x), _reference(mod, x)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_residual_that_is_also_another_argument_of_the_call_is_not_written_over() -> None:
    # conv(r) + r with r bound to two parameters of the kernel: written over, the
    # convolution would read its input while the output replaced it.
    with relay.transform.PassContext(opt_level=3):
        lowered, _ = optimize(residual_block(32, 32, 8))
    bindings, tail = let_chain(lowered["main"].body)
    ((index, call, at),) = [
        (i, let.value, at)
        for i, let in enumerate(bindings)
        if isinstance(let.value, relay.Call) and (at := in_place_argument(let.value)) is not None
    ]
    assert plan_body(lowered["main"].body).buffers[index].over is not None
    shared = relay.Call(call.op, [call.args[at], *call.args[1:]], call.attrs)
    shared._checked_type = call.checked_type
    body = tail
    for i, let in reversed(list(enumerate(bindings))):
        body = relay.Let(let.var, shared if i == index else let.value, body)
    assert all(o.over is None for o in plan_body(body).buffers)


def test_an_output_the_function_returns_is_not_written_over_its_residual() -> None:
    assert _written_over(residual_block(32, 16, 8, pool=False)) == []


@pytest.mark.parametrize(
    ("channels", "depth", "size", "kernel"),
    [(32, 16, 8, 3), (24, 200, 7, 1), (24, 400, 10, 1)],
    ids=["3x3 window", "7x7 plane by pixels", "product in blocks of k"],
)
def test_a_convolution_not_run_in_pixel_panels_is_not_written_over(
    channels: int, depth: int, size: int, kernel: int
) -> None:
    mod = residual_block(channels, depth, size, kernel=kernel)
    assert _written_over(mod) == []
    x = RNG.standard_normal((1, channels, size, size)).astype("float32")
    (got,), (want,) = _run(mod, x), _reference(mod, x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
