"""Hostile summaries (*.summary.json): a value that does not fit its format or its column's meaning, a missing key,
a packed graph whose arrays disagree, a FIFO, a device or an oversized file named as a summary is one error line
naming the file, in ``overlap-report``, ``job`` and ``diff``, and every other summary beside it is still reported.
The two good summaries are a SYNTHETIC job (scripts/synth_job.py: made up, not recorded)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import starts_with_window
from typer.testing import CliRunner

from traceprobe.cli import app
from traceprobe.errors import TraceFormatError
from traceprobe.summary_file import MAX_BYTES, read_summary

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import synth_job  # noqa: E402  # pyright: ignore[reportMissingImports]
import synth_trace as st  # noqa: E402  # pyright: ignore[reportMissingImports]


def _setcol(doc: dict, table: str, col: str, value: object) -> None:
    t = doc["tables"][table]
    t["data"][t["columns"].index(col)][0] = value


def _deep(doc: dict) -> str:
    return json.dumps({**doc, "info": 0}).replace('"info": 0', '"info": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}")


CASES = {  # name -> how the good document is spoiled (returns the text, or None: the document as changed)
    "rank_2_64": lambda d: d.__setitem__("rank", 2**64 - 1),
    "coll_null_start": lambda d: _setcol(d, "collectives", "start_ns", None),
    "coll_2_70": lambda d: _setcol(d, "collectives", "start_ns", 2**70),
    "int_null": lambda d: _setcol(d, "steps", "step", None),
    "int_str": lambda d: _setcol(d, "steps", "step", "x"),
    "int_float": lambda d: _setcol(d, "steps", "step", 1.5),
    "ragged": lambda d: d["tables"]["steps"]["data"][0].pop() and None,
    "deep_info": _deep,
    "dtype_huge": lambda d: d["tables"]["findings"]["dtypes"].__setitem__(0, "U1000000000"),
    "window_2_70": lambda d: d.__setitem__("window_ns", [0, 2**70]),
    "event_count_2_64": lambda d: d.__setitem__("event_count", 2**64),
    "headline_str": lambda d: d["headline"].__setitem__("x", "abc"),
    "no_rank": lambda d: d.pop("rank") and None,
    "no_tables": lambda d: d.pop("tables") and None,
    "no_headline": lambda d: d.pop("headline") and None,
    "no_verdicts": lambda d: d.pop("verdicts") and None,
    "dtypes_short": lambda d: d["tables"]["steps"]["dtypes"].pop() and None,
}


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("good")
    synth_job.write_summaries(st.Config(events=2000, seed=3), 2, folder)
    return folder


def _spoiled(good: Path, name: str) -> str:
    doc = json.loads((good / "rank0.summary.json").read_text())
    doc["rank"] = 2
    text = CASES[name](doc)
    return text if isinstance(text, str) else json.dumps(doc)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_is_one_line_naming_the_file(good: Path, tmp_path: Path, name: str) -> None:
    p = tmp_path / f"{name}.summary.json"
    p.write_text(_spoiled(good, name))
    with pytest.raises(TraceFormatError) as e:
        read_summary(p)
    assert e.value.path == str(p) and "\n" not in str(e.value)


@pytest.fixture(scope="module")
def hostile(good: Path, tmp_path_factory) -> Path:
    """The two good summaries and every hostile one beside them in one folder."""
    folder = tmp_path_factory.mktemp("hostile")
    for f in good.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    for name in CASES:
        (folder / f"{name}.summary.json").write_text(_spoiled(good, name))
    return folder


def _lines_per_case(stderr: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    for name in CASES:
        mine = [ln for ln in lines if f"{name}.summary.json" in ln]
        assert len(mine) == 1, (name, lines)
    assert not any("Error:" in ln and "summary.json" not in ln for ln in lines), lines  # (no bare OverflowError...)


def test_overlap_report_reports_the_good_ones(hostile: Path) -> None:
    res = CliRunner().invoke(app, ["overlap-report", str(hostile), "--format", "json", "-j", "1"])
    assert res.exit_code == 2, res.output
    _lines_per_case(res.stderr)
    doc = json.loads(res.stdout)
    assert sorted(Path(t["path"]).name for t in doc["traces"]) == ["rank0.summary.json", "rank1.summary.json"]


def test_job_reports_the_good_ones(hostile: Path) -> None:
    res = CliRunner().invoke(app, ["job", str(hostile), "--format", "json"])
    assert res.exit_code == 2, res.output
    _lines_per_case(res.stderr)
    doc = json.loads(res.stdout)
    assert {f["ranks"] for f in doc["figures"]} == {2}


def test_job_names_a_summary_without_a_rank(good: Path, tmp_path: Path) -> None:
    for f in good.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    doc = json.loads((good / "rank0.summary.json").read_text())
    (tmp_path / "unranked.summary.json").write_text(json.dumps({**doc, "rank": None}))
    res = CliRunner().invoke(app, ["job", str(tmp_path)])
    assert res.exit_code == 2
    assert any("unranked.summary.json" in ln and "without a rank" in ln for ln in res.stderr.splitlines()), res.stderr


def test_oversized_summary_refused_by_its_limit(good: Path, tmp_path: Path, monkeypatch) -> None:
    """Plain: refused from its size before a read; gzip: as it inflates past the limit, the line saying which limit
    (not "the gzip stream ends early")."""
    import traceprobe.summary_file as sf

    raw = (good / "rank0.summary.json").read_bytes()
    monkeypatch.setattr(sf, "MAX_BYTES", len(raw) // 2)
    (tmp_path / "big.summary.json").write_bytes(raw)
    (tmp_path / "bomb.summary.json.gz").write_bytes(gzip.compress(raw))
    for name in ("big.summary.json", "bomb.summary.json.gz"):
        with pytest.raises(TraceFormatError) as e:
            sf.read_summary(tmp_path / name)
        assert "limit of a summary" in e.value.reason and "ends early" not in e.value.reason
    assert MAX_BYTES == 256 << 20


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "traceprobe", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("command", ["overlap-report", "job"])
def test_fifo_and_device_named_as_summaries_are_not_opened(good: Path, tmp_path: Path, command: str) -> None:
    for f in good.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    os.mkfifo(tmp_path / "r.summary.json")
    os.mkfifo(tmp_path / "g.summary.json.gz")
    (tmp_path / "zero.summary.json").symlink_to("/dev/zero")
    names = ["rank0.summary.json", "rank1.summary.json", "r.summary.json", "g.summary.json.gz", "zero.summary.json"]
    res = _run([command, *names, "-j", "1"], tmp_path)  # (a FIFO opened would hang: the timeout fails it)
    assert res.returncode == 2, res.stderr
    for name, what in [("r.summary.json", "FIFO"), ("g.summary.json.gz", "FIFO"), ("zero.summary.json", "device")]:
        mine = [ln for ln in res.stderr.splitlines() if name in ln]
        assert len(mine) == 1 and what in mine[0], (name, res.stderr)
    assert "rank0" in res.stdout or "2" in res.stdout


def _graph_cases() -> dict:
    """Spoiled ``graph`` tables (the rank's packed dependency graph): not base64, not a zip, an index beyond its
    arrays, two columns."""
    import base64
    import io

    import numpy as np

    from traceprobe.analysis.job.graph_tables import graph_from_blob

    def out_of_range(blob: str) -> str:
        graph_from_blob(blob)  # (a good graph before it is spoiled)
        buf = io.BytesIO()
        raw = np.load(io.BytesIO(base64.b64decode(blob)), allow_pickle=False)
        arrays = {k: raw[k] for k in raw.files}
        arrays["dep"] = np.full(arrays["dep"].shape, 10**9, np.int64)
        np.savez_compressed(buf, **arrays)  # pyright: ignore[reportArgumentType]
        return base64.b64encode(buf.getvalue()).decode()

    return {
        "graph_not_base64": lambda t: t["data"][0].__setitem__(0, "!!! not base64 !!!"),
        "graph_not_zip": lambda t: t["data"][0].__setitem__(0, base64.b64encode(b"PK not a zip at all").decode()),
        "graph_index": lambda t: t["data"][0].__setitem__(0, out_of_range(t["data"][0][0])),
        "graph_two_columns": lambda t: t.update(columns=["npz", "x"], dtypes=["object", "object"], data=[t["data"][0], ["y"]]),
        "graph_number": lambda t: t["data"][0].__setitem__(0, 12345),
    }


@pytest.mark.parametrize("name", ["graph_not_base64", "graph_not_zip", "graph_index", "graph_two_columns", "graph_number"])
def test_a_spoiled_graph_is_one_line_and_job_still_reports(good: Path, tmp_path: Path, name: str) -> None:
    """A summary whose packed graph is spoiled: loading it is one line naming the file; ``job`` names it (the window is
    not replayed) and still gives the figures of every rank."""
    from traceprobe.analysis.job.summaries import load_summary

    cases = _graph_cases()
    for f in good.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    doc = json.loads((good / "rank0.summary.json").read_text())
    assert "graph" in doc["tables"]  # (written by write_summaries from analysed reports)
    cases[name](doc["tables"]["graph"])
    bad = tmp_path / "rank0.summary.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError) as e:
        load_summary(bad)
    assert e.value.path == str(bad) and "\n" not in str(e.value)
    res = CliRunner().invoke(app, ["job", str(tmp_path), "--format", "json"])
    assert res.exit_code == 2, res.output
    named = [ln for ln in res.stderr.splitlines() if "rank0.summary.json" in ln]
    assert len(named) == 1 and "graph" in named[0], res.stderr
    doc = json.loads(res.stdout)
    assert {f["ranks"] for f in doc["figures"]} == {2} and doc["what_if"] == []


def test_a_graph_that_inflates_past_its_limit_is_refused(good: Path, tmp_path: Path, monkeypatch) -> None:
    import traceprobe.analysis.job.graph_tables as gt
    from traceprobe.analysis.job.summaries import load_summary

    monkeypatch.setattr(gt, "MAX_INFLATED", 1000)
    p = tmp_path / "r.summary.json"
    p.write_bytes((good / "rank0.summary.json").read_bytes())
    with pytest.raises(TraceFormatError) as e:
        load_summary(p)
    assert "inflates to" in str(e.value) and "bytes, past 1,000" in str(e.value)


def test_a_collective_naming_no_group_members_row_is_one_line(good: Path, tmp_path: Path) -> None:
    """A collective's ``pg_ranks`` is a row of the summary's ``pg_members`` table: one beyond it is one line naming the
    file, in the loader and in ``job``, which still reports the other rank."""
    from traceprobe.analysis.job.summaries import load_summary

    for f in good.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    doc = json.loads((good / "rank0.summary.json").read_text())
    assert "pg_members" in doc["tables"]
    _setcol(doc, "collectives", "pg_ranks", 10**6)
    bad = tmp_path / "rank0.summary.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError) as e:
        load_summary(bad)
    assert e.value.path == str(bad) and "members" in str(e.value)
    res = CliRunner().invoke(app, ["job", str(tmp_path)])
    assert res.exit_code == 2 and len([ln for ln in res.stderr.splitlines() if "rank0.summary.json" in ln]) == 1, res.stderr


def _declare(doc: dict, table: str, col: str, value: object, dtype: str) -> None:
    """Set the first value of a column and the dtype the column declares (a file whose values fit its own dtypes)."""
    t = doc["tables"][table]
    i = t["columns"].index(col)
    t["data"][i][0] = value
    t["dtypes"][i] = dtype


COLUMN_CASES = {  # name -> how the good document is spoiled: a value of another kind than its column's meaning, its dtype to match
    "exposed_start_str": lambda d: _declare(d, "exposed_comm", "start_ns", "abc", "str"),
    "coll_start_null": lambda d: _declare(d, "collectives", "start_ns", None, "Int64"),
    "step_float": lambda d: _declare(d, "steps", "step", 1.5, "float64"),
    "members_not_ranks": lambda d: _setcol(d, "pg_members", "pg_ranks", "a,b"),
}


def _beside(good: Path, folder: Path, name: str, spoil) -> Path:
    """``folder`` holding the two good summaries and ``<name>.summary.json``: rank 0's summary as rank 2, spoiled."""
    folder.mkdir(exist_ok=True)
    for f in good.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    doc = json.loads((good / "rank0.summary.json").read_text())
    doc["rank"] = 2
    spoil(doc)
    bad = folder / f"{name}.summary.json"
    bad.write_text(json.dumps(doc))
    return bad


def _one_line_and_the_good_ones(res, bad: Path, command: str, ranks: int = 2) -> str:
    """Exit code 2, one stderr line in all, naming ``bad``, and the two good summaries reported; the line."""
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len([ln for ln in lines if bad.name in ln]) == 1 and len(lines) == 1, lines
    doc = json.loads(res.stdout)
    if command == "overlap-report":
        assert sorted(Path(t["path"]).name for t in doc["traces"]) == ["rank0.summary.json", "rank1.summary.json"]
    elif command == "job":
        assert {f["ranks"] for f in doc["figures"]} == {ranks}
    else:
        assert sorted(Path(p["b"]).name for p in doc["pairs"]) == ["rank0.summary.json", "rank1.summary.json"]
    return lines[0]


@pytest.mark.parametrize("command", ["overlap-report", "job", "diff"])
@pytest.mark.parametrize("name", sorted(COLUMN_CASES))
def test_a_column_of_another_kind_than_its_meaning_is_one_line(good: Path, tmp_path: Path, name: str, command: str) -> None:
    """A summary whose known column holds values of another kind than the column's meaning (a string among times,
    a null among collective starts, a fractional step, members that are not ranks), its dtype declared to match
    them: one line naming the file and the column, every other summary reported (``overlap-report``, ``job`` and
    ``diff`` stopped on a ValueError or a TypeError, or took the file as it was). The good summaries: SYNTHETIC."""
    bad = _beside(good, tmp_path / "b", name, COLUMN_CASES[name])
    args = [str(tmp_path / "b")] if command != "diff" else [str(good), str(tmp_path / "b")]
    res = CliRunner().invoke(app, [command, *args, "--format", "json", "-j", "1"])
    line = _one_line_and_the_good_ones(res, bad, command)
    assert "does not fit its format" in line and ("pg_ranks" if name == "members_not_ranks" else "_ns" if "start" in name else ".step") in line, line


@pytest.mark.parametrize("name", sorted(COLUMN_CASES))
def test_the_job_of_summaries_checks_the_columns_it_reads(good: Path, tmp_path: Path, name: str) -> None:
    """``job_report_from_summaries`` called from Python (no file checked before) leaves the file out with a failure
    naming it and reports the others (it stopped on a ValueError or a TypeError)."""
    from traceprobe.analysis.job.job import job_report_from_summaries

    bad = _beside(good, tmp_path, name, COLUMN_CASES[name])
    job, failures = job_report_from_summaries(sorted(tmp_path.glob("*.summary.json")))
    assert [f.path for f in failures] == [str(bad)] and "does not fit its format" in failures[0].error, failures
    assert set(job.figures["ranks"]) == {2}


def _respool(change):
    """A spoiler of a packed graph: its arrays read, ``change``d (a dict by name) and packed again."""
    import base64
    import io

    import numpy as np

    def spoil(blob: str) -> str:
        raw = np.load(io.BytesIO(base64.b64decode(blob)), allow_pickle=False)
        arrays = {k: raw[k] for k in raw.files}
        change(arrays)
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)  # pyright: ignore[reportArgumentType]
        return base64.b64encode(buf.getvalue()).decode()
    return spoil


