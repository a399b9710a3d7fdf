"""The reproduction scoreboard: ``docs/reproduction.md`` built from ``docs/claims.yaml`` and the
JSON under ``docs/results/``.

``python -m dogi_ml report reproduction [out=PATH] [check=true] [claims=PATH] [results=DIR]``
(``--check`` is ``check=true``) writes the page; with ``check=true`` it writes nothing and exits
with status 1 and one line when the page on disk differs from what the registry and the JSON give.
Defaults are the checkout's ``docs/claims.yaml``, ``docs/results`` and ``docs/reproduction.md``
(found beside the package, so the command runs from any directory of the checkout); explicit
paths are relative to the working directory.

The registry (``docs/claims.yaml``) is data: per paper a title, a page and the paper's text; per
results file the command and scale that made it (a file that records ``command`` / ``scale`` at
its top level is taken at its word, and the registry may not contradict it); per claim its text,
the paper's number and where the paper gives it, how ours is read from the JSON, the tolerances
and a human's one-line reason for a verdict other than reproduced. The verdict is always computed
here, from the numbers and the tolerances; the registry cannot state one.

How ours is read (``ours:``), a small language with no code in it:

* a *path* is a list of steps into a JSON document: a string is a key, an integer a list index,
  a mapping picks the one list element whose fields equal it (``{workload: zipf, mode: empty}``);
  ``"{var}"`` inside a step is the current value of an ``over`` variable (a step that is exactly
  ``"{var}"`` takes the value with its type, so a selector can match an integer);
* a *ref* is a path into ``ours.file``, or ``{file: NAME.json, path: [...]}`` for another file;
* ``measure`` (one of :data:`MEASURES`) turns refs into one number or truth value per setting,
  e.g. ``reduction_pct(new, base) = 100 (1 - new / base)``;
* ``over`` (an ordered mapping variable -> values) and ``aggregate`` (variable -> one of
  :data:`AGGREGATES`) repeat the measure over settings and combine the results, outermost
  variable first: ``mean``, ``share`` (per cent of settings where a truth value holds), ``range``
  ([min, max]), ``min``, ``max``, ``each`` (the list, outermost only) and ``pooled`` (innermost
  only: the refs are summed over the settings before the measure, e.g. the overall WAF of equal
  user-write volumes).

Verdicts (:func:`verdict`), with ours rounded to the digits shown: ``compare: value`` measures
the largest absolute difference from the paper's number (element by element for a list);
``range`` how far ours falls outside the paper's [low, high]; ``at_least`` / ``at_most`` how far
ours falls short of / beyond it. Within ``tolerance``: reproduced; within ``partly``: partly;
else not. A number of the opposite sign to the paper's (a cut that is a rise) is never
reproduced. A claim with ``ours: null`` is *unmeasured* (no results JSON holds a number for it);
one marked ``pending`` whose file does not exist yet is *pending* (another piece of work is
producing it); once the file exists the claim resolves like any other.

Nothing is left blank: a missing file, a path that does not resolve, a value that is not a
number, an unknown key, a verdict other than reproduced without a reason, a results file without
a command -- each stops the build with one line naming the claim and the file.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dogi_ml.errors import DogiMLError, UsageError

#: the checkout this package runs from (``docs/`` beside the package folders)
REPO = Path(__file__).resolve().parent.parent
DEFAULT_CLAIMS = REPO / "docs" / "claims.yaml"
DEFAULT_RESULTS = REPO / "docs" / "results"
DEFAULT_OUT = REPO / "docs" / "reproduction.md"
COMMAND = "python -m dogi_ml report reproduction"

VERDICTS = ("reproduced", "partly", "not", "unmeasured", "pending")
COMPARES = ("value", "range", "at_least", "at_most")
TOP_KEYS = {"papers", "sources", "claims"}
PAPER_KEYS = {"title", "about", "page"}  # title required, the others optional
SOURCE_KEYS = {"command", "scale"}
CLAIM_KEYS = {
    "id",
    "paper",
    "claim",
    "where",
    "paper_value",
    "unit",
    "digits",
    "ours",
    "compare",
    "tolerance",
    "partly",
    "reason",
    "note",
    "pending",
}
OURS_KEYS = {"file", "measure", "args", "over", "aggregate"}


class ClaimError(DogiMLError):
    """A registry entry or results file the scoreboard cannot be built from."""


# -- measures: one number (or truth value) per setting ------------------------------------------
def _min(xs: list[float]) -> float:
    return min(xs)


#: name -> (function, parameter kinds): ``ref`` one number, ``refs`` a list of numbers, ``bool`` a
#: JSON truth value, ``number`` a ref or a constant
MEASURES: dict[str, tuple[Callable[..., float | bool], dict[str, str]]] = {
    "value": (lambda x: x, {"x": "ref"}),
    "percent": (lambda x: 100.0 * x, {"x": "ref"}),
    "ratio": (lambda a, b: a / b, {"a": "ref", "b": "number"}),
    "difference": (lambda a, b: a - b, {"a": "ref", "b": "ref"}),
    "percent_points": (lambda a, b: 100.0 * (a - b), {"a": "ref", "b": "ref"}),
    "reduction_pct": (lambda new, base: 100.0 * (1.0 - new / base), {"new": "ref", "base": "ref"}),
    "abs_change_pct": (lambda a, b: 100.0 * abs(a / b - 1.0), {"a": "ref", "b": "ref"}),
    "gc_reduction_pct": (
        lambda new, base: 100.0 * (1.0 - (new - 1.0) / (base - 1.0)),
        {"new": "ref", "base": "ref"},
    ),
    "reduction_vs_best_pct": (
        lambda new, bases: 100.0 * (1.0 - new / _min(bases)),
        {"new": "ref", "bases": "refs"},
    ),
    "gc_reduction_vs_best_pct": (
        lambda new, bases: 100.0 * (1.0 - (new - 1.0) / (_min(bases) - 1.0)),
        {"new": "ref", "bases": "refs"},
    ),
    "above_best_pct": (lambda x, candidates: 100.0 * (x / _min(candidates) - 1.0), {"x": "ref", "candidates": "refs"}),
    "ratio_to_best": (lambda x, candidates: x / _min(candidates), {"x": "ref", "candidates": "refs"}),
    "lowest": (lambda target, others: target < _min(others), {"target": "ref", "others": "refs"}),
    "not_above": (lambda target, others: target <= _min(others), {"target": "ref", "others": "refs"}),
    "ordered": (lambda chain: all(a < b for a, b in itertools.pairwise(chain)), {"chain": "refs"}),
    "holds": (lambda x: x, {"x": "bool"}),
}
#: measures whose refs may be summed over a ``pooled`` variable (sums of WAF over equal user
#: volumes are total writes over total user writes; other measures do not pool)
POOLABLE = {"value", "reduction_pct"}
#: measures that give a truth value (aggregated with share)
TRUTH_MEASURES = {"lowest", "not_above", "ordered", "holds"}
AGGREGATES = ("each", "mean", "share", "range", "min", "max", "pooled")


# -- the registry -------------------------------------------------------------------------------
@dataclass
class Claim:
    """One headline claim of a paper, as the registry gives it (validated)."""

    id: str
    paper: str
    text: str
    where: str
    paper_value: float | list[float]
    unit: str
    digits: int
    ours: dict | None
    compare: str
    tolerance: float
    partly: float
    reason: str | None
    note: str | None
    pending: str | None

    def files(self) -> list[str]:
        """The results files the claim reads, in the order they appear."""
        if self.ours is None:
            return []
        found = [self.ours["file"]] if self.ours.get("file") else []
        for ref in refs_of(self.ours):
            if isinstance(ref, dict) and ref["file"] not in found:
                found.append(ref["file"])
        return found


def refs_of(ours: dict) -> list:
    """Every ref of ``ours.args`` (a path list, or a ``{file, path}`` mapping), by the measure's
    parameter kinds; constants are left out."""
    if "measure" not in ours:
        return []
    out = []
    for pname, kind in MEASURES[ours["measure"]][1].items():
        a = (ours.get("args") or {}).get(pname)
        if kind == "refs":
            out += list(a) if isinstance(a, list) else [a]
        elif not (kind == "number" and _number(a)):
            out.append(a)
    return out


def _is_ref(x: Any) -> bool:
    return isinstance(x, list) or (isinstance(x, dict) and "path" in x)


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def load_registry(path: Path) -> dict:
    """Parse and check ``claims.yaml``: known keys only, every claim complete and consistent."""
    import yaml

    if not path.exists():
        raise ClaimError(f"no claims registry at {path}", "pass claims=PATH (a wheel install has no docs/)")
    try:
        reg = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ClaimError(f"{path} is not valid YAML: {' '.join(str(exc).split())}", "fix the file") from None
    if not isinstance(reg, dict) or set(reg) - TOP_KEYS or not {"papers", "claims"} <= set(reg):
        raise ClaimError(f"{path} must be a mapping with keys papers, claims (and sources)", "see its header")
    for name, p in reg["papers"].items():
        if not isinstance(p, dict) or "title" not in p or set(p) - PAPER_KEYS:
            raise ClaimError(f"papers.{name} needs a title and may hold {sorted(PAPER_KEYS)}", f"fix {path}")
    sources = reg.get("sources") or {}
    for name, s in sources.items():
        if not isinstance(s, dict) or set(s) - SOURCE_KEYS:
            raise ClaimError(f"sources.{name} may hold only {sorted(SOURCE_KEYS)}", f"fix {path}")
    claims, seen = [], set()
    for i, raw in enumerate(reg["claims"]):
        claims.append(_claim(raw, i, reg["papers"], path))
        if claims[-1].id in seen:
            raise ClaimError(f"claim id {claims[-1].id!r} appears twice", f"give each claim its own id in {path}")
        seen.add(claims[-1].id)
    return {"papers": reg["papers"], "sources": sources, "claims": claims}


def _claim(raw: Any, index: int, papers: dict, path: Path) -> Claim:
    where = f"claim #{index + 1}" + (f" ({raw.get('id')})" if isinstance(raw, dict) and raw.get("id") else "")
    if not isinstance(raw, dict):
        raise ClaimError(f"{where} is not a mapping", f"fix {path}")
    unknown = set(raw) - CLAIM_KEYS
    if unknown:
        hint = " (verdicts are computed from the numbers, never written)" if "verdict" in unknown else ""
        raise ClaimError(
            f"{where}: unknown key(s) {sorted(unknown)}{hint}", f"known keys: {', '.join(sorted(CLAIM_KEYS))}"
        )
    for key in ("id", "paper", "claim", "where", "paper_value", "ours"):
        if key not in raw:
            raise ClaimError(f"{where}: no {key!r}", f"add it in {path}")
    if raw["paper"] not in papers:
        raise ClaimError(f"{where}: paper {raw['paper']!r} is not under papers:", f"one of {', '.join(papers)}")
    value = raw["paper_value"]
    if not (_number(value) or (isinstance(value, list) and value and all(_number(v) for v in value))):
        raise ClaimError(f"{where}: paper_value must be a number or a list of numbers, got {value!r}", f"fix {path}")
    compare = raw.get("compare", "value")
    if compare not in COMPARES:
        raise ClaimError(f"{where}: compare {compare!r} unknown", f"use one of {', '.join(COMPARES)}")
    if compare == "range" and not (isinstance(value, list) and len(value) == 2 and value[0] <= value[1]):
        raise ClaimError(f"{where}: compare: range needs paper_value [low, high]", f"fix {path}")
    if compare in ("at_least", "at_most") and not _number(value):
        raise ClaimError(f"{where}: compare: {compare} needs one number as paper_value", f"fix {path}")
    ours = raw["ours"]
    if ours is not None:
        _check_ours(ours, where, path, pending=raw.get("pending") is not None)
        for key in ("tolerance", "partly"):
            if not _number(raw.get(key)) or raw[key] < 0:
                raise ClaimError(f"{where}: {key} must be a number >= 0", f"set it in {path}")
        if raw["partly"] < raw["tolerance"]:
            raise ClaimError(
                f"{where}: partly ({raw['partly']}) is below tolerance ({raw['tolerance']})", f"fix {path}"
            )
    else:
        if not raw.get("reason"):
            raise ClaimError(f"{where}: ours is null (unmeasured) but no reason says why", f"add a reason in {path}")
        if raw.get("pending") is not None:
            raise ClaimError(f"{where}: pending needs ours.file (the file being produced)", f"fix {path}")
    digits = raw.get("digits", 1)
    if not isinstance(digits, int) or not 0 <= digits <= 6:
        raise ClaimError(f"{where}: digits must be an integer 0..6", f"fix {path}")
    return Claim(
        id=str(raw["id"]),
        paper=raw["paper"],
        text=" ".join(str(raw["claim"]).split()),
        where=str(raw["where"]),
        paper_value=value,
        unit=str(raw.get("unit", "")),
        digits=digits,
        ours=ours,
        compare=compare,
        tolerance=float(raw.get("tolerance", 0.0)),
        partly=float(raw.get("partly", 0.0)),
        reason=" ".join(str(raw["reason"]).split()) if raw.get("reason") else None,
        note=" ".join(str(raw["note"]).split()) if raw.get("note") else None,
        pending=" ".join(str(raw["pending"]).split()) if raw.get("pending") else None,
    )


def _check_ours(ours: Any, where: str, path: Path, pending: bool) -> None:
    if not isinstance(ours, dict) or set(ours) - OURS_KEYS:
        raise ClaimError(f"{where}: ours may hold only {sorted(OURS_KEYS)}", f"fix {path}")
    if "measure" not in ours:
        if pending and set(ours) == {"file"}:
            return  # the file is still being produced; its layout is not known yet
        raise ClaimError(f"{where}: ours has no measure", f"one of {', '.join(MEASURES)}")
    if ours["measure"] not in MEASURES:
        raise ClaimError(f"{where}: measure {ours['measure']!r} unknown", f"one of {', '.join(MEASURES)}")
    params = MEASURES[ours["measure"]][1]
    args = ours.get("args") or {}
    if set(args) != set(params):
        raise ClaimError(
            f"{where}: measure {ours['measure']} takes {', '.join(params)}, got {', '.join(args) or 'nothing'}",
            f"fix {path}",
        )
    for ref in refs_of(ours):
        if isinstance(ref, dict):
            if set(ref) != {"file", "path"} or not isinstance(ref["path"], list):
                raise ClaimError(
                    f"{where}: a ref is a path list or {{file: NAME, path: [...]}}, got {ref!r}", f"fix {path}"
                )
        elif not isinstance(ref, list):
            raise ClaimError(
                f"{where}: a ref is a path list or {{file: NAME, path: [...]}}, got {ref!r}", f"fix {path}"
            )
        elif not ours.get("file"):
            raise ClaimError(f"{where}: the path {ref} names no file and ours has no file", f"fix {path}")
    over, agg = ours.get("over") or {}, ours.get("aggregate") or {}
    if not isinstance(over, dict) or not all(isinstance(v, list) and v for v in over.values()):
        raise ClaimError(f"{where}: over must map each variable to a non-empty list", f"fix {path}")
    if set(over) != set(agg):
        raise ClaimError(f"{where}: aggregate must name one aggregate per over variable", f"fix {path}")
    names = list(over)
    truth = ours["measure"] in TRUTH_MEASURES
    if truth != (bool(names) and agg[names[-1]] == "share"):
        raise ClaimError(
            f"{where}: measure {ours['measure']} "
            + (
                "gives truth values: aggregate its innermost variable with share"
                if truth
                else "gives numbers: share is for truth values"
            ),
            f"fix {path}",
        )
    for i, var in enumerate(names):
        if agg[var] not in AGGREGATES:
            raise ClaimError(f"{where}: aggregate {agg[var]!r} unknown", f"one of {', '.join(AGGREGATES)}")
        if agg[var] == "share" and any(agg[v] != "share" for v in names[i + 1 :]):
            raise ClaimError(f"{where}: share's inner variables must be shares too", f"fix {path}")
        if agg[var] == "each" and i != 0:
            raise ClaimError(f"{where}: each is for the outermost variable only", f"reorder over in {path}")
        if agg[var] == "pooled" and (i != len(names) - 1 or ours["measure"] not in POOLABLE):
            raise ClaimError(
                f"{where}: pooled is for the innermost variable of {', '.join(sorted(POOLABLE))} only", f"fix {path}"
            )


# -- reading the JSON ----------------------------------------------------------------------------
class Results:
    """The results directory, each file parsed once."""

    def __init__(self, directory: Path):
        self.dir = directory
        self._docs: dict[str, Any] = {}

    def exists(self, name: str) -> bool:
        return (self.dir / name).exists()

    def doc(self, name: str, claim: str) -> Any:
        if name not in self._docs:
            p = self.dir / name
            if not p.exists():
                raise ClaimError(
                    f"claim {claim}: {p} does not exist",
                    "run the command that makes it (sources: in the registry) or fix the claim's file",
                )
            try:
                self._docs[name] = json.loads(p.read_text())
            except json.JSONDecodeError as exc:
                raise ClaimError(f"claim {claim}: {p} is not valid JSON ({exc})", "regenerate it") from None
        return self._docs[name]


def _bind(step: Any, bindings: dict) -> Any:
    """A step with ``{var}`` replaced; a step that is exactly ``{var}`` keeps the value's type."""
    if isinstance(step, str):
        for var, value in bindings.items():
            if step == "{" + var + "}":
                return value
        try:
            return step.format_map(bindings)
        except (KeyError, IndexError, ValueError) as exc:
            raise KeyError(f"step {step!r} names a variable not in over ({exc})") from None
    if isinstance(step, dict):
        return {k: _bind(v, bindings) for k, v in step.items()}
    return step


