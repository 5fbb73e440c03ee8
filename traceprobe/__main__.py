"""``python -m traceprobe`` runs the CLI."""

from .cli import entry

entry()
