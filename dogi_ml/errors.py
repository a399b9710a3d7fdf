"""The one base class of user errors: bad config, bad input, a missing prerequisite.

The command line prints a :class:`DogiMLError` on one line, ``error: <problem> -- <fix>``, with
exit status 2 and no traceback; any other exception is a bug here and keeps its traceback.
A leaf module: every layer may import it (``traces`` and ``sim`` included).
"""

from __future__ import annotations


class DogiMLError(ValueError):
    """Something the user can fix. ``problem`` says what is wrong, ``fix`` what to do about it
    (a subclass may set a class-level ``fix`` that fits all its cases).

    A ``ValueError`` so that callers which caught the ``ValueError`` of bad input keep working.
    """

    fix: str | None = None

    def __init__(self, problem: str, fix: str | None = None):
        # args carry the fix too, so a pickled error (a Hydra launcher's worker) keeps it
        super().__init__(*((problem,) if fix is None else (problem, fix)))
        self.problem = problem
        if fix is not None:
            self.fix = fix

    def __str__(self) -> str:
        return f"{self.problem} -- {self.fix}" if self.fix else self.problem


class ConfigError(DogiMLError):
    """A configuration (Hydra overrides, params.yaml) that cannot be run as given."""


class UsageError(DogiMLError):
    """Bad command-line input (a command's arguments)."""


class InputFileError(ConfigError):
    """A file a setting names that exists but cannot be read as what the setting says (a model
    file that holds no model). The command line exits 3, as for a trace that cannot be read
    (``dogi_ml/zns/exit_codes.py``'s ``BAD_INPUT``: the input is bad, not the command line); a
    path to nothing stays a :class:`ConfigError` (2)."""

    exit_status = 3


def checked_setting(
    value,
    key: str,
    kind: type = int,
    *,
    minimum=None,
    above=None,
    nullable: bool = False,
    example=None,
    maximum=None,
    below=None,
):
    """``value`` of setting ``key`` if it is a ``kind`` (``int``, ``float`` or ``bool``) of at
    least ``minimum`` (or None when ``nullable``); else a :class:`ConfigError` naming the key and
    the fix (``above``: an exclusive lower bound, for positive floats; ``maximum`` and ``below``:
    an inclusive and an exclusive upper bound, the message then names the whole range). A string
    is never read as a number (Hydra has already parsed the numbers); a whole float (``1e6``)
    passes as an int; NaN and infinities never pass."""
    example = example if example is not None else (minimum if minimum is not None else 1)
    if value is None:
        if nullable:
            return None
        raise ConfigError(f"{key} is null", f"give {key}={example}")
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}={value!r} is not true or false", f"give {key}=true or {key}=false")
    what = "a whole number" if kind is int else "a number"
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    given = value  # as the user wrote it: 1e+30, not the 31 digits of int(1e30)
    if number and isinstance(value, float):
        finite = value == value and abs(value) != float("inf")
        number = finite and (kind is float or value.is_integer())
        if number and kind is int:
            value = int(value)
    if not number:
        null = ", or null" if nullable else ""
        raise ConfigError(f"{key}={value!r} is not {what}", f"give {what}, e.g. {key}={example}{null}")
    if kind is int and not -(2**63) <= value < 2**63:
        # every count ends up in a 64-bit array or a C long: beyond that, OverflowError's traceback
        raise ConfigError(f"{key}={given} does not fit in 64 bits", f"give e.g. {key}={example}")
    if maximum is not None or below is not None:
        # a bounded range (a probability, a C field's width): the message names all of it
        low = [f">= {minimum}"] if minimum is not None else [f"above {above}"] if above is not None else []
        high = [f"<= {maximum}"] if maximum is not None else [f"below {below}"]
        inside = (
            (minimum is None or value >= minimum)
            and (above is None or value > above)
            and (maximum is None or value <= maximum)
            and (below is None or value < below)
        )
        if not inside:
            null = " (null: the default)" if nullable else ""
            raise ConfigError(f"{key}={value} must be {' and '.join(low + high)}", f"give e.g. {key}={example}{null}")
        return value
    if minimum is not None and value < minimum:
        bound = "positive" if minimum == 1 and kind is int else f">= {minimum}"
        null = " (null: the default)" if nullable else ""
        raise ConfigError(f"{key}={value} must be {bound}", f"give e.g. {key}={example}{null}")
    if above is not None and value <= above:
        raise ConfigError(f"{key}={value} must be above {above}", f"give e.g. {key}={example}")
    return value


def did_you_mean(prefix: str, key: str, names) -> str | None:
    """``"did you mean PREFIX.NAME?"`` for the name in ``names`` nearest to a mistyped ``key``
    (difflib's closest match), or None when none is close."""
    import difflib

    close = difflib.get_close_matches(key, sorted(map(str, names)), n=1)
    if not close:
        return None
    return f"did you mean {prefix}.{close[0]}?" if prefix else f"did you mean {close[0]}?"


def refuse_unknown_keys(cfg, allowed, group: str, hint: str | None = None, what: str | None = None) -> None:
    """A ConfigError naming the first key of ``cfg`` (a config group as a mapping) not in
    ``allowed`` (``what`` names the group in the message), with the nearest allowed name
    (:func:`did_you_mean`), or ``hint``: a key no one reads would otherwise be ignored without a
    word (``+data.bogus=1``, a misspelt ``+sim.victm=greedy``)."""
    unknown = sorted(set(cfg) - set(allowed))
    if not unknown:
        return
    fix = (
        did_you_mean(group, unknown[0], allowed)
        or hint
        or "one of " + ", ".join(f"{group}.{k}" for k in sorted(allowed))
    )
    raise ConfigError(f"{group}.{unknown[0]}: no such {what or group} setting", fix)