def resolve(doc: Any, path: list, bindings: dict) -> Any:
    """Follow ``path`` into ``doc``; raise ``LookupError`` naming the step that fails."""
    node, walked = doc, []
    for raw in path:
        step = _bind(raw, bindings)
        if isinstance(step, float):
            raise LookupError(f"step {step!r} is a float: quote keys like '0.15' in the registry")
        if isinstance(step, dict):
            if not isinstance(node, list):
                raise LookupError(f"{_where(walked)} is not a list to select {step} from")
            hits = [e for e in node if isinstance(e, dict) and all(k in e and e[k] == v for k, v in step.items())]
            if len(hits) != 1:
                raise LookupError(f"{len(hits)} elements of {_where(walked)} match {step} (need exactly 1)")
            node = hits[0]
        elif isinstance(step, int) and not isinstance(step, bool):
            if not isinstance(node, list) or not -len(node) <= step < len(node):
                raise LookupError(f"{_where(walked)} has no index {step}")
            node = node[step]
        elif isinstance(step, str):
            if not isinstance(node, dict) or step not in node:
                keys = ", ".join(list(node)[:12]) if isinstance(node, dict) else type(node).__name__
                raise LookupError(f"{_where(walked)} has no key {step!r} (it has: {keys})")
            node = node[step]
        else:
            raise LookupError(f"step {step!r} is neither a key, an index nor a selector")
        walked.append(step)
    return node


