"""The binary trace commands: ``ingest`` (a trace file -> the binary format and its statistics;
``split=true``: a multi-volume trace -> a fleet, one ``.dtr`` per volume and ``fleet.parquet``),
``fleet`` (a synthetic fleet, ``conf/fleet.yaml``), ``stats`` (a binary trace's header and
statistics) and ``print`` (its requests as text)."""

from __future__ import annotations

import warnings
from pathlib import Path

from dogi_ml.errors import UsageError, checked_setting


def _given(cfg, key: str):
    """``cfg[key]``, or None when it is unset (``???``) or null."""
    from omegaconf import OmegaConf

    if key not in cfg or OmegaConf.is_missing(cfg, key):
        return None
    value = cfg[key]
    return None if value in (None, "???") else value


def _input_file(cfg, what: str) -> Path:
    """``path=`` as an existing file (not a directory); a UsageError naming the fix otherwise."""
    path = _given(cfg, "path")
    if path is None:
        raise UsageError("no path= given", f"give path=FILE ({what})")
    path = Path(str(path))
    if path.is_dir():
        raise UsageError(f"path={path} is a directory", f"give path=FILE ({what}), not a directory")
    if not path.exists():
        raise FileNotFoundError(f"trace file not found: {path}")
    return path


def _mapping(cfg, key: str, example: str) -> dict | None:
    """``key=`` as a plain dict (None when not given); a scalar or a list is refused by key."""
    from omegaconf import DictConfig, OmegaConf

    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, DictConfig):
        raise UsageError(f"{key}={value!r} is not a mapping", f"give {key}={example}")
    return OmegaConf.to_container(value, resolve=True)


def _delimited(cfg) -> dict | None:
    """``delimited=``, which only ``format=delimited`` reads (a preset has its own columns)."""
    delimited = _mapping(cfg, "delimited", "{columns: {ts: 0, offset: 1, size: 2, op: 3}, units: {...}, op_map: {...}}")
    if delimited is not None and str(cfg.format) != "delimited":
        raise UsageError(
            f"delimited= is read only with format=delimited, not format={cfg.format}",
            "drop delimited=, or give format=delimited with the full mapping",
        )
    return delimited or None


def _volume_list(cfg) -> list | None:
    from omegaconf import OmegaConf

    if not cfg.volumes:
        return None
    return list(cfg.volumes) if OmegaConf.is_list(cfg.volumes) else [cfg.volumes]


def run_ingest(cfg, out_dir: Path) -> Path:
    """Convert ``path`` (``format``) into ``out``; returns the binary trace's path (with
    ``split=true``: the fleet manifest's)."""

    from dogi_ml.report import print_stats
    from dogi_ml.traces.binfmt import ingest
    from dogi_ml.traces.readers import check_format, input_warnings
    from dogi_ml.traces.trace import TraceWarning

    if _given(cfg, "path") is None or _given(cfg, "format") is None:
        raise UsageError(
            "ingest needs path=FILE and format=NAME",
            "e.g. python -m dogi_ml ingest path=trace.csv format=msr out=data/",
        )
    check_format(cfg.format)  # by its key, before the input is hashed or anything is written
    split = checked_setting(cfg.get("split", False), "split", bool)
    if split:
        return _run_split(cfg)
    path = _input_file(cfg, "the trace to convert")
    if Path(str(cfg.out)).exists() and not Path(str(cfg.out)).is_dir():
        raise UsageError(
            f"out={cfg.out} is a file", "give out=DIR, a directory for the binary trace and its statistics"
        )
    if not isinstance(cfg.skip_malformed, bool):
        raise UsageError(f"skip_malformed={cfg.skip_malformed!r} is not true or false", "give skip_malformed=true")
    opts = {"skip_malformed": cfg.skip_malformed}
    if cfg.volumes:
        opts["volumes"] = _volume_list(cfg)
    delimited = _delimited(cfg)
    if delimited:
        opts["delimited"] = delimited
    with warnings.catch_warnings():  # the reader's warnings print below, also for a cached result
        warnings.simplefilter("ignore", TraceWarning)
        binary, stats = ingest(path, cfg.format, cfg.out, **opts)
    replaced = stats.pop("replaced", None)  # a note, not a statistic
    print_stats(stats, title=f"ingested {path}")
    if replaced:
        print(f"note: {replaced}")
    for message in input_warnings({**stats, "source": str(path)}):
        print(f"warning: {message}")
    print(f"binary trace: {binary}")
    print(f"statistics:   {Path(cfg.out) / (Path(binary).stem + '.stats.json')}")
    return Path(binary)


