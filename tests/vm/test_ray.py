"""vm.ray: batch inference with Ray Data and serving with Ray Serve, one executable per actor.

Returns: a batch job over a few thousand rows on a local two-CPU cluster gives, for every
row, the output of a single-process run; the executable goes to the actors as one object
in the store, not inside each task; a Serve deployment answers through a handle and over
HTTP. Without Ray: the predictor feeds a dynamic batch axis the whole batch, a static one
``b`` rows at a time (the last call padded) and a parameter without a batch axis a row at a
time; kept columns pass through; output names apply. Invalid: a missing column, a column
that does not fit the parameter, a wrong number of output names, a function that does not
exist. Ray tests skip when ``ray[data,serve]`` is not installed, and the cluster is shut
down after them.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import urllib.request

import numpy as np
import pytest

import vm
from tests.vm.executable_samples import kernel_executable
from vm.ray import BatchPredictor, ServeModel, executable_bytes, predict_dataset, put_executable

MLP = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 16), float32], %w1: Tensor[(32, 16), float32],
          %b1: Tensor[(32), float32], %w2: Tensor[(4, 32), float32]) {
  %0 = nn.relu(add(nn.dense(%x, %w1), %b1));
  nn.dense(%0, %w2)
}
"""

ROWS = 3000


def compile_text(text: str, params: dict | None = None) -> vm.Executable:
    from compiler import relay

    return relay.vm.compile(relay.fromtext(text), params=params or {})


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory):
    """A 16-32-4 perceptron with a dynamic batch axis and its weights bound, saved."""
    rng = np.random.default_rng(0)
    params = {
        "w1": rng.standard_normal((32, 16)).astype("float32"),
        "b1": rng.standard_normal(32).astype("float32"),
        "w2": rng.standard_normal((4, 32)).astype("float32"),
    }
    path = tmp_path_factory.mktemp("ray") / "mlp.relayvm"
    compile_text(MLP, params).save(str(path))
    return path


@pytest.fixture(scope="module")
def rows():
    return np.random.default_rng(1).standard_normal((ROWS, 16)).astype("float32")


@pytest.fixture(scope="module")
def single_process(mlp_path, rows):
    """The reference: every row through one machine in this process."""
    machine = vm.VirtualMachine(vm.Executable.load_exec(str(mlp_path)))
    return np.asarray(machine.invoke("main", rows))


@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        yield ray
    finally:
        with contextlib.suppress(Exception):  # Serve may never have started
            from ray import serve

            serve.shutdown()
        ray.shutdown()


# ---- on a Ray cluster ---------------------------------------------------------------------


def test_a_batch_job_matches_a_single_process_run_row_by_row(
    cluster, mlp_path, rows, single_process
):
    dataset = cluster.data.from_items([{"id": i, "x": rows[i]} for i in range(ROWS)])
    result = predict_dataset(dataset, mlp_path, workers=2, batch_size=256, keep_columns=["id"])
    out = result.take_all()
    assert sorted(r["id"] for r in out) == list(range(ROWS))
    got = np.stack([r["output_0"] for r in sorted(out, key=lambda r: r["id"])])
    # Batches of other sizes may sum in another order: equal to float32 rounding.
    np.testing.assert_allclose(got, single_process, rtol=1e-5, atol=1e-5)


def test_the_executable_travels_once_through_the_object_store(cluster, mlp_path):
    ref = put_executable(mlp_path)
    assert isinstance(ref, cluster.ObjectRef)
    assert cluster.get(ref).tobytes() == mlp_path.read_bytes()

    class Recorder:
        def map_batches(self, fn, **options):
            self.fn, self.options = fn, options
            return self

    recorded = predict_dataset(Recorder(), mlp_path, workers=2)
    (shipped,) = recorded.options["fn_constructor_args"]
    assert recorded.fn is BatchPredictor and isinstance(shipped, cluster.ObjectRef)
    compute = recorded.options["compute"]
    assert (compute.min_size, compute.max_size) == (2, 2)
    # A ref given is used as it is, not put again.
    assert predict_dataset(Recorder(), ref).options["fn_constructor_args"] == (ref,)


