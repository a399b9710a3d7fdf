"""Lifetime models: one interface (fit, predict, predict_proba, save, load) and a registry."""

from .base import MODELS, LifetimeModel, make_model, model_names, register_model  # noqa: F401
