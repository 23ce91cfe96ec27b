"""Run a saved executable on a Ray cluster: batch inference with Ray Data, serving with Ray Serve.

Runtime layer (``vm``); ``ray`` is an optional extra (``pip install 'relayvm[ray]'``) and
is imported only by the functions that need it, so ``import vm.ray`` works without it.

The executable travels as its file's bytes: :func:`put_executable` puts them in Ray's
object store once, and each actor reads them from there (zero-copy on its node) and loads
them with :meth:`vm.Executable.load_exec`, which verifies the program before anything
runs. That is what makes shipping a file to workers safe: a worker runs only what passes
the verifier, never code from the file. Nothing is pickled per batch but the batch.

Batch inference (one loaded executable and one machine per actor)::

    import ray
    import vm.ray

    ray.init()
    ds = ray.data.read_parquet("s3://bucket/inputs/")       # a column per parameter
    out = vm.ray.predict_dataset(ds, "model.relayvm", workers=8, batch_size=256)
    out.write_parquet("s3://bucket/outputs/")

Serving::

    from ray import serve

    app = vm.ray.deployment().bind(vm.ray.put_executable("model.relayvm"))
    handle = serve.run(app)
    handle.remote({"x": x}).result()                 # or HTTP POST {"x": [[...], ...]}

Rows are along the first axis of every column. A parameter whose first dimension is
dynamic (``?``) gets the whole batch in one call; one with a static first dimension ``b``
gets ``b`` rows a call (the last call padded with zeros, its extra rows dropped), so the
model must treat rows independently, as inference models do; a column with one axis more
than the parameter is called once per row.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import vm
from vm.executable import Executable


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError(
            "vm.ray needs Ray: pip install 'relayvm[ray]' (or 'ray[data,serve]')"
        ) from None
    return ray


def executable_bytes(source: Any) -> bytes:
    """The saved-file bytes of ``source``: a path, the bytes themselves, or a ``vm.Executable``."""
    if isinstance(source, Executable):
        return bytes(source.save()[0])
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as handle:
            return handle.read()
    raise TypeError(
        f"expected an executable file path, its bytes or a vm.Executable, got "
        f"{type(source).__name__}"
    )


def put_executable(source: Any) -> Any:
    """Put the executable's file bytes in Ray's object store once; pass the ref to actors.

    Parameters
    ----------
    source : str, os.PathLike, bytes or vm.Executable
        The saved executable (or one in memory, saved here).

    Returns
    -------
    ray.ObjectRef
        A ref to a ``uint8`` array of the file's bytes (an array, so that every actor on a
        node maps the same shared memory instead of copying it).
    """
    return _ray().put(np.frombuffer(executable_bytes(source), dtype=np.uint8))


class BatchPredictor:
    """A callable class for ``Dataset.map_batches``: one verified executable per actor.

    Parameters
    ----------
    executable : ray.ObjectRef, str, os.PathLike, bytes or vm.Executable
        What :func:`put_executable` returned (or a source it accepts, for use outside Ray).
    function : str
        The function to call (default ``"main"``).
    outputs : sequence of str, optional
        Column names for the results, in order; default ``output_0``, ``output_1``, ...
    keep_columns : sequence of str
        Input columns copied to the output unchanged (an id, to join results back).
    num_threads : int, optional
        Kernel threads in this actor: sets ``RELAYVM_NUM_THREADS`` for the process, which
        takes effect if no kernel has run in it yet (true of a fresh actor). Default: the
        CPUs Ray gave the actor, so actors sharing a node do not fight over its cores;
        outside a Ray worker, the variable is left alone.

    Notes
    -----
    A batch is a dict of numpy arrays with a column per parameter of ``function``; the
    result is a dict of numpy arrays with a column per output (tuples flattened in order).
    """

    def __init__(
        self,
        executable: Any,
        function: str = "main",
        outputs: Sequence[str] | None = None,
        keep_columns: Sequence[str] = (),
        num_threads: int | None = None,
    ) -> None:
        if num_threads is None:
            num_threads = _assigned_cpus()
        if num_threads is not None:
            # Read when the kernels' worker threads first start, which is below.
            os.environ["RELAYVM_NUM_THREADS"] = str(max(1, int(num_threads)))
        data = _resolve(executable)
        self.exe = vm.Executable.load_exec(memoryview(data))  # verified before anything runs
        if function not in self.exe.globals:
            raise ValueError(
                f"the executable has no function {function!r}; it has {', '.join(self.exe.globals)}"
            )
        self.machine = vm.VirtualMachine(self.exe, vm.cpu())
        func = self.exe.get_function(function)
        self.function = function
        self.params = list(func.params)
        self.param_types = list(func.param_types)
        for name, spec in zip(self.params, self.param_types):
            if spec[0] != "tensor":
                raise ValueError(f"{function}: parameter {name!r} is a {spec[0]}, not a tensor")
        self.outputs = list(outputs) if outputs is not None else None
        self.keep_columns = list(keep_columns)

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run ``function`` over every row of ``batch``; a column per output."""
        missing = [name for name in self.params if name not in batch]
        if missing:
            raise KeyError(
                f"{self.function}: the batch has no column for parameter(s) {missing}; "
                f"it has {sorted(batch)}"
            )
        columns = [
            np.asarray(batch[name], dtype=np.dtype(spec[2]))
            for name, spec in zip(self.params, self.param_types)
        ]
        rows = len(columns[0]) if columns else 0
        if any(len(c) != rows for c in columns):
            raise ValueError(f"{self.function}: the input columns have different lengths")
        results = self._run(columns, rows) if rows else None
        names = self.outputs
        out: dict[str, np.ndarray] = {}
        if results is not None:
            if names is not None and len(names) != len(results):
                raise ValueError(
                    f"{self.function} has {len(results)} output(s); {len(names)} names given"
                )
            for i, value in enumerate(results):
                out[names[i] if names else f"output_{i}"] = value
        for name in self.keep_columns:
            out[name] = np.asarray(batch[name])
        return out

    def _run(self, columns: list[np.ndarray], rows: int) -> list[np.ndarray]:
        step = self._rows_per_call(columns)
        chunk = rows if step is None else max(step, 1)
        pieces: list[list[np.ndarray]] = []
        for start in range(0, rows, chunk):
            stop = min(rows, start + chunk)
            if step == 0:  # one call per row, the row without the batch axis
                args = [np.ascontiguousarray(c[start]) for c in columns]
            else:
                args = [_padded(c[start:stop], chunk) for c in columns]
            flat = _flatten(self.machine.invoke(self.function, *args))
            if step == 0:
                flat = [value[np.newaxis] for value in flat]
            pieces.append([value[: stop - start] for value in flat])
        return [np.concatenate(parts) for parts in zip(*pieces)]

    def _rows_per_call(self, columns: list[np.ndarray]) -> int | None:
        """None: the whole batch per call; 0: one row per call; b: b rows per call."""
        steps = set()
        for name, spec, column in zip(self.params, self.param_types, columns):
            dims = spec[1]
            if column.ndim == len(dims) + 1:
                steps.add(0)
            elif column.ndim == len(dims) and dims:
                steps.add(None if dims[0] < 0 else int(dims[0]))
            else:
                raise ValueError(
                    f"{self.function}: column {name!r} of shape {column.shape} does not fit "
                    f"parameter shape {tuple(dims)}: rows go along a first axis"
                )
        if len(steps) > 1:
            raise ValueError(
                f"{self.function}: the parameters disagree on how many rows a call takes"
            )
        return steps.pop() if steps else None