def _where(walked: list) -> str:
    return "the document" if not walked else "/".join(str(s) for s in walked)


@dataclass
class Measured:
    """Ours for one claim: the value (a number or a list) and the files it came from."""

    value: float | list[float]
    description: str
    files: list[str] = field(default_factory=list)


def measure_claim(claim: Claim, results: Results) -> Measured:
    """Evaluate ``claim.ours`` on the results; errors name the claim, the file and the step."""
    ours = claim.ours
    assert ours is not None and "measure" in ours
    fn, params = MEASURES[ours["measure"]]
    over, agg = ours.get("over") or {}, ours.get("aggregate") or {}
    names = list(over)

    def ref_value(ref: Any, bindings: dict, kind: str) -> Any:
        if kind == "number" and _number(ref):
            return float(ref)
        name, path = (ref["file"], ref["path"]) if isinstance(ref, dict) else (ours["file"], ref)
        name = _bind(name, bindings)
        try:
            value = resolve(results.doc(name, claim.id), path, bindings)
        except (LookupError, KeyError) as exc:
            raise ClaimError(
                f"claim {claim.id}: {results.dir / name}: {exc.args[0]}",
                "fix the claim's path in the registry or regenerate the file",
            ) from None
        if kind == "bool":
            if not isinstance(value, bool):
                raise ClaimError(
                    f"claim {claim.id}: {results.dir / name} {path}: {value!r} is not true/false", "fix the path"
                )
            return value
        if not _number(value) or not math.isfinite(value):
            raise ClaimError(
                f"claim {claim.id}: {results.dir / name} {path}: {value!r} is not a number", "fix the path"
            )
        return float(value)

    def args_at(bindings: dict) -> dict:
        out = {}
        for pname, kind in params.items():
            a = ours["args"][pname]
            out[pname] = [ref_value(r, bindings, "ref") for r in a] if kind == "refs" else ref_value(a, bindings, kind)
        return out

    def apply(args: dict) -> float | bool:
        try:
            return fn(**args)
        except ZeroDivisionError:
            raise ClaimError(
                f"claim {claim.id}: measure {ours['measure']} divides by zero", "check the paths"
            ) from None

    def level(i: int, bindings: dict) -> Any:
        if i == len(names):
            return apply(args_at(bindings))
        var, how = names[i], agg[names[i]]
        if how == "pooled":
            per = [args_at({**bindings, var: v}) for v in over[var]]
            return apply({p: _sum([a[p] for a in per]) for p in params})
        parts = [level(i + 1, {**bindings, var: v}) for v in over[var]]
        return _aggregate(how, parts, claim.id)

    value = level(0, {})
    if isinstance(value, bool):
        raise ClaimError(f"claim {claim.id}: ours is a truth value", "aggregate it with share over a variable")
    files = claim.files()
    return Measured(value=value, description=describe(ours), files=files)


