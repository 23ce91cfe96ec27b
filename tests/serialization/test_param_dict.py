"""Parameter dictionaries: round trips, determinism, and malformed input."""

import struct

import numpy as np
import pytest

import serialization
from serialization import FormatError, load_param_dict, save_param_dict
from serialization.codec import pack, unpack
from serialization.formats import PARAMS_FORMAT
from serialization.framing import PREFIX_SIZE


def params():
    return {
        "weight": np.arange(12, dtype="float32").reshape(3, 4),
        "bias": np.array([0.5, -1.0], dtype="float64"),
        "mask": np.array([True, False]),
        "step": np.int64(3),
        "empty": np.zeros((0, 2), dtype="uint8"),
    }


# ---- returns ------------------------------------------------------------------------------


def test_round_trip_keeps_names_dtypes_shapes_and_values():
    original = params()
    loaded = load_param_dict(save_param_dict(original))
    assert sorted(loaded) == sorted(original)
    for name, value in original.items():
        value = np.asarray(value)
        assert loaded[name].dtype == value.dtype, name
        assert loaded[name].shape == value.shape, name
        assert np.array_equal(loaded[name], value), name


def test_the_api_is_exported_from_the_package():
    assert serialization.save_param_dict is save_param_dict
    assert serialization.load_param_dict is load_param_dict


def test_bytes_do_not_depend_on_insertion_order():
    forward = params()
    backward = dict(reversed(list(forward.items())))
    assert save_param_dict(forward) == save_param_dict(backward)


def test_loaded_names_are_sorted_and_arrays_read_only():
    loaded = load_param_dict(save_param_dict(params()))
    assert list(loaded) == sorted(loaded)
    assert not any(a.flags.writeable for a in loaded.values())


def test_an_empty_dict_round_trips():
    assert load_param_dict(save_param_dict({})) == {}


def test_the_file_has_its_own_magic():
    data = save_param_dict({})
    assert data[:8] == PARAMS_FORMAT.magic == b"\x89RVP\r\n\x1a\n"


def test_bytearray_and_memoryview_inputs_are_accepted():
    data = save_param_dict({"a": np.ones(2)})
    assert np.array_equal(load_param_dict(bytearray(data))["a"], np.ones(2))
    assert np.array_equal(load_param_dict(memoryview(data))["a"], np.ones(2))


# ---- bad arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1.0, 2.0], "parameter 'p' must be a numpy array, got list"),
        (np.zeros(2, dtype=object), "parameter 'p'"),
        (np.zeros(2, dtype=np.complex64), "complex64"),
    ],
)
def test_saving_an_unsupported_value_names_the_parameter(value, message):
    with pytest.raises(TypeError, match=None) as info:
        save_param_dict({"p": value})
    assert message in str(info.value)


def test_saving_a_non_string_name_is_a_type_error():
    with pytest.raises(TypeError, match="names must be strings"):
        save_param_dict({1: np.ones(1)})


def test_saving_a_non_mapping_is_a_type_error():
    with pytest.raises(TypeError, match="mapping"):
        save_param_dict([("a", np.ones(1))])


def test_loading_a_non_bytes_value_is_a_type_error():
    with pytest.raises(TypeError, match="needs bytes, got str"):
        load_param_dict("weights.params")


# ---- malformed ---------------------------------------------------------------------------


def with_params_section(value) -> bytes:
    data = save_param_dict({})
    body = unpack(data[PREFIX_SIZE:])
    body[1][1] = pack(value)
    return data[:PREFIX_SIZE] + pack(body)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (with_params_section({"a": 1}), "must be a list of [name, array] pairs"),
        (with_params_section([["a"]]), "entry 0 must be a [name, array] pair"),
        (with_params_section([["a", 1]]), "entry 0 must be a [name, array] pair"),
        (with_params_section([[1, b""]]), "entry 0 must be a [name, array] pair"),
    ],
)
def test_malformed_params_sections_raise_format_error(data, message):
    with pytest.raises(FormatError) as info:
        load_param_dict(data)
    assert message in str(info.value)
    assert info.value.section == "params"


def test_a_duplicate_name_is_rejected():
    data = save_param_dict({"a": np.ones(1)})
    body = unpack(data[PREFIX_SIZE:])
    payload = body[1][1]
    # Decode the one pair with its raw extension value and write it twice.
    import msgpack

    pairs = msgpack.unpackb(payload)
    body[1][1] = msgpack.packb(pairs + pairs, use_bin_type=True)
    with pytest.raises(FormatError, match="the parameter 'a' appears twice"):
        load_param_dict(data[:PREFIX_SIZE] + pack(body))


def test_an_executable_is_not_a_param_dict():
    fake = b"\x89RVM\r\n\x1a\n" + struct.pack("<HH", 1, 0) + pack([])
    with pytest.raises(FormatError, match="not a relayvm parameter dictionary"):
        load_param_dict(fake)


def test_every_truncation_raises_format_error():
    data = save_param_dict({"w": np.arange(6, dtype="int16")})
    for cut in range(len(data)):
        with pytest.raises(FormatError, match="truncated"):
            load_param_dict(data[:cut])


def test_random_byte_changes_raise_only_format_error():
    rng = np.random.default_rng(1234)
    data = bytearray(save_param_dict({"w": np.arange(6, dtype="int16"), "b": np.ones(2)}))
    for _ in range(1500):
        mutated = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            mutated[int(rng.integers(len(mutated)))] = int(rng.integers(256))
        try:
            loaded = load_param_dict(bytes(mutated))
        except FormatError:
            continue
        assert all(isinstance(v, np.ndarray) for v in loaded.values())


def test_saving_more_than_the_byte_cap_is_a_value_error(monkeypatch):
    import serialization.params as params_module

    monkeypatch.setattr(params_module, "MAX_CONSTANT_BYTES", 100)
    with pytest.raises(ValueError, match="at most 100"):
        save_param_dict({"a": np.zeros(8), "b": np.zeros(8)})
