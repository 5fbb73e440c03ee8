"""The package's version, in a module of its own that imports nothing: every part that writes it (the JSON
document, the manifest, summaries, ``--version``) reads it here, so none imports the package's top, whose
names load the reading, analysis and recording sides."""

__version__ = "0.1.0"
