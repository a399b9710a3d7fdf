"""No silent victim override (issue 38): ``sim.victim`` and ``policy.victim`` are honoured or
rejected with one line naming the keys and the fix; results and comparisons carry the settings
a run actually used."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import CAP, SEG, hotcold_writes
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from dogi_ml.cli import CONF_DIR, available
from dogi_ml.errors import ConfigError
from dogi_ml.policies import configured_victim, make_policy, policy_class
from dogi_ml.report import differing_settings, print_comparison, settings_markdown
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.sim.victims import ANY_SCHEME_VICTIMS, VICTIMS, resolve_victim


def compose_simulate(overrides):
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        return compose(config_name="simulate", overrides=overrides, return_hydra_config=True)


def policy_and_sim(cfg):
    return OmegaConf.to_container(cfg.policy, resolve=True), OmegaConf.to_container(cfg.sim, resolve=True)


# -- the rule -------------------------------------------------------------------------------------


def spec(victim, rules=None, selector=None, note=None, name="p"):
    return SimpleNamespace(name=name, victim=victim, victim_rules=rules, selector=selector, victim_note=note)


@pytest.mark.parametrize(
    "sim_victim, own, expected",
    [
        (None, None, "greedy"),  # neither set: greedy
        (None, "cost_benefit", "cost_benefit"),  # the scheme's own
        ("fifo", None, "fifo"),  # the run's
        ("fifo", "fifo", "fifo"),  # both, equal
    ],
)
def test_one_rule_set_or_both_equal_is_honoured(sim_victim, own, expected):
    assert resolve_victim(sim_victim, "all", spec(own)) == (expected, expected)


def test_two_different_rules_are_an_error_naming_both_keys_and_the_fix():
    with pytest.raises(ConfigError) as e:
        resolve_victim("cost_benefit", "all", spec("cost_benefit_sepbit", name="minos"))
    msg = str(e.value)
    assert "sim.victim=cost_benefit" in msg and "policy=minos" in msg and "policy.victim=cost_benefit_sepbit" in msg
    assert "set policy.victim=null" in msg and "sim.victim_for=followers" in msg and "\n" not in msg


def test_followers_scope_keeps_each_schemes_own_rule():
    assert resolve_victim("cost_benefit", "followers", spec("cost_benefit_sepbit")) == ("cost_benefit_sepbit",) * 2
    assert resolve_victim("cost_benefit", "followers", spec(None)) == ("cost_benefit", "cost_benefit")
    with pytest.raises(ConfigError, match="unknown sim.victim_for='some'"):
        resolve_victim("cost_benefit", "some", spec(None))


def test_a_scheme_with_its_own_selector_cannot_follow_and_says_so():
    own = spec("nodap", rules=(), selector="nodap", note="expired segments first", name="nodap")
    assert resolve_victim(None, "all", own) == ("nodap", "nodap")
    with pytest.raises(ConfigError, match=r"nodap cannot follow it: set sim.victim_for=followers"):
        resolve_victim("greedy", "all", own)
    # a selector building on a generic rule (MiDAS-style) runs its own selector with that rule
    built = spec("cost_benefit", rules=("fifo", "greedy", "cost_benefit"), selector="own", name="b")
    assert resolve_victim("greedy", "followers", built) == ("cost_benefit", "own")
    assert resolve_victim(None, "all", spec(None, rules=("fifo", "greedy"), selector="own")) == ("greedy", "own")
    with pytest.raises(ConfigError, match="cannot run with victim rule 'cost_benefit_sqrt'"):
        resolve_victim("cost_benefit_sqrt", "all", spec(None, rules=("fifo", "greedy"), selector="own"))


def test_an_unknown_rule_names_its_key():
    with pytest.raises(ConfigError, match=r"unknown victim selection 'best' \(sim.victim\) -- known: greedy"):
        resolve_victim("best", "all", spec(None))


def test_the_old_params_victim_is_rejected_with_the_new_key():
    pc, sc = policy_and_sim(compose_simulate(["policy=minos", "++policy.params.victim=greedy"]))
    with pytest.raises(
        ConfigError,
        match=r"policy.params.victim=greedy is no longer a parameter of policy=minos -- set policy.victim=NAME",
    ):
        configured_victim(pc, sc)


# -- every policy config, every rule ---------------------------------------------------------------


@pytest.mark.parametrize("policy", available("policy"))
def test_every_policy_config_honours_or_rejects_an_explicit_sim_victim(policy):
    """``sim.victim=R`` set explicitly for each policy config and each rule: the run's rule is R,
    or the configuration is rejected with one line naming sim.victim, the policy and the fix.
    With ``policy.victim=null`` every scheme that can follow a rule runs R."""
    cls = policy_class(compose_simulate([f"policy={policy}"]).policy.name)
    # composed once through Hydra with the override (the command line's path); the other rules by
    # setting the same key in the composed config (composing costs ~0.1 s each)
    pc0, sc0 = policy_and_sim(compose_simulate([f"policy={policy}", "sim.victim=fifo", "policy.victim=null"]))
    assert sc0["victim"] == "fifo" and pc0["victim"] is None
    pc_own = policy_and_sim(compose_simulate([f"policy={policy}"]))[0]
    for rule in ANY_SCHEME_VICTIMS:
        pc, sc = pc_own, {**sc0, "victim": rule}
        try:
            got, selector = configured_victim(pc, sc)
        except ConfigError as e:
            msg = str(e)
            assert f"sim.victim={rule}" in msg and f"policy={cls.name}" in msg and "\n" not in msg, msg
            assert "sim.victim_for=followers" in msg and "drop sim.victim" in msg, msg
            assert ("set policy.victim=null" in msg) == (cls.victim_rules != ()), msg
            assert pc["victim"] not in (None, rule)  # rejected only when the scheme's own rule differs
        else:
            assert got == rule, f"{policy}: sim.victim={rule} ran {got}"
            assert pc["victim"] in (None, rule)
            assert selector == (cls.selector or rule)
        # policy.victim=null: every scheme that can follow runs the rule; the others say why not
        pc = pc0
        if cls.victim_rules == ():
            with pytest.raises(
                ConfigError, match=rf"policy={cls.name} chooses its victims itself.*leave policy.victim"
            ):
                configured_victim(pc, sc)
        elif cls.victim_rules is None or rule in cls.victim_rules:
            assert configured_victim(pc, sc)[0] == rule


def test_the_engine_runs_the_rule_it_resolved():
    """The selector compiled into the loop is the resolved one, and the result names it: MINOS
    under sim.victim=cost_benefit with policy.victim=null writes what cost-benefit makes it write,
    not what its own rule would (the issue's 'same WAF under two rules')."""
    writes = hotcold_writes(CAP, 6 * CAP)
    results = {}
    # two rules: each (scheme, selector) pair is a loop Numba compiles (the second is MINOS's own,
    # compiled by test_minos too; bench's test below reuses both)
    for rule in ("cost_benefit", "cost_benefit_sepbit"):
        pol = make_policy("minos", victim=None, n_user=4, n_gc=2)
        sim = Simulator(pol, SimConfig(segment_blocks=SEG, victim=rule), CAP)
        assert sim.select_victim is VICTIMS[rule] and sim.victim_rule == rule
        r = sim.run(writes)
        assert r["victim"] == r["settings"]["victim"] == rule
        results[rule] = r["gc_writes"]
    assert len(set(results.values())) == 2, results
    # the scheme's own rule is what runs when sim.victim is not set
    own = Simulator(make_policy("minos", n_user=4, n_gc=2), SimConfig(segment_blocks=SEG), CAP).run(writes)
    assert own["victim"] == "cost_benefit_sepbit" and own["gc_writes"] == results["cost_benefit_sepbit"]


def test_bench_rows_run_the_rule_they_name():
    """``bench`` printed MINOS under greedy and cost_benefit with one WAF: each row now runs its rule."""
    from dogi_ml.bench import bench_policies

    writes = hotcold_writes(CAP, 6 * CAP)
    rows = bench_policies(writes, CAP, SEG, 0.25, ["minos"], ["cost_benefit_sepbit", "cost_benefit"])
    assert [r["victim"] for r in rows] == ["cost_benefit_sepbit", "cost_benefit"]
    assert rows[0]["gc_writes"] != rows[1]["gc_writes"]


# -- presets ----------------------------------------------------------------------------------------


def sweep_jobs(experiment: str, base: list[str]):
    """Each job's overrides of a preset's sweep (workload choices left out: they do not bear on
    the victim rule)."""
    params = compose_simulate([*base, f"+experiment={experiment}"]).hydra.sweeper.get("params")
    parser = OverridesParser.create()
    keys, choices = [], []
    for k, v in (OmegaConf.to_container(params) if params else {}).items():
        if "workload" in k:
            continue
        o = parser.parse_overrides([f"{k}={v}"])[0]
        keys.append(o.get_key_element())
        choices.append(list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()])
    for combo in itertools.product(*choices):
        yield [f"{k}={c}" for k, c in zip(keys, combo)]


