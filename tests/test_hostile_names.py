"""Names and walks from a hostile file system: a folder walk never leaves the folder given through a link
(``up -> ..``, ``slash -> /``), cycles still cut; a file name that is not UTF-8 is reported (``--format json``:
``\\xNN``) and exported; control bytes and bidi overrides in names reach no terminal raw (export's lines, the
Markdown report, warnings from matplotlib under ``plot``). The traces are SYNTHETIC (tests/synthetic.py)."""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic import TraceBuilder
from typer.testing import CliRunner

from traceprobe import console
from traceprobe.cli import app
from traceprobe.collect import discover

RAW = ("\x1b", "\r", "\x07", "\u202e")
"""What must never be printed raw."""
EVIL = "e\x1b[31mvil\r\x07\u202egnp"
NOT_UTF8 = os.fsdecode(b"lat\xff")


def _trace(path: Path) -> Path:
    b = TraceBuilder("hostile names")
    b.kernel(0, 7, 0, 1000)
    b.kernel(0, 7, 2000, 1000)
    b.step(1, 0, 5000)
    return b.write(path)


@pytest.fixture()
def named(tmp_path: Path) -> Path:
    folder = tmp_path / "names"
    folder.mkdir()
    for stem in ("good", NOT_UTF8, EVIL):
        _trace(folder / f"{stem}.json")
    return folder


def test_walk_stays_inside_the_folder(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "inner"
    (inner / "sub").mkdir(parents=True)
    _trace(outer / "parent.json")
    _trace(inner / "t.json")
    _trace(inner / "sub" / "deeper.json")
    (inner / "up").symlink_to("..")
    (inner / "slash").symlink_to("/")
    (inner / "self").symlink_to(".")  # inside: followed, the cycle cut
    (inner / "sub" / "back").symlink_to("..")  # inside (inner itself): cut as a cycle
    files, failures = discover([inner])
    assert sorted(Path(f).name for f in files) == ["deeper.json", "t.json"]
    assert len(failures) == 1 and failures[0].path == str(inner)
    assert "left out 2 links" in failures[0].error and "up ->" in failures[0].error and "slash -> /" in failures[0].error


def test_walk_link_inside_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    _trace(tmp_path / "real" / "t.json")
    (tmp_path / "alias").symlink_to("real")
    files, failures = discover([tmp_path])
    assert [Path(f).name for f in files] == ["t.json"] and not failures


def test_one_line_escapes_bidi_c1_and_bytes() -> None:
    assert console.one_line(f"{EVIL}{NOT_UTF8}\x85") == "e\\x1b[31mvil\\r\\x07\\u202egnplat\\xff\\u0085"
    text = console.shown_document(f"# {EVIL}\r\n| a\t|\n")
    assert not any(c in text for c in ("\x1b", "\x07", "\u202e")) and text.endswith("\r\n| a\t|\n")


_NAMES = st.lists(st.one_of(st.characters(max_codepoint=0x2FF), st.sampled_from([*console.BIDI, NOT_UTF8, "\r\n", "\r"]),
                            st.integers(0xDC80, 0xDCFF).map(chr))).map("".join)


@settings(max_examples=300, deadline=None)
@given(_NAMES)
def test_a_document_is_escaped_as_translate_escapes_it(text: str) -> None:
    """The document's escaping (one regex over the characters escaped) is ``str.translate`` over its tables, its
    definition, character for character."""
    assert console.shown_document(text, "json") == text.translate(console._JSON_ESCAPES)
    assert console.shown_document(text) == console._LONE_CR.sub("\\\\r", text).translate(console._IN_DOCUMENT)
    assert console.shown_document(text, "raw") is text


def test_json_report_of_a_name_that_is_not_utf8(named: Path) -> None:
    res = CliRunner().invoke(app, ["overlap-report", str(named), "--format", "json", "-j", "1"])
    assert res.exit_code == 0, res.output
    paths = sorted(Path(t["path"]).name for t in json.loads(res.stdout)["traces"])
    assert paths == sorted(["good.json", "lat\\xff.json", EVIL + ".json"])
    assert "\u202e" not in res.stdout  # (written \u202e: the same string once parsed)


def test_markdown_and_table_escape_names(named: Path) -> None:
    for fmt in ("markdown", "table", "csv", "tsv"):
        res = CliRunner().invoke(app, ["overlap-report", str(named), "--format", fmt, "-j", "1"])
        assert res.exit_code == 0, (fmt, res.output)
        assert not any(c in res.stdout for c in RAW), (fmt, res.stdout)
        assert "lat\\xff" in res.stdout, fmt


def test_export_writes_every_file_and_escapes_its_lines(named: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["export", str(named), "--perfetto", "-o", str(out), "-j", "1"])
    assert res.exit_code == 0, res.output
    assert sorted(os.listdir(os.fsencode(out))) == sorted([b"good.pftrace", b"lat\xff.pftrace", os.fsencode(EVIL + ".pftrace")])
    wrote = [ln for ln in res.stdout.splitlines() if ln.startswith("wrote ")]
    assert len(wrote) == 3 and not any(c in res.stdout for c in RAW)
    assert any("lat\\xff.pftrace" in ln for ln in wrote) and any("e\\x1b[31mvil\\r\\x07\\u202egnp.pftrace" in ln for ln in wrote)


def test_plot_escapes_names_and_library_warnings(named: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["plot", str(named), "-o", str(tmp_path / "p.png"), "-j", "1"])
    assert res.exit_code == 0, res.output
    assert len(list(tmp_path.glob("p.*.png"))) == 3
    assert not any(c in res.stdout + res.stderr for c in RAW), res.stderr


def test_library_warnings_are_escaped(capsys) -> None:
    with console.library_warnings():
        warnings.warn(f"Glyph 27 ({EVIL}) missing from font(s) DejaVu Sans.", UserWarning, stacklevel=1)
        logging.getLogger("matplotlib.font_manager").warning("findfont: %s", EVIL)
    err = capsys.readouterr().err
    assert "Glyph 27" in err and "findfont" in err and not any(c in err for c in RAW), err
