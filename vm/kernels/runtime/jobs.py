"""The shared-job slot: one job at a time that compiled code shares with the worker threads
without the GIL, and the registry of the kinds of job it carries.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy, numba, llvmlite,
ctypes and
:mod:`vm.kernels.runtime.callbacks`.

A caller with work to share (a big product, an im2col copy, a convolution's column blocks,
a Winograd transform, a depthwise image, a max pool, a mean's row sums) claims the slot
(:func:`claim`), posts its job (:func:`post`, or :func:`share` for a job whose words are plain
arguments), does chunks of it and waits for the chunks the polling workers of
:mod:`vm.kernels.runtime.threads` took (:func:`serve`); all in compiled code, without the GIL on
either side. A job not worth sharing runs through the same chunk code on the caller's
thread (:func:`run_here`). The slot is registered with LLVM under a fixed symbol, so kernels loaded
from numba's disk cache find the slot of the process they run in.

Kinds. A job's kind names its chunk code: a C callback ``void (int64 slot, int64 index,
int64 parts)`` that does chunk ``index`` of ``parts``, reading the job's words from the
slot. The module that posts a kind registers the plain Python function with
:func:`chunk`; :func:`require` compiles it (or loads it from the disk cache) the first
time a kind is needed and writes its address into the kind's word of the slot's handler
table, which the threads taking chunks call through. So a process compiles the chunk
code of the kinds its kernels use and no other: the kernel loader requires, for each
kernel, what the library entry points it calls need (:class:`Needs`, in tables beside
those entry points). A kind's number is its place in one fixed table (:data:`BLAS` ...
:data:`TRANSPOSE`), since it is compiled into the callers' machine code. Posting a kind
whose chunk code is not registered shares nothing (the caller computes the job alone, as
when no worker polls) and is counted (:func:`unregistered_posts`), so that a missing
requirement shows instead of making a model silently single-threaded.
"""

from __future__ import annotations

import ctypes
import importlib
import threading
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.ccallback import CFunc
from numba.extending import intrinsic

from vm.kernels.runtime import atomics, callbacks, symbols

# The slot below is one job at a time: a caller claims it (BUSY 0 -> 1), writes the job
# and its chunk count, then publishes TICKET = (job << 40) | (0 << 20) | parts: the job,
# the first chunk nobody took and one past the last. The caller takes chunks from the
# front, the workers from the back, each with a compare-exchange of TICKET, until the two
# ends meet. The kernels cut their chunks along the same pixels (rows of an image, pixel
# panels), so the caller computes the first ones of every layer and a worker the last:
# each then mostly reads what it wrote itself, in its own core's cache (with the
# depthwise bands of vm.kernels.runtime.depthwise, MobileNetV2 ran 3-4% faster than when
# whichever thread was free took the next chunk). A ticket is only honoured if JOB still
# names its job after PARTS was read (a new job writes JOB before PARTS), so a thread
# holding a stale ticket does nothing. DONE
# counts finished chunks; the caller waits for all of them, then frees the slot. The
# workers of vm.kernels.runtime.threads poll the slot (serve) while they wait for Python jobs, and
# sleep on a pipe when idle, which a caller writes to (no GIL needed) so that they are
# awake for the next job. A short job is only shared when some worker is polling: waking
# one takes longer than the job (see claim).
#
# The pipe: SLEEPERS holds (sleepers << 32) | bytes written and not yet read. A byte is
# only written after a compare-exchange raised the second count while it was below the
# first, and every worker that counted itself asleep reads exactly one byte and then takes
# one off both counts (a worker that sees work after counting itself writes its own byte if
# none is on its way). So the pipe never holds more bytes than sleepers, and is empty when
# every worker is awake: no byte is left behind to cause a spurious wake-up later.

_TICKET, _DONE, _AWAKE, _SLEEPERS = 0, 8, 16, 17
#: Multiply-adds from which a job counts on the workers it wakes (see :func:`claim`):
#: about 0.2 ms on one core, several times a worker's wake-up.
WAIT_WORK = 1 << 24
_BUSY, _JOB, _PARTS, _WAKE_FD, _ONE, _UNREGISTERED, _WAKES, _KIND = range(24, 32)
#: The slot's first argument word: a job's poster writes its words from here on, and its
#: chunk code reads them (:func:`word`, :func:`argument`).
FIRST_ARGUMENT = 32
#: How many words a job's arguments may take.
ARGUMENTS = 48
#: Room for this many kinds in the handler table (a word each, after the arguments).
MAX_KINDS = 32
_HANDLERS = FIRST_ARGUMENT + ARGUMENTS
_JOB_MASK = (1 << 23) - 1
_INDEX_MASK = (1 << 32) - 1
_CHUNK_BITS = 20
_CHUNK_MASK = (1 << _CHUNK_BITS) - 1
_FRONT = 1 << _CHUNK_BITS
#: The most chunks one job is cut into.
MAX_PARTS = _CHUNK_MASK

