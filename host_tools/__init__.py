"""mpy-lazy host tools: pack model weights into the mpy-lazy container (docs/FORMAT.md)."""

__version__ = "0.2.0"
