"""Renderers: one module per output format. They format; they compute nothing (the contract: :mod:`.renderers`)."""

from __future__ import annotations

from pathlib import Path


def image_format(output: str | Path) -> str:
    """The image format named by ``output``'s suffix (``png`` without one)."""
    return Path(output).suffix.lstrip(".").lower() or "png"
