"""Memory planning: offset assignment, liveness and escapes, the bytecode it shapes, and
end-to-end agreement of the planned VM with the reference interpreter.

Programs are compiled with ``FuseOps`` disabled so that each operator stays its own kernel
(and its own buffer); the end-to-end programs use only ``exp`` and ``negative`` on
float32 vectors, so the suite compiles two kernels.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import relay
from compiler.backend import memory_plan as mp
from compiler.backend.codegen import compile_module
from compiler.backend.memory_plan import (
    ALIGNMENT,
    FOREVER,
    KILL_MIN_BYTES,
    Block,
    assign_offsets,
    peak_intermediate_bytes,
    plan_body,
    plan_function,
)
from compiler.ir.expr import Call, Function, Let, Var
from compiler.ir.types import TensorType
from compiler.relay.vm import optimize
from compiler.transform.pass_manager import PassContext
from tests.e2e.harness import check, parse
from vm.isa import Opcode

F3 = "Tensor[(3), float32]"
#: A vector of exactly KILL_MIN_BYTES bytes: large enough for kills and its own storage.
BIG_LEN = KILL_MIN_BYTES // 4
BIG = f"Tensor[({BIG_LEN}), float32]"


def unfused(**config: object) -> PassContext:
    """A context where every operator is its own kernel, with extra config."""
    return PassContext(disabled_pass=["FuseOps"], config=config)


def lower(text: str):  # type: ignore[no-untyped-def]
    with unfused():
        lowered, _ = optimize(parse(text))
    return lowered


def plan(text: str, name: str = "main", planned: bool = True) -> mp.FunctionPlan:
    return plan_function(lower(text)[name], planned)


def compile_text(text: str, planned: bool = True):  # type: ignore[no-untyped-def]
    with unfused(**{mp.CONFIG_KEY: planned}):
        return relay.vm.compile(parse(text))


def code(exe, name: str = "main") -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(Opcode(i.opcode).name, *i.operands) for i in exe.get_function(name).instructions]


def offsets(exe, name: str = "main") -> list[int]:  # type: ignore[no-untyped-def]
    """The byte offset of every AllocTensor, in code order."""
    return [ops[1] for op, *ops in code(exe, name) if op == "AllocTensor"]


def by_name(p: mp.FunctionPlan, text_order: list[str]) -> dict[str, mp.MemoryObject]:
    """The plan's buffers named in evaluation order (one output per kernel call)."""
    buffers = p.buffers
    assert len(buffers) == len(text_order)
    return dict(zip(text_order, buffers))


CHAIN = f"""
def @main(%x: {F3}) {{
  let %a = exp(%x);
  let %b = negative(%a);
  let %c = exp(%b);
  let %d = negative(%c);
  let %e = exp(%d);
  (%a, %e)
}}"""


# --- offset assignment ------------------------------------------------------------------------


def test_blocks_with_disjoint_intervals_share_offset_zero() -> None:
    offs, size = assign_offsets([Block(100, 0, 1), Block(100, 2, 3), Block(40, 4, 9)])
    assert offs == [0, 0, 0] and size == 100


def test_overlapping_blocks_get_disjoint_aligned_ranges() -> None:
    offs, size = assign_offsets([Block(100, 0, 5), Block(10, 3, 8), Block(1, 4, 4)])
    assert all(o % ALIGNMENT == 0 for o in offs)
    ranges = sorted((o, o + s) for o, s in zip(offs, (100, 10, 1)))
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(ranges))
    assert offs[0] == 0 and size == max(o + s for o, s in zip(offs, (100, 10, 1)))


def test_a_block_starting_where_another_ends_conflicts() -> None:
    # A kernel reads its input at the position it writes its output: never in place.
    offs, _ = assign_offsets([Block(64, 0, 3), Block(64, 3, 5)])
    assert offs[0] != offs[1]
    assert Block(64, 0, 3).conflicts(Block(64, 3, 5))
    assert not Block(64, 0, 2).conflicts(Block(64, 3, 5))


