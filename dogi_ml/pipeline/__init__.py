"""Pipeline stages: simulate (and, later, annotate/features/train/evaluate)."""
