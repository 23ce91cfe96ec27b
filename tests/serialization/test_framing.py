"""Framing and versioning: magic, (major, minor), section list; returns and malformed cases."""

import struct

import numpy as np
import pytest

from serialization.codec import pack, unpack
from serialization.errors import FormatError, VersionError
from serialization.framing import (
    PREFIX_SIZE,
    DocumentFormat,
    producer_version,
    read_document,
    read_prefix,
    write_document,
)

FMT = DocumentFormat(
    name="test document",
    magic=b"\x89TST\r\n\x1a\n",
    version=(2, 3),
    sections=("alpha", "arrays"),
    array_sections=frozenset({"arrays"}),
)


def sample() -> bytes:
    return write_document(FMT, [("alpha", {"x": [1, 2]}), ("arrays", [np.arange(3)])])


def with_version(data: bytes, major: int, minor: int) -> bytes:
    return data[:8] + struct.pack("<HH", major, minor) + data[PREFIX_SIZE:]


def body_of(data: bytes) -> list:
    return unpack(data[PREFIX_SIZE:])


def rebuild(data: bytes, body: list) -> bytes:
    return data[:PREFIX_SIZE] + pack(body)


# ---- returns ------------------------------------------------------------------------------


def test_a_document_round_trips_with_metadata():
    document = read_document(FMT, sample())
    assert document.version == (2, 3)
    assert document.sections["alpha"] == {"x": [1, 2]}
    assert np.array_equal(document.sections["arrays"][0], np.arange(3))
    assert document.metadata["format"] == "test document"
    assert document.metadata["producer"] == "relayvm"
    assert document.metadata["producer_version"] == producer_version()


def test_the_file_starts_with_magic_then_little_endian_major_and_minor():
    data = sample()
    assert data[:8] == FMT.magic
    assert struct.unpack_from("<HH", data, 8) == (2, 3)


def test_writing_is_deterministic():
    assert sample() == sample()


def test_an_older_minor_version_of_the_same_major_is_accepted():
    assert read_document(FMT, with_version(sample(), 2, 0)).version == (2, 0)


def test_extra_header_keys_are_ignorable():
    data = sample()
    body = body_of(data)
    header = unpack(body[0][1])
    header["comment"] = "added by a later minor version"
    body[0][1] = pack(header)
    assert read_document(FMT, rebuild(data, body)).metadata["comment"].startswith("added")


def test_the_magic_must_be_eight_bytes():
    with pytest.raises(ValueError, match="8 bytes"):
        DocumentFormat("bad", b"\x89AB", (1, 0), ())


def test_writing_requires_exactly_the_formats_sections():
    with pytest.raises(ValueError, match="expected"):
        write_document(FMT, [("arrays", []), ("alpha", {})])


def test_arrays_are_refused_in_sections_that_do_not_hold_them():
    with pytest.raises(TypeError, match="alpha section"):
        write_document(FMT, [("alpha", [np.arange(2)]), ("arrays", [])])


# ---- malformed: prefix and version -------------------------------------------------------


@pytest.mark.parametrize("cut", range(PREFIX_SIZE))
def test_every_prefix_shorter_than_magic_and_version_is_truncated(cut):
    with pytest.raises(FormatError, match="truncated"):
        read_document(FMT, sample()[:cut])


def test_every_strict_prefix_of_a_document_is_truncated():
    data = sample()
    for cut in range(len(data)):
        with pytest.raises(FormatError, match="truncated"):
            read_document(FMT, data[:cut])


def test_wrong_magic_names_the_expected_magic():
    with pytest.raises(FormatError, match="not a test document") as info:
        read_document(FMT, b"PK\x03\x04" + sample()[4:])
    assert info.value.section is None


def test_text_mode_line_ending_conversion_is_diagnosed():
    mangled = sample().replace(b"\r\n", b"\n", 1)
    with pytest.raises(FormatError, match="text mode"):
        read_document(FMT, mangled)


@pytest.mark.parametrize(
    ("major", "minor", "advice"),
    [(2, 4, "upgrade relayvm"), (3, 0, "upgrade relayvm"), (1, 9, "save the program again")],
)
def test_an_unsupported_version_names_both_versions_and_what_to_do(major, minor, advice):
    with pytest.raises(VersionError) as info:
        read_document(FMT, with_version(sample(), major, minor))
    err = info.value
    message = str(err)
    assert f"format version {major}.{minor}" in message
    assert "reads format 2.0 to 2.3" in message
    assert advice in message
    assert f"written by relayvm {producer_version()}" in message
    assert err.found == (major, minor) and err.supported == (2, 3)
    assert err.section == "header"


