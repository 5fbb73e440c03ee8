"""Memory bounded per command, not per worker: the limit on decompressed JSON is shared by the workers that read
traces at once (what one holds the others may not take), a gzip is refused as soon as its inflated size passes its
share, and the refusal line says which limit. The default is the smaller of half the available memory and 4 GiB.
The "bombs" are SYNTHETIC: a few tens of MB of blanks gzipped to a few KB (no gigabytes are allocated here)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceprobe.cli import app
from traceprobe.collect import analyze_paths
from traceprobe.errors import TraceFormatError
from traceprobe.reading import files

INFLATED = 40 << 20
"""Each bomb's JSON: 40 MiB."""


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> Path:
    """Three hard links to one gzip bomb (and a fourth copy), as in a folder a user may hand over."""
    folder = tmp_path_factory.mktemp("bombs")
    data = b'{"traceEvents": [' + b" " * INFLATED + b"]}"
    (folder / "b0.json.gz").write_bytes(gzip.compress(data, 9))
    for i in (1, 2):
        os.link(folder / "b0.json.gz", folder / f"b{i}.json.gz")
    return folder


def test_three_bombs_under_jobs_3_stay_within_the_command_limit(bombs: Path, monkeypatch) -> None:
    made: list[files.SharedLimit] = []
    real = files.share_limit

    def spy(max_bytes):
        made.append(real(max_bytes))
        return made[-1]

    monkeypatch.setattr(files, "share_limit", spy)
    limit = 24 << 20
    s = analyze_paths([str(bombs)], jobs=3, max_bytes=limit)
    assert len(s.failures) == 3 and not s.reports
    assert all("too large" in f.error and "--max-bytes" in f.error for f in s.failures), s.failures
    assert made and made[0].peak <= limit  # the three together never held more than the command's limit
    assert files._SHARED[0] is None  # (the limit is the command's: gone with it)


def test_share_refused_while_another_reader_holds_the_rest(bombs: Path) -> None:
    """Deterministic: another reader holds 20 of 24 MiB, so a bomb that alone would pass (limit 24 MiB, read up to
    it) is refused at its share, its line saying what the others held and which limit."""
    shared = files.share_limit(24 << 20)
    try:
        other = os.getpid() + 1_000_000  # (a reader that is not this process)
        assert shared.take(20 << 20, pid=other) == -1
        with pytest.raises(TraceFormatError) as e:
            for _ in files.read_trace_chunks(bombs / "b0.json.gz", 24 << 20):
                pass
        assert "held 20 MiB of the command's 24 MiB" in e.value.reason and "max_bytes limit (--max-bytes)" in e.value.reason
        files.release()
        assert shared.held() == 0 and shared.held(other) == 20 << 20
        shared.forget(other)
        assert shared.take(24 << 20) == -1  # (everything given back)
    finally:
        files.unshare_limit()


def test_each_file_gives_back_its_share(bombs: Path, tmp_path: Path) -> None:
    """Files read one after another each get the whole limit back: a small trace after a refused bomb is read."""
    (tmp_path / "a.json.gz").write_bytes((bombs / "b0.json.gz").read_bytes())
    (tmp_path / "z.json").write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
                                     '"ts": 1, "dur": 2, "args": {"device": 0, "stream": 7}}], "traceName": "synthetic: one kernel"}')
    s = analyze_paths([str(tmp_path)], jobs=1, max_bytes=8 << 20)
    assert [Path(f.path).name for f in s.failures] == ["a.json.gz"] and len(s.reports) == 1


def test_cli_line_names_the_limit(bombs: Path) -> None:
    res = CliRunner().invoke(app, ["overlap-report", str(bombs), "-j", "3", "--max-bytes", "2e7"])
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ".json.gz" in ln]
    assert len(lines) == 3 and all("too large" in ln and "max_bytes limit (--max-bytes)" in ln for ln in lines), res.stderr
    assert not any("ends early" in ln for ln in lines)


def test_default_limit_is_capped(monkeypatch) -> None:
    monkeypatch.setattr(files, "available_memory", lambda: 64 << 30)
    assert files.default_max_bytes() == files.DEFAULT_CAP == 4 << 30
    monkeypatch.setattr(files, "available_memory", lambda: 2 << 30)
    assert files.default_max_bytes() == 1 << 30
    with pytest.raises(TraceFormatError) as e:
        raise files._too_big("x.json.gz", 1 << 30, explicit=False)
    assert "smaller of 50% of the memory available and 4 GiB" in e.value.reason


def _die_holding(x: int) -> int:
    """A worker that reserves 20 MiB of the shared limit, then dies (as one killed by the OOM killer)."""
    if x == 0:
        files._SHARED[0].take(20 << 20)  # type: ignore[union-attr]
        os._exit(9)
    return x


def test_a_dead_worker_gives_its_share_back(monkeypatch) -> None:
    """What a worker held when it died is free again: the command's other files are not refused for it."""
    from traceprobe.collect.execution import map_items

    shared = files.share_limit(24 << 20)
    try:
        out = map_items(_die_holding, [0, 1, 2], jobs=2, on_crash=lambda x, why: -1)
        assert out[0] == -1 and out[1:] == [1, 2]
        assert shared.take(24 << 20) == -1  # (nothing left held by the dead workers)
    finally:
        files.unshare_limit()
