# trkx developer entry points. Every target bootstraps .venv when it is missing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
TORCH_VERSION := 2.13.0

.PHONY: test demo lint clean-venv

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

demo: $(VENV)/.installed
	$(PY) -m trkx run configs/quickstart.yaml --workdir runs/quickstart

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check trkx tests benchmarks

clean-venv:
	rm -rf $(VENV)
