"""Deployment export (see export/quantize.py)."""