def _sum(values: list) -> Any:
    if isinstance(values[0], list):
        return [sum(col) for col in zip(*values)]
    return sum(values)


def _aggregate(how: str, parts: list, claim: str) -> Any:
    truth = [isinstance(p, bool) for p in parts]
    if any(isinstance(p, list) for p in parts):
        raise ClaimError(
            f"claim {claim}: {how} of lists", "only the outermost variable may produce a list (each, range)"
        )
    if how == "share":
        if all(truth):
            return 100.0 * sum(parts) / len(parts)
        if not any(truth):  # shares of an inner variable (a full grid): their mean is the share
            return sum(parts) / len(parts)
        raise ClaimError(
            f"claim {claim}: share needs truth values (lowest, not_above, ordered, holds)", "fix the measure"
        )
    if any(truth):
        raise ClaimError(f"claim {claim}: {how} of truth values", "use share")
    if how == "each":
        return [float(p) for p in parts]
    if how == "mean":
        return sum(parts) / len(parts)
    if how == "range":
        return [min(parts), max(parts)]
    return min(parts) if how == "min" else max(parts)


def describe(ours: dict) -> str:
    """How ours was aggregated, in words: ``mean over workload: zipf, ycsb_a``."""
    over, agg = ours.get("over") or {}, ours.get("aggregate") or {}
    words = {"each": "each of", "share": "share of", "range": "range over", "pooled": "pooled over"}
    return "; ".join(f"{words.get(agg[v], agg[v] + ' over')} {v}: {', '.join(str(x) for x in over[v])}" for v in over)


