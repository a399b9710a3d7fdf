"""Turn a ``workload`` config (generator or file) into a :class:`Trace`, cached on disk.

Generated traces are cached by a hash of their config; file traces by the file's content hash
(plus reader options), in the binary format, so a second run skips generation and parsing.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from pathlib import Path

from dogi_ml.errors import DogiMLError, checked_setting

from .binfmt import content_hash, read_binary, write_trace
from .generators import GENERATORS, GeneratorParameterError, default_params, generate
from .readers import check_format, input_warnings, read_trace
from .trace import Trace, TraceWarning


class WorkloadError(DogiMLError):
    """A workload config that cannot be turned into a trace."""


def _plain(obj):
    """OmegaConf containers -> plain Python (without importing omegaconf here)."""
    if hasattr(obj, "_content") or type(obj).__name__ in ("DictConfig", "ListConfig"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(obj, resolve=True)
    return obj


def workload_capacity(trace: Trace) -> int:
    """The logical capacity a workload implies: the generator's capacity, else the write WSS."""
    cap = trace.meta.get("capacity_blocks")
    if cap:
        return int(cap)
    return int(trace.meta.get("wss_blocks") or trace.stats()["wss_blocks"])


#: the keys a workload config may hold, per source (conf/workload/*.yaml)
_COMMON_KEYS = ("name", "source", "capacity_blocks")
WORKLOAD_KEYS = {
    "generator": (*_COMMON_KEYS, "generator", "write_volume", "seed", "params"),
    "file": (*_COMMON_KEYS, "path", "format", "volumes", "skip_malformed", "delimited"),
}


def _check_keys(cfg: dict, source: str) -> None:
    """A key the source does not read would be ignored without a word: refused, naming it."""
    allowed = WORKLOAD_KEYS.get(source)
    if allowed is None:
        return  # an unknown source is refused below
    for key in cfg:
        if key in allowed:
            continue
        other = next((s for s, keys in WORKLOAD_KEYS.items() if s != source and key in keys), None)
        if other is not None:
            raise WorkloadError(
                f"workload.{key} is read by {other} workloads only; this one is source={source}",
                f"drop workload.{key}",
            )
        hint = (
            f"a generator's parameter goes under workload.params (workload.params.{key}=...)"
            if source == "generator"
            else f"one of workload.{', workload.'.join(allowed)}"
        )
        raise WorkloadError(f"workload.{key}: no such workload setting", hint)


def _checked_generator_params(kind: str, params: dict) -> dict:
    """``params`` with each value checked against the kind of its default (a switch, a number),
    naming ``workload.params.KEY``: a string where a number belongs ended in float()'s message,
    with no key, and ``reshuffle=maybe`` ran as true without a word. Ranges stay the generator's
    to check (its messages name the parameter); null stays the generator's to judge."""
    defaults = default_params(kind)
    for key, value in params.items():
        default = defaults.get(key)
        if value is None or default is None or isinstance(default, str):
            continue
        kind_of = bool if isinstance(default, bool) else float  # an int default: the generator checks whole-ness
        checked_setting(value, f"workload.params.{key}", kind_of, example=default)
    return params


def _generated(kind: str, capacity: int, n_writes: int, seed: int, params: dict) -> Trace:
    """Generator ``kind``'s trace; a parameter out of its range is a one-line error naming the
    setting (the generator's message names its argument: ``wss_fraction must be in (0, 1]``)."""
    try:
        return generate(kind, capacity_blocks=capacity, n_writes=n_writes, seed=seed, **params)
    except GeneratorParameterError as exc:
        if exc.param == "capacity_blocks":  # its message says what else to change (n_files, ...)
            raise WorkloadError(exc.named("workload.capacity_blocks")) from None
        if exc.param not in params and exc.param not in default_params(kind):
            raise  # an argument the workload config does not set
        key, example = f"workload.params.{exc.param}", default_params(kind).get(exc.param)
        fix = f"give e.g. {key}={example}" if example is not None else f"change {key}"
        raise WorkloadError(exc.named(key), fix) from None


