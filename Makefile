# The two commands of the README's quick start:
#   make lab    set everything up and open JupyterLab on the project
#   make test   set everything up and run the whole test suite
# While working on the code:
#   make check  lint, the fast tests (no browser, notebooks, clusters or slow tests: under a
#               minute on 2 cores) and the size report of minitf/ (tools/size_report.py: it
#               fails when a function grows past 60 lines)
#   make lint   ruff check (and format --check) of minitf/, tests/, bench/ and tools/
#   make format ruff format of the same folders (rewrites files)
#   make stress the load and fault runs of tests/stress (random bytes to every RPC, kill -9 of
#               each task, memory after thousands of failed steps: several minutes)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
LINTED := minitf tests bench tools
FAST   := not browser and not notebooks and not cluster and not slow and not stress

.PHONY: lab test check lint format bench setup setup-lab chromium notebooks clean stress

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $@

$(VENV)/.lab-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test,lab]"
	touch $@

setup: $(VENV)/.test-installed

setup-lab: $(VENV)/.lab-installed

# tests/browser drives Debian's chromium through Playwright (which never downloads a browser):
# installed here when missing and we are root (CI, Binder-like containers), with a CJK font so
# the Chinese notebooks' labels render (tests/browser/test_zh_fonts.py).
chromium:
	@if [ ! -x /usr/bin/chromium ] || ! fc-list :lang=zh 2>/dev/null | grep -q .; then \
	    if [ "$$(id -u)" != 0 ]; then \
	        echo "make: tests/browser needs Debian's chromium and a CJK font:" \
	            "sudo apt-get install chromium fonts-noto-cjk" >&2; \
	        exit 1; fi; \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	        --no-install-recommends chromium fonts-liberation fonts-noto-cjk || exit 1; \
	    [ -x /usr/bin/chromium ] || { echo "make: still no /usr/bin/chromium" >&2; exit 1; }; \
	fi

test: setup chromium
	$(BIN)/python -m pytest -q

check: lint
	$(BIN)/python -m pytest -q -m "$(FAST)"
	$(BIN)/python tools/size_report.py --max-function-lines 60

stress: setup
	$(BIN)/python -m pytest -q -m stress tests/stress

lint: setup
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

format: setup
	$(BIN)/ruff format $(LINTED)

bench: setup
	$(BIN)/python bench/bench_session.py
	$(BIN)/python bench/bench_executor.py $(if $(TF_PYTHON),--tf $(TF_PYTHON))
	$(BIN)/python bench/bench_cluster.py
	$(BIN)/python bench/bench_train.py
	$(BIN)/python bench/bench_queues.py
	$(BIN)/python bench/bench_graph_render.py

lab: setup-lab
	$(BIN)/jupyter lab --notebook-dir=. $(if $(filter 0,$(shell id -u)),--allow-root,)

# Re-executes every notebook in place (after a change to what minitf prints).
notebooks: setup-lab
	for nb in notebooks/*.ipynb notebooks/solutions/*.ipynb; do \
	    MINITF_STATE_DIR=$$(mktemp -d) NUMBA_ENABLE_CUDASIM=1 \
	    $(BIN)/jupyter nbconvert --to notebook --execute --inplace $$nb || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
