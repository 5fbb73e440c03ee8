"""Plain-text tables that fit a width without cutting a word: the layout under :mod:`.table`.

A cell is a rich ``Text`` (style only; its string is printed literally, with control
characters escaped by :func:`cell`). Columns are laid out at their natural width; a
column marked ``wrap`` is word-wrapped into a narrower width, where a number and its
unit (``58.0 ms``, ``11%``) are never split; a name too long for its column is
shortened in the middle by :func:`shorten`, keeping its end (where the windows and
variants of a run differ). Nothing here computes a figure.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rich.text import Text

from ..console import one_line

GAP = " "
"""Between two columns."""
_UNIT = re.compile(r"(?<=\d) (?=(?:ns|µs|us|ms|s|%|x|GB/s|MB|GB|KB|B|ranks?|steps?)\b)"
                   r"|(?:(?<=\brank)|(?<=\branks)|(?<=\bstream)|(?<=\bstep)|(?<=\bsteps)|(?<=\bgroup)) (?=\d)")
"""The spaces a line never breaks at: between a number and its unit (``58.0 ms``, ``4 ranks``), and between a word and
the number that names it (``rank 3``, ``stream 7``, ``steps 2-4``, ``group 1``)."""
_NBSP = "\u00a0"
NARROWEST = 16
"""The narrowest a paragraph is wrapped to, and a name shortened to (:func:`para`)."""


def cell(text: object, style: str = "") -> Text:
    """One cell: ``text`` escaped onto one line (``\\n``, ``\\x1b`` shown as such), in ``style``."""
    return Text(one_line(text), style=style)


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: unchanged if it fits, else its start and its
    longer end around an ellipsis (``h100-1gpu/com…y.nonblocking``); at least one character of each."""
    if len(text) <= width or width < 3:
        return text
    tail = (2 * (width - 1) + 2) // 3
    head = width - 1 - tail
    return text[:head] + "…" + text[len(text) - tail:]


def shortened(texts: list[str], width: int) -> list[str]:
    """Each of ``texts`` as :func:`shorten` gives it, except where two different texts would read alike (kernel names
    that differ only in their template arguments): each of those keeps, between its start and its end, the stretch where
    it first differs from the one most like it (``void wgrad_…, 128, 5, 5, 3, 3, 3, fal…int, int)``): two different
    texts of one length never read alike. Texts that fit are unchanged; every result is at most ``width`` characters
    (from 11 on; narrower, as :func:`shorten` gives it)."""
    out = [shorten(t, width) for t in texts]
    by_text: dict[str, set[str]] = {}
    for t, s in zip(texts, out):
        by_text.setdefault(s, set()).add(t)
    for i, (t, s) in enumerate(zip(texts, out)):
        alike = by_text[s] - {t}
        if alike and width >= 11:
            out[i] = _with_difference(t, max(len(os.path.commonprefix((t, o))) for o in alike), width)
    return out


def _with_difference(text: str, at: int, width: int) -> str:
    """``text`` in ``width`` characters (at least 11): its start, the stretch from a third of the room before ``at``, and
    its end, joined by ``…`` where cut."""
    head = tail = max((width - 2) // 5, 1)
    room = width - head - tail - 2
    lo = min(max(at - room // 3, head), len(text) - tail - room)
    return text[:head] + ("…" if lo > head else "") + text[lo:lo + room] + ("…" if lo + room < len(text) - tail else "") \
        + text[len(text) - tail:]


def wrap(text: str, width: int) -> list[str]:
    """``text`` word-wrapped into lines of at most ``width`` characters where its words allow
    (a word longer than ``width`` stands alone on its line, whole); a number keeps its unit, and ``rank 3`` its number
    (:data:`_UNIT`)."""
    words = _UNIT.sub(_NBSP, text).split(" ")
    lines: list[str] = []
    line = ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    lines.append(line)
    return [x.replace(_NBSP, " ") for x in lines]


def para(text: str, width: int | None, indent: int = 0, style: str = "", hang: int = 2) -> list[Text]:
    """``text`` as lines of at most ``width`` columns (None: one line, as it is): the first indented ``indent``, the
    others ``hang`` more (under its label); wrapped between words (:func:`wrap`, never narrower than :data:`NARROWEST`),
    a word longer than its line (a name) shortened in the middle (:func:`shorten`). Each line escaped by :func:`cell`."""
    if width is None:
        return [cell(" " * indent + text, style)]
    out = []
    for k, part in enumerate(wrap(text, max(width - indent - hang, NARROWEST))):
        pad = indent + (hang if k else 0)
        out.append(cell(" " * pad + shorten(part, width - pad), style))
    return out


@dataclass
class Column:
    """One column: its header, one cell per row, alignment, and whether it may wrap."""

    header: str
    cells: list[Text]
    right: bool = False
    wrap: bool = False
    width: int = 0  # set by layout: 0 = natural
    lines: list[list[Text]] = field(default_factory=list)

    def natural(self) -> int:
        """The widest of the header and the cells."""
        return max([len(self.header), *(len(c.plain) for c in self.cells)])


def natural_width(cols: Sequence[Column]) -> int:
    """The table's width with every column at its natural width."""
    return sum(c.natural() for c in cols) + len(GAP) * (len(cols) - 1)


def lines(cols: Sequence[Column], header_style: str = "bold", after: Mapping[int, list[Text]] | None = None,
          before: Mapping[int, list[Text]] | None = None) -> list[Text]:
    """The table's lines: a header, then one or more lines per row (wrapped cells add lines).

    Each column is as wide as its ``width`` (natural when 0); a ``wrap`` column's cells are
    wrapped into it. Trailing spaces are dropped. ``before[r]`` and ``after[r]``: lines printed
    as they are before and after row ``r`` (a name on its own line, a note under the row).
    """
    widths = [c.width or c.natural() for c in cols]
    rows = len(cols[0].cells) if cols else 0
    out: list[Text] = []
    head = Text()
    for i, (c, w) in enumerate(zip(cols, widths)):
        head.append(GAP if i else "")
        head.append(c.header.rjust(w) if c.right else c.header.ljust(w), style=header_style)
    out.append(_rstrip(head))
    for r in range(rows):
        out += (before or {}).get(r, [])
        parts: list[list[Text]] = []
        for c, w in zip(cols, widths):
            t = c.cells[r]
            if c.wrap and len(t.plain) > w:
                parts.append([Text(x, style=str(t.style)) for x in wrap(t.plain, w)])
            else:
                parts.append([t])
        height = max(len(p) for p in parts)
        for k in range(height):
            line = Text()
            for i, (c, w, p) in enumerate(zip(cols, widths, parts)):
                line.append(GAP if i else "")
                t = p[k] if k < len(p) else Text("")
                pad = " " * max(w - len(t.plain), 0)
                if c.right:
                    line.append(pad)
                    line.append_text(t)
                else:
                    line.append_text(t)
                    line.append(pad)
            out.append(_rstrip(line))
        out += (after or {}).get(r, [])
    return out


def _rstrip(t: Text) -> Text:
    t.rstrip()
    return t
