"""The ndarray extension codec: round trips (returns) and rejected payloads (malformed)."""

import msgpack
import numpy as np
import pytest

from serialization.codec import pack
from serialization.errors import FormatError
from serialization.limits import MAX_ARRAY_ELEMENTS, MAX_RANK
from serialization.ndarray import (
    ALLOWED_DTYPES,
    DTYPE_NAMES,
    NDARRAY_EXT_CODE,
    allowed_dtype,
    decode_ndarray,
    encode_ndarray,
)


def round_trip(array):
    ext = encode_ndarray(array)
    assert ext.code == NDARRAY_EXT_CODE
    return decode_ndarray(ext.data)


def payload(dtype_str, shape, raw):
    return pack([dtype_str, shape, raw])


# ---- returns ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_every_allowed_dtype_round_trips_exactly(name):
    rng = np.random.default_rng(0)
    array = (rng.standard_normal((3, 4)) * 50).astype(name)
    back = round_trip(array)
    assert back.dtype == np.dtype(name)
    assert back.shape == (3, 4)
    assert back.tobytes() == array.tobytes()


def test_the_allowlist_is_exactly_the_documented_dtype_strings():
    expected = ["|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8"]
    assert sorted(ALLOWED_DTYPES) == sorted(expected)


def test_scalars_and_empty_arrays_round_trip():
    assert round_trip(np.array(7, dtype="int64")).shape == ()
    empty = round_trip(np.zeros((0, 5), dtype="float32"))
    assert empty.shape == (0, 5) and empty.dtype == np.float32


def test_big_endian_input_is_written_little_endian():
    array = np.arange(4, dtype=">i4")
    ext = encode_ndarray(array)
    dtype_str, _, raw = msgpack.unpackb(ext.data)
    assert dtype_str == "<i4"
    assert raw == np.arange(4, dtype="<i4").tobytes()
    assert np.array_equal(decode_ndarray(ext.data), array)


def test_non_contiguous_input_is_written_in_c_order():
    array = np.arange(12, dtype="float64").reshape(3, 4).T
    back = round_trip(array)
    assert np.array_equal(back, array)
    assert back.flags.c_contiguous


def test_nan_and_negative_zero_keep_their_bits():
    array = np.array([np.nan, -0.0, np.inf], dtype="float64")
    assert round_trip(array).tobytes() == array.tobytes()


def test_decoded_arrays_are_read_only():
    back = round_trip(np.arange(3, dtype="int32"))
    assert not back.flags.writeable
    with pytest.raises(ValueError):
        back[0] = 5


def test_bool_arrays_are_written_as_canonical_bytes():
    odd = np.array([0, 2, 255], dtype=np.uint8).view(np.bool_)
    back = round_trip(odd)
    assert back.view(np.uint8).tolist() == [0, 1, 1]


def test_allowed_dtype_rejects_object_complex_and_structured_dtypes():
    for bad in (object, np.complex64, [("a", "<i4")], "V8", "U3", "M8[s]"):
        with pytest.raises(TypeError, match="cannot be saved"):
            allowed_dtype(bad)


def test_encoding_a_disallowed_dtype_names_it():
    with pytest.raises(TypeError, match="complex128"):
        encode_ndarray(np.zeros(2, dtype=np.complex128))


# ---- malformed ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (payload("|O", [1], b"\0" * 8), "dtype '|O' is not allowed"),
        (payload(">f4", [1], b"\0" * 4), "dtype '>f4' is not allowed"),
        (payload("<c8", [1], b"\0" * 8), "is not allowed"),
        (payload("V4", [1], b"\0" * 4), "is not allowed"),
        (payload(5, [1], b"\0" * 4), "dtype 5 is not allowed"),
        (payload("<f4", [2], b"\0" * 7), "needs 8 bytes of data, found 7"),
        (payload("<f4", [2], b"\0" * 9), "needs 8 bytes of data, found 9"),
        (payload("<f4", [-1], b""), "non-negative ints"),
        (payload("<f4", [True], b"\0" * 4), "non-negative ints"),
        (payload("<f4", [1.0], b"\0" * 4), "non-negative ints"),
        (payload("<f4", 3, b"\0" * 12), "shape must be a list"),
        (payload("<f4", [1] * (MAX_RANK + 1), b"\0" * 4), "rank 33 exceeds"),
        (payload("<f4", [2**32, 2**32], b""), "more than"),
        (payload("<f4", [2**40, 2**40, 0], b""), "more than"),
        (payload("|u1", [MAX_ARRAY_ELEMENTS + 1], b""), "more than"),
        (payload("<f4", [1], "abcd"), "data must be bytes"),
        (payload("|b1", [2], b"\x01\x02"), "other than 0 or 1"),
        (pack(["<f4", [1]]), "must be a list [dtype, shape, data]"),
        (pack({"dtype": "<f4"}), "must be a list [dtype, shape, data]"),
        (pack(["<f4", [1], b"\0" * 4]) + b"\0", "unexpected bytes after the end"),
        (pack(["<f4", [1], b"\0" * 4])[:-1], "truncated"),
        (b"\xc1", "does not start any msgpack value"),
        (pack(["<f4", [1], msgpack.ExtType(1, b"")]), "extension"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_malformed_payloads_raise_format_error(data, message):
    with pytest.raises(FormatError, match=None) as info:
        decode_ndarray(data)
    assert message in str(info.value)


def test_a_misaligned_buffer_is_copied_to_an_aligned_read_only_array():
    # A payload whose raw bytes start at an odd address inside the unpacked bytes object
    # cannot happen with bytes objects, so check the guarantee directly on the result.
    back = decode_ndarray(encode_ndarray(np.arange(5, dtype="float64")).data)
    assert back.flags.aligned and not back.flags.writeable
