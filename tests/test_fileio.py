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
        1 / 0  # noqa: B018  # pyright: ignore[reportUnusedExpression]
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


def _racer(folder: str, who: int, rounds: int, windows: int, barrier) -> None:
    """One of the processes of the race: each round, ``windows`` windows under one stem, as the summary's process
    writes them (the summary naming its trace)."""
    from traceprobe.fileio import claim_stem

    for r in range(rounds):
        barrier.wait()
        for w in range(windows):
            tag = f"{who}.{w}".encode()
            claim_stem(folder, f"r{r}.rank0.steps2-4", [
                (".summary.json", lambda c, tag=tag: tag + b" " + f"{c}.pt.trace.json.gz".encode()),
                (".pt.trace.json.gz", lambda _, tag=tag: tag)])


def test_three_processes_racing_into_one_folder_lose_no_window(tmp_path):
    """SYNTHETIC: three processes write 4 windows each under one stem, 12 rounds started together by a barrier
    (:func:`claim_stem`, what the summary's process calls): every window of every round is there, each summary
    beside the trace it names, nothing overwritten (checking then renaming lost 1-2 windows in 3 of 6 rounds)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    rounds, windows = 12, 4
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_racer, args=(str(tmp_path), who, rounds, windows, barrier)) for who in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    for r in range(rounds):
        summaries = sorted(tmp_path.glob(f"r{r}.rank0.steps2-4*.summary.json"))
        tags = []
        for s in summaries:
            tag, trace = s.read_bytes().split(b" ")
            assert (tmp_path / trace.decode()).read_bytes() == tag  # (the trace it names is its own)
            tags.append(tag)
        assert sorted(tags) == sorted(f"{who}.{w}".encode() for who in range(3) for w in range(windows))
    assert len(list(tmp_path.iterdir())) == rounds * 3 * windows * 2  # (no temporary file left)


def test_claim_stem_skips_a_stem_whose_other_file_is_there(tmp_path):
    """A stem is free only where none of its files is there: a trace alone makes the summary-only writer move on."""
    from traceprobe.fileio import claim_stem

    (tmp_path / "a.pt.trace.json.gz").write_bytes(b"t")
    got = claim_stem(tmp_path, "a", [(".summary.json", lambda c: b"s")], free=[".pt.trace.json.gz"])
    assert got == "a-2" and sorted(p.name for p in tmp_path.iterdir()) == ["a-2.summary.json", "a.pt.trace.json.gz"]


def test_default_out_claims_its_folder(tmp_path, monkeypatch):
    """Two recordings started in one second get two folders, each created by the call that named it."""
    from traceprobe.recording import trace_files

    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    got = [trace_files.default_out("x", tmp_path) for _ in range(3)]
    assert len(set(got)) == 3 and all(p.is_dir() for p in got)  # (checking before creating named one folder thrice)
