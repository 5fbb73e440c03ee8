"""``python -m traceprobe`` runs the CLI."""

from .cli import main

main()
