# Two commands do everything on a fresh machine:
#   make book   builds the HTML book (_build/html/index.html), every chapter executed
#   make test   lint, unit tests, every chapter under nbval, a strict book build, a browser check
# Both create .venv and install everything they need on first use.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# An index pip also reads for torch: on a stock Linux machine `torch==2.13.0` is the
# CUDA build (gigabytes); `make book TORCH_INDEX=https://download.pytorch.org/whl/cpu`
# takes PyTorch's CPU build (2.13.0+cpu) instead.
TORCH_INDEX ?=
VENV     := .venv
PY       := $(VENV)/bin/python
JB       := $(VENV)/bin/jupyter-book
BUILD    := _build
NBVAL    := $(BUILD)/nbval
LINT     := $(BUILD)/lint
CACHE    := $(BUILD)/.jupyter_cache
RUNS     := $(BUILD)/runs
# `make portability`: the book models trained again, with another seed and on another
# CPU kernel path, and the chapters that load them run against them
OTHER_SEED := 1
OTHER_RUNS := $(BUILD)/runs-other
MODEL_CHAPTERS := $(shell grep -l 'book_model\|BOOK_MODELS\|table3_cpu' book/*.md)
SETUP    := $(VENV)/.installed
SRC      := $(shell find src -type f -name '*.py' 2>/dev/null) $(wildcard src/aiayn)
CHAPTERS := $(shell grep -l '^kernelspec:' book/*.md)

.PHONY: help book models sync test lint unit notebooks strict-book browser chromium \
        portability clean

help:
	@echo "make book   build the HTML book into $(BUILD)/html"
	@echo "make test   run every check: lint, unit tests, notebooks, strict build, browser"
	@echo "make models train the models the final chapters load (into $(RUNS))"
	@echo "make sync   copy the library's definitions into the chapters that teach them"
	@echo "make portability  the chapters with trained models, on another seed and CPU path"
	@echo "make clean  remove $(BUILD) (keeps $(VENV))"

# --- setup -------------------------------------------------------------------------------------
$(SETUP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) \
	  -r requirements.txt
	$(PY) -m ipykernel install --sys-prefix --name aiayn --display-name "Python 3 (aiayn)" >/dev/null
	touch $@

# jupyter-cache keys on cell text only: any change under src/ (or to the installed packages)
# empties the cache, Sphinx's saved doctrees and the models the final chapters trained, so every
# chapter is read, executed and trained again against the new code, not kept from the old one.
$(BUILD)/.src-stamp: $(SRC) $(SETUP)
	rm -rf $(CACHE) $(BUILD)/.doctrees $(RUNS) $(OTHER_RUNS)
	mkdir -p $(BUILD)
	touch $@

# --- the trained models -------------------------------------------------------------------------
# The final chapters load trained models; they are made here, once, before any chapter runs, so
# that no executed chapter trains (or depends on the machine's speed, or on the order in which
# the chapters run). A finished model is reused: only a change under src/ retrains.
models: $(SETUP) $(BUILD)/.src-stamp
	$(PY) -m aiayn.book_models --runs $(RUNS) --jobs 2

# --- the book ----------------------------------------------------------------------------------
book: $(SETUP) $(BUILD)/.src-stamp models
	$(JB) build .
	@echo "Open $(BUILD)/html/index.html"

# --- the taught code ----------------------------------------------------------------------------
# src/aiayn is the source of every definition a chapter teaches; this copies each one into the
# chapters (tests/test_book_matches_library.py fails until it has been run).
sync: $(SETUP)
	$(PY) tests/book_code.py

# --- the tests ---------------------------------------------------------------------------------
test: lint unit notebooks strict-book browser
	@echo "make test: every check passed"

# Spelling (codespell) over the book, the library and the tests; the library and tests, then the
# chapters' code: every chapter converted to a git-ignored
# notebook under $(LINT) (by jupytext, in one process: tests/to_notebooks.py) and checked cell
# by cell with book/ruff.toml (88 columns, pyflakes).
lint: $(SETUP)
	$(VENV)/bin/codespell book src tests README.md LICENSE CITATION.cff _config.yml _toc.yml
	$(VENV)/bin/ruff check src tests
	rm -rf $(LINT)
	$(PY) tests/to_notebooks.py $(LINT) $(CHAPTERS)
	test "$$(ls $(LINT)/*.ipynb | wc -l)" -eq "$(words $(CHAPTERS))"
	$(VENV)/bin/ruff check --config book/ruff.toml $(LINT)/*.ipynb

# Two pytest-xdist workers, one per core; OMP_WAIT_POLICY=PASSIVE keeps the OpenMP threads of
# one worker from spinning on the core that the other one needs.
unit: $(SETUP)
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -n 2 tests

# Every chapter, converted to a git-ignored .ipynb, executed cell by cell by nbval. The outputs
# of the chapters that pass are stored in the book's execution cache (tests/nbval_book_cache.py),
# so the strict build below renders them instead of executing every chapter a second time.
# Two chapters run at a time (pytest-xdist; --dist loadscope keeps a chapter's cells, in order,
# on one worker).
notebooks: $(SETUP) $(BUILD)/.src-stamp models
	rm -rf $(NBVAL)
	$(PY) tests/to_notebooks.py $(NBVAL) $(CHAPTERS)
	test "$$(ls $(NBVAL)/*.ipynb | wc -l)" -eq "$(words $(CHAPTERS))"
	rm -rf $(CACHE)
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest --nbval-lax --nbval-current-env -n 2 \
	  --dist loadscope -p tests.notebook_durations -p tests.nbval_book_cache \
	  --book-cache $(CACHE) $(NBVAL)

# Warnings are errors (-W), every reference must resolve (-n), failing cells raise;
# --all rebuilds every page so that no warning hides behind an earlier build.
strict-book: $(SETUP) $(BUILD)/.src-stamp models
	$(JB) build . --all -W -n --keep-going

browser: $(SETUP) chromium
	$(PY) -m pytest -o addopts="" tests/browser

chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian's chromium for the browser check"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else \
	    echo "The browser check needs /usr/bin/chromium: run 'sudo apt-get install chromium chromium-driver'" >&2; \
	    exit 1; \
	  fi; \
	fi

# A reader's machine is not this one: its CPU may take another kernel path (AVX2,
# AVX-512, ARM) and round differently, and every trained model differs from the book's in
# its last bits, more after a longer run; another seed differs more. So the book models
# are trained again with seed OTHER_SEED on the kernel path tests/other_kernels.py names
# (ATEN_CPU_CAPABILITY), and every chapter that reads them runs against those models:
# a claim that holds for one training run only fails here.
portability: $(SETUP) $(BUILD)/.src-stamp
	export AIAYN_BOOK_SEED=$(OTHER_SEED) AIAYN_RUNS=$(abspath $(OTHER_RUNS)) \
	  ATEN_CPU_CAPABILITY=$$($(PY) tests/other_kernels.py); \
	echo "book models with seed $$AIAYN_BOOK_SEED on the $$ATEN_CPU_CAPABILITY path"; \
	$(PY) -m aiayn.book_models --runs $(OTHER_RUNS) --jobs 2; \
	rm -rf $(BUILD)/nbval-other; \
	$(PY) tests/to_notebooks.py $(BUILD)/nbval-other $(MODEL_CHAPTERS); \
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest --nbval-lax --nbval-current-env -n 2 \
	  --dist loadscope -p tests.notebook_durations $(BUILD)/nbval-other
	@# the chapters loaded those models: none trained one of its own
	test -z "$$(find $(BUILD)/nbval-other -name '*.pt')"

clean:
	rm -rf $(BUILD)