def load_workload(cfg: Mapping, cache_dir: str | Path | None = ".cache/dogi_ml/traces", log=print) -> Trace:
    """Build or load the trace a ``workload`` config describes (a key its source does not read is
    refused)."""
    cfg = dict(_plain(cfg))
    source = cfg.get("source", "generator")
    _check_keys(cfg, source)
    if source == "generator":
        kind = cfg.get("generator")
        if kind not in GENERATORS:
            raise WorkloadError(
                f"workload {cfg.get('name')!r}: unknown generator {kind!r}; known: {', '.join(sorted(GENERATORS))}"
            )
        cap = checked_setting(cfg.get("capacity_blocks"), "workload.capacity_blocks", int, minimum=1, example=262144)
        volume = checked_setting(cfg.get("write_volume", 16.0), "workload.write_volume", float, above=0, example=16)
        n_writes = int(round(float(volume) * cap))
        params = _checked_generator_params(kind, dict(cfg.get("params") or {}))
        seed = checked_setting(cfg.get("seed", 0), "workload.seed", int, minimum=0, example=0)
        key_src = json.dumps(
            {"generator": kind, "capacity": cap, "n_writes": n_writes, "seed": seed, "params": params}, sort_keys=True
        )
        key = hashlib.blake2b(key_src.encode(), digest_size=10).hexdigest()
        path = Path(cache_dir) / f"{cfg.get('name', kind)}-{key}.dtr" if cache_dir else None
        if path is not None and path.exists():
            trace = read_binary(path)
            trace.meta.setdefault("capacity_blocks", cap)
            return trace
        trace = _generated(kind, cap, n_writes, seed, params)
        trace.name = cfg.get("name", kind)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_trace(trace, path)
            # continue on the memory-mapped copy, as a later run would: a paper-scale trace's
            # arrays take ~18 GB, which the run's own state then cannot share the machine with
            del trace
            trace = read_binary(path)
            trace.meta.setdefault("capacity_blocks", cap)
        return trace
    if source == "file":
        path = cfg.get("path")
        fmt = cfg.get("format")
        if not path or path == "???":
            raise WorkloadError("workload=file needs workload.path=FILE (and workload.format=NAME)")
        if not fmt or fmt == "???":
            raise WorkloadError("workload=file needs workload.format=NAME (e.g. msr, alibaba, blkparse)")
        check_format(fmt, "workload.format")
        path = Path(path)
        if not path.exists():
            raise WorkloadError(f"trace file not found: {path} (set workload.path to an existing file)")
        if path.is_dir():
            raise WorkloadError(f"workload.path={path} is a directory", "set workload.path to a trace file")
        checked_setting(cfg.get("capacity_blocks"), "workload.capacity_blocks", int, minimum=1, nullable=True)
        volumes = cfg.get("volumes")
        opts = {
            "volumes": [volumes] if isinstance(volumes, (str, int)) else volumes,
            "skip_malformed": checked_setting(cfg.get("skip_malformed", False), "workload.skip_malformed", bool),
            "delimited": cfg.get("delimited"),
        }
        cached = None
        if cache_dir:
            key = content_hash(path, {"format": fmt, **opts})
            cached = Path(cache_dir) / f"{path.stem}-{key[:20]}.dtr"
            if cached.exists():
                trace = read_binary(cached)
                for message in input_warnings(trace.meta):  # what the first read reported
                    warnings.warn(message, TraceWarning, stacklevel=2)
                _apply_capacity(trace, cfg)
                return trace
        trace = read_trace(path, fmt, **opts)  # warns of skipped lines and backward stamps
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            write_trace(trace, cached)
            del trace  # the memory-mapped copy, as a later run would have
            trace = read_binary(cached)
        _apply_capacity(trace, cfg)
        return trace
    raise WorkloadError(f"workload {cfg.get('name')!r}: unknown source {source!r}; use generator or file")


def _apply_capacity(trace: Trace, cfg: dict) -> None:
    if cfg.get("capacity_blocks") is not None:  # checked positive by load_workload
        trace.meta["capacity_blocks"] = int(cfg["capacity_blocks"])
