"""The top-level help: each command's first sentence whole, wrapped under its name (click cuts it at one line with
``...``); usage lines without typer's braces (:class:`PlainUsage`); an unknown command answered with the commands whose name holds it as a word (``report``: ``overlap-report``)
before the near spellings."""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup


def first_sentence(text: str) -> str:
    """The first sentence of a command's help (up to the first ``. `` or the end of its first paragraph)."""
    para = " ".join(text.strip().split("\n\n")[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


class FirstSentenceGroup(TyperGroup):
    """A typer group whose command list gives each command's first sentence whole (wrapped, never cut), and whose
    answer to an unknown command names first the commands holding it as a word (module doc)."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Typer's resolution; an unknown name that is a word of a command's name (``report``) suggests that command."""
        try:
            return super().resolve_command(ctx, args)
        except Exception as e:
            message = getattr(e, "message", None)
            if args and isinstance(message, str) and message.startswith("No such command"):
                words = [c for c in self.list_commands(ctx) if args[0].lower() in c.split("-") and c != args[0]]
                if words:
                    e.message = f"No such command {args[0]!r}. Did you mean {', '.join(repr(w) for w in words)}?"  # type: ignore[attr-defined]
            raise

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


class PlainUsage(TyperCommand):
    """A command whose usage line names its arguments as people write them (``PATHS...``), not typer's ``{PATHS...}``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """Typer's pieces, a required argument's braces dropped."""
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in super().collect_usage_pieces(ctx)]
