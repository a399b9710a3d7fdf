"""``python -m dogi_ml cache info|clear``: what the on-disk caches hold, and pruning them.

Two caches:

* kernels (``$DOGI_ML_KERNEL_CACHE``, default ``~/.cache/dogi_ml/kernels``): the specialised
  simulator loops (``loop_<key>.py`` and Numba's cache of them in ``__pycache__/``), Numba's cache
  of the project's own ``cache=True`` functions (``numba/<module>-<path hash>/``) and the memo of
  module import records that keys them (see :mod:`dogi_ml.numba_cache`). An edit to a source
  gives new keys; the old entries stay until cleared, which is what ``clear --older-than`` is for.
* traces (``$DOGI_ML_CACHE/traces``, default ``.cache/dogi_ml/traces`` under the working
  directory, as the commands' ``cache_dir`` config): generated and converted traces (``*.dtr``),
  oracle annotations (``annotations/annot-*.npz``) and NoDaP search journals
  (``nodap/search-*.jsonl``: every simulation of a search, so a stopped search resumes).

Entries are dated by their newest file, i.e. when they were last compiled or written; a cache
hit does not change that, so ``--older-than`` may drop an entry still in use (it is rebuilt).

Only files these caches write are ever removed; anything else found there is listed as unknown
and left alone. Everything here is rebuilt on demand, so clearing is always safe (the next run
compiles or generates again).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from dogi_ml.numba_cache import imports_store_path, kernel_cache_dir

CACHES = ("kernels", "traces")
KINDS = {
    "loop": "specialised loops",
    "numba": "Numba, project functions",
    "records": "import records",
    "trace": "traces (.dtr)",
    "annotation": "annotations",
    "nodap": "NoDaP search journals",
    "partial": "unfinished writes",
}


def trace_cache_dir() -> Path:
    """The trace cache the commands use by default: ``$DOGI_ML_CACHE/traces`` (default
    ``.cache/dogi_ml/traces``, relative to the working directory)."""
    return Path(os.environ.get("DOGI_ML_CACHE", ".cache/dogi_ml")) / "traces"


def nodap_journal(writes, capacity: int, sim_config, root: str | Path | None = None) -> Path:
    """Where NoDaP's offline search on these writes and settings keeps its journal (every
    simulation's result, :func:`dogi_ml.oracles.nodap.search`): ``nodap/search-<fingerprint>.jsonl``
    under the trace cache (``root``, default :func:`trace_cache_dir`)."""
    from dogi_ml.oracles.nodap import search_fingerprint

    base = trace_cache_dir() if root is None else Path(root)
    return base / "nodap" / f"search-{search_fingerprint(writes, capacity, sim_config)}.jsonl"


def cache_dir(cache: str) -> Path:
    if cache == "kernels":
        return kernel_cache_dir()
    if cache == "traces":
        return trace_cache_dir()
    raise ValueError(f"unknown cache {cache!r}; use one of {', '.join(CACHES)}")


@dataclass
class Entry:
    """One removable unit: a loop and its compiled forms, one Numba function's index and data
    files, one trace, ..."""

    kind: str
    name: str
    files: list[Path] = field(default_factory=list)

    def __post_init__(self):
        stats = []
        for f in self.files:
            try:
                stats.append(f.stat())
            except FileNotFoundError:
                pass  # removed by another process since the scan
        self.size = sum(s.st_size for s in stats)
        # the newest file: when the entry was last (re)written
        self.mtime = max((s.st_mtime for s in stats), default=0.0)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()} if root.is_dir() else set()


def scan(cache: str, root: Path | None = None) -> tuple[list[Entry], list[Path]]:
    """The entries of ``cache`` (under ``root``, default its configured folder) and the files
    found there that it did not write (never removed)."""
    root = cache_dir(cache) if root is None else Path(root)
    files = _files(root)
    entries: list[Entry] = []

    def take(kind: str, name: str, members: Iterable[Path]) -> None:
        members = sorted({m for m in members if m in files})
        if members:
            files.difference_update(members)
            entries.append(Entry(kind, name, members))

    if cache == "kernels":
        pycache = root / "__pycache__"
        for f in sorted(root.glob("loop_*.py")):
            take("loop", f.stem, [f, *pycache.glob(f"{f.stem}.*")])
        for f in sorted(root.glob("loop_*.tmp")):
            take("partial", f.name, [f])
        store = root / imports_store_path().name
        take("records", store.name, [store, *root.glob(f"{store.name}.*.tmp")])
        numba_root = root / "numba"
        for index in sorted(numba_root.glob("*/*.nbi")):
            base = index.name[: -len(".nbi")]
            take("numba", f"{index.parent.name}/{base}", [index, *index.parent.glob(f"{base}.*")])
        for f in sorted(f for f in files if numba_root in f.parents):
            take("numba", f"{f.parent.name}/{f.name}", [f])  # data without an index, tmp files
    elif cache == "traces":
        for f in sorted(root.glob("*.dtr")):
            take("trace", f.name, [f])
        for f in sorted(root.glob("*.dtr*.tmp")):
            take("partial", f.name, [f])
        for f in sorted((root / "annotations").glob("annot-*.npz")):
            take("partial" if f.name.endswith(".tmp.npz") else "annotation", f"annotations/{f.name}", [f])
        for f in sorted((root / "nodap").glob("search-*.jsonl")):
            take("nodap", f"nodap/{f.name}", [f])
    else:
        raise ValueError(f"unknown cache {cache!r}; use one of {', '.join(CACHES)}")
    return entries, sorted(files)


def info(caches: Iterable[str] = CACHES, oldest: int = 5) -> dict:
    """Per cache: folder, entries and bytes per kind, totals, the ``oldest`` entries by last
    write, and unknown files."""
    out = {}
    for cache in caches:
        root = cache_dir(cache)
        entries, unknown = scan(cache, root)
        kinds = {}
        for e in entries:
            k = kinds.setdefault(e.kind, {"entries": 0, "files": 0, "bytes": 0})
            k["entries"] += 1
            k["files"] += len(e.files)
            k["bytes"] += e.size
        out[cache] = {
            "path": str(root.resolve()),
            "exists": root.is_dir(),
            "kinds": kinds,
            "entries": len(entries),
            "files": sum(len(e.files) for e in entries),
            "bytes": sum(e.size for e in entries),
            "oldest": [
                {"kind": e.kind, "name": e.name, "files": len(e.files), "bytes": e.size, "mtime": e.mtime}
                for e in sorted(entries, key=lambda e: e.mtime)[:oldest]
            ],
            "unknown": [str(p) for p in unknown],
        }
    return out


def clear(caches: Iterable[str] = CACHES, older_than_days: float | None = None, dry_run: bool = False) -> dict:
    """Remove the entries of ``caches`` (only those last written more than ``older_than_days``
    ago, if given). Returns, per cache, what was (or, with ``dry_run``, would be) removed."""
    if older_than_days is not None and not older_than_days >= 0:  # NaN too
        raise ValueError(f"--older-than must be >= 0 days, got {older_than_days}")
    cutoff = None if older_than_days is None else time.time() - older_than_days * 86400.0
    out = {}
    for cache in caches:
        root = cache_dir(cache)
        entries, unknown = scan(cache, root)
        doomed = [e for e in entries if cutoff is None or e.mtime < cutoff]
        if not dry_run:
            for e in doomed:
                for f in e.files:
                    try:
                        f.unlink()
                    except FileNotFoundError:
                        pass  # another process removed it meanwhile
            _remove_empty_dirs(cache, root)
        out[cache] = {
            "path": str(root.resolve()),
            "removed_entries": len(doomed),
            "removed_files": sum(len(e.files) for e in doomed),
            "removed_bytes": sum(e.size for e in doomed),
            "kept_entries": len(entries) - len(doomed),
            "unknown": [str(p) for p in unknown],
        }
    return out


def _remove_empty_dirs(cache: str, root: Path) -> None:
    """Drop the sub-folders a clear emptied (only those the cache creates)."""
    dirs = (
        [*(root / "numba").glob("*/"), root / "numba", root / "__pycache__"]
        if cache == "kernels"
        else [root / "annotations", root / "nodap"]
    )
    for d in dirs:
        try:
            d.rmdir()  # only if empty
        except OSError:
            pass


# -- command line ----------------------------------------------------------------------------
def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def _when(t: float) -> str:
    age = max(0.0, time.time() - t)
    ago = f"{age / 86400:.1f} d" if age >= 86400 else f"{age / 3600:.1f} h" if age >= 3600 else f"{age / 60:.0f} min"
    return f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(t))} ({ago} ago)"


_WHERE = {
    "kernels": "$DOGI_ML_KERNEL_CACHE moves it",
    "traces": "$DOGI_ML_CACHE/traces; relative to the working directory by default",
}


def print_info(report: dict, file=None) -> None:
    file = file or sys.stdout
    for cache, r in report.items():
        print(f"{cache} cache: {r['path']}  ({_WHERE[cache]})", file=file)
        if not r["exists"]:
            print("  empty (no such folder)", file=file)
            continue
        for kind, k in sorted(r["kinds"].items(), key=lambda kv: list(KINDS).index(kv[0])):
            print(
                f"  {KINDS[kind]:<26} {k['entries']:>6} entries {k['files']:>7} files {_size(k['bytes']):>11}",
                file=file,
            )
        print(f"  {'total':<26} {r['entries']:>6} entries {r['files']:>7} files {_size(r['bytes']):>11}", file=file)
        if r["oldest"]:
            print("  oldest entries (last written):", file=file)
            for e in r["oldest"]:
                print(
                    f"    {_when(e['mtime'])}  {e['kind']:<10} {e['name']}  ({e['files']} files, {_size(e['bytes'])})",
                    file=file,
                )
        if r["unknown"]:
            print(
                f"  {len(r['unknown'])} unknown file(s), never removed: "
                + ", ".join(r["unknown"][:5])
                + (" ..." if len(r["unknown"]) > 5 else ""),
                file=file,
            )


def print_clear(report: dict, dry_run: bool, file=None) -> None:
    file = file or sys.stdout
    verb = "would remove" if dry_run else "removed"
    for cache, r in report.items():
        print(
            f"{cache} cache: {r['path']}: {verb} {r['removed_entries']} entries ({r['removed_files']} files, "
            f"{_size(r['removed_bytes'])}); {r['kept_entries']} entries kept",
            file=file,
        )
        if r["unknown"]:
            print(f"  {len(r['unknown'])} unknown file(s) left alone", file=file)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m dogi_ml cache",
        description="Show or prune the kernel cache (compiled code) and the trace cache.",
    )
    sub = p.add_subparsers(dest="action", required=True, metavar="{info,clear}")
    for name, text in (
        ("info", "sizes, counts and oldest entries of the caches"),
        ("clear", "remove cache entries (everything, or those older than --older-than)"),
    ):
        s = sub.add_parser(name, help=text, description=text)
        s.add_argument("which", nargs="?", default="all", choices=(*CACHES, "all"), help="which cache (default: all)")
        s.add_argument("--json", action="store_true", help="print the report as JSON")
        if name == "info":
            s.add_argument("--oldest", type=int, default=5, metavar="N", help="list the N oldest entries (default 5)")
        else:
            s.add_argument(
                "--older-than",
                type=float,
                default=None,
                metavar="DAYS",
                help="only entries last written more than DAYS days ago",
            )
            s.add_argument("--dry-run", action="store_true", help="show what would be removed, remove nothing")
    return p


def main(argv: list[str]) -> int:
    """``cache info|clear [kernels|traces|all] [options]``; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return int(exc.code or 0)
    caches = CACHES if args.which == "all" else (args.which,)
    if args.action == "info":
        if args.oldest < 0:
            print(f"error: --oldest must be >= 0, got {args.oldest}", file=sys.stderr)
            return 2
        report = info(caches, oldest=args.oldest)
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print_info(report)
        return 0
    try:
        report = clear(caches, older_than_days=args.older_than, dry_run=args.dry_run)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_clear(report, args.dry_run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