# -- verdicts ------------------------------------------------------------------------------------
@dataclass
class Verdict:
    label: str  # one of VERDICTS
    distance: float | None = None  # how far ours is from the paper, in the claim's unit
    opposite_sign: bool = False


def _as_list(x: float | list[float]) -> list[float]:
    return list(x) if isinstance(x, list) else [x]


def verdict(
    paper: float | list[float], ours: float | list[float], compare: str, tolerance: float, partly: float
) -> Verdict:
    """reproduced / partly / not for ``ours`` against ``paper`` (see the module docstring)."""
    p, o = _as_list(paper), _as_list(ours)
    if compare == "value":
        if len(p) != len(o):
            raise ValueError(f"the paper gives {len(p)} number(s), ours {len(o)}")
        d = max(abs(a - b) for a, b in zip(o, p))
    elif compare == "range":
        lo, hi = p
        d = max(max(lo - x, x - hi, 0.0) for x in o)
    elif compare == "at_least":
        d = max(max(p[0] - x, 0.0) for x in o)
    else:
        d = max(max(x - p[0], 0.0) for x in o)
    if all(x > 0 for x in p) or all(x < 0 for x in p):
        sign = 1.0 if p[0] > 0 else -1.0
        if any(x * sign < 0 for x in o):
            return Verdict("not", d, opposite_sign=True)
    if d <= tolerance:
        return Verdict("reproduced", d)
    return Verdict("partly" if d <= partly else "not", d)