@pytest.mark.skipif(
    os.environ.get("RELAYVM_RAY_SERVE") != "1",
    reason="starts Ray Serve's controller and HTTP proxy, whose actors Ray's health checks "
    "may kill on a machine busy with other work; set RELAYVM_RAY_SERVE=1 to run it",
)
def test_a_serve_deployment_answers_through_a_handle_and_http(
    cluster, mlp_path, rows, single_process
):
    from ray import serve

    import vm.ray

    with socket.socket() as probe:  # a free port: 8000 may be taken on a shared machine
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    app = vm.ray.deployment(ray_actor_options={"num_cpus": 1}).bind(put_executable(mlp_path))
    handle = serve.run(app, name="mlp", route_prefix="/mlp")
    answer = handle.remote({"x": rows[:5]}).result()
    np.testing.assert_allclose(answer["output_0"], single_process[:5], rtol=1e-5, atol=1e-5)
    body = json.dumps({"x": rows[5:8].tolist()}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mlp", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    np.testing.assert_allclose(answer["output_0"], single_process[5:8], rtol=1e-5, atol=1e-5)


# ---- the predictor, without Ray -------------------------------------------------------------


def test_a_dynamic_batch_axis_gets_the_whole_batch(mlp_path, rows, single_process):
    predictor = BatchPredictor(executable_bytes(mlp_path), outputs=["scores"])
    out = predictor({"x": rows[:100], "id": np.arange(100)})
    assert list(out) == ["scores"]
    np.testing.assert_allclose(out["scores"], single_process[:100], rtol=1e-5, atol=1e-5)


def test_a_static_batch_axis_is_fed_in_padded_chunks():
    exe = compile_text(
        '#[version = "0.0.5"]\ndef @main(%x: Tensor[(4, 3), float32]) { nn.relu(%x) }'
    )
    x = np.random.default_rng(2).standard_normal((10, 3)).astype("float32")
    out = BatchPredictor(exe, keep_columns=["id"])({"x": x, "id": np.arange(10)})
    np.testing.assert_array_equal(out["output_0"], np.maximum(x, 0))
    np.testing.assert_array_equal(out["id"], np.arange(10))


def test_a_parameter_without_a_batch_axis_is_called_once_per_row():
    x = np.arange(12, dtype="float32").reshape(6, 2)
    out = BatchPredictor(kernel_executable())({"x": x, "y": 10 * x})
    np.testing.assert_array_equal(out["output_0"], 11 * x)


def test_an_empty_batch_gives_only_the_kept_columns(mlp_path):
    out = BatchPredictor(mlp_path, keep_columns=["id"])(
        {"x": np.zeros((0, 16), "float32"), "id": np.zeros(0, "int64")}
    )
    assert list(out) == ["id"]


def test_invalid_batches_and_options_are_named(mlp_path, rows):
    predictor = BatchPredictor(mlp_path)
    with pytest.raises(KeyError, match=r"no column for parameter\(s\) \['x'\]"):
        predictor({"data": rows})
    with pytest.raises(ValueError, match=r"column 'x' of shape \(16,\) does not fit"):
        predictor({"x": rows[0]})
    with pytest.raises(ValueError, match="1 output\\(s\\); 2 names given"):
        BatchPredictor(mlp_path, outputs=["a", "b"])({"x": rows[:2]})
    with pytest.raises(ValueError, match="no function 'nope'"):
        BatchPredictor(mlp_path, function="nope")
    with pytest.raises(TypeError, match="expected an executable file path"):
        BatchPredictor(42)


def test_serve_model_answers_a_dict_without_serve(mlp_path, rows, single_process):
    import asyncio

    model = ServeModel(str(mlp_path))
    answer = asyncio.run(model({"x": rows[:3]}))
    np.testing.assert_allclose(answer["output_0"], single_process[:3], rtol=1e-5, atol=1e-5)
