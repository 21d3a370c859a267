"""wisp.core: everything except drawing. Never imports Textual (DESIGN.md)."""

__version__ = "0.1.0"