#: The kinds of job. The numbers are compiled into every caller (and kept in numba's disk
#: cache): a new kind takes the next free number, and a retired one's is not used again
#: (IM2COL, the shared im2col that im2row replaced, is no longer posted).
BLAS, PACKED, IM2COL, CONV, WINOGRAD, WINOGRAD_PLANES = 0, 1, 2, 3, 4, 5
DEPTHWISE_GROUPS, DEPTHWISE_CHANNELS, MAX_POOL, POINTWISE, BATCHED = 6, 7, 8, 9, 10
IM2ROW, DEPTHWISE_ROWS, TRANSPOSE, ROW_SUMS = 11, 12, 13, 14
SOFTMAX_ROWS, LAYER_NORM_ROWS, RESAMPLE, GROUPED = 15, 16, 17, 18
#: The module whose import registers each kind's chunk code (:func:`require` imports it).
OWNERS = {
    BLAS: "vm.kernels.runtime.products",
    PACKED: "vm.kernels.runtime.products",
    CONV: "vm.kernels.runtime.conv_jobs",
    WINOGRAD: "vm.kernels.runtime.conv_jobs",
    WINOGRAD_PLANES: "vm.kernels.runtime.convolution",
    DEPTHWISE_GROUPS: "vm.kernels.runtime.depthwise",
    DEPTHWISE_CHANNELS: "vm.kernels.runtime.depthwise",
    DEPTHWISE_ROWS: "vm.kernels.runtime.depthwise",
    MAX_POOL: "vm.kernels.runtime.pool_loops",
    POINTWISE: "vm.kernels.runtime.pointwise",
    BATCHED: "vm.kernels.runtime.products",
    IM2ROW: "vm.kernels.runtime.conv_jobs",
    TRANSPOSE: "vm.kernels.runtime.transpose",
    ROW_SUMS: "vm.kernels.runtime.pool_loops",
    SOFTMAX_ROWS: "vm.kernels.runtime.rows",
    LAYER_NORM_ROWS: "vm.kernels.runtime.rows",
    RESAMPLE: "vm.kernels.runtime.resample",
    GROUPED: "vm.kernels.runtime.conv_jobs",
}
#: The C signature of chunk code: ``(slot, index, parts)``.
CHUNK = types.void(types.int64, types.int64, types.int64)

#: The slot's words (a cache line apart where threads write them at once).
SLOT = np.zeros(_HANDLERS + MAX_KINDS, np.int64)
symbols.export(symbols.JOB_SLOT, SLOT.ctypes.data)
#: The slot's address, in compiled code.
slot = atomics.symbol_address(symbols.JOB_SLOT)

_LIBC = ctypes.CDLL(None)
symbols.export(symbols.WRITE, ctypes.cast(_LIBC.write, ctypes.c_void_p).value)
_write = types.ExternalFunction(symbols.WRITE, types.int64(types.int32, types.int64, types.int64))


#: ``word(slot, index)``: word ``index`` of the slot at address ``slot``.
word = atomics.load_word
#: ``set_word(slot, index, value)``: write ``value`` to word ``index`` of the slot.
set_word = atomics.store_word
#: ``pair(slot, index)``: word ``index`` as the two 32-bit halves ``(high, low)`` a poster
#: packed into it.
pair = atomics.load_halves


