# The two commands of the README's quick start:
#   make lab    set everything up and open JupyterLab on the project
#   make test   set everything up and run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: lab test bench setup setup-lab clean

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

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python bench/bench_session.py
	$(BIN)/python bench/bench_executor.py

lab: setup-lab
	$(BIN)/jupyter lab --notebook-dir=. $(if $(filter 0,$(shell id -u)),--allow-root,)

clean:
	rm -rf $(VENV) build *.egg-info