def test_a_version_error_does_not_need_a_readable_body():
    data = FMT.magic + struct.pack("<HH", 9, 0) + b"\xc1garbage"
    with pytest.raises(VersionError, match=r"format version 9\.0, but") as info:
        read_document(FMT, data)
    assert info.value.producer is None


# ---- malformed: body and sections ---------------------------------------------------------


def mutate_body(mutator):
    data = sample()
    body = body_of(data)
    mutator(body)
    return rebuild(data, body)


@pytest.mark.parametrize(
    ("mutator", "message", "section"),
    [
        (lambda b: b.pop(), "has the sections ['header', 'alpha'], expected", None),
        (lambda b: b.append(["extra", pack(1)]), "expected ['header', 'alpha', 'arrays']", None),
        (lambda b: b.reverse(), "expected", None),
        (lambda b: b.__setitem__(1, ["alpha"]), "[name, bytes] section pairs", None),
        (lambda b: b.__setitem__(1, ["alpha", "text"]), "contents must be bytes", "alpha"),
        (lambda b: b.__setitem__(1, ["alpha", b"\xc1"]), "does not start any msgpack", "alpha"),
        (lambda b: b.__setitem__(1, ["alpha", pack(1) + b"\0"]), "unexpected bytes", "alpha"),
        (lambda b: b.__setitem__(1, ["alpha", pack([[[[[]]]]])[:-1]]), "truncated", "alpha"),
        (
            lambda b: b.__setitem__(1, ["alpha", b"\x91" * 5000 + b"\x90"]),
            "nested too deeply",
            "alpha",
        ),
        (
            lambda b: b.__setitem__(1, ["alpha", b"\x91" * 100 + b"\x90"]),
            "nested deeper than 64",
            "alpha",
        ),
        (lambda b: b.__setitem__(0, ["header", pack([1])]), "header must be a map", "header"),
        (
            lambda b: b.__setitem__(0, ["header", pack({"format": "test document"})]),
            "needs a string 'producer'",
            "header",
        ),
        (
            lambda b: b.__setitem__(
                0,
                [
                    "header",
                    pack({"format": "other", "producer": "x", "producer_version": "1"}),
                ],
            ),
            "expected a 'test document'",
            "header",
        ),
    ],
)
def test_malformed_bodies_name_their_section(mutator, message, section):
    with pytest.raises(FormatError) as info:
        read_document(FMT, mutate_body(mutator))
    err = info.value
    assert message in str(err)
    assert err.section == section
    if section:
        assert str(err).startswith(f"{section} section: ")


def test_an_array_in_a_section_without_arrays_is_rejected():
    from serialization.ndarray import encode_ndarray

    data = mutate_body(lambda b: b.__setitem__(1, ["alpha", pack([encode_ndarray(np.arange(2))])]))
    with pytest.raises(FormatError, match="extension") as info:
        read_document(FMT, data)
    assert info.value.section == "alpha"


def test_an_unknown_extension_code_in_an_array_section_is_rejected():
    import msgpack

    data = mutate_body(lambda b: b.__setitem__(2, ["arrays", pack([msgpack.ExtType(7, b"")])]))
    with pytest.raises(FormatError, match="unknown msgpack extension type code 7") as info:
        read_document(FMT, data)
    assert info.value.section == "arrays"


def test_a_bad_array_names_the_array_section():
    import msgpack

    from serialization.ndarray import NDARRAY_EXT_CODE

    bad = msgpack.ExtType(NDARRAY_EXT_CODE, pack(["|O", [1], b"\0" * 8]))
    data = mutate_body(lambda b: b.__setitem__(2, ["arrays", pack([bad])]))
    with pytest.raises(
        FormatError, match=r"^arrays section: array 0: array dtype '\|O' is not allowed"
    ):
        read_document(FMT, data)


def test_read_prefix_returns_the_version_without_checking_it():
    assert read_prefix(FMT, with_version(sample(), 7, 1)) == (7, 1)
