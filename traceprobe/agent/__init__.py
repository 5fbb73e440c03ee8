"""An interface for agents: ``traceprobe mcp``, a Model Context Protocol server whose tools answer narrow questions
over a folder or trace with small JSON answers, a few KB where the whole JSON document is 10-100 MB.

``answers`` builds each answer from a finished :class:`~traceprobe.analysis.summary.Summary` (the folder's summary, a
window's ranked claims with their evidence, a step's critical path, a device's top kernels, a diff); ``explain`` says
what a figure means, from where it is declared and defined; ``server`` holds the tools and the analyses they read, once
per path. ``server`` imports the ``mcp`` SDK (the ``mcp`` extra): only the command imports it.
"""
