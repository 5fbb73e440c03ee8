"""The top-level help: each command's first sentence whole, wrapped under its name (click cuts it at one line with
``...``)."""

from __future__ import annotations

from typing import Any

from typer.core import TyperGroup


def first_sentence(text: str) -> str:
    """The first sentence of a command's help (up to the first ``. `` or the end of its first paragraph)."""
    para = " ".join(text.strip().split("\n\n")[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


class FirstSentenceGroup(TyperGroup):
    """A typer group whose command list gives each command's first sentence whole (wrapped, never cut)."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:  # (typer's own click: its Context, HelpFormatter)
        """The ``Commands:`` section: name, then the first sentence of its help, wrapped to the formatter's width."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            rows.append((name, first_sentence(cmd.help or cmd.short_help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
