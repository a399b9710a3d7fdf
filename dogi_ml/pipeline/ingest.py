"""The binary trace commands: ``ingest`` (a trace file -> the binary format and its statistics),
``stats`` (a binary trace's header and statistics) and ``print`` (its requests as text)."""

from __future__ import annotations

import warnings
from pathlib import Path

from dogi_ml.errors import UsageError


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


def run_ingest(cfg, out_dir: Path) -> Path:
    """Convert ``path`` (``format``) into ``out``; returns the binary trace's path."""
    from omegaconf import OmegaConf

    from dogi_ml.report import print_stats
    from dogi_ml.traces.binfmt import ingest
    from dogi_ml.traces.readers import input_warnings
    from dogi_ml.traces.trace import TraceWarning

    if _given(cfg, "path") is None or _given(cfg, "format") is None:
        raise UsageError(
            "ingest needs path=FILE and format=NAME",
            "e.g. python -m dogi_ml ingest path=trace.csv format=msr out=data/",
        )
    path = _input_file(cfg, "the trace to convert")
    if Path(str(cfg.out)).exists() and not Path(str(cfg.out)).is_dir():
        raise UsageError(
            f"out={cfg.out} is a file", "give out=DIR, a directory for the binary trace and its statistics"
        )
    if not isinstance(cfg.skip_malformed, bool):
        raise UsageError(f"skip_malformed={cfg.skip_malformed!r} is not true or false", "give skip_malformed=true")
    opts = {"skip_malformed": cfg.skip_malformed}
    if cfg.volumes:
        opts["volumes"] = list(cfg.volumes) if OmegaConf.is_list(cfg.volumes) else [cfg.volumes]
    if cfg.delimited:
        opts["delimited"] = OmegaConf.to_container(cfg.delimited, resolve=True)
    with warnings.catch_warnings():  # the reader's warnings print below, also for a cached result
        warnings.simplefilter("ignore", TraceWarning)
        binary, stats = ingest(path, cfg.format, cfg.out, **opts)
    print_stats(stats, title=f"ingested {path}")
    for message in input_warnings({**stats, "source": str(path)}):
        print(f"warning: {message}")
    print(f"binary trace: {binary}")
    print(f"statistics:   {Path(cfg.out) / (Path(binary).stem + '.stats.json')}")
    return Path(binary)


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