def test_best_fit_takes_the_smallest_gap_that_fits() -> None:
    # Placed first (largest): a 256-byte and a 128-byte block live throughout, with gaps
    # made by two short-lived blocks; the 64-byte block then fits the smaller gap.
    blocks = [
        Block(256, 0, 10),  # 0..256
        Block(192, 0, 1),  # 256..448, dies early
        Block(128, 0, 10),  # 448..576
        Block(64, 0, 1),  # 576..640, dies early
        Block(64, 0, 10),  # 640..704
        Block(64, 5, 6),  # best fit: the 64-byte gap at 576, not the 192-byte one at 256
    ]
    offs, _ = assign_offsets(blocks)
    assert offs[:5] == [0, 256, 448, 576, 640]
    assert offs[5] == 576


def test_block_with_no_gap_goes_above_the_highest_conflicting_block() -> None:
    offs, size = assign_offsets([Block(128, 0, 10), Block(64, 0, 10), Block(64, 0, 10)])
    assert offs == [0, 128, 192] and size == 256


def test_blocks_in_different_arms_of_one_branch_share_but_sequential_branches_do_not() -> None:
    then_arm, else_arm = ((0, 0),), ((0, 1),)
    offs, _ = assign_offsets([Block(64, 0, 10, then_arm), Block(64, 0, 10, else_arm)])
    assert offs == [0, 0]
    first_if, second_if = ((0, 0),), ((1, 0),)
    offs, _ = assign_offsets([Block(64, 0, 10, first_if), Block(64, 0, 10, second_if)])
    assert offs[0] != offs[1]
    # Nested: the then-arm of an inner if and the else-arm of the outer one are exclusive.
    assert mp.exclusive(((0, 0), (3, 1)), ((0, 1),))
    assert not mp.exclusive(((0, 0), (3, 1)), ((0, 0),))


def test_a_block_that_never_ends_is_never_reused() -> None:
    offs, _ = assign_offsets([Block(64, 1, FOREVER), Block(64, 50, 60), Block(64, 90, 99)])
    assert offs[0] not in offs[1:]


def test_arena_size_is_the_end_of_the_highest_block_not_rounded_up() -> None:
    _, size = assign_offsets([Block(12, 0, 1), Block(12, 1, 2)])
    assert size == 64 + 12


def test_empty_blocks_need_no_bytes() -> None:
    offs, size = assign_offsets([Block(0, 0, 5), Block(8, 0, 5)])
    assert offs == [0, 0] and size == 8


