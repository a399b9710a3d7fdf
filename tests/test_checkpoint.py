"""Issue 41 (preemptible simulations): a run checkpointed at chunk boundaries (sim.checkpoint_every)
and stopped, in-process after a random checkpoint or by SIGKILL at a random moment, resumes from
its checkpoint to the uninterrupted run's result to the last digit
(:func:`dogi_ml.determinism.outcome_digest`: every key but the timings), for every scheme in
``conf/policy/``; a checkpoint of another job is refused naming the key that differs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import Stop, run_stopped
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from dogi_ml.determinism import outcome_digest
from dogi_ml.errors import ConfigError
from dogi_ml.pipeline.simulate import simulate
from dogi_ml.policies.sepbit import SepBIT
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.sim import checkpoint as ckpt
from dogi_ml.traces.generators import zipf

CONF = Path(__file__).resolve().parent.parent / "conf"
CAP = 16384
SIM = {"capacity_blocks": CAP, "segment_blocks": 64, "op_ratio": 0.2, "chunk_blocks": 4096}
EVERY = 8192  # a checkpoint at every other chunk boundary: 5 of them
#: the learned schemes trained on this small trace, several times, mid-run (their defaults wait
#: for more samples than it has)
LEARNED = {
    "dogi": {"retrain_every": 8192, "min_samples": 300, "max_samples": 20000, "model_params": {"epochs": 1}},
    "phftl": {"retrain_every": 8192, "sample_every": 2, "min_samples": 300, "max_train": 2000,
              "model_params": {"epochs": 2, "hidden": 16}},
    "mldt": {"retrain_every": 8192, "sample_every": 2, "min_samples": 300, "max_train": 2000, "history": 4,
             "model_params": {"epochs": 2, "channels": [8, 8]}},
    "shiro": {"window": 0.25, "sample_every": 2, "min_samples": 600, "max_train": 1000,
              "model_params": {"epochs": 1, "batch_size": 64, "patience": 1, "hidden": 8, "lr": 0.001}},
    "nodap": {"max_groups": 3},
}  # fmt: skip
LEARNED.update(phftl_ng=LEARNED["phftl"], shiro_cb=LEARNED["shiro"], shiro_ng=LEARNED["shiro"])
POLICIES = sorted(p.stem for p in (CONF / "policy").glob("*.yaml"))


@pytest.fixture(scope="module")
def trace():
    return zipf(CAP, 3 * CAP, seed=5, theta=1.0)


def policy_config(name: str, **params) -> dict:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="simulate", overrides=[f"policy={name}"])
    policy = OmegaConf.to_container(cfg.policy, resolve=True)
    policy["params"] = {**(policy.get("params") or {}), **LEARNED.get(name, {}), **params}
    return policy


def sim_config(**extra) -> dict:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="simulate", overrides=[])
    return {**OmegaConf.to_container(cfg.sim, resolve=True), **SIM, **extra}


@pytest.fixture(scope="module")
def frozen_bundle(trace, tmp_path_factory):
    """dogi_frozen runs a DOGI deployment bundle: one made on this trace (int8 MLP deployed)."""
    from dogi_ml.pipeline.replay import export_dogi_bundle

    params = {
        "deployed": "int8", "int8_runtime": "numba", "retrain_every": 8192, "min_samples": 300,
        "max_samples": 20000, "model_params": {"epochs": 2}, "fallback_compare": "none", "fallback_accuracy": 0.0,
    }  # fmt: skip
    out = tmp_path_factory.mktemp("bundle") / "dogi"
    export_dogi_bundle(trace, {"name": "dogi", "params": params}, sim_config(victim=None), out)
    return out


@pytest.fixture(scope="module")
def hybrid_bundle(trace, tmp_path_factory):
    """hybrid_frozen runs a hybrid deployment bundle: one made on this trace (its final model, int8)."""
    from dogi_ml.pipeline.replay import export_dogi_bundle

    params = {"deployed": "int8", **LEARNED["dogi"], "fallback_compare": "none", "fallback_accuracy": 0.0}
    out = tmp_path_factory.mktemp("bundle") / "hybrid"
    export_dogi_bundle(trace, {"name": "hybrid", "params": params}, sim_config(victim=None), out)
    return out


#: the frozen schemes' bundles (fixtures)
BUNDLES = {"dogi_frozen": "frozen_bundle", "hybrid_frozen": "hybrid_bundle"}
_REFERENCES: dict = {}


def reference_run(name: str, trace, policy: dict) -> dict:
    """The uninterrupted run (checkpoints off), once per scheme."""
    if name not in _REFERENCES:
        _REFERENCES[name] = json.loads(json.dumps(simulate(trace, policy, sim_config(), progress=False), default=float))
    return _REFERENCES[name]


@pytest.mark.parametrize("name", POLICIES)
def test_resumed_run_equals_the_uninterrupted_one(name, trace, tmp_path, monkeypatch, request):
    """Stopped after a random checkpoint (seeded by the scheme's name), rerun: the same outcome."""
    params = {"bundle": str(request.getfixturevalue(BUNDLES[name]))} if name in BUNDLES else {}
    policy = policy_config(name, **params)
    reference = reference_run(name, trace, policy)
    sim_cfg = sim_config(checkpoint_every=EVERY, checkpoint_dir=str(tmp_path / "ckpt"))
    k = random.Random(name).randint(1, 4)
    run_stopped(trace, policy, sim_cfg, k, monkeypatch)
    header = ckpt.Checkpointer(tmp_path / "ckpt", {}).header()
    assert header["position"] > 0
    # when checkpoints are taken is no part of the job: the rerun takes no more of them
    resumed = simulate(trace, policy, {**sim_cfg, "checkpoint_every": 10**9}, progress=False)
    assert outcome_digest(json.loads(json.dumps(resumed, default=float))) == outcome_digest(reference), name
    assert resumed["waf"] == reference["waf"]
    assert not (tmp_path / "ckpt" / ckpt.FILE_NAME).exists()  # a finished run deletes its checkpoint
    if name in ("dogi", "phftl", "mldt", "shiro"):  # stopped mid-training: models before and after
        history = resumed.get("training_history") or []
        trained = [h for h in history if h.get("user_writes", 0) <= header["position"] and "action" in h]
        assert len(history) > len(trained) >= 1, name


def test_a_checkpoint_of_another_job_is_refused_by_key(trace, tmp_path, monkeypatch):
    """Another seed, another trace, another code version: a one-line error naming the key and
    the fix, never a silent resume; the checkpoint stays for its own job."""
    policy = policy_config("sepbit")
    sim_cfg = sim_config(checkpoint_every=EVERY, checkpoint_dir=str(tmp_path))
    run_stopped(trace, policy, sim_cfg, 2, monkeypatch)
    with pytest.raises(ConfigError) as err:
        simulate(trace, policy, {**sim_cfg, "seed": 2}, progress=False)
    message = str(err.value)
    assert "\n" not in message
    assert "sim.seed is 1 there, 2 here" in message and "remove" in message and "sim.checkpoint_dir" in message
    other = zipf(CAP, 3 * CAP, seed=6, theta=1.0)
    with pytest.raises(ConfigError, match=r"trace\.digest is \w+ there, \w+ here"):
        simulate(other, policy, sim_cfg, progress=False)
    with monkeypatch.context() as m:
        m.setattr(ckpt, "_code_version", "0123456789abcdef")
        with pytest.raises(ConfigError, match="code.version is .* there, 0123456789abcdef here"):
            simulate(trace, policy, sim_cfg, progress=False)
    assert outcome_digest(simulate(trace, policy, sim_cfg, progress=False)) == outcome_digest(
        simulate(trace, policy, sim_config(), progress=False)
    )


def test_dogi_with_its_background_threads_resumes(trace, tmp_path, monkeypatch):
    """DOGI with its feature thread (the next chunk's features and int8 predictions) and its ghost
    on a worker thread: their jobs are drained at the checkpoint, their results stored."""
    policy = policy_config("dogi", deployed="int8", int8_runtime="numba", feature_thread=True, ghost_process="thread")
    reference = simulate(trace, policy, sim_config(), progress=False)
    assert reference["inferred_ahead_used"] > 0
    sim_cfg = sim_config(checkpoint_every=EVERY, checkpoint_dir=str(tmp_path))
    run_stopped(trace, policy, sim_cfg, 3, monkeypatch)
    assert outcome_digest(simulate(trace, policy, sim_cfg, progress=False)) == outcome_digest(reference)


def test_the_engines_own_generator_resumes(trace, tmp_path, monkeypatch):
    """d-choices victims draw from the engine's generator (its state is a counter of the engine's
    arrays): resumed, the same victims."""
    policy = policy_config("nosep")
    reference = simulate(trace, policy, sim_config(victim="d_choices"), progress=False)
    sim_cfg = sim_config(victim="d_choices", checkpoint_every=EVERY, checkpoint_dir=str(tmp_path))
    run_stopped(trace, policy, sim_cfg, 2, monkeypatch)
    assert outcome_digest(simulate(trace, policy, sim_cfg, progress=False)) == outcome_digest(reference)


def test_checkpoint_minutes_zero_checkpoints_at_every_chunk_boundary(trace, tmp_path, monkeypatch):
    policy = policy_config("nosep")
    sim_cfg = sim_config(checkpoint_minutes=0, checkpoint_dir=str(tmp_path))
    run_stopped(trace, policy, sim_cfg, 3, monkeypatch)
    assert ckpt.Checkpointer(tmp_path, {}).header()["position"] == 3 * SIM["chunk_blocks"]


def test_checkpoint_settings_are_checked(trace, tmp_path):
    policy = policy_config("nosep")
    with pytest.raises(ConfigError, match="sim.checkpoint_dir=PATH"):
        simulate(trace, policy, sim_config(checkpoint_every=EVERY), progress=False)
    with pytest.raises(ConfigError, match="set sim.checkpoint_every=WRITES or sim.checkpoint_minutes"):
        simulate(trace, policy, sim_config(checkpoint_dir=str(tmp_path)), progress=False)
    with pytest.raises(ConfigError, match="sim.checkpoint_every=0 must be positive"):
        simulate(trace, policy, sim_config(checkpoint_every=0, checkpoint_dir=str(tmp_path)), progress=False)
    with pytest.raises(ConfigError, match="ghost_process=True runs its ghost in a child process"):
        simulate(trace, policy_config("dogi", ghost_process=True), sim_config(checkpoint_every=EVERY,
                 checkpoint_dir=str(tmp_path)), progress=False)  # fmt: skip


# The job's code version is the test's: other work in a shared checkout may edit a source file
# between the kill and the rerun, which (rightly) makes the checkpoint another job's.
JOB = textwrap.dedent(
    """
    import json, sys
    from dogi_ml.pipeline.simulate import simulate
    from dogi_ml.sim import checkpoint
    from dogi_ml.traces.generators import zipf
    checkpoint._code_version = {version!r}
    policy, sim_cfg, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
    result = simulate(zipf({cap}, 3 * {cap}, seed=5, theta=1.0), policy, sim_cfg, progress=False)
    open(out, "w").write(json.dumps(result, default=float))
    """
).format(cap=CAP, version=ckpt.code_version())


@pytest.mark.parametrize("name", ["sepbit", "dogi"])
def test_sigkill_at_a_random_moment_then_rerun(name, trace, tmp_path):
    """A job killed with SIGKILL at a random moment (seeded) after its first checkpoint, then
    rerun as it was: the uninterrupted result to the last digit (DOGI: killed while training)."""
    policy = policy_config(name)
    reference = reference_run(name, trace, policy)
    ckdir = tmp_path / "ckpt"
    sim_cfg = sim_config(checkpoint_every=EVERY, checkpoint_dir=str(ckdir))
    out = tmp_path / "result.json"
    cmd = [sys.executable, "-c", JOB, json.dumps(policy), json.dumps(sim_cfg), str(out)]
    env = {**os.environ, "DOGI_ML_QUIET": "1"}
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # killed once a randomly chosen checkpoint is on disk, a random few ms later: in the loop,
    # in a retraining or in the middle of writing the next checkpoint
    rng = random.Random(f"kill {name}")
    target = rng.choice([2, 3, 4]) * EVERY
    reader = ckpt.Checkpointer(ckdir, {})
    deadline = time.monotonic() + 120
    while job.poll() is None and time.monotonic() < deadline:
        header = reader.header() if (ckdir / ckpt.FILE_NAME).exists() else None
        if header is not None and header["position"] >= target - SIM["chunk_blocks"]:
            break
        time.sleep(0.002)
    time.sleep(rng.uniform(0.0, 0.02))
    job.send_signal(signal.SIGKILL)
    job.wait()
    assert job.returncode == -signal.SIGKILL, (
        f"the job ended before it was killed: {job.stderr.read().decode()[-2000:]}"
    )
    assert not out.exists()
    position = ckpt.Checkpointer(ckdir, {}).header()["position"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = json.loads(out.read_text())
    assert 0 < position < resumed["user_writes"]
    assert outcome_digest(resumed) == outcome_digest(reference)


class RandomRetirement(SepBIT):
    """SepBIT that, between chunks, seals a group drawn from NumPy's and Python's global
    generators: its outcome depends on the process-wide random states, which no object holds."""

    def between_chunks(self, sim) -> None:
        super().between_chunks(sim)
        sim.retire_group(int(np.random.randint(self.n_groups)) if random.random() < 0.9 else 0)


def test_process_wide_random_states_are_restored(trace, tmp_path):
    """A run resumed in a process whose global generators have moved on (as a new process's
    would) continues with the states it was checkpointed with."""
    cfg = SimConfig(**{k: v for k, v in SIM.items()})
    writes = trace.block_writes

    def start():
        np.random.seed(7)
        random.seed(7)
        sim = Simulator(RandomRetirement(), cfg, CAP)
        sim.prefill()
        return sim

    sim = start()
    sim.feed(writes)
    reference = sim.result()
    checkpointer = ckpt.Checkpointer(
        tmp_path, {"job": "random retirement"}, every_writes=EVERY, externals={"writes": writes}
    )

    def stop_at_second(s, position):
        checkpointer.after_chunk(s, position)
        if checkpointer.saved == 2:
            raise Stop

    with pytest.raises(Stop):
        start().feed(writes, after_chunk=stop_at_second)
    np.random.seed(99)  # a fresh process's generators
    random.seed(99)
    resumed, position = checkpointer.load()
    resumed.feed(writes[position:])
    assert outcome_digest(resumed.result()) == outcome_digest(reference)


def test_a_preempted_submitit_job_checkpoints_requeues_and_resumes(trace, tmp_path):
    """The Hydra submitit launcher's semantics (its ``checkpoint`` resubmits the same call) through
    submitit's local executor: the signal arrives while the job is about to write a checkpoint; the job finishes that checkpoint first (the signal waits for the chunk boundary),
    then submitit requeues it, and the requeued job resumes from it to the uninterrupted result.
    Without the deferral the signal ends the job before the checkpoint is written."""
    import submitit

    policy = policy_config("sepbit")
    reference = reference_run("sepbit", trace, policy)
    ckdir = tmp_path / "ckpt"
    sim_cfg = sim_config(checkpoint_every=EVERY, checkpoint_dir=str(ckdir))
    starts = tmp_path / "starts.txt"
    version = ckpt.code_version()

    class SimulateJob:  # defined here: cloudpickle sends it by value to the job's process
        def __call__(self, policy, sim_cfg):
            from dogi_ml.pipeline.simulate import simulate
            from dogi_ml.sim import checkpoint
            from dogi_ml.traces.generators import zipf

            checkpoint._code_version = version  # see JOB
            header = checkpoint.Checkpointer(sim_cfg["checkpoint_dir"], {}).header()
            with open(starts, "a") as f:
                f.write(f"{header['position'] if header else 0}\n")
            save = checkpoint.Checkpointer.save

            def save_once_preempted(self, sim, position):
                deadline = time.monotonic() + 30
                while header is None and self._requested is None and time.monotonic() < deadline:
                    time.sleep(0.01)  # the first run waits here for its preemption
                return save(self, sim, position)

            checkpoint.Checkpointer.save = save_once_preempted
            return simulate(zipf(CAP, 3 * CAP, seed=5, theta=1.0), policy, sim_cfg, progress=False)

        def checkpoint(self, *args, **kwargs):
            return submitit.helpers.DelayedSubmission(self, *args, **kwargs)

    # submitit's local executor signals a job ``signal_delay_s`` before its time limit (its
    # stand-in for SLURM's preemption and time-limit signal) and requeues it as SLURM would
    executor = submitit.LocalExecutor(folder=tmp_path / "submitit", max_num_timeout=3)
    executor.update_parameters(timeout_min=12 / 60, signal_delay_s=4)
    resumed = executor.submit(SimulateJob(), policy, sim_cfg).result()
    positions = [int(x) for x in starts.read_text().split()]
    assert len(positions) >= 2 and positions[0] == 0, positions  # started, requeued
    assert positions[1] >= EVERY  # from the checkpoint written after the signal
    assert outcome_digest(json.loads(json.dumps(resumed, default=float))) == outcome_digest(reference)
