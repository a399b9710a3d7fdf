"""The MLflow UI shows the project's runs: a tiny ``train`` run, ``mlflow server`` on the
loopback interface, headless Chromium (Debian's chromium + chromium-driver, through Selenium)
on the experiment and the run's page. A screenshot of each page is kept under
``$DOGI_TEST_ARTIFACTS`` (default ``outputs/test-artifacts/``). Skips, with the reason, where
Chromium or its driver is not installed (``.ci/run`` installs them)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import REPO, skip_or_fail_in_ci

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or next(
    (p for p in ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver") if os.path.exists(p)), None
)
ARTIFACTS = Path(os.environ.get("DOGI_TEST_ARTIFACTS", REPO / "outputs" / "test-artifacts"))


@pytest.fixture(scope="module", autouse=True)
def _browser_installed():
    """Without headless Chromium the test skips (fails under CI=true: .ci/run installs it)."""
    if CHROMIUM is None or DRIVER is None:
        skip_or_fail_in_ci(
            "headless Chromium not installed (apt-get install chromium chromium-driver; .ci/run does it)"
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"mlflow server exited with {proc.returncode}:\n{proc.stdout.read()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"mlflow server did not answer {url} within {timeout:.0f} s")


@pytest.fixture
def mlflow_server(tmp_path, monkeypatch):
    """A tiny train run in a private database, and the server over it on 127.0.0.1 (stopped
    at the end). Yields (base URL, TrainResult)."""
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    from dogi_ml import tracking

    monkeypatch.setattr(tracking, "_USER_URI", None)  # artifacts in ./mlartifacts, as `make run`
    import dogi_ml

    result = dogi_ml.train(
        {"name": "zipf", "capacity_blocks": 16384, "write_volume": 6},
        model="logistic",
        overrides=["latency_budget_s=0.01"],
        out_dir=tmp_path / "train",
    )
    port = _free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    proc = subprocess.Popen(
        [
            str(mlflow),
            "server",
            "--backend-store-uri",
            uri,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_http(base + "/health", proc)
        yield base, result
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its worker, nothing else
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def _wait_text(driver, texts: list[str], timeout: float = 60.0) -> str:
    from selenium.webdriver.common.by import By

    end = time.monotonic() + timeout
    body = ""
    while time.monotonic() < end:
        body = driver.find_element(By.TAG_NAME, "body").text
        if all(t in body for t in texts):
            return body
        time.sleep(0.5)
    missing = [t for t in texts if t not in body]
    raise AssertionError(f"the page never showed {missing}; it shows:\n{body[:2000]}")


def test_the_ui_shows_the_train_experiment_and_run(mlflow_server, browser):
    base, result = mlflow_server
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    exp = client.get_experiment_by_name("train")
    run = client.get_run(result.run_id)
    assert run.info.run_name.startswith("logistic on zipf [capacity_blocks=16384, write_volume=6")
    assert {"confusion_matrix.png", "feature_report.png"} <= {a.path for a in client.list_artifacts(result.run_id)}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    browser.get(f"{base}/#/experiments/{exp.experiment_id}/runs")
    _wait_text(browser, ["train", "logistic on zipf"])
    browser.save_screenshot(str(ARTIFACTS / "mlflow_ui_experiment.png"))

    browser.get(f"{base}/#/experiments/{exp.experiment_id}/runs/{result.run_id}")
    body = _wait_text(browser, ["logistic on zipf", "accuracy"])
    browser.save_screenshot(str(ARTIFACTS / "mlflow_ui_run.png"))
    # the run page lists the metrics by name with their values
    acc = f"{result.accuracy:.4f}"[:5]
    assert acc in body, f"accuracy {acc} not on the run page"
    assert (ARTIFACTS / "mlflow_ui_run.png").stat().st_size > 10_000
    # the trained model is an MLflow logged model of the run (issue 41: it said "Logged models (0)")
    _wait_text(browser, ["Logged models (1)", "\nmodel\nReady\n"])
