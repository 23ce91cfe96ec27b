"""atomic_write: the target holds the old or the new bytes, never a mix; no temp files remain."""

import os

import pytest

import serialization.atomic as atomic
from serialization.atomic import atomic_write


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_writes_a_new_file(tmp_path):
    target = tmp_path / "model.relayvm"
    atomic_write(target, b"new contents")
    assert target.read_bytes() == b"new contents"
    assert leftovers(tmp_path) == []


def test_replaces_an_existing_file_and_accepts_str_paths(tmp_path):
    target = tmp_path / "model.relayvm"
    target.write_bytes(b"old")
    atomic_write(str(target), bytearray(b"replacement"))
    assert target.read_bytes() == b"replacement"


def test_a_failure_between_write_and_replace_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "model.relayvm"
    target.write_bytes(b"old contents")

    def crash(src, dst):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        atomic_write(target, b"new contents that never land")
    assert target.read_bytes() == b"old contents"
    assert leftovers(tmp_path) == []


def test_a_failure_while_writing_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "model.relayvm"
    target.write_bytes(b"old contents")

    def crash(fd):
        raise OSError("simulated disk error")

    monkeypatch.setattr(atomic.os, "fsync", crash)
    with pytest.raises(OSError, match="simulated disk error"):
        atomic_write(target, b"x" * 100_000)
    assert target.read_bytes() == b"old contents"
    assert leftovers(tmp_path) == []


def test_an_interrupt_also_cleans_up(tmp_path, monkeypatch):
    target = tmp_path / "model.relayvm"

    def interrupt(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, b"data")
    assert not target.exists()
    assert leftovers(tmp_path) == []


def test_a_missing_directory_raises_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "no" / "such" / "dir" / "f.bin", b"x")


@pytest.mark.skipif(os.name != "posix", reason="permission bits are POSIX")
def test_the_new_file_gets_ordinary_umask_permissions(tmp_path):
    target = tmp_path / "model.relayvm"
    atomic_write(target, b"x")
    reference = tmp_path / "reference"
    reference.write_bytes(b"x")
    assert target.stat().st_mode & 0o777 == reference.stat().st_mode & 0o777