@intrinsic
def argument(typingctx, slot, i):
    """Argument ``i`` of the job in the slot (see :func:`share`)."""
    if not (isinstance(slot, types.Integer) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        index = builder.add(args[1], ir.Constant(ir.IntType(64), FIRST_ARGUMENT))
        return atomics.emit_load_word(builder, args[0], index)

    return types.int64(types.int64, types.int64), codegen


# --- posting a job ----------------------------------------------------------------------------


@njit(nogil=True)
def claim(slot, kind, work):
    """Claim the slot for a job of ``kind`` of about ``work`` multiply-adds; the number of
    threads that will share it, 0 if none will, another job holds the slot, or the kind's
    chunk code is not registered (counted, see :func:`unregistered_posts`).

    The threads are the caller and the polling workers, and for a job of at least
    :data:`WAIT_WORK` also the sleeping workers a wake-up byte is on its way to. Such a
    worker arrives tens of microseconds later: too late for a short job, whose caller
    would then wait for the chunk it took, but in time to halve a long one (a 5 ms
    product). Counting only polling workers left every long job after an idle spell to
    the caller alone, and the worker, woken for nothing, polled and slept again before
    the next call: a model of long products ran on one thread in steady state."""
    if kind < 0 or kind >= MAX_KINDS or word(slot, _HANDLERS + kind) == 0:
        atomics.fetch_add(slot + 8 * _UNREGISTERED, 1)
        return 0
    _wake_one(slot, 1)
    awake = word(slot, _AWAKE)
    sleepers = word(slot, _SLEEPERS)
    coming = min(sleepers & _INDEX_MASK, sleepers >> 32) if work >= WAIT_WORK else 0
    if awake + coming <= 0 or not atomics.compare_exchange(slot + 8 * _BUSY, 0, 1):
        return 0
    return awake + coming + 1


@njit(nogil=True)
def post(slot, parts, kind, at, words):
    """Run a job of ``parts`` chunks of ``kind`` in the slot :func:`claim` gave this thread,
    ``words[i]`` at word ``at[i]``: write it, publish it, do chunks of it and wait for the
    workers' chunks, then free the slot."""
    job = (word(slot, _JOB) + 1) & _JOB_MASK
    parts = min(parts, MAX_PARTS)
    set_word(slot, _JOB, job)
    set_word(slot, _PARTS, parts)
    set_word(slot, _DONE, 0)
    for i in range(len(at)):
        set_word(slot, at[i], words[i])
    set_word(slot, _KIND, kind)
    set_word(slot, _TICKET, (job << (2 * _CHUNK_BITS)) | parts)
    _take_chunks(slot, False)
    while word(slot, _DONE) < parts:
        pass
    set_word(slot, _BUSY, 0)


@njit(nogil=True)
def share(kind, extent, arguments, work):
    """Run the chunk code of ``kind`` for every ``index < parts``, on this thread and the
    polling workers, without the GIL: ``parts`` chunks of ``extent`` items (two per thread,
    at most ``extent``), which the chunk code cuts as ``extent * index // parts``. It reads
    the int64 ``arguments`` (at most :data:`ARGUMENTS`) with :func:`argument`; ``work``
    is the job's size in multiply-adds (see :func:`claim`). False, doing nothing, if no
    worker polls, another job holds the slot or the kind is not registered: the caller
    then does the work itself."""
    if len(arguments) > ARGUMENTS:
        raise ValueError("share: more arguments than the slot holds")
    address = slot()
    threads = claim(address, kind, work)
    if threads == 0:
        return False
    # Written before the job starts: the slot is claimed, and no chunk runs before post()
    # publishes the job.
    for i in range(len(arguments)):
        set_word(address, FIRST_ARGUMENT + i, np.int64(arguments[i]))
    # post() writes at least one word: the kind itself, again.
    post(address, min(2 * threads, extent), kind, (_KIND,), (np.int64(kind),))
    return True


@njit(nogil=True)
def run(kind, at, words, extent, work, share):
    """Run a job of ``kind`` whose chunk code cuts ``extent`` items, ``words[i]`` at word
    ``at[i]``: with ``share`` and some worker polling, posted in chunks (two per thread,
    at most ``extent``; ``work`` its multiply-adds, see :func:`claim`), else on this
    thread alone (:func:`run_here`).

    Raises
    ------
    ValueError
        If the kind's chunk code is not registered (see :func:`run_here`).
    """
    address = slot()
    threads = claim(address, kind, work) if share and extent > 1 else 0
    if threads == 0:
        run_here(kind, at, words)
    else:
        post(address, min(2 * threads, extent), kind, at, words)


@njit(nogil=True)
def run_here(kind, at, words):
    """Run a whole job of ``kind`` on this thread, as its one chunk of one: ``words[i]``
    at word ``at[i]`` of a block laid out as the slot, which the kind's chunk code reads
    in place of the slot. For a caller whose job is not shared (too small, no worker
    polling, the slot busy): the chunk code is then the one compiled copy of the job's
    loops, where an entry point of its own beside it compiled them twice.

    Raises
    ------
    ValueError
        If the kind's chunk code is not registered in this process (:func:`require` it
        first: a kernel's ``NEEDS`` lists the kinds it posts).
    """
    address = slot()
    handler = word(address, _HANDLERS + kind) if 0 <= kind < MAX_KINDS else 0
    if handler == 0:
        raise ValueError("run_here: the job kind's chunk code is not registered (jobs.require)")
    size = FIRST_ARGUMENT
    for i in range(len(at)):
        size = max(size, at[i] + 1)
    block = np.zeros(size, np.int64)
    for i in range(len(at)):
        block[at[i]] = words[i]
    _call_handler(handler, np.int64(block.ctypes.data), 0, 1)
    callbacks.alive(block)


@njit(nogil=True)
def polling():
    """Whether some worker polls for shared jobs now."""
    return word(slot(), _AWAKE) > 0


# --- taking chunks ----------------------------------------------------------------------------


@intrinsic
def _call_handler(typingctx, handler, slot, index, parts):
    """Call the C function ``void (int64 slot, int64 index, int64 parts)`` at address
    ``handler``."""
    if not all(isinstance(t, types.Integer) for t in (handler, slot, index, parts)):
        return None

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        kind = ir.FunctionType(ir.VoidType(), [i64, i64, i64])
        builder.call(builder.inttoptr(args[0], kind.as_pointer()), args[1:])
        return context.get_dummy_value()

    return types.none(types.int64, types.int64, types.int64, types.int64), codegen


@njit(nogil=True)
def _ticket_fields(ticket):
    """``(job, front, end)`` of a ticket word (see :func:`post`): its job, the first chunk
    nobody took and one past the last."""
    return ticket >> (2 * _CHUNK_BITS), (ticket >> _CHUNK_BITS) & _CHUNK_MASK, ticket & _CHUNK_MASK


@njit(nogil=True)
def _take_chunks(slot, back):
    """Do chunks of the slot's job until none is left, from the last one down if ``back``
    (the workers), from the first one up if not (the poster); returns how many this
    thread did."""
    did = 0
    while True:
        ticket = word(slot, _TICKET)
        job, front, end = _ticket_fields(ticket)
        parts = word(slot, _PARTS)
        if word(slot, _JOB) != job or front >= end:
            return did
        if back:
            index, taken = end - 1, ticket - 1
        else:
            index, taken = front, ticket + _FRONT
        if not atomics.compare_exchange(slot + 8 * _TICKET, ticket, taken):
            continue
        # Through the kind's handler, not a call of its code: each poster would link the
        # chunk code of every kind, and numba optimises each kernel's whole linked module.
        _call_handler(word(slot, _HANDLERS + word(slot, _KIND)), slot, index, parts)
        atomics.fetch_add(slot + 8 * _DONE, 1)
        did += 1


@njit(nogil=True)
def _has_chunk(slot):
    job, front, end = _ticket_fields(word(slot, _TICKET))
    return job == word(slot, _JOB) and front < end


@njit(nogil=True)
def _wake_one(slot, most):
    """Write a byte for a sleeping worker that has none on its way, if fewer than ``most``
    are (jobs wake one worker at a time); whether it wrote one."""
    fd = word(slot, _WAKE_FD)
    while fd >= 0:
        value = word(slot, _SLEEPERS)
        pending = value & _INDEX_MASK
        if pending >= value >> 32 or pending >= most:
            return False
        if atomics.compare_exchange(slot + 8 * _SLEEPERS, value, value + 1):
            _write(np.int32(fd), slot + 8 * _ONE, 1)
            return True
    return False


# --- the worker side (called from vm.kernels.runtime.threads) ---------------------------------


@njit(nogil=True, cache=True)
def serve(posted, seen, polls):
    """Poll for ``polls`` rounds, doing chunks of shared jobs, until ``posted[0]`` differs
    from ``seen`` (a Python job: True) or the rounds pass (False)."""
    address = slot()
    flag = posted.ctypes.data
    atomics.fetch_add(address + 8 * _AWAKE, 1)
    changed = False
    rounds = 0
    while rounds < polls:
        if atomics.load(flag) != seen:
            changed = True
            break
        if _has_chunk(address):
            _take_chunks(address, True)
            rounds = 0
        rounds += 1
    atomics.fetch_add(address + 8 * _AWAKE, -1)
    return changed


@njit(nogil=True, cache=True)
def going_to_sleep():
    """Count a worker that will read one byte from the pipe (see the comment above
    :data:`SLOT`); it then calls :func:`woken`."""
    atomics.fetch_add(slot() + 8 * _SLEEPERS, np.int64(1) << 32)


@njit(nogil=True, cache=True)
def woken():
    """A worker read its byte from the pipe: it is no longer asleep, the byte no longer
    pending."""
    atomics.fetch_add(slot() + 8 * _SLEEPERS, -(np.int64(1) << 32) - 1)
    atomics.fetch_add(slot() + 8 * _WAKES, 1)


@njit(nogil=True, cache=True)
def wake(count):
    """Write a byte for up to ``count`` sleeping workers that have none on its way (one
    each); how many were written."""
    address = slot()
    written = 0
    while written < count and _wake_one(address, np.int64(1) << 31):
        written += 1
    return written


@njit(nogil=True, cache=True)
def has_work():
    """Whether a shared job has chunks nobody took yet."""
    return _has_chunk(slot())


def sleeping() -> int:
    """How many workers sleep on the pipe (or are about to)."""
    return int(SLOT[_SLEEPERS]) >> 32


def pending_wake_ups() -> int:
    """How many bytes were written to the pipe and not yet read."""
    return int(SLOT[_SLEEPERS]) & _INDEX_MASK


def wake_ups() -> int:
    """How many times a worker woke up from the pipe (for tests and diagnostics)."""
    return int(SLOT[_WAKES])


def set_wake_fd(fd: int) -> None:
    """The pipe end callers write a byte to, to wake a sleeping worker (-1: none)."""
    SLOT[_WAKE_FD] = fd


def jobs_posted() -> int:
    """How many jobs were posted since :func:`reset` (modulo 2**23; for tests)."""
    return int(SLOT[_JOB])


def busy() -> bool:
    """Whether a job holds the slot now."""
    return bool(SLOT[_BUSY])


def reset() -> None:
    """Forget every worker and job (at import, and in a forked child, where none exist);
    registered kinds stay, as their code does."""
    SLOT[:_HANDLERS] = 0
    SLOT[_WAKE_FD] = -1
    SLOT[_ONE] = 1


reset()


# --- the registry of kinds --------------------------------------------------------------------

_LOCK = threading.Lock()
#: Each kind's chunk code, a plain Python function, once its owner module registered it,
#: and the symbols of the C entry points it calls.
_CHUNKS: dict[int, tuple[Callable, tuple[str, ...]]] = {}


def chunk(kind: int, links: tuple[str, ...] = ()) -> Callable[[Callable], Callable]:
    """Register the decorated plain Python function as the chunk code of ``kind`` (in the
    module :data:`OWNERS` names for it), calling the C entry points of ``links``
    (:func:`vm.kernels.runtime.callbacks.entry`); it is compiled only by :func:`require`.
    Returns the function unchanged."""

    def register(function: Callable) -> Callable:
        if function.__module__ != OWNERS[kind]:
            raise ValueError(f"kind {kind} belongs to {OWNERS[kind]}, not {function.__module__}")
        _CHUNKS[kind] = (function, tuple(links))
        return function

    return register


def require(*kinds: int) -> None:
    """Make jobs of ``kinds`` shareable in this process: compile (or load from the disk
    cache) each kind's chunk code, once, and register it in the slot's handler table.

    Raises
    ------
    KeyError
        If a kind is not in :data:`OWNERS`.
    """
    for kind in kinds:
        if SLOT[_HANDLERS + kind] != 0:
            continue
        with _LOCK:
            if SLOT[_HANDLERS + kind] != 0:
                continue
            importlib.import_module(OWNERS[kind])
            function, links = _CHUNKS[kind]
            SLOT[_HANDLERS + kind] = callbacks.build(function, CHUNK, links).address


def callback(kind: int) -> CFunc:
    """The compiled chunk code of ``kind`` (required first)."""
    require(kind)
    function, links = _CHUNKS[kind]
    return callbacks.build(function, CHUNK, links)


def chunk_links(kind: int) -> tuple[str, ...]:
    """The symbols of the C entry points the chunk code of ``kind`` calls (imports the
    module that registers it).

    Raises
    ------
    KeyError
        If ``kind`` is not in :data:`OWNERS`.
    """
    importlib.import_module(OWNERS[kind])
    return _CHUNKS[kind][1]


def registered() -> tuple[int, ...]:
    """The kinds whose chunk code is registered in this process."""
    return tuple(kind for kind in OWNERS if SLOT[_HANDLERS + kind] != 0)


def unregistered_posts() -> int:
    """How many times a job of a kind whose chunk code was not registered was offered (and
    computed by its caller alone) since :func:`reset`."""
    return int(SLOT[_UNREGISTERED])


class Needs(NamedTuple):
    """What a library entry point that kernels call needs before a kernel calling it is
    compiled or loaded: the kinds of job it may post (:func:`require`) and the C entry
    points it calls by symbol (:func:`vm.kernels.runtime.callbacks.link`)."""

    kinds: tuple[int, ...] = ()
    symbols: tuple[str, ...] = ()

    def prepare(self) -> None:
        """Require the kinds and link the symbols."""
        require(*self.kinds)
        callbacks.link(*self.symbols)
