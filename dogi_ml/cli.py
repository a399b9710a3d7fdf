"""``python -m dogi_ml <command> [hydra overrides]``: a thin dispatcher over ``dogi_ml.pipeline``.

Every Hydra command composes ``conf/<command>.yaml``, runs its body from the pipeline, prints a
short human summary and writes machine-readable JSON (its path is printed). Configs are found
relative to the package, outputs go under the working directory. ``stage``, ``cache`` and
``report`` take plain arguments instead of Hydra overrides.

User errors (:class:`dogi_ml.errors.DogiMLError`, a missing input file) print one line,
``error: <problem> -- <fix>``, and exit with status 2 (or the error's own ``exit_status``: 3 for
a bad input file, dogi_ml/zns/exit_codes.py); any other exception is a bug and keeps its traceback.

``--quiet`` / ``-q`` before the command silences progress bars and chatty logging for the process
and the jobs it starts (it sets ``DOGI_ML_QUIET=1``); summaries and JSON paths still print.

Run as a program (``python -m dogi_ml``, ``dogi-ml``), a command that computes first holds the
float libraries to one code path (:func:`dogi_ml.determinism.pin_process`: by default the same
bits on every x86-64 CPU; ``DOGI_ML_NUMERICS=avx2`` or ``native`` choose faster ones), which may
run the command line again once with the pinned environment; its jobs inherit it.
``main(argv)`` called with a list, in a process of the caller's, leaves that process as it is.
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings

from dogi_ml.callbacks import failures
from dogi_ml.determinism import pin_process
from dogi_ml.errors import DogiMLError, UsageError
from dogi_ml.pipeline.common import CONF_DIR, available, output_dir

__all__ = ["CONF_DIR", "COMMANDS", "available", "main", "usage"]

COMMANDS = {
    "train": "learn block lifetimes: +workload=NAME [model=NAME]; logs to MLflow",
    "oracle": "offline oracles: +workload=NAME [oracle.kind=nodap|opmin|segment|percentile|kmeans] [oracle.max_groups=10]",
    "simulate": "run placement schemes over a workload: +workload=NAME policy=NAME sim.victim=NAME",
    "ingest": "convert a trace to the binary format: path=FILE format=NAME out=DIR [split=true: one .dtr per volume + fleet.parquet]",
    "fleet": "write a synthetic fleet of volumes (.dtr each + fleet.parquet): out=DIR n_volumes=N seed=S [csv=true]",
    "stats": "show a binary trace's header and statistics: path=FILE.dtr",
    "print": "print a binary trace's requests as text: path=FILE.dtr [head=N]",
    "export": "deploy a model: int8 C header, ONNX, manifest: +workload=NAME [model=NAME] [export.run_id=ID]",
    "bench": "measure simulator and annotation throughput",
    "replay": "replay a workload onto a zoned device (ZNS or file-emulated): +workload=NAME device=file:PATH|/dev/...",
    "stage": "one DVC pipeline stage: stage NAME [params=params.yaml] [out=data/dvc] (see dvc.yaml)",
    "cache": "show or empty the on-disk caches (compiled kernels, traces, annotations): cache info|clear [--help]",
    "report": "build docs/reproduction.md from docs/claims.yaml and docs/results: report reproduction [check=true]; "
    "redraw every figure of docs/results from its JSON: report figures [check=true]",
    "study": "every scheme on every volume of a fleet: fleet=PATH policy=a,b,c [filter=NAME] [only=failed] (docs/fleets.md)",
}


# -- the error guard -----------------------------------------------------------------------------
def _raised_by_project(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc``'s traceback runs dogi_ml's own code."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "")
    return module == "dogi_ml" or module.startswith("dogi_ml.")


def one_line(kind: str, text: str) -> str:
    """``<kind>: <text>`` on one line (a message's own line breaks become spaces)."""
    return f"{kind}: " + " ".join(text.split("\n"))


def _missing_value(exc: BaseException) -> bool:
    """An omegaconf ``???`` setting read before the user gave it (e.g. ``ingest`` without ``path=``)."""
    try:
        from omegaconf.errors import MissingMandatoryValue
    except ImportError:
        return False
    return isinstance(exc, MissingMandatoryValue)


#: numpy's refusals of an array beyond any machine's memory (a size setting of 1e15)
_TOO_BIG = ("array is too big", "Maximum allowed size exceeded", "Maximum allowed dimension exceeded")


def _memory_fix() -> str:
    """What to lower when a run ran out of memory: this machine's memory and the run's own
    command-line settings (Hydra's overrides of this job), one of which asked for too much."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        machine = f"this machine has {total:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        machine = "the machine has too little memory"
    try:
        from hydra.core.hydra_config import HydraConfig

        given = list(HydraConfig.get().overrides.task)
    except (ImportError, ValueError):  # not in a Hydra job
        given = []
    settings = f"; the settings given: {' '.join(given)}" if given else ""
    return f"{machine}: lower the size setting that asks for more{settings}"


def user_error_line(exc: BaseException) -> str | None:
    """``error: <problem> -- <fix>`` for an error the user can fix; None for a bug."""
    if isinstance(exc, DogiMLError):
        text = str(exc)
    elif isinstance(exc, FileNotFoundError):
        text = f"{exc} -- check the path (relative paths start from {os.getcwd()})"
    elif isinstance(exc, (IsADirectoryError, NotADirectoryError, PermissionError, FileExistsError)) and exc.filename:
        # a directory where a file is expected (or the reverse), a path we may not read or write
        text = (
            f"{exc.filename}: {exc.strerror.lower()} -- check the path: an input must be a file you can read, "
            "an output (out=) a directory you can write"
        )
    elif isinstance(exc, MemoryError) or (isinstance(exc, ValueError) and str(exc).startswith(_TOO_BIG)):
        # a size setting raised past this machine (sim.capacity_blocks=1.9e9 wants 8 GiB per
        # array): the allocation's own message, and the settings the user gave, which hold it
        text = f"out of memory: {exc} -- {_memory_fix()}"
    elif _missing_value(exc):
        key = getattr(exc, "full_key", None) or "a required setting"
        text = f"no value for {key} (the command needs it) -- give it on the command line, e.g. {key}=VALUE"
    elif isinstance(exc, ValueError) and _raised_by_project(exc):
        # Bad input that a module still reports with a plain ValueError (the message names the
        # fix); a ValueError from inside a library is a bug here and keeps its traceback.
        text = str(exc)
    else:
        return None
    return one_line("error", text)


def _fail(exc: BaseException) -> None:
    print(user_error_line(exc), file=sys.stderr)
    # 2 unless the error carries a status of its own: 3 for a bad input file, and the others of
    # dogi_ml/zns/exit_codes.py (docs/deployment.md, "Exit codes")
    raise SystemExit(getattr(exc, "exit_status", None) or 2)


def _guarded(body, *args):
    try:
        return body(*args)
    except Exception as exc:  # noqa: BLE001 - user errors become one line; bugs propagate
        if user_error_line(exc) is None:
            raise
        _fail(exc)


def show_project_warnings() -> None:
    """Warnings raised from dogi_ml's own code print as one ``warning: ...`` line, as user errors
    do, instead of Python's file, line number and source line; other warnings keep that format."""
    default = warnings.showwarning
    if getattr(default, "dogi_ml", False):
        return  # installed by an earlier call in this process
    root = os.path.dirname(os.path.abspath(__file__)) + os.sep

    def show(message, category, filename, lineno, file=None, line=None):
        if os.path.abspath(filename).startswith(root):
            print(one_line("warning", str(message)), file=file or sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)

    show.dogi_ml = True
    warnings.showwarning = show


# -- Hydra commands: each body lives in dogi_ml.pipeline -------------------------------------------
def _train(cfg):
    from dogi_ml.pipeline.train import run_train

    return run_train(cfg, output_dir())


def _oracle(cfg):
    from dogi_ml.pipeline.oracle import run_oracle

    run_oracle(cfg, output_dir())


def _simulate(cfg):
    from dogi_ml.pipeline.simulate import run_simulate

    return run_simulate(cfg, output_dir())


def _ingest(cfg):
    from dogi_ml.pipeline.ingest import run_ingest

    run_ingest(cfg, output_dir())


def _fleet(cfg):
    from dogi_ml.pipeline.ingest import run_fleet

    run_fleet(cfg, output_dir())


def _stats(cfg):
    from dogi_ml.pipeline.ingest import run_stats

    run_stats(cfg, output_dir())


def _print(cfg):
    from dogi_ml.pipeline.ingest import run_print

    run_print(cfg, output_dir())


def _export(cfg):
    from dogi_ml.pipeline.export import run_export

    return run_export(cfg, output_dir())


def _replay(cfg):
    from dogi_ml.pipeline.replay import run_replay

    return run_replay(cfg, output_dir())


def _bench(cfg):
    from dogi_ml.bench import run_bench

    run_bench(cfg, output_dir())


_BODIES = {
    "train": _train,
    "oracle": _oracle,
    "simulate": _simulate,
    "ingest": _ingest,
    "fleet": _fleet,
    "stats": _stats,
    "print": _print,
    "export": _export,
    "bench": _bench,
    "replay": _replay,
}


def _hydra_task(command: str):
    import hydra

    body = _BODIES[command]

    def task(cfg):
        from hydra.core.hydra_config import HydraConfig

        from dogi_ml.pipeline.common import check_run_config, kept_victim_note

        # this job's overrides in command-line order (a sweep job's own, its sweep values included)
        overrides = list(HydraConfig.get().overrides.task)
        _guarded(check_run_config, command, cfg, overrides)
        if command in ("simulate", "replay"):
            note = _guarded(kept_victim_note, cfg, overrides)
            if note:
                print(note, file=sys.stderr)
        return _guarded(body, cfg)

    task.__name__ = body.__name__.lstrip("_")
    return hydra.main(config_path=CONF_DIR, config_name=command, version_base="1.3")(task)


SWEEP_FLAGS = ("-m", "--multirun")
#: the most job compositions a sweep's overrides are checked with (each takes ~0.1 s)
MAX_SWEEP_PROBES = 64


def override_error(command: str, args: list[str]) -> UsageError | None:
    """:func:`composition_error` of the command line's overrides, one line; for a ``-m`` sweep,
    of every value of each comma list (:func:`sweep_probes`), so a bad key or group option in a
    sweep is the same one line and status 2 as in a single run (Hydra printed several lines and
    exited 1). None for other flags (``--cfg``, ``--help``: Hydra's own handling)."""
    flags = [a for a in args if a.startswith("-")]
    if any(f not in SWEEP_FLAGS for f in flags):
        return None
    overrides = [a for a in args if not a.startswith("-")]
    for job in sweep_probes(overrides) if flags else [overrides]:
        error = composition_error(command, job)
        if error is not None:
            return error
    return None


def sweep_probes(overrides: list[str]) -> list[list[str]]:
    """Job override lists that try each value of each comma list of a sweep at least once: every
    list at its first value, then each other value of each list in turn, the rest at their first
    (the sum of the lists' lengths, not their product; at most :data:`MAX_SWEEP_PROBES`). [] when
    the overrides do not parse or sweep otherwise (``glob``, intervals): Hydra reports those."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        choices = []
        for text, o in zip(overrides, parsed):
            if not o.is_sweep_override():
                choices.append([text])
            elif o.is_discrete_sweep():
                choices.append([f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()])
            else:
                return []
    except Exception:  # noqa: BLE001 - Hydra reports an override it cannot parse or expand itself
        return []
    first = [c[0] for c in choices]
    probes = [first]
    for i, values in enumerate(choices):
        probes += [[*first[:i], v, *first[i + 1 :]] for v in values[1:]]
    return probes[:MAX_SWEEP_PROBES]


def composition_error(command: str, overrides: list[str]) -> UsageError | None:
    """A plain ``key=value`` override of a key ``conf/<command>.yaml`` does not have, or a config
    group option that does not exist (``policy=sepbitt``), as one line naming it and the nearest
    real ones; None when the overrides compose (or fail for another reason, which Hydra then
    reports). Hydra's own messages are several lines (thirty for a group option), and for a key
    suggest ``+key=value``, which the run's check then refuses as a key no one reads."""
    import difflib

    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException, MissingConfigException

    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            compose(config_name=command, overrides=overrides)
            return None
    except MissingConfigException as exc:
        group, _, option = str(exc.missing_cfg_file or "").rpartition("/")
        options = available(group) if group else []
        if not options:
            return None
        close = difflib.get_close_matches(option, options, n=1, cutoff=0.6)
        hint = f"did you mean {group}={close[0]}? " if close else ""
        return UsageError(f"{group}={option}: no such {group} option", f"{hint}{group} options: {', '.join(options)}")
    except ConfigCompositionException as exc:
        cause = str(exc.__cause__ or "")
        if "not in struct" not in cause or not str(exc).startswith("Could not override '"):
            return None
        key = str(exc).split("'")[1]
    except Exception:  # noqa: BLE001 - anything else is Hydra's to report, as before
        return None
    parent, _, leaf = key.rpartition(".")
    close = difflib.get_close_matches(leaf, _settings_beside(command, overrides, key), n=3, cutoff=0.6)
    listing = f"python -m dogi_ml {command} --cfg job lists the settings"
    fix = (
        f"did you mean {' or '.join(f'{parent}.{c}' if parent else c for c in close)}? ({listing})"
        if close
        else listing
    )
    if key.startswith("policy.params."):
        fix += f"; ++{key}=VALUE adds a parameter the scheme reads that its config file does not list"
    return UsageError(f"{key}: the {command} command's config has no setting {key!r}", fix)


def _settings_beside(command: str, overrides: list[str], key: str) -> list[str]:
    """The names of the settings in the section that would hold ``key`` (the config composed
    without its override); none when that does not compose."""
    from hydra import compose, initialize_config_dir
    from omegaconf import DictConfig, OmegaConf

    parent = key.rpartition(".")[0]
    try:
        rest = [o for o in overrides if o.split("=", 1)[0] != key]
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            node = compose(config_name=command, overrides=rest)
        node = OmegaConf.select(node, parent) if parent else node
    except Exception:  # noqa: BLE001 - no suggestion then
        return []
    return [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []


# -- plain-argument commands -------------------------------------------------------------------
def _stage(args: list[str]) -> None:
    """DVC stages take plain ``key=value`` arguments and read params.yaml (what DVC tracks)."""
    from dogi_ml.pipeline.stages import STAGES, run_stage

    if not args or "=" in args[0]:
        raise UsageError(
            "stage needs a NAME",
            f"usage: python -m dogi_ml stage NAME [params=params.yaml] [out=data/dvc]; NAME one of {', '.join(STAGES)}",
        )
    opts = {}
    for a in args[1:]:
        key, sep, value = a.partition("=")
        if not sep or key not in ("params", "out"):
            raise UsageError(f"stage: unexpected argument {a!r}", "use params=FILE and out=DIR")
        opts[key] = value
    run_stage(args[0], **opts)


def _cache(args: list[str]) -> int:
    """``cache info|clear``: dogi_ml.pipeline.cache parses its own arguments."""
    try:
        from dogi_ml.pipeline.cache import main as cache_main
    except ModuleNotFoundError as exc:
        if exc.name != "dogi_ml.pipeline.cache":
            raise
        raise UsageError(
            "the cache command is not in this build of dogi_ml (no dogi_ml.pipeline.cache)",
            "update dogi_ml; the caches live under $DOGI_ML_CACHE (default .cache/)",
        ) from None
    return cache_main(list(args))


def _study(args: list[str]) -> int:
    """``study``: Hydra overrides, but its own driver (it launches the jobs left to do)."""
    from dogi_ml.pipeline.study import run_study

    return run_study(list(args))


def _report(args: list[str]) -> int:
    """``report reproduction``: the scoreboard (dogi_ml.report_reproduction parses its
    arguments); ``report figures``: every figure against its JSON (dogi_ml.report_figures)."""
    if args and args[0] == "figures":
        from dogi_ml.report_figures import main as figures_main

        return figures_main(list(args[1:]))
    from dogi_ml.report_reproduction import main as report_main

    return report_main(list(args))


QUIET_FLAGS = ("--quiet", "-q")


def _strip_quiet(argv: list[str]) -> tuple[list[str], bool]:
    """Remove ``--quiet``/``-q`` given before the command; when present, go quiet for the process
    (and its sweep jobs, which inherit the environment) and hush chatty loggers."""
    quiet = False
    while argv and argv[0] in QUIET_FLAGS:
        quiet = True
        argv = argv[1:]
    if quiet:
        import logging

        from dogi_ml import progress

        progress.set_quiet()
        # Hydra's job logging, MLflow and the search/oracle info lines drop to warnings.
        logging.getLogger().setLevel(logging.WARNING)
        for name in ("dogi_ml", "mlflow", "numba", "hydra"):
            logging.getLogger(name).setLevel(logging.WARNING)
    return argv, quiet


# Hydra configures logging itself when a job starts: these keep its INFO lines out too.
QUIET_HYDRA_OVERRIDES = ["hydra.job_logging.root.level=WARNING", "hydra.hydra_logging.root.level=WARNING"]


def usage() -> str:
    lines = ["usage: python -m dogi_ml [--quiet|-q] <command> [hydra overrides]", "", "commands:"]
    lines += [f"  {name:<9} {text}" for name, text in COMMANDS.items()]
    lines += [
        "",
        "config groups: "
        + ", ".join(f"{g} ({', '.join(available(g))})" for g in ("workload", "model", "policy", "sim", "experiment")),
    ]
    lines += ["--quiet (-q): no progress bars or chatty logging; summaries and JSON paths still print."]
    lines += ["Hydra: add -m for sweeps (e.g. policy=nosep,sepbit -m), --cfg job to show the config."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    own_command_line = argv is None  # the program's entry (python -m dogi_ml, dogi-ml), not a caller's list
    argv = list(sys.argv[1:] if argv is None else argv)
    argv, quiet = _strip_quiet(argv)
    show_project_warnings()
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return
    command, rest = argv[0], argv[1:]
    if own_command_line and (command in _BODIES or command in ("stage", "study")):
        _guarded(pin_process)  # may run this command line again, pinned
    if command == "stage":
        _guarded(_stage, rest)
        return
    if command == "study":
        status = _guarded(_study, rest)  # --quiet reaches it (and its jobs) as DOGI_ML_QUIET=1
        if status:
            raise SystemExit(status)
        return
    if command in ("cache", "report"):
        status = _guarded(_cache if command == "cache" else _report, rest)
        if status:
            raise SystemExit(status)
        return
    if command not in _BODIES:
        _fail(
            UsageError(f"unknown command {command!r}", f"use one of: {', '.join(COMMANDS)} (python -m dogi_ml --help)")
        )
    error = override_error(command, rest)
    if error is not None:
        _fail(error)
    task = _hydra_task(command)
    if quiet and not any(a.startswith(("--cfg", "-c", "--help", "--hydra-help", "--info")) for a in rest):
        rest = [*rest, *QUIET_HYDRA_OVERRIDES]
    sys.argv = [f"dogi_ml-{command}", *rest]
    task()
    _exit_if_a_hook_failed()


def _exit_if_a_hook_failed() -> None:
    """A callback hook that failed (a sweep's report not written, its MLflow parent not opened)
    ends the command with status 2, one line each (a bug's traceback first): Hydra would only have
    warned (:mod:`dogi_ml.callbacks`)."""
    failed = failures()
    if not failed:
        return
    for hook, exc in failed:
        line = user_error_line(exc)
        if line is None:  # a bug: where it happened
            traceback.print_exception(exc, file=sys.stderr)
            line = one_line("error", f"{type(exc).__name__}: {exc}")
        print(line.replace("error: ", f"error: {hook}: ", 1), file=sys.stderr)
    raise SystemExit(2)