_blocks = st.lists(
    st.builds(
        lambda size, start, length, arm: Block(
            size, start, start + length, () if arm is None else ((arm // 2, arm % 2),)
        ),
        st.integers(0, 300),
        st.integers(0, 30),
        st.integers(0, 12),
        st.one_of(st.none(), st.integers(0, 3)),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(_blocks)
def test_conflicting_blocks_never_share_a_byte(blocks: list[Block]) -> None:
    offs, size = assign_offsets(blocks)
    assert all(o % ALIGNMENT == 0 for o in offs)
    for i, a in enumerate(blocks):
        assert offs[i] + a.size <= size or a.size == 0
        for j in range(i + 1, len(blocks)):
            b = blocks[j]
            if a.size and b.size and a.conflicts(b):
                assert offs[i] + a.size <= offs[j] or offs[j] + b.size <= offs[i], (i, j)
    assert size <= sum(mp.align(b.size) for b in blocks)
    assert assign_offsets(blocks) == (offs, size)  # deterministic


# --- liveness on lowered functions ------------------------------------------------------------


def test_intervals_run_from_the_kernel_call_to_the_last_use() -> None:
    buffers = by_name(plan(CHAIN), ["a", "b", "c", "d", "e"])
    a, b, c, d, e = buffers.values()
    assert [o.start for o in buffers.values()] == sorted(o.start for o in buffers.values())
    assert b.last_use == c.start and c.last_use == d.start and d.last_use == e.start
    assert a.escapes and e.escapes and not (b.escapes or c.escapes or d.escapes)
    assert a.end == FOREVER and b.end == b.last_use


def test_sequential_temporaries_share_an_offset() -> None:
    p = plan(CHAIN)
    a, b, c, d, e = p.buffers
    assert b.offset == d.offset  # %b is dead when %d is written
    assert c.offset == e.offset  # %c is dead when %e is written
    assert len({a.offset, b.offset, c.offset}) == 3
    assert p.unplanned_bytes == 4 * 64 + 12 and p.peak_bytes == 2 * 64 + 12


def test_returned_values_and_fields_of_a_returned_tuple_escape() -> None:
    p = plan(f"""
    def @main(%x: {F3}) {{
      let %a = exp(%x);
      let %b = negative(%x);
      let %t = (%a, %x);
      let %c = exp(%b);
      let %u = (%t, %c);
      %u
    }}""")
    a, b, c = p.buffers
    assert a.escapes and not b.escapes and c.escapes


def test_a_value_passed_to_a_function_call_escapes() -> None:
    p = plan(f"""
    def @id(%y: {F3}) -> {F3} {{ %y }}
    def @main(%x: {F3}) {{
      let %a = exp(%x);
      let %b = @id(%a);
      let %c = negative(%b);
      let %d = exp(%c);
      %d
    }}""")
    a, c, d = p.buffers
    assert a.escapes and not c.escapes and d.escapes
    (foreign,) = [o for o in p.objects if o.kind == mp.FOREIGN]
    assert foreign.last_use == c.start


def test_a_value_captured_by_a_closure_escapes() -> None:
    p = plan(f"""
    def @main(%x: {F3}) {{
      let %a = exp(%x);
      let %f = fn (%y: {F3}) -> {F3} {{ %y * %a }};
      let %b = negative(%x);
      %f(%b)
    }}""")
    a, b = p.buffers
    assert a.escapes and b.escapes  # b is an argument of InvokeClosure


def test_a_field_of_a_local_tuple_is_tracked_through_the_projection() -> None:
    p = plan(f"""
    def @main(%x: {F3}) {{
      let %a = exp(%x);
      let %b = negative(%x);
      let %t = (%a, %b);
      let %c = exp(%t.0);
      let %d = negative(%c);
      let %e = exp(%d);
      %e
    }}""")
    a, b, c, d, e = p.buffers
    assert not (a.escapes or b.escapes)
    assert b.last_use < a.last_use == c.start  # the tuple's projection only reads %a
    assert not d.escapes and e.escapes


def test_a_value_bound_across_a_branch_merge_lives_until_the_merged_value_dies() -> None:
    p = plan(f"""
    def @main(%x: {F3}, %y: {F3}, %k: bool) {{
      let %a = exp(%x);
      let %m = if (%k) {{ %a }} else {{ negative(%x) }};
      let %b = exp(%y);
      let %c = negative(%m);
      let %d = exp(%b);
      (%c, %d)
    }}""")
    a, n, b, c, _ = p.buffers
    assert a.last_use == c.start and n.last_use == c.start
    assert not (a.escapes or n.escapes or b.escapes)
    assert a.offset != b.offset  # %a is still needed (through %m) when %b is written


def test_temporaries_in_different_branches_of_an_if_share_memory() -> None:
    p = plan(f"""
    def @main(%x: {F3}, %k: bool) {{
      if (%k) {{ let %a = exp(%x); let %b = negative(%a); exp(%b) }}
      else {{ let %c = negative(%x); let %d = exp(%c); negative(%d) }}
    }}""")
    a, b, r1, c, d, r2 = p.buffers
    assert {a.offset, b.offset} == {c.offset, d.offset}
    assert r1.escapes and r2.escapes and r1.offset == r2.offset  # only one arm runs
    assert p.peak_bytes == 64 + 12


def test_clauses_of_a_match_share_memory() -> None:
    p = plan(f"""
    type Opt {{ Some({F3}), Empty }}
    def @main(%o: Opt, %x: {F3}) {{
      match (%o) {{
        Some(%v) => {{ let %a = exp(%v); negative(%a) }},
        Empty => {{ let %b = negative(%x); exp(%b) }},
      }}
    }}""")
    a, r1, b, r2 = p.buffers
    assert a.offset == b.offset and r1.offset == r2.offset and len(p.storages) == 1


def test_match_on_a_local_value_tracks_its_fields_into_the_clause() -> None:
    p = plan(f"""
    def @main(%x: {F3}) {{
      let %a = exp(%x);
      let %p = (%a, %x);
      let %r = match (%p) {{ (%u, _) => negative(%u) }};
      let %s = exp(%r);
      %s
    }}""")
    a, r, s = p.buffers
    assert not a.escapes and a.last_use == r.start and not r.escapes and s.escapes


def test_large_functions_keep_results_in_their_own_storage() -> None:
    p = plan(f"""
    def @main(%x: {BIG}) {{
      let %a = exp(%x);
      let %b = negative(%a);
      exp(%b)
    }}""")
    a, b, r = p.buffers
    assert len(p.storages) == 2
    assert (a.storage, b.storage, r.storage) == (0, 0, 1)
    assert p.storages == (2 * KILL_MIN_BYTES, KILL_MIN_BYTES)
    assert p.peak_bytes == 3 * KILL_MIN_BYTES and p.unplanned_bytes == 3 * KILL_MIN_BYTES


def test_small_functions_use_one_storage_for_pool_and_results() -> None:
    assert len(plan(CHAIN).storages) == 1


def test_without_planning_every_output_has_its_own_offset() -> None:
    p = plan(CHAIN, planned=False)
    assert [o.offset for o in p.buffers] == [0, 64, 128, 192, 256]
    assert p.storages == (256 + 12,) and not p.kills
    assert p.peak_bytes == p.unplanned_bytes


def test_a_10000_deep_chain_is_planned_into_two_slots() -> None:
    # Built directly (no parser or type inference) to keep the test fast.
    ty = TensorType((4,), "float32")
    p0 = Var("p", ty)
    neg = Function([p0], relay.negative(p0), ty, attrs={"Primitive": 1})
    x = Var("x", ty)
    names = [Var(f"v{i}", ty) for i in range(10_000)]
    body = names[-1]
    for i in range(len(names) - 1, -1, -1):
        call = Call(neg, [names[i - 1] if i else x])
        call._checked_type = ty
        body = Let(names[i], call, body)
    p = plan_body(body)
    # Two alternating temporaries; the result takes the one that is free at the end.
    assert p.storages == (64 + 16,)
    assert len(p.calls) == 10_000 and p.bindings[0] is names[0]


# --- code generation ---------------------------------------------------------------------------


def test_codegen_reuses_the_offset_of_a_dead_temporary() -> None:
    exe = compile_text(CHAIN)
    assert offsets(exe) == [0, 64, 128, 64, 128]  # %d reuses %b's bytes, %e those of %c
    assert code(exe)[:2] == [("LoadConsti", 128 + 12, 1), ("AllocStorage", 1, 64, "uint8", 2)]
    assert "KillRegister" not in [op for op, *_ in code(exe)]  # pool-resident: nothing to free


def test_without_planning_codegen_gives_one_offset_per_output() -> None:
    exe = compile_text(CHAIN, planned=False)
    assert offsets(exe) == [0, 64, 128, 192, 256]
    lowered = lower(CHAIN)
    assert code(compile_module(lowered, memory_plan=False)) == code(exe)
    assert code(compile_module(lowered, memory_plan=True)) == code(compile_text(CHAIN))


BIG_CALLS = f"""
def @big(%y: {BIG}) -> {BIG} {{ exp(%y) }}
def @main(%x: {BIG}) {{
  let %a = @big(%x);
  let %b = negative(%a);
  let %c = exp(%b);
  let %d = @big(%c);
  let %e = negative(%d);
  %e
}}"""


def test_kill_register_follows_the_last_use_of_a_large_call_result() -> None:
    exe = compile_text(BIG_CALLS)
    ops = code(exe)
    invokes = [i for i, (op, *_) in enumerate(ops) if op == "Invoke"]
    first_result = ops[invokes[0]][3]
    kill = ops.index(("KillRegister", first_result))
    packed = [i for i, (op, *_) in enumerate(ops) if op == "InvokePacked"]
    assert packed[0] < kill < packed[1]  # right after %b, its only reader
    # %d's result is read last by %e, just before the return: no kill there.
    second_result = ops[invokes[1]][3]
    assert ("KillRegister", second_result) not in ops


def test_a_large_dead_pool_is_killed_before_a_later_call() -> None:
    exe = compile_text(BIG_CALLS)
    ops = code(exe)
    storages = [op[4] for op in ops if op[0] == "AllocStorage"]
    assert len(storages) == 2  # the pool (%b) and the results (%c, %e)
    pool = storages[0]
    b_reg = [op[5] for op in ops if op[0] == "AllocTensor" and op[1] == pool]
    kills = {op[1] for op in ops if op[0] == "KillRegister"}
    assert pool in kills and set(b_reg) <= kills
    # ... killed after %c (the pool's last reader) and before the second call.
    last_kill = max(i for i, op in enumerate(ops) if op[0] == "KillRegister")
    assert last_kill < [i for i, op in enumerate(ops) if op[0] == "Invoke"][1]


BIG_BRANCHES = f"""
def @big(%y: {BIG}) -> {BIG} {{ exp(%y) }}
def @main(%x: {BIG}, %k: bool) {{
  let %a = @big(%x);
  let %r = if (%k) {{
    negative(%a)
  }} else {{
    let %p = @big(%x);
    let %q = negative(%p);
    exp(%q)
  }};
  let %s = @big(%r);
  negative(%s)
}}"""


def test_kills_run_on_every_path_that_allocated_the_value() -> None:
    exe = compile_text(BIG_BRANCHES)
    ops = code(exe)
    invokes = [i for i, op in enumerate(ops) if op[0] == "Invoke"]
    a_reg, p_reg = ops[invokes[0]][3], ops[invokes[1]][3]
    moves = [i for i, op in enumerate(ops) if op[0] == "Move"]
    # %a is read only in the then-branch but made before the if: it is killed after the
    # merge, so the else path frees it too ...
    a_kill = ops.index(("KillRegister", a_reg))
    assert moves[-1] < a_kill < invokes[2]
    # ... while %p, made and last read inside the else-branch, is killed right there.
    p_kill = ops.index(("KillRegister", p_reg))
    packed = [i for i, op in enumerate(ops) if op[0] == "InvokePacked"]
    assert invokes[1] < packed[1] < p_kill < packed[2] < moves[-1]


def test_kills_in_branches_compute_the_right_values() -> None:
    x = np.linspace(-1, 1, BIG_LEN, dtype="float32")
    with unfused():
        mod = parse(BIG_BRANCHES)
        check(mod, x, np.bool_(True), expected=-np.exp(-np.exp(x)))
        check(mod, x, np.bool_(False), expected=-np.exp(np.exp(-np.exp(x))))


def test_a_node_shared_by_two_bindings_gets_a_buffer_per_evaluation_and_no_kills() -> None:
    ty = TensorType((4,), "float32")
    p0 = Var("p", ty)
    neg = Function([p0], relay.negative(p0), ty, attrs={"Primitive": 1})
    x, a, b = Var("x", ty), Var("a", ty), Var("b", ty)
    shared = Call(neg, [x])
    shared._checked_type = ty
    body = Let(a, shared, Let(b, shared, relay.Tuple([a, b])))
    p = plan_body(body)
    assert len(p.calls) == 2 and p.calls[0].outputs != p.calls[1].outputs
    first, second = p.buffers
    assert first.offset != second.offset and not p.kills


def test_without_planning_nothing_is_killed() -> None:
    exe = compile_text(BIG_CALLS, planned=False)
    assert "KillRegister" not in [op for op, *_ in code(exe)]


def test_small_call_results_are_not_killed() -> None:
    exe = compile_text(f"""
    def @id(%y: {F3}) -> {F3} {{ %y }}
    def @main(%x: {F3}) {{ let %a = @id(%x); let %b = exp(%a); let %c = @id(%b); exp(%c) }}""")
    assert "KillRegister" not in [op for op, *_ in code(exe)]


def test_memory_plan_config_must_be_a_bool() -> None:
    mod = parse(f"def @main(%x: {F3}) {{ exp(%x) }}")
    with PassContext(config={mp.CONFIG_KEY: "no"}), pytest.raises(TypeError, match="True or False"):
        relay.vm.compile(mod)


def test_peak_intermediate_bytes_with_and_without_planning() -> None:
    planned, unplanned = compile_text(CHAIN), compile_text(CHAIN, planned=False)
    assert peak_intermediate_bytes(planned) == 128 + 12
    assert peak_intermediate_bytes(unplanned) == 256 + 12
    lowered = lower(CHAIN)
    assert peak_intermediate_bytes(lowered) == 128 + 12
    assert peak_intermediate_bytes(lowered, planned=False) == 256 + 12
    assert peak_intermediate_bytes(lowered["main"]) == 128 + 12
    with pytest.raises(ValueError, match="leave out planned"):
        peak_intermediate_bytes(planned, planned=True)
    with pytest.raises(KeyError, match="no function named 'nope'"):
        peak_intermediate_bytes(planned, "nope")
    assert mp.storage_bytes(compile_text(BIG_CALLS)) == {
        "big": KILL_MIN_BYTES,
        "main": 3 * KILL_MIN_BYTES,  # the pool (%b), then %c and %e
    }


def test_storage_bytes_refuses_a_size_known_only_at_run_time() -> None:
    from vm.builder import ExecutableBuilder

    b = ExecutableBuilder()
    f = b.function("main", ["n"], [("tensor", (), "int64")], ("any",))
    f.emit(Opcode.AllocStorage, 0, 64, "uint8", 1)
    f.emit(Opcode.Ret, 0)  # not the storage: its bytes are uninitialized, so that is invalid
    b.add_function(f)
    with pytest.raises(ValueError, match=r"function main: .* register \$0"):
        mp.storage_bytes(b.build())


def test_plan_description_lists_buffers_and_kills() -> None:
    text = plan(BIG_CALLS).describe()
    assert "storages: [65536, 131072] bytes" in text
    assert "escapes" in text and "kill after %b" in text and "kill after %c" in text
    assert mp.memory_plan_enabled()  # the default context plans


# --- returns: planned VM, VM after save/load and the interpreter agree ------------------------


def vec(*values: float) -> np.ndarray:
    return np.array(values, dtype="float32")


def test_reused_buffers_do_not_disturb_an_earlier_result_that_is_returned() -> None:
    x = vec(0.5, -1.0, 2.0)
    a = np.exp(x)
    e = np.exp(-np.exp(-a))
    with unfused():
        a_out, e_out = check(parse(CHAIN), x, expected=(a, e))
    assert not np.shares_memory(a_out, e_out)


def test_branch_temporaries_sharing_memory_compute_the_right_values() -> None:
    mod = parse(f"""
    def @main(%x: {F3}, %k: bool) {{
      let %a = exp(%x);
      let %r = if (%k) {{ let %b = negative(%a); let %c = exp(%b); negative(%c) }}
               else {{ let %d = exp(%a); let %e = negative(%d); exp(%e) }};
      let %s = exp(%r);
      (%s, %a)
    }}""")
    x = vec(0.1, 0.2, -0.3)
    a = np.exp(x)
    with unfused():
        check(mod, x, np.bool_(True), expected=(np.exp(-np.exp(-a)), a))
        check(mod, x, np.bool_(False), expected=(np.exp(np.exp(-np.exp(a))), a))


def test_kills_and_two_storages_compute_the_right_values() -> None:
    x = np.linspace(-1, 1, BIG_LEN, dtype="float32")
    want = -np.exp(np.exp(-np.exp(x)))
    with unfused():
        check(parse(BIG_CALLS), x, expected=want)


def test_each_invocation_returns_its_own_result() -> None:
    import vm

    exe = compile_text(CHAIN)
    machine = vm.VirtualMachine(exe)
    first = machine.run(vec(1, 2, 3))
    kept = [np.array(v) for v in first]
    machine.run(vec(-5, 0, 5))
    for got, want in zip(first, kept):
        np.testing.assert_array_equal(got, want)