class ServeModel:
    """A Ray Serve deployment body: loads the executable once per replica, then answers.

    Called through a deployment handle with a dict of arrays, or over HTTP with a JSON
    object of nested lists (a key per parameter); answers a dict of output columns (lists,
    for JSON). Wrap it with :func:`deployment`.
    """

    def __init__(self, executable: Any, function: str = "main", **options: Any) -> None:
        self.predict = BatchPredictor(executable, function, **options)

    async def __call__(self, request: Any) -> dict[str, Any]:
        if not callable(getattr(request, "json", None)):  # a dict, through a handle
            return self.predict(request)
        payload = await request.json()  # a starlette Request, from Serve's HTTP proxy
        if not isinstance(payload, dict):
            raise ValueError("the request body must be a JSON object with a key per parameter")
        result = self.predict({k: np.asarray(v) for k, v in payload.items()})
        return {k: v.tolist() for k, v in result.items()}


def deployment(**options: Any) -> Any:
    """``serve.deployment(ServeModel, **options)``: bind it to :func:`put_executable`'s ref.

    ``options`` are Serve's (``num_replicas``, ``ray_actor_options``...).
    """
    _ray()
    from ray import serve

    return serve.deployment(ServeModel, **options)


def predict_dataset(
    dataset: Any,
    executable: Any,
    workers: int = 1,
    batch_size: int = 256,
    cpus_per_worker: float = 1,
    **options: Any,
) -> Any:
    """``dataset.map_batches`` with :class:`BatchPredictor` on a pool of ``workers`` actors.

    Parameters
    ----------
    dataset : ray.data.Dataset
        A column per parameter of the function.
    executable : ray.ObjectRef, str, os.PathLike, bytes or vm.Executable
        The executable; anything but a ref is put in the object store here, once.
    workers : int
        Actors in the pool, each with its own loaded executable.
    batch_size : int
        Rows per batch.
    cpus_per_worker : float
        CPUs Ray reserves for each actor (also its kernel threads).
    **options
        ``function``, ``outputs``, ``keep_columns`` of :class:`BatchPredictor`.

    Returns
    -------
    ray.data.Dataset
        The lazy result: a column per output (and the kept columns).
    """
    _ray()
    import ray
    import ray.data

    ref = executable if isinstance(executable, ray.ObjectRef) else put_executable(executable)
    return dataset.map_batches(
        BatchPredictor,
        fn_constructor_args=(ref,),
        fn_constructor_kwargs=options,
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=cpus_per_worker,
    )


def _resolve(executable: Any) -> Any:
    """The bytes behind ``executable``: fetched from the object store if it is a ref."""
    try:
        import ray
    except ImportError:
        return executable_bytes(executable)
    if isinstance(executable, ray.ObjectRef):
        executable = ray.get(executable)
    if isinstance(executable, np.ndarray):
        return executable
    return executable_bytes(executable)


def _assigned_cpus() -> int | None:
    """The CPUs Ray assigned to this actor, or None outside a Ray worker."""
    try:
        import ray
    except ImportError:
        return None
    if not ray.is_initialized():
        return None
    try:
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    except Exception:  # not a worker (the driver): Ray raises rather than answer
        return None
    return int(cpus) if cpus else None


def _padded(rows: np.ndarray, count: int) -> np.ndarray:
    """``rows`` extended with zero rows to ``count`` rows, C-contiguous."""
    if len(rows) == count:
        return np.ascontiguousarray(rows)
    out = np.zeros((count, *rows.shape[1:]), rows.dtype)
    out[: len(rows)] = rows
    return out


def _flatten(value: Any) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, np.ndarray):
            out.append(np.asarray(item))
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        else:
            raise ValueError(f"cannot return a {type(item).__name__} output as a column")
    return out
