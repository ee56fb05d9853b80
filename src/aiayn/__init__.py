"""The Transformer of *Attention Is All You Need*, built bottom-up."""

__version__ = "0.1.0"
