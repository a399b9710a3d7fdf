# Quickstart:  make run   (venv + install + the main job)
#              make ui    (the MLflow UI over ./mlruns.db: http://127.0.0.1:5000)
#              make test  (venv + install + the test suite)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install run compare test test-fast bench lint ui notebooks results clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "dogi_ml needs Python 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test]"
	@touch $@

# The main job: learn block lifetimes on YCSB-A, tracked in MLflow (./mlruns.db).
run: install
	$(BIN)/python -m dogi_ml train +workload=ycsb_a

# Every placement scheme (heuristic, learned, oracle) on the same workload.
compare: install
	$(BIN)/python -m dogi_ml simulate -m +workload=ycsb_a policy=nosep,sepgc,sepbit,mida,midas,dac,warcip,phftl,mldt,dogi,fk,nodap

# Tests on TEST_WORKERS processes (pytest-xdist), each test file whole on one worker (its
# module fixtures and compiled loops stay together): on 2 cores with cold kernel caches the
# suite's 2,035 tests took 18 min on a Zen 5 (AVX-512) VM and 29 on a slower VM (fresh-clone CI,
# December 2026), most of it Numba compiling
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test: install
	$(PYTEST)

test-fast: install
	$(PYTEST) -m "not slow"

bench: install
	$(BIN)/python -m dogi_ml bench

# ruff (lint + format check), then import-linter on the installed layout (the card's folders are
# mapped into dogi_ml, so the source tree has no dogi_ml/models): the wheel is built and unpacked into a temporary directory first
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tests/test_layering.py

# The MLflow UI over this directory's runs (./mlruns.db, artifacts in ./mlartifacts), on the
# loopback interface only: open http://127.0.0.1:$(UI_PORT) (UI_PORT=5001 make ui for another port)
UI_PORT ?= 5000
ui: install
	$(BIN)/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/mlruns.db --host 127.0.0.1 --port $(UI_PORT)

# Run every notebook (notebooks/*.py, paired .ipynb) at its default scale and render it to HTML
# under docs/notebooks/ (SCALE=4 make notebooks for bigger runs)
SCALE ?= 1
notebooks: install
	$(BIN)/python notebooks/execute.py --scale $(SCALE) --html docs/notebooks notebooks/[0-9]*.py

# Every file under docs/results from the commands the docs cite (docs/results/regenerate.sh; hours
# on 2 cores): RESULTS="minos shiro" for some families (dogi, minos, shiro, adapt, peers,
# reproduction)
RESULTS ?= all
results: install
	PYTHON=$(BIN)/python bash docs/results/regenerate.sh $(RESULTS)

clean:
	rm -rf $(VENV) outputs multirun .cache mlruns.db mlartifacts