# -- the page ------------------------------------------------------------------------------------
@dataclass
class Row:
    claim: Claim
    verdict: Verdict
    ours: Measured | None
    sources: list[tuple[str, str, str]]  # (file, command, scale)


def _round(x: float | list[float], digits: int) -> float | list[float]:
    if isinstance(x, list):
        return [round(v, digits) + 0.0 for v in x]
    return round(x, digits) + 0.0  # + 0.0: no "-0.0"


def _fmt(x: float, digits: int) -> str:
    return f"{x:.{digits}f}".replace("-", "\u2212")


def format_value(x: float | list[float], claim: Claim, compare: str | None = None) -> str:
    """A value with the claim's digits and unit; a range as ``low-high``, a list as ``a / b``."""
    unit = claim.unit
    sep = "\u2013" if compare == "range" else " / "
    body = sep.join(_fmt(v, claim.digits) for v in _as_list(x))
    if not unit:
        return body
    return f"{body}{unit}" if unit.startswith("%") or unit.startswith("x") else f"{body} {unit}"


def _delta_unit(unit: str) -> str:
    """The unit of a difference: percentage points for percentages, else the claim's unit."""
    if unit.startswith("%"):
        return " pp"
    if not unit or unit.startswith("x"):
        return unit
    return f" {unit}"


def verdict_text(claim: Claim, v: Verdict) -> str:
    du = _delta_unit(claim.unit)
    if v.label == "reproduced":
        if claim.tolerance == 0:
            return "**reproduced**"
        return f"**reproduced** (within {_fmt(claim.tolerance, claim.digits)}{du})"
    if v.label in ("unmeasured", "pending"):
        return v.label
    if v.opposite_sign:
        return "**not** (opposite sign)"
    off = _fmt(v.distance, claim.digits)
    if v.label == "partly":
        return f"partly (off by {off}{du}; within {_fmt(claim.partly, claim.digits)}{du})"
    return f"**not** (off by {off}{du})"


