"""Renderers: one module per output format. They format; they compute nothing."""
