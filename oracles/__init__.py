"""Oracles: future-knowledge annotation and ideal placements."""

from .annotate import NEVER, annotate, annotate_cached, stream_key

__all__ = ["NEVER", "annotate", "annotate_cached", "stream_key"]