def source_of(name: str, registry: dict, results: Results, claim: str) -> tuple[str, str]:
    """(command, scale) of a results file: the file's own ``command`` / ``scale`` where it records
    them, else the registry's ``sources``; both, and different, is an error."""
    entry = registry["sources"].get(name) or {}
    doc = results.doc(name, claim) if results.exists(name) else {}
    out = []
    for key in ("command", "scale"):
        own = doc.get(key) if isinstance(doc, dict) else None
        if own is not None and key in entry and _scale_text(own) != _scale_text(entry[key]):
            raise ClaimError(
                f"{name} records its {key} and sources.{name}.{key} in the registry says otherwise",
                f"drop sources.{name}.{key} from the registry (the file is the record)",
            )
        text = own if own is not None else entry.get(key)
        if text is None:
            raise ClaimError(f"claim {claim}: no {key} for {name}", f"add sources.{name}.{key} to the registry")
        out.append(_scale_text(text))
    return out[0], out[1]


def _scale_text(x: Any, depth: int = 0) -> str:
    """A recorded scale (text, or a mapping such as ``{workload: {capacity_blocks: ...}}``) as text:
    the outer mapping as ``key: ...; key: ...`` (keys with equal values share one entry), inner
    ones as ``k=v, k=v``."""
    if isinstance(x, dict):
        if depth > 0:
            return ", ".join(f"{k}={_scale_text(v, depth + 1)}" for k, v in x.items())
        groups: dict[str, list[str]] = {}
        for k, v in x.items():
            groups.setdefault(_scale_text(v, depth + 1), []).append(str(k))
        return "; ".join(f"{', '.join(keys)}: {text}" for text, keys in groups.items())
    if isinstance(x, list):
        return ", ".join(_scale_text(v, depth + 1) for v in x)
    return " ".join(str(x).split())


