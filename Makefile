# trkx developer entry points. Every target bootstraps .venv when it is missing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
TORCH_VERSION := 2.13.0

.PHONY: test demo train-demo lint clean-venv

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	# Pin torch first: an unpinned torch pulls several GB of CUDA packages on a CPU machine.
	$(PY) -m pip install "torch==$(TORCH_VERSION)"
	$(PY) -m pip install -e ".[dev]"
	touch $@

test: $(VENV)/.installed
	$(PY) -m pytest -q

TRKX_DATA ?= $(abspath ../shared/data/trackml)
export TRKX_DATA

# `trkx demo`: the shipped cells set (trkx/models/pu200_cells: the event has cells) on the full
# real pile-up-200 event 21001: tracks in runs/demo, the efficiency on its pixel truth printed,
# the evaluation and its plots in runs/demo/evaluate (about 10 s on 2 CPU cores once the models
# are loaded).
demo: $(VENV)/.installed
	$(PY) -m trkx demo --out runs/demo

# Training from nothing: the pile-up-20 quick start (simulate, train, infer, evaluate; minutes).
train-demo: $(VENV)/.installed
	$(PY) -m trkx run configs/quickstart.yaml --workdir runs/quickstart

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check trkx tests benchmarks

clean-venv:
	rm -rf $(VENV)
