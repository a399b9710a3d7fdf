"""The binary trace commands: ``ingest`` (a trace file -> the binary format and its statistics),
``stats`` (a binary trace's header and statistics) and ``print`` (its requests as text)."""

from __future__ import annotations

from pathlib import Path

from dogi_ml.errors import UsageError


def run_ingest(cfg, out_dir: Path) -> Path:
    """Convert ``path`` (``format``) into ``out``; returns the binary trace's path."""
    from omegaconf import OmegaConf

    from dogi_ml.report import print_stats
    from dogi_ml.traces.binfmt import ingest

    if cfg.path in (None, "???") or cfg.format in (None, "???"):
        raise UsageError(
            "ingest needs path=FILE and format=NAME",
            "e.g. python -m dogi_ml ingest path=trace.csv format=msr out=data/",
        )
    opts = {"skip_malformed": bool(cfg.skip_malformed)}
    if cfg.volumes:
        opts["volumes"] = list(cfg.volumes)
    if cfg.delimited:
        opts["delimited"] = OmegaConf.to_container(cfg.delimited, resolve=True)
    binary, stats = ingest(cfg.path, cfg.format, cfg.out, **opts)
    print_stats(stats, title=f"ingested {cfg.path}")
    if stats.get("skipped_lines"):
        print(f"skipped {stats['skipped_lines']} malformed line(s)")
    print(f"binary trace: {binary}")
    print(f"statistics:   {Path(cfg.out) / (Path(binary).stem + '.stats.json')}")
    return Path(binary)


def _load_binary(cfg):
    from dogi_ml.traces.binfmt import read_binary

    if cfg.path in (None, "???"):
        raise UsageError("no trace given", "give path=FILE.dtr (a trace written by `python -m dogi_ml ingest`)")
    return read_binary(cfg.path)


def run_stats(cfg, out_dir: Path) -> dict:
    """Print a binary trace's header and statistics; write them to ``stats.json``."""
    from dogi_ml.pipeline.simulate import write_json
    from dogi_ml.report import print_stats
    from dogi_ml.traces.binfmt import read_header

    header = read_header(cfg.path) if cfg.path not in (None, "???") else None
    trace = _load_binary(cfg)
    stats = trace.stats()
    print_stats(
        {**{f"header.{k}": v for k, v in header.items() if not isinstance(v, (dict, list))}, **stats},
        title=str(cfg.path),
    )
    out = out_dir / "stats.json"
    write_json({"header": header, "stats": stats}, out)
    print(f"json: {out}")
    return stats


def run_print(cfg, out_dir: Path) -> None:
    """Print the first ``head`` requests of a binary trace, tab-separated."""
    from dogi_ml.traces.trace import OP_NAMES

    trace = _load_binary(cfg)
    n = min(int(cfg.head), trace.n_requests)
    print("ts_us\tvolume\top\tlba\tnblocks")
    for i in range(n):
        print(
            f"{trace.ts_us[i]}\t{trace.volumes[trace.volume[i]]}\t{OP_NAMES.get(int(trace.op[i]), '?')}"
            f"\t{trace.lba[i]}\t{trace.nblocks[i]}"
        )
    if n < trace.n_requests:
        print(f"... {trace.n_requests - n} more requests (head={cfg.head})")
