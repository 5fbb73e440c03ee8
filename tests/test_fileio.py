"""The atomic writer: whole files or the old file, one-line errors, exact temporary names."""

from __future__ import annotations

import errno
import gzip
import os

import pytest

from traceprobe import fileio


def _hidden(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_text_bytes_and_gzip(tmp_path):
    fileio.atomic_write(tmp_path / "a.txt", "héllo\n")
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "héllo\n"
    fileio.atomic_write(tmp_path / "b.json.gz", b"{}")
    assert gzip.decompress((tmp_path / "b.json.gz").read_bytes()) == b"{}"
    with fileio.atomic_open(tmp_path / "c.gz", text=True) as f:
        f.write("x" * 100_000)
    assert gzip.decompress((tmp_path / "c.gz").read_bytes()) == b"x" * 100_000
    fileio.atomic_write_bytes(tmp_path / "d.gz", b"raw")
    assert (tmp_path / "d.gz").read_bytes() == b"raw"
    assert _hidden(tmp_path) == []


def test_failure_in_block_keeps_old_file(tmp_path):
    p = tmp_path / "report.json"
    p.write_text("old")
    with pytest.raises(ZeroDivisionError), fileio.atomic_open(p, text=True) as f:
        f.write("new, half")
        1 / 0  # noqa: B018
    assert p.read_text() == "old" and _hidden(tmp_path) == []


def test_full_disk_is_one_line_write_error(tmp_path, monkeypatch):
    p = tmp_path / "report.json"
    p.write_text("old")
    real = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio.os, "fsync", full)
    with pytest.raises(fileio.WriteError) as ei:
        fileio.atomic_write(p, "new" * 1000)
    monkeypatch.setattr(fileio.os, "fsync", real)
    assert str(ei.value) == f"cannot write {p}: No space left on device" and ei.value.errno == errno.ENOSPC
    assert isinstance(ei.value, OSError) and p.read_text() == "old" and _hidden(tmp_path) == []


def test_missing_or_readonly_folder(tmp_path):
    with pytest.raises(fileio.WriteError, match="cannot write .*missing"):
        fileio.atomic_write(tmp_path / "missing" / "x.json", "{}")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(fileio.WriteError, match="Permission denied"):
            fileio.atomic_write(ro / "x.json", "{}")
    finally:
        ro.chmod(0o700)


def test_exclusive_never_replaces(tmp_path):
    p = tmp_path / "t.gz"
    fileio.atomic_write(p, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        fileio.atomic_write(p, b"second", exclusive=True)
    assert gzip.decompress(p.read_bytes()) == b"first" and _hidden(tmp_path) == []


def test_stale_temps_removed_by_exact_pattern_only(tmp_path):
    keep = [".env.tmpl", ".x.tmp", ".notes.tmp.json", "a.traceprobe-abcdefgh.tmp", ".y.traceprobe-abc.tmp"]
    for n in keep:
        (tmp_path / n).write_text("mine")
    stale = [fileio.scratch_path(tmp_path, "r.pt.trace.json.gz"), fileio.scratch_path(tmp_path, "t", ".json")]
    assert all(fileio.TEMP_PATTERN.match(p.name) for p in stale)
    assert sorted(fileio.remove_stale_temps(tmp_path)) == sorted(stale)
    assert _hidden(tmp_path) == sorted(n for n in keep if n.startswith("."))
    fresh = fileio.scratch_path(tmp_path, "busy")
    assert fileio.remove_stale_temps(tmp_path, older_than_s=3600) == [] and fresh.exists()


def test_a_long_valid_name_is_written(tmp_path):
    """A 250-character name is valid; its longer temporary name is cut to fit, not refused."""
    name = "r" * 246 + ".csv"
    fileio.atomic_write(tmp_path / name, "x")
    assert [p.name for p in tmp_path.iterdir()] == [name]
    p = fileio.scratch_path(tmp_path, "é" * 200)
    assert len(p.name.encode()) <= 255 and fileio.TEMP_PATTERN.match(p.name)
