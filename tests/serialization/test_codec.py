"""msgpack with limits: every msgpack failure becomes a FormatError with a plain reason."""

import msgpack
import pytest

from serialization.codec import check_nesting, pack, unpack
from serialization.errors import FormatError
from serialization.limits import MAX_NESTING


def test_plain_data_round_trips_with_bytes_kept_as_bytes():
    value = {"a": [1, -2, 3.5, None, True, "text", b"\x00\xff"], "b": {"c": []}}
    assert unpack(pack(value)) == value


def test_maps_are_written_in_insertion_order():
    assert pack({"b": 1, "a": 2}) != pack({"a": 2, "b": 1})


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "truncated"),
        (b"\x92\x01", "truncated"),
        (b"\x01\x02", "unexpected bytes after the end of the data (1 left over after one"),
        (b"\x01\x02\x03", "(2 left over after one complete value)"),
        (b"\xc1", "does not start any msgpack value"),
        (b"\xa2\xff\xfe", "not valid UTF-8"),
        (b"\x81\x01\x02", "map key that is not a string"),
        (b"\xdd\xff\xff\xff\xff", "declared length exceeds the data"),
        (b"\xc6\xff\xff\xff\xff", "truncated"),
        (b"\x91" * 5000 + b"\x90", "nested too deeply"),
        (b"\x82\xa1a\x01\xa1a\x02", "the key 'a' twice"),
        (b"\xd4\x05\x00", "unexpected msgpack extension value (code 5)"),
        (b"\xd5\xff\x00\x00", "timestamp"),
    ],
)
def test_every_unpack_failure_is_a_format_error_with_a_reason(data, reason):
    with pytest.raises(FormatError) as info:
        unpack(data)
    assert reason in str(info.value)
    assert "msgpack.exceptions" not in str(info.value)


def test_limits_come_from_the_input_length():
    # 0xdc 0x00 0x10: an array header declaring 16 items, followed by only 3 bytes.
    with pytest.raises(FormatError, match="declared length exceeds the data"):
        unpack(b"\xdc\x00\x10\x01\x02\x03")


def test_an_extension_hook_error_propagates_unchanged():
    def hook(code, data):
        raise FormatError("custom rejection")

    with pytest.raises(FormatError, match="custom rejection"):
        unpack(msgpack.packb(msgpack.ExtType(1, b"x")), ext_hook=hook)


def test_pack_rejects_integers_beyond_64_bits_with_a_value_error():
    with pytest.raises(ValueError, match="64 bits"):
        pack([1 << 70])


def test_check_nesting_accepts_the_limit_and_rejects_one_more():
    value: list = []
    for _ in range(MAX_NESTING - 1):
        value = [value]
    check_nesting(value)
    with pytest.raises(FormatError, match="nested deeper than"):
        check_nesting([value])


def test_check_nesting_counts_maps_too_and_is_iterative():
    value: dict = {}
    for _ in range(5000):
        value = {"k": value}
    with pytest.raises(FormatError, match="MAX_NESTING"):
        check_nesting(value)
