"""``python -m traceprobe`` runs the CLI."""

from .launch import entry

entry()
