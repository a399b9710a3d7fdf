"""Placement schemes, one module each, registered by name.

Adding a scheme: write ``dogi_ml/policies/<name>.py`` with a :class:`~dogi_ml.sim.PlacementPolicy`
subclass decorated with ``@register``, and ``conf/policy/<name>.yaml``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping
from pathlib import Path

import dogi_ml.conf
from dogi_ml.errors import ConfigError, checked_setting
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


#: ``make_policy``'s marker for "the config does not set ``policy.victim``: keep the class's"
KEEP_VICTIM = object()


def policy_class(name: str) -> type[PlacementPolicy]:
    """The registered class of ``name``; an unknown name fails listing the known ones."""
    _discover()
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))} (choose with policy=NAME)"
        ) from None


def make_policy(name: str, n_groups: int | None = None, victim=KEEP_VICTIM, **params) -> PlacementPolicy:
    """Instantiate a registered policy; an unknown name fails listing the known ones.

    ``victim`` is ``policy.victim``: the scheme's own victim rule (None = follow ``sim.victim``);
    left out, the class's default stands. It is checked here against what the scheme can run with
    and resolved against ``sim.victim`` by the engine (:func:`dogi_ml.sim.victims.resolve_victim`)."""
    cls = policy_class(name)
    if n_groups is None:
        n_groups = getattr(cls, "default_groups", 1)
    policy = cls(n_groups, **params)
    if victim is not KEEP_VICTIM:
        policy.victim = checked_policy_victim(cls, victim)
    return policy


#: the keys of a ``policy`` config (conf/policy/*.yaml)
POLICY_KEYS = ("name", "n_groups", "victim", "params")


def policy_params(policy_cfg) -> dict:
    """A policy config's ``params`` as a dict, refusing the place the victim rule used to live and
    a key beside ``params`` that no one reads (``+policy.bogus=1``, ignored without a word else)."""
    unknown = sorted(set(policy_cfg) - set(POLICY_KEYS))
    if unknown:
        raise ConfigError(
            f"policy.{unknown[0]}: no such policy setting (policy={policy_cfg.get('name')})",
            f"a scheme's parameter goes under policy.params (policy.params.{unknown[0]}=...); the others are "
            + ", ".join(f"policy.{k}" for k in POLICY_KEYS),
        )
    params = dict(policy_cfg.get("params") or {})
    if "victim" in params:
        raise ConfigError(
            f"policy.params.victim={params['victim']} is no longer a parameter of policy={policy_cfg['name']}",
            "set policy.victim=NAME instead (null follows sim.victim)",
        )
    return params


@functools.cache
def policy_number_defaults(name: str) -> dict:
    """The numeric parameters of scheme ``name`` and their defaults, from the packaged policy
    configs that run it (conf/policy/*.yaml whose ``name`` is it); a key whose defaults are not
    numbers of one kind in all of them is left out."""
    from omegaconf import OmegaConf

    out: dict = {}
    for path in sorted((Path(dogi_ml.conf.__file__).resolve().parent / "policy").glob("*.yaml")):
        cfg = OmegaConf.to_container(OmegaConf.load(path))
        if cfg.get("name", path.stem) != name:
            continue
        for key, value in (cfg.get("params") or {}).items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            same = key not in out or (out[key] is not None and number and type(out[key][1]) is type(value))
            out[key] = (type(value), value) if number and same else None
    return {key: value for key, value in out.items() if value is not None}


def check_policy_numbers(name: str, params: Mapping) -> None:
    """A one-line error naming ``policy.params.KEY`` when a parameter the scheme's config gives a
    number is set to something else (a string, a switch, a list): the schemes convert with
    ``int()``/``float()`` deep inside, whose messages name no key, and a few read such a value
    without a word (``seed=abc``). null stays the scheme's to judge."""
    defaults = policy_number_defaults(name)
    for key, value in params.items():
        kind = defaults.get(key)
        if kind is not None and value is not None:
            # a seed seeds numpy's generators too, which take none below 0
            minimum = 0 if key == "seed" else None
            checked_setting(value, f"policy.params.{key}", kind[0], minimum=minimum, example=kind[1])


def checked_policy_victim(cls: type[PlacementPolicy], victim: str | None) -> str | None:
    """``policy.victim`` for a scheme of class ``cls``, or a one-line error naming the fix when the
    scheme cannot run with that rule."""
    from dogi_ml.sim.victims import ANY_SCHEME_VICTIMS

    name = cls.name
    if cls.victim_rules == ():  # the scheme's own selector and nothing else
        if victim != cls.selector:
            raise ConfigError(
                f"policy={name} chooses its victims itself ({cls.victim_note}); policy.victim={victim} cannot change that",
                f"leave policy.victim={cls.selector}",
            )
    elif victim is not None:
        allowed = ANY_SCHEME_VICTIMS if cls.victim_rules is None else cls.victim_rules
        if victim not in allowed:
            raise ConfigError(
                f"policy={name} cannot run with policy.victim={victim!r}",
                f"use one of {', '.join(allowed)}, or null to follow sim.victim",
            )
    return None if victim is None else str(victim)


def configured_victim(policy_cfg, sim_cfg) -> tuple[str, str]:
    """The ``(rule, selector)`` a run of these configs will use (``policy`` and ``sim`` groups as
    mappings), checked before any work starts: a conflict fails at once, before a trace is read."""
    from types import SimpleNamespace

    from dogi_ml.sim.victims import resolve_victim

    cls = policy_class(policy_cfg["name"])
    policy_params(policy_cfg)
    victim = policy_cfg.get("victim", KEEP_VICTIM)
    spec = SimpleNamespace(
        name=cls.name,
        victim=cls.victim if victim is KEEP_VICTIM else checked_policy_victim(cls, victim),
        selector=cls.selector,
        victim_rules=cls.victim_rules,
        victim_note=cls.victim_note,
    )
    return resolve_victim(sim_cfg.get("victim"), sim_cfg.get("victim_for", "all"), spec)