def _run_split(cfg) -> Path:
    """``ingest split=true``: ``path`` (a multi-volume trace or a directory of per-volume files)
    -> ``out/volumes/<id>.dtr`` and ``out/fleet.parquet``; prints the fleet's totals."""

    from dogi_ml.traces.fleet import fleet_metadata, read_fleet, split_trace
    from dogi_ml.traces.trace import TraceWarning

    path = Path(str(_given(cfg, "path")))
    if not path.exists():
        raise FileNotFoundError(f"trace file not found: {path}")
    out = Path(str(cfg.out))
    if out.exists() and not out.is_dir():
        raise UsageError(f"out={out} is a file", "give out=DIR, a directory for the fleet (volumes/ and fleet.parquet)")
    skip = checked_setting(cfg.skip_malformed, "skip_malformed", bool)
    block_mb = checked_setting(cfg.get("block_mb", 32), "block_mb", minimum=1, example=32)
    spill_mb = checked_setting(cfg.get("spill_mb", 256), "spill_mb", minimum=1, example=256)
    delimited = _delimited(cfg)
    with warnings.catch_warnings(record=True) as caught:  # printed below as one line each
        warnings.simplefilter("always", TraceWarning)
        manifest = split_trace(
            path,
            str(cfg.format),
            out,
            volumes=_volume_list(cfg),
            skip_malformed=skip,
            delimited=delimited,
            block_bytes=block_mb << 20,
            spill_bytes=spill_mb << 20,
        )
    rows = read_fleet(manifest)
    meta = fleet_metadata(manifest)
    _print_fleet(rows, meta, f"split {path}")
    for w in caught:
        print(f"warning: {w.message}")
    empty = meta.get("volumes_without_requests_count", 0)
    if empty:
        print(
            f"warning: {empty} volume(s) named in the trace hold no read, write or trim request "
            f"(only zero-length requests or flushes) and have no .dtr, e.g. {meta['volumes_without_requests'][:5]}"
        )
    print(f"fleet manifest: {manifest}")
    return manifest


def _print_fleet(rows, meta: dict, title: str) -> None:
    from dogi_ml.report import print_stats

    write_blocks = sum(r.write_blocks for r in rows)
    wss = sum(r.working_set_blocks for r in rows)
    totals = {
        "volumes": len(rows),
        "requests": sum(r.requests for r in rows),
        "write_blocks": write_blocks,
        "working_set_blocks": wss,
        "traffic_over_wss": write_blocks / wss if wss else 0.0,
        "read_requests": sum(r.read_requests for r in rows),
        "largest volume (requests)": max(r.requests for r in rows),
    }
    totals.update({k: meta[k] for k in ("skipped_lines", "zero_length_requests", "flush_requests") if meta.get(k)})
    print_stats(totals, title=title)


def run_fleet(cfg, out_dir: Path) -> Path:
    """``fleet``: write a synthetic fleet (``conf/fleet.yaml``) to ``out``; returns its manifest."""

    from dogi_ml.traces.fleet import FleetSpec, fleet_metadata, generate_fleet, read_fleet

    n_volumes = checked_setting(cfg.n_volumes, "n_volumes", minimum=1, example=100)
    seed = checked_setting(cfg.seed, "seed", minimum=0, example=0)
    csv = checked_setting(cfg.csv, "csv", bool)
    out = Path(str(cfg.out))
    if out.exists() and not out.is_dir():
        raise UsageError(f"out={out} is a file", "give out=DIR, a directory for the fleet")
    if (out / "fleet.parquet").exists():
        raise UsageError(f"out={out} already holds a fleet", "give a new directory, or delete the old fleet first")
    spec = FleetSpec.from_mapping(
        _mapping(cfg, "spec", "{wss_median: 4096, traffic_median: 4.0} or spec.KEY=VALUE") or {}
    )
    manifest = generate_fleet(out, n_volumes, seed, spec, csv=csv)
    _print_fleet(read_fleet(manifest), fleet_metadata(manifest), f"synthetic fleet ({n_volumes} volumes, seed {seed})")
    if csv:
        print(f"alibaba csv:    {out / 'fleet.alibaba.csv'}")
    print(f"fleet manifest: {manifest}")
    return manifest


def _load_binary(cfg):
    from dogi_ml.traces.binfmt import read_binary

    return read_binary(_input_file(cfg, "a .dtr trace written by `python -m dogi_ml ingest`"))


def run_stats(cfg, out_dir: Path) -> dict:
    """Print a binary trace's header and statistics; write them to ``stats.json``."""
    from dogi_ml.pipeline.simulate import write_json
    from dogi_ml.report import print_stats
    from dogi_ml.traces.binfmt import read_header
    from dogi_ml.traces.readers import input_warnings

    trace = _load_binary(cfg)
    header = read_header(cfg.path)
    stats = trace.stats()
    print_stats(
        {**{f"header.{k}": v for k, v in header.items() if not isinstance(v, (dict, list))}, **stats},
        title=str(cfg.path),
    )
    for message in input_warnings(trace.meta):
        print(f"warning: {message}")
    out = out_dir / "stats.json"
    write_json({"header": header, "stats": stats}, out)
    print(f"json: {out}")
    return stats


def run_print(cfg, out_dir: Path) -> None:
    """Print the first ``head`` requests of a binary trace, tab-separated."""
    from dogi_ml.traces.trace import OP_NAMES

    head = cfg.head
    if isinstance(head, bool) or not isinstance(head, int) or head < 0:
        raise UsageError(
            f"head={head!r} is not a whole number >= 0", "give the number of requests to print, e.g. head=20"
        )
    trace = _load_binary(cfg)
    n = min(head, trace.n_requests)
    print("ts_us\tvolume\top\tlba\tnblocks")
    for i in range(n):
        print(
            f"{trace.ts_us[i]}\t{trace.volumes[trace.volume[i]]}\t{OP_NAMES.get(int(trace.op[i]), '?')}"
            f"\t{trace.lba[i]}\t{trace.nblocks[i]}"
        )
    if n < trace.n_requests:
        print(f"... {trace.n_requests - n} more requests (head={cfg.head})")
