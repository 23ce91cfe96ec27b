"""Batch-inference throughput on a local Ray cluster: rows per second for 1 and 2 workers.

Benchmarks layer. Run: ``python -m benchmarks.bench_ray`` (``--rows N``, ``--batch B``,
``--workers 1,2``); needs ``pip install 'relayvm[ray]'``.

The model is the benchmark MLP (784-512-512-10, relu, softmax) compiled for a batch of
``B`` rows and saved. The rows are put in Ray's object store first, in 32 blocks, so the
timed part is the job itself: :func:`vm.ray.predict_dataset` with ``workers`` actors, from
starting the actors (each loads the executable from the object store and its kernels from
the disk cache) to the last output materialized. The single-process row runs the same
batches through one :class:`vm.ray.BatchPredictor` in this process, without Ray. Every
job's outputs are checked against the single-process run. What starting an actor costs is
timed apart: a task in a fresh worker process loading the executable and its kernels.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

import numpy as np


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _load_seconds(ref: object) -> float:
    """Seconds a fresh worker takes to load the executable and its (cached) kernels."""
    from vm.ray import BatchPredictor

    start = time.perf_counter()
    BatchPredictor(ref)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    """Print rows/s for a single process and for each worker count."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args(argv)

    import pyarrow as pa
    import ray
    import ray.data
    from ray.data.extensions import ArrowTensorArray

    from benchmarks import models
    from compiler import relay
    from compiler.transform import PassContext
    from vm.ray import BatchPredictor, predict_dataset, put_executable

    mod, params = models.mlp(batch=args.batch)
    with PassContext(opt_level=3):
        exe = relay.vm.compile(mod, params=params)
    path = os.path.join(tempfile.mkdtemp(), "mlp.relayvm")
    exe.save(path)
    rows = np.random.default_rng(0).standard_normal((args.rows, 784)).astype("float32")

    predictor = BatchPredictor(path, num_threads=1)
    predictor({"x": rows[: args.batch]})  # warm: kernels built, threads started
    start = time.perf_counter()
    expected = np.concatenate(
        [
            predictor({"x": rows[i : i + args.batch]})["output_0"]
            for i in range(0, args.rows, args.batch)
        ]
    )
    single = args.rows / (time.perf_counter() - start)

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        dataset = ray.data.from_arrow(
            [
                pa.table({"id": ids, "x": ArrowTensorArray.from_numpy(rows[ids])})
                for ids in np.array_split(np.arange(args.rows), 32)
            ]
        ).materialize()
        ref = put_executable(path)
        startup = ray.get(ray.remote(num_cpus=1)(_load_seconds).remote(ref))
        results = []
        for workers in (int(w) for w in args.workers.split(",")):
            start = time.perf_counter()
            out = predict_dataset(
                dataset, ref, workers=workers, batch_size=args.batch, keep_columns=["id"]
            ).materialize()
            seconds = time.perf_counter() - start
            got = np.empty_like(expected)
            for batch in out.iter_batches(batch_size=None, batch_format="numpy"):
                got[batch["id"]] = batch["output_0"]
            error = float(np.abs(got - expected).max())
            results.append((workers, args.rows / seconds, seconds, error))
    finally:
        ray.shutdown()

    print(f"CPU: {_cpu_model()}, {os.cpu_count()} CPUs; ray {ray.__version__}")
    print(f"MLP 784-512-512-10, {args.rows} rows in batches of {args.batch}")
    print(f"{'engine':<24}{'rows/s':>10}{'seconds':>10}{'max abs diff':>14}")
    print(f"{'single process, no Ray':<24}{single:>10.0f}{args.rows / single:>10.2f}{'-':>14}")
    for workers, rate, seconds, error in results:
        name = f"Ray Data, {workers} worker{'s' if workers > 1 else ''}"
        print(f"{name:<24}{rate:>10.0f}{seconds:>10.2f}{error:>14.2e}")
    print("(Ray rows: the whole job, starting the actors included; an actor's load of the")
    print(f" executable and its cached kernels in a fresh worker process: {startup:.2f} s)")


if __name__ == "__main__":
    main()