def _huge_header(blob: str) -> str:
    """The blob with ``dep``'s ``.npy`` header claiming 2^40 int64 (8 TiB), its member 64 bytes of data."""
    import base64
    import io
    import zipfile

    import numpy as np

    src = zipfile.ZipFile(io.BytesIO(base64.b64decode(blob)))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "dep.npy":
                head = io.BytesIO()
                np.lib.format.write_array_header_1_0(head, {"descr": "<i8", "fortran_order": False, "shape": (1 << 40,)})
                data = head.getvalue() + data[-64:]
            z.writestr(info.filename, data)
    return base64.b64encode(buf.getvalue()).decode()


def _rezipped(blob: str, compress_type: int, spoil_member=None, member: str = "dep.npy") -> str:
    """The blob's members written again with ``compress_type``, ``member``'s bytes passed through ``spoil_member``
    (its compressed data, as the zip holds it) where given."""
    import base64
    import io
    import zipfile

    src = zipfile.ZipFile(io.BytesIO(base64.b64decode(blob)))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compress_type) as z:
        for info in src.infolist():
            z.writestr(info.filename, src.read(info))
    raw = bytearray(buf.getvalue())
    if spoil_member is not None:
        info = zipfile.ZipFile(io.BytesIO(bytes(raw))).getinfo(member)
        at = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
        raw[at:at + info.compress_size] = spoil_member(bytes(raw[at:at + info.compress_size]))
    return base64.b64encode(bytes(raw)).decode()