def build_rows(registry: dict, results: Results) -> list[Row]:
    rows = []
    for c in registry["claims"]:
        if c.ours is None:
            rows.append(Row(c, Verdict("unmeasured"), None, []))
            continue
        files = c.files()
        if c.pending is not None and not all(results.exists(f) for f in files):
            rows.append(Row(c, Verdict("pending"), None, []))
            continue
        if "measure" not in c.ours:
            raise ClaimError(
                f"claim {c.id}: {results.dir / c.ours['file']} exists now",
                "write the claim's ours (measure, args) in the registry and drop its pending mark",
            )
        m = measure_claim(c, results)
        m.value = _round(m.value, c.digits)
        try:
            v = verdict(c.paper_value, m.value, c.compare, c.tolerance, c.partly)
        except ValueError as exc:
            raise ClaimError(f"claim {c.id}: {exc}", "make paper_value and ours the same shape") from None
        if v.label != "reproduced" and not c.reason:
            raise ClaimError(
                f"claim {c.id}: the verdict is {v.label} and the registry gives no reason",
                "add a one-line reason to the claim",
            )
        rows.append(Row(c, v, m, [(f, *source_of(f, registry, results, c.id)) for f in m.files]))
    return rows


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render(registry: dict, rows: list[Row], claims_path: str, results_path: str) -> str:
    """The Markdown page. Deterministic: no dates, no machine names, nothing but the inputs."""
    lines = [
        "# Reproduction scoreboard",
        "",
        f"<!-- Generated by `{COMMAND}` from {claims_path} and {results_path}/*.json. Do not edit by hand. -->",
        "",
        f"This page is generated by `{COMMAND}` from the claims registry [claims.yaml](claims.yaml) "
        f"(each paper's headline claims, the paper's numbers, how ours are read, the tolerances, the reasons) and "
        f"the JSON under [results/](results/); it is never edited by hand. `{COMMAND} check=true` fails when it "
        "differs from what they give (`tests/test_reproduction.py` runs that check).",
        "",
        "Verdicts are computed from the numbers: **reproduced** when ours is within the claim's tolerance of the "
        "paper's number (for a range, of the range; for at least / at most, of the bound), *partly* within a "
        "wider band, **not** beyond it or when ours has the opposite sign (a cut that is a rise); *unmeasured* "
        "when no results JSON holds our number; *pending* when the JSON is still being produced. Percentages "
        "are the paper's quantity (WAF, GC writes, accuracy) as it states it; differences between percentages "
        "are in percentage points (pp). Each paper's page holds the departures and what they cost.",
        "",
        "| paper | claims | reproduced | partly | not | unmeasured | pending |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, paper in registry["papers"].items():
        mine = [r for r in rows if r.claim.paper == key]
        counts = [sum(r.verdict.label == v for r in mine) for v in VERDICTS]
        lines.append(
            f"| [{paper['title']}](#{_slug(paper['title'])}) | {len(mine)} | " + " | ".join(map(str, counts)) + " |"
        )
    for key, paper in registry["papers"].items():
        mine = [r for r in rows if r.claim.paper == key]
        counts = {v: sum(r.verdict.label == v for r in mine) for v in VERDICTS}
        lines += [
            "",
            f"## {paper['title']}",
            "",
            *_paper_line(paper),
            " / ".join(f"{counts[v]} {v}" for v in VERDICTS) + f" of {len(mine)} claims.",
            "",
            "| claim | paper | ours | verdict | command & scale (below) | reason |",
            "|---|---|---|---|---|---|",
        ]
        lines += [_row(r) for r in mine]
        sources = {f: (cmd, scale) for r in mine for f, cmd, scale in r.sources}
        if sources:
            lines += ["", "Commands and scales:", ""]
            lines += [f"- [{f}](results/{f}): `{cmd}`; {scale}" for f, (cmd, scale) in sources.items()]
    return "\n".join(lines) + "\n"


def _paper_line(paper: dict) -> list[str]:
    parts = []
    if paper.get("about"):
        parts.append(paper["about"])
    if paper.get("page"):
        parts.append(f"Reproduction: [{paper['page']}]({Path(paper['page']).name}).")
    return [" ".join(parts), ""] if parts else []


def _slug(heading: str) -> str:
    import re

    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _row(r: Row) -> str:
    c = r.claim
    paper = f"{format_value(c.paper_value, c, c.compare)} ({c.where})"
    if c.compare == "at_least":
        paper = "at least " + paper
    elif c.compare == "at_most":
        paper = "at most " + paper
    if r.ours is not None:
        ours = format_value(r.ours.value, c)
        if r.ours.description:
            ours += f" ({r.ours.description})"
    elif r.verdict.label == "pending":
        ours = f"pending: {c.pending}"
    else:
        ours = "-"
    src = ", ".join(f"[{f}](results/{f})" for f, _, _ in r.sources)
    if r.verdict.label == "pending":
        src = f"`{c.ours['file']}` (not yet in results/)"
    # the reason explains a shortfall: shown for partly / not / unmeasured, not while pending
    reason = c.reason if r.verdict.label in ("partly", "not", "unmeasured") and c.reason else ""
    if c.note:
        reason = f"{reason} *Note:* {c.note}".strip()
    cells = [c.text, paper, ours, verdict_text(c, r.verdict), src or "-", reason or "-"]
    return "| " + " | ".join(_cell(x) for x in cells) + " |"


def build(claims: Path, results: Path) -> tuple[str, list[Row]]:
    registry = load_registry(claims)
    rows = build_rows(registry, Results(results))
    return render(registry, rows, _shown(claims), _shown(results)), rows


def _shown(p: Path) -> str:
    """A path as the page names it: relative to the checkout when inside it."""
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return str(p)


# -- command line --------------------------------------------------------------------------------
USAGE = f"usage: {COMMAND} [out=PATH] [check=true|false] [claims=PATH] [results=DIR] (--check = check=true)"
REPORTS = ("reproduction",)


def parse_args(args: list[str]) -> dict:
    if not args or args[0] not in REPORTS:
        raise UsageError(f"report needs a kind ({', '.join(REPORTS)}, figures)", USAGE)
    opts: dict[str, Any] = {"out": DEFAULT_OUT, "claims": DEFAULT_CLAIMS, "results": DEFAULT_RESULTS, "check": False}
    for a in args[1:]:
        if a == "--check":
            opts["check"] = True
            continue
        key, sep, value = a.partition("=")
        if not sep or key not in opts:
            raise UsageError(f"report reproduction: unexpected argument {a!r}", USAGE)
        if key == "check":
            if value.lower() not in ("true", "false"):
                raise UsageError(f"check={value!r} is not true or false", "use check=true or check=false")
            opts["check"] = value.lower() == "true"
        else:
            opts[key] = Path(value)
    return opts


def main(args: list[str]) -> int:
    """``report reproduction ...``: write the page, or check it (status 1 and one line on drift)."""
    opts = parse_args(list(args))
    page, rows = build(opts["claims"], opts["results"])
    counts = ", ".join(f"{sum(r.verdict.label == v for r in rows)} {v}" for v in VERDICTS)
    out: Path = opts["out"]
    if opts["check"]:
        current = out.read_text() if out.exists() else None
        if current != page:
            state = "does not exist" if current is None else "differs from what the registry and results give"
            print(f"check failed: {out} {state} -- run: {COMMAND} out={out}", file=sys.stderr)
            return 1
        print(f"{out} is up to date: {len(rows)} claims ({counts})")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    print(f"wrote {out}: {len(rows)} claims ({counts})")
    return 0
