"""Placement schemes, one module each, registered by name.

Adding a scheme: write ``dogi_ml/policies/<name>.py`` with a :class:`~dogi_ml.sim.PlacementPolicy`
subclass decorated with ``@register``, and ``conf/policy/<name>.yaml``.
"""

from __future__ import annotations

import importlib
import pkgutil

from dogi_ml.sim.policy_api import PlacementPolicy

POLICIES: dict[str, type[PlacementPolicy]] = {}


def register(cls: type[PlacementPolicy]) -> type[PlacementPolicy]:
    """Class decorator: make a policy available by its ``name``."""
    if cls.name in POLICIES and POLICIES[cls.name] is not cls:
        raise ValueError(f"policy name {cls.name!r} registered twice")
    POLICIES[cls.name] = cls
    return cls


def _discover() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")


def policy_names() -> list[str]:
    _discover()
    return sorted(POLICIES)


def make_policy(name: str, n_groups: int | None = None, **params) -> PlacementPolicy:
    """Instantiate a registered policy; an unknown name fails listing the known ones."""
    _discover()
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))} (choose with policy=NAME)"
        ) from None
    if n_groups is None:
        n_groups = getattr(cls, "default_groups", 1)
    return cls(n_groups, **params)