def _flipped(data: bytes) -> bytes:
    """Deflated data with one byte of its middle changed: it inflates to other bytes, or not at all."""
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]


def _directory_lies(blob: str, field: int, by: int) -> str:
    """The blob with a 4-byte field of ``dep.npy``'s entry in the zip's directory (its inflated size at 24, the offset
    of its local header at 42) moved by ``by``."""
    import base64
    import struct

    raw = bytearray(base64.b64decode(_rezipped(blob, 8)))
    at = raw.index(b"PK\x01\x02")  # (the first directory entry)
    while True:  # (each directory entry: its name at 46, its lengths at 28-33)
        n, e, c = struct.unpack_from("<HHH", raw, at + 28)
        if raw[at + 46:at + 46 + n] == b"dep.npy":
            struct.pack_into("<I", raw, at + field, struct.unpack_from("<I", raw, at + field)[0] + by)
            break
        at += 46 + n + e + c
    return base64.b64encode(bytes(raw)).decode()


def _renamed_step_column(a: dict) -> None:
    import numpy as np

    names = a["steps_columns"].tolist()
    names[names.index("start_ns")] = "begin_ns"
    a["steps_columns"] = np.array(names)


GRAPH_ARRAY_CASES = {  # name -> how the packed graph's arrays are spoiled (each aborted the whole command)
    "lane_half": _respool(lambda a: a.update(lane=a["lane"][: a["lane"].size // 2])),  # ValueError: operands could not be broadcast
    "class_ns_2_rows": _respool(lambda a: a.update(class_ns=a["class_ns"][:2])),  # IndexError
    "anchor_float": _respool(lambda a: a.update(anchor=a["anchor"].astype("float64"))),  # IndexError: arrays used as indices
    "steps_renamed": _respool(_renamed_step_column),  # KeyError: 'start_ns'
    "npy_2_40": _huge_header,  # MemoryError: 8 TiB
    "member_flipped": lambda b: _rezipped(b, 8, _flipped),  # a member's data spoiled: it does not inflate, or not to its CRC-32
    "member_cut": lambda b: _rezipped(b, 8, lambda d: d[: len(d) // 2] + bytes(len(d) - len(d) // 2)),
    "member_size_lies": lambda b: _directory_lies(b, 24, -64),  # a member that inflates past the size the directory gives it
    "member_offset_lies": lambda b: _directory_lies(b, 42, 1),  # a directory entry pointing past its member's local header
    "member_bzip2": lambda b: _rezipped(b, 12),  # a method np.savez never writes
    # a stored member's byte changed (its size kept): only its CRC-32 tells (any duration is a graph's)
    "member_stored_flipped": lambda b: _rezipped(b, 0, lambda d: d[:-4] + bytes([d[-4] ^ 1]) + d[-3:], "d.npy"),
}


def test_a_graph_member_is_read_as_zipfile_reads_it_and_checked_as_it_checks(good: Path) -> None:
    """Each member of a packed graph inflated where it lies (``graph_tables._inflated``) gives the arrays ``zipfile``
    gives, stored or deflated; a member whose bytes were changed, its size kept, is refused by its CRC-32 as
    ``zipfile`` refuses it. The good summaries: SYNTHETIC."""
    import base64
    import io
    import zipfile

    import numpy as np

    from traceprobe.analysis.job.graph_tables import graph_from_blob

    blob = json.loads((good / "rank0.summary.json").read_text())["tables"]["graph"]["data"][0][0]
    for packed in (blob, _rezipped(blob, zipfile.ZIP_STORED)):
        with zipfile.ZipFile(io.BytesIO(base64.b64decode(packed))) as z:
            want = {i.filename.removesuffix(".npy"): np.load(io.BytesIO(z.read(i)), allow_pickle=False) for i in z.infolist()}
        got = graph_from_blob(packed)
        for k in ("d", "dep", "lane", "anchor", "pre_dur", "blocking", "comm"):
            assert np.array_equal(np.asarray(getattr(got, k)), want[k]) and want[k].size, k
    spoiled = GRAPH_ARRAY_CASES["member_stored_flipped"](blob)
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(spoiled))) as z, pytest.raises(zipfile.BadZipFile, match="CRC"):
        z.read("d.npy")
    with pytest.raises(ValueError, match="CRC-32"):
        graph_from_blob(spoiled)


@pytest.mark.parametrize("command", ["overlap-report", "job"])
@pytest.mark.parametrize("name", sorted(GRAPH_ARRAY_CASES))
def test_a_graph_whose_arrays_disagree_is_one_line(good: Path, tmp_path: Path, name: str, command: str) -> None:
    """A summary whose packed graph's arrays disagree in length, shape or dtype, or whose ``.npy`` header claims
    more than the blob holds: one line naming the file, checked before any array is used or allocated; every other
    summary still reported (``job`` keeps the file's figures, the window not replayed). The good summaries: SYNTHETIC."""
    from traceprobe.analysis.job.summaries import load_summary

    def spoil(doc: dict) -> None:
        t = doc["tables"]["graph"]
        t["data"][0][0] = GRAPH_ARRAY_CASES[name](t["data"][0][0])

    bad = _beside(good, tmp_path / "b", name, spoil)
    res = CliRunner().invoke(app, [command, str(tmp_path / "b"), "--format", "json", "-j", "1"])
    line = _one_line_and_the_good_ones(res, bad, command, ranks=3)
    assert "graph" in line, line
    with pytest.raises(TraceFormatError) as e:
        load_summary(bad)
    assert e.value.path == str(bad) and "graph" in e.value.reason and "\n" not in str(e.value)


def _shift_steps(good: Path, out: Path, by: int) -> dict:
    """Each summary of ``good`` written to ``out`` with its steps numbered ``by`` apart (SYNTHETIC); the last one's document."""
    doc: dict = {}
    for f in sorted(good.iterdir()):
        doc = json.loads(f.read_text())
        t = doc["tables"]["steps"]
        i = t["columns"].index("step")
        t["data"][i] = [s + by for s in t["data"][i]]
        (out / f.name).write_text(json.dumps(doc))
    return doc


def test_negative_steps_are_counted_from_their_numbers(good: Path, tmp_path: Path) -> None:
    """Two ranks whose steps are numbered -19..-10 (SYNTHETIC: the good summaries' steps moved down by 20): ``job``
    reports their window as ``steps -19--10``, with the figures of the same ranks numbered 1..10, its causes over its
    10 steps (it split the label on "-" and stopped on int('')); a third summary whose steps are fractional is one line."""
    doc = _shift_steps(good, tmp_path, -20)
    bad = tmp_path / "fractional.summary.json"
    doc["rank"] = 2
    _declare(doc, "steps", "step", -18.5, "float64")
    bad.write_text(json.dumps(doc))
    res = CliRunner().invoke(app, ["job", str(tmp_path), "--format", "json"])
    _one_line_and_the_good_ones(res, bad, "job")
    moved = json.loads(res.stdout)
    same = json.loads(CliRunner().invoke(app, ["job", str(good), "--format", "json"]).stdout)
    assert {f["window"] for f in moved["figures"]} == {"steps -19--10"} and {f["window"] for f in same["figures"]} == {"steps 1-10"}
    assert [{**f, "run": "", "window": ""} for f in moved["figures"]] == [{**f, "run": "", "window": ""} for f in same["figures"]]
    from traceprobe.analysis.job.job import job_report_from_summaries

    job, failures = job_report_from_summaries(sorted(tmp_path.glob("rank*.summary.json")))
    assert not failures and [(c.window, c.steps) for c in job.causes] == [("steps -19--10", 10)]


def test_negative_step_numbers_make_one_window(good: Path, tmp_path: Path) -> None:
    """Two ranks' summaries whose steps are numbered -9..0: one window of both ranks, labelled and counted from the
    step numbers (a label such as ``steps -9-0`` is never parsed back)."""
    _shift_steps(good, tmp_path, -10)
    res = CliRunner().invoke(app, ["job", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert starts_with_window(res.stdout, tmp_path, "steps -9-0: 2 ranks ")  # (its header wrapped at 80 columns)