SIMULATE_PRESETS = [
    e
    for e in available("experiment")
    if "dogi_ml train" not in (Path(CONF_DIR) / "experiment" / f"{e}.yaml").read_text() and e != "minos_table1"
]


@pytest.mark.parametrize("experiment", SIMULATE_PRESETS)
def test_every_preset_job_resolves_its_victim_rule(experiment):
    """Every job of every simulate preset runs a rule it was given, never one silently replaced:
    a preset that sets sim.victim beside a scheme with its own rule says victim_for: followers."""
    text = (Path(CONF_DIR) / "experiment" / f"{experiment}.yaml").read_text()
    base = ["+workload=file"] if "workload.format" in text else ["+workload=zipf"]
    n = 0
    for job in sweep_jobs(experiment, base):
        pc, sc = policy_and_sim(compose_simulate([*base, f"+experiment={experiment}", *job]))
        rule, _ = configured_victim(pc, sc)
        if sc.get("victim") is not None and pc.get("victim") is None:
            assert rule == sc["victim"]
        n += 1
    assert n >= 1


def test_cli_rejects_a_conflict_in_one_line_before_reading_the_trace(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "dogi_ml", "simulate", "+workload=file", "workload.path=/nonexistent.csv"]
        + ["policy=minos", "sim.victim=cost_benefit", "mlflow=false"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: sim.victim=cost_benefit differs from policy=minos"), p.stderr
    assert "policy.victim=null" in lines[0]


# -- effective settings in results and comparisons ----------------------------------------------------


def _result(workload, scheme, **settings):
    base = {"victim": "greedy", "gc_trigger": "free_segments", "op_ratio": 0.1, "segment_blocks": 64, "prefill": True}
    return {
        "workload": workload,
        "policy": scheme,
        "scheme": scheme,
        "victim": {**base, **settings}["victim"],
        "waf": 2.0,
        "gc_writes": 1,
        "user_writes": 1,
        "settings": {**base, **settings},
    }


def test_a_comparison_shows_the_settings_its_runs_differ_in(capsys):
    same = [_result("zipf", "a"), _result("zipf", "b")]
    assert differing_settings(same) == [] and settings_markdown(same) == ""
    mixed = [_result("zipf", "a"), _result("zipf", "b", op_ratio=0.2, victim="fifo"), _result("ycsb", "a")]
    assert differing_settings(mixed) == ["victim", "op_ratio"]
    print_comparison(mixed)
    out = capsys.readouterr().out
    assert "op_ratio" in out and "0.2" in out
    md = settings_markdown(mixed)
    assert "| workload | scheme | victim | op_ratio |" in md and "| zipf | b | fifo | 0.2 |" in md
    # differences between workloads alone (e.g. their capacities) are not a difference of settings
    assert differing_settings([_result("zipf", "a"), _result("ycsb", "a", capacity_blocks=5)]) == []


def test_a_result_records_its_effective_settings():
    writes = hotcold_writes(CAP, 3 * CAP)
    r = Simulator(make_policy("sepbit"), SimConfig(segment_blocks=SEG, op_ratio=0.25, gc_free_ratio=0.05), CAP).run(
        writes
    )
    st = r["settings"]
    assert st["victim"] == "greedy" and st["gc_trigger"] == "free_segments" and st["prefill"] is True
    assert st["gc_free_segments"] == int(np.ceil(0.05 * r["physical_segments"]))  # the ratio, as segments
    assert st["segment_blocks"] == SEG and st["capacity_blocks"] == CAP and st["op_ratio"] == 0.25
    json.dumps(st)  # plain JSON


def test_simulate_writes_settings_to_json_and_mlflow(tmp_path):
    """The command's JSON and its MLflow run carry the effective settings (victim rule included)."""
    import mlflow

    db = tmp_path / "mlruns.db"
    out = tmp_path / "r.json"
    p = subprocess.run(
        [sys.executable, "-m", "dogi_ml", "--quiet", "simulate", "+workload=zipf", "workload.capacity_blocks=8192"]
        + ["workload.write_volume=2", "sim.segment_blocks=64", "policy=sepbit", f"sim.output={out}", "plot=false"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{db}"},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(out.read_text())
    # configured: no rule (null); effective: greedy, SepBIT having no rule of its own
    assert r["settings"]["victim"] == "greedy" and r["config"]["victim"] is None
    assert r["numerics"]["mode"] == "portable"  # the command line pins the numerics (dogi_ml.determinism)
    mlflow.set_tracking_uri(f"sqlite:///{db}")
    runs = mlflow.search_runs(experiment_names=["simulate"])
    assert runs["params.effective.victim"].tolist() == ["greedy"]
    assert runs["params.sim.victim"].tolist() == ["null"]
