"""``traceprobe mcp``: the Model Context Protocol server for agents (:mod:`traceprobe.agent.server`), on stdin/stdout."""

from __future__ import annotations

import typer

from ..console import fail

INSTALL = "traceprobe mcp needs the MCP SDK (mcp 2 or later): pip install 'traceprobe[mcp]'"


def mcp_cmd(
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes per analysis (default: CPU count)."),
) -> None:
    """Answer an agent's questions over the Model Context Protocol (stdio), in small JSON answers.

    Its tools: the folder's summary, a window's ranked claims with their evidence, a step's critical path, a device's
    top kernels, a diff of two folders, what a figure means.

    Register it with any MCP client as the command `traceprobe mcp`.
    """
    try:
        import mcp.server.mcpserver  # noqa: F401  - the SDK, an optional extra
    except ImportError:
        fail(INSTALL)
    from ..agent.server import serve

    serve(jobs)


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to ``app``."""
    app.command("mcp")(mcp_cmd)
