"""Every published figure against the JSON it is drawn from: ``report figures``.

``python -m dogi_ml report figures [check=true] [results=DIR] [NAME ...]`` redraws each figure of
``docs/results`` (or ``results=DIR``) that a report draws from its JSON alone, with that report's
own ``--redraw`` (the title kept from the figure or its Markdown): after a change to a report's
plotting code, one command brings every figure up to date. With ``check=true`` (or ``--check``) it
writes nothing and exits with status 1 and one line naming the figures whose recorded digest
(the PNG's ``Source`` text, :func:`dogi_ml.plotting.data_digest`) is not their JSON's. ``NAME``
limits it to those files (``hybrid_select`` or ``docs/results/hybrid_select.png``).

Which report draws a file is told by its name (:data:`FAMILIES`, first match). Every figure of
``docs/results`` is covered. A figure without a JSON beside it, or whose JSON its report cannot draw
from (a file written by an older version, say), is listed as not covered, with the reason: its
digest cannot be checked.
"""

from __future__ import annotations

import sys
from contextlib import redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from types import ModuleType

from dogi_ml import report, report_adapt, report_hybrid, report_minos, report_shiro
from dogi_ml.errors import UsageError
from dogi_ml.pipeline import minos_table, study
from dogi_ml.plotting import data_digest, figure_source
from dogi_ml.report_reproduction import DEFAULT_RESULTS

COMMAND = "python -m dogi_ml report figures"
USAGE = f"usage: {COMMAND} [check=true|false] [results=DIR] [NAME ...] (--check = check=true)"


@dataclass(frozen=True)
class Family:
    """The figures of one report, by file-name prefix: its module gives ``figure_data(PREFIX)``
    (the data the figure draws from ``PREFIX.json``; a :class:`SystemExit` naming the reason when
    the report cannot draw from the JSON alone) and ``redraw(PREFIX)``."""

    prefix: str
    module: ModuleType

    @property
    def report(self) -> str:
        return self.module.__name__


#: the reports whose figures draw from their JSON, by file-name prefix (first match)
FAMILIES = (
    Family("hybrid", report_hybrid),
    Family("shiro_", report_shiro),
    Family("adapt_", report_adapt),
    Family("minos_table", minos_table),
    Family("minos_", report_minos),
    Family("dogi_fig", report),
    Family("fleet_study", study),
)


def family_of(name: str) -> Family | None:
    return next((f for f in FAMILIES if name.startswith(f.prefix)), None)


def survey(results: Path, names: list[str] | None = None) -> tuple[list[tuple[Path, Family, object]], list[str]]:
    """The figures of ``results`` a report draws from its JSON alone, each with its family and the
    data it draws, and one line per figure that is not (no JSON beside it, no report of its name,
    or a report that cannot draw it from the JSON: the reason)."""
    pngs = sorted(results.glob("*.png"))
    if names:
        wanted = {Path(n).stem for n in names}
        unknown = sorted(wanted - {p.stem for p in pngs})
        if unknown:
            raise UsageError(f"report figures: no {', '.join(unknown)} figure in {results}", USAGE)
        pngs = [p for p in pngs if p.stem in wanted]
    covered, not_covered = [], []
    for png in pngs:
        stem = png.with_suffix("")
        family = family_of(png.stem)
        if not stem.with_suffix(".json").is_file():
            not_covered.append(f"{png.name}: no {stem.name}.json beside it (its data is in no JSON)")
        elif family is None:
            not_covered.append(f"{png.name}: no report draws it from its JSON")
        else:
            try:
                covered.append((stem, family, family.module.figure_data(stem)))
            except SystemExit as e:
                reason = str(e).removeprefix(f"error: --redraw {stem}: ")
                not_covered.append(f"{png.name}: {family.report} cannot draw it from its JSON ({reason})")
    return covered, not_covered


def parse_args(args: list[str]) -> dict:
    opts: dict = {"check": False, "results": DEFAULT_RESULTS, "names": []}
    for a in args:
        if a == "--check":
            opts["check"] = True
            continue
        key, sep, value = a.partition("=")
        if a.startswith("-"):  # --chek was read as the name of a figure
            raise UsageError(f"report figures: unknown option {a!r}", USAGE)
        if not sep:
            opts["names"].append(a)
        elif key == "check":
            if value.lower() not in ("true", "false"):
                raise UsageError(f"check={value!r} is not true or false", "use check=true or check=false")
            opts["check"] = value.lower() == "true"
        elif key == "results":
            opts["results"] = Path(value)
        else:
            raise UsageError(f"report figures: unexpected argument {a!r}", USAGE)
    if not opts["results"].is_dir():
        raise UsageError(f"report figures: results={opts['results']} is not a directory", USAGE)
    return opts


def main(args: list[str]) -> int:
    """``report figures ...``: redraw every covered figure, or check their digests (status 1 and
    one line naming the stale ones)."""
    opts = parse_args(list(args))
    covered, not_covered = survey(opts["results"], opts["names"])
    if opts["check"]:
        stale = [stem.name for stem, _, data in covered if figure_source(stem.with_suffix(".png")) != data_digest(data)]
        if stale:
            print(
                f"check failed: {len(stale)} of {len(covered)} figures are not drawn from their JSON: "
                f"{', '.join(stale)} -- run: {COMMAND} {' '.join(stale)}",
                file=sys.stderr,
            )
            return 1
        print(f"{len(covered)} figures are drawn from their JSON; {len(not_covered)} not covered")
    else:
        for stem, family, _ in covered:
            with redirect_stdout(StringIO()):  # each report prints its table; the list below says what was done
                family.module.redraw(stem)
            print(f"redrew:  {stem.with_suffix('.png')} ({family.report})")
        print(f"{len(covered)} figures redrawn from their JSON; {len(not_covered)} not covered")
    for line in not_covered:
        print(f"  not covered: {line}")
    return 0
