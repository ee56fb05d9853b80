# Two commands do everything on a fresh machine:
#   make book   builds the HTML book (_build/html/index.html), every chapter executed
#   make test   lint, unit tests, every chapter under nbval, strict build, PDF, browser check
# Both create .venv and install everything they need on first use.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
# Python keeps the bytecode of what it imports (see SETUP below)
unexport PYTHONDONTWRITEBYTECODE

# An index pip also reads for torch: on a stock Linux machine `torch==2.13.0` is the
# CUDA build (gigabytes); `make book TORCH_INDEX=https://download.pytorch.org/whl/cpu`
# takes PyTorch's CPU build (2.13.0+cpu) instead.
TORCH_INDEX ?=
# The book's repository on GitHub, owner/name: the site's address and the launch links are
# derived from it (aiayn.book.site, book/_ext/book_site.py). `make book
# REPOSITORY=owner/name` names it; otherwise the publishing workflow's GITHUB_REPOSITORY,
# else the git remote origin if it is on GitHub, else none: the book then links to no site.
REPOSITORY ?=
ifneq ($(REPOSITORY),)
export AIAYN_REPOSITORY := $(REPOSITORY)
endif
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
# A set of the library's files: the Python files under some paths, and a list of their names
# that is rewritten only when a file is added or removed: make then sees a deleted file too,
# and not Python's __pycache__ folders, which appear under src/ when the library is first
# imported. $(call python_files,LIST,PATHS) writes the list LIST; it gives the files and LIST.
define python_files
$(shell mkdir -p $(BUILD); { find $(2) -type f -name '*.py' 2>/dev/null || true; } \
  | sort > $(1).new; cmp -s $(1).new $(1) || mv $(1).new $(1); rm -f $(1).new; cat $(1)) $(1)
endef
# every file of the library: the chapters import any of them (the tools, the CLI too)
SRC := $(call python_files,$(BUILD)/.src-files,src)
# the files a trained model depends on: the model and its fast paths, the tasks, decoding
# and evaluation, training, and the book models' table; not the tools or the CLI
MODEL_SRC := $(call python_files,$(BUILD)/.model-src-files,src/aiayn/model src/aiayn/fast \
  src/aiayn/tasks src/aiayn/train src/aiayn/decoding.py src/aiayn/evaluation.py \
  src/aiayn/__init__.py src/aiayn/book/models.py)
CHAPTERS := $(shell grep -l '^kernelspec:' book/*.md)

.PHONY: help setup book models sync test lint unit notebooks strict-book pdf browser chromium \
        portability lock clean

help:
	@echo "make setup  create $(VENV) and node_modules with every package of the locks installed"
	@echo "make book   build the HTML book into $(BUILD)/html"
	@echo "make test   run every check: lint, unit tests, notebooks, strict build, PDF, browser"
	@echo "make models train the models the final chapters load (into $(RUNS))"
	@echo "make sync   copy the library's definitions into the chapters that teach them"
	@echo "make portability  the chapters with trained models, on another seed and CPU path"
	@echo "make pdf    the whole book as one PDF: $(PDF)"
	@echo "make lock   pin every package of the environment into requirements.txt"
	@echo "make clean  remove $(BUILD) (keeps $(VENV))"

# --- setup -------------------------------------------------------------------------------------
# requirements.txt pins every package (make lock); pip does not byte-compile them (on one
# core, every file of torch): Python compiles a module the first time it is imported and
# keeps its bytecode, for the part of the environment that is ever imported. Where
# PYTHONDONTWRITEBYTECODE is set (as on some CI machines) it would compile them again in
# every process: make's commands run without it. JupyterLab in .venv opens a chapter (.md)
# as a notebook: the repository's .jupyter/labconfig setting (Binder reads it from the
# repository, which it copies into the home folder) is copied into the environment.
LAB_SETTING := .jupyter/labconfig/default_setting_overrides.json
$(SETUP): requirements.txt pyproject.toml $(LAB_SETTING)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile \
	  $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -r requirements.txt
	$(PY) -m ipykernel install --sys-prefix --name aiayn --display-name "Python 3 (aiayn)" >/dev/null
	install -D -m 644 $(LAB_SETTING) $(VENV)/etc/jupyter/labconfig/$(notdir $(LAB_SETTING))
	touch $@

# The explorer's JavaScript runtime (onnxruntime-web), at the version package-lock.json pins,
# into node_modules/; the book's build copies the three files a page loads into the site
# (book/_ext/explorer_assets.py): a reader of the built book needs no Node.js.
NODE_MODULES := node_modules/.package-lock.json
$(NODE_MODULES): package.json package-lock.json
	@if ! command -v npm >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian's npm for the explorer's runtime"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; \
	  else \
	    echo "The explorer's runtime needs npm: run 'sudo apt-get install npm'" >&2; exit 1; \
	  fi; \
	fi
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

setup: $(SETUP) $(NODE_MODULES)

# jupyter-cache keys on cell text only: any change under src/ (or to the installed packages)
# empties the cache and Sphinx's saved doctrees, so that every chapter is read and executed
# again against the new code, not kept from the old one.
$(BUILD)/.src-stamp: $(SRC) $(SETUP)
	rm -rf $(CACHE) $(BUILD)/.doctrees
	mkdir -p $(BUILD)
	touch $@

# The trained models are deleted, to be trained again, only when what they were trained with
# changed (MODEL_SRC, or the installed packages): a change to a tool or the CLI keeps them.
$(BUILD)/.models-stamp: $(MODEL_SRC) $(SETUP)
	rm -rf $(RUNS) $(OTHER_RUNS)
	mkdir -p $(BUILD)
	touch $@

# requirements.txt is the lock: every package the book installs, pinned. It is written here
# from the direct pins in pyproject.toml (the extras "book" and "test"), installed into a
# fresh environment; torch without its local label (+cpu), so that the same line takes the
# CPU build from TORCH_INDEX, the plain build elsewhere (macOS, Windows).
LOCK_VENV := $(BUILD)/lock-venv
lock:
	rm -rf $(LOCK_VENV)
	python3 -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install --quiet \
	  $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -e ".[book,test]"
	{ echo "# The book's whole environment, every package pinned: written by \`make lock\` from the"; \
	  echo "# direct pins in pyproject.toml (README: \"The locked environment\"). Do not edit by hand."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable | sed 's/^torch==\([^+]*\)+cpu$$/torch==\1/'; \
	  echo "# the book's own library, from this repository"; \
	  echo "-e ."; } > requirements.txt
	rm -rf $(LOCK_VENV)

# --- the trained models -------------------------------------------------------------------------
# The final chapters load trained models. `make notebooks` (so `make book` and `make test`)
# trains them in the same run as the chapters, on the same two workers (see EXECUTE below);
# `make models` trains them alone. A finished model is reused: only a change to the model, a
# task or training (MODEL_SRC), or to the installed packages, retrains.
models: $(SETUP) $(BUILD)/.models-stamp
	$(PY) -m aiayn.book.models --runs $(RUNS) --jobs 2

# --- the book ----------------------------------------------------------------------------------
# The chapters execute under nbval as for `make test` (both cores, the models trained
# alongside), into the execution cache from which the build renders them.
book: notebooks $(NODE_MODULES)
	$(JB) build .
	@echo "Open $(BUILD)/html/index.html"

# The whole book as one PDF, beside the HTML pages (the published site links to it): the book
# on one page (Sphinx's singlehtml builder; the chapters' outputs come from the execution
# cache, or it executes them), printed by the browser check's Chromium. Nothing is downloaded.
# The one-page build goes to a folder of its own (its own doctrees), so that it can run
# beside the strict build of the HTML pages (`make test` runs the two at once).
PDF := $(BUILD)/html/aiayn.pdf
ONE_PAGE := $(BUILD)/one-page
ONE_PAGE_BUILD = $(JB) build . --builder singlehtml --path-output $(ONE_PAGE)
PRINT_PDF = $(PY) tests/print_pdf.py $(ONE_PAGE)/_build/singlehtml $(PDF)
pdf: $(SETUP) $(NODE_MODULES) notebooks chromium
	$(ONE_PAGE_BUILD)
	$(PRINT_PDF)

# --- the taught code ----------------------------------------------------------------------------
# src/aiayn is the source of every definition a chapter teaches; this copies each one into the
# chapters (tests/test_book_matches_library.py fails until it has been run).
sync: $(SETUP)
	$(PY) tests/book_code.py

# --- the tests ---------------------------------------------------------------------------------
# The strict build, the PDF and the browser check each keep about one core busy (Sphinx
# builds on one, Chromium prints on one, the browser check mostly waits for pages): they
# run two at a time, `alongside`. The strict build beside the PDF's one-page build; then
# the PDF's printing beside the browser check of the pages; then the check of the PDF.
# $(call alongside,A,B,LOG): A, and B at the same time with its output kept in LOG (its
# last line shown, or all of it if B fails); fails if either fails.
alongside = { $(2); } > $(3) 2>&1 & second=$$!; first=0; $(1) || first=$$?; \
  if wait $$second; then tail -n 1 $(3); \
  else cat $(3); echo "failed: the command whose output is above" >&2; exit 1; fi; \
  exit $$first
PDF_CHECK := tests/browser/test_published.py::test_the_pdf_is_the_whole_book_numbered_like_the_html
PAGES_CHECK = $(BROWSER_CHECK) tests/browser --deselect $(PDF_CHECK)
test: lint unit notebooks chromium $(NODE_MODULES)
	$(call alongside,$(STRICT_BUILD),$(ONE_PAGE_BUILD),$(BUILD)/one-page.log)
	$(call alongside,$(PAGES_CHECK),$(PRINT_PDF),$(BUILD)/pdf.log)
	$(BROWSER_CHECK) $(PDF_CHECK)
	@echo "make test: every check passed"

# Spelling (codespell) over the book, the library and the tests; the library and tests, then the
# chapters' code: every chapter converted to a git-ignored
# notebook under $(LINT) (by jupytext, in one process: tests/to_notebooks.py) and checked cell
# by cell with book/ruff.toml (88 columns, pyflakes).
lint: $(SETUP)
	$(VENV)/bin/codespell book src tests README.md LICENSE CITATION.cff _config.yml _toc.yml .github .ci
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/actionlint .github/workflows/*.yml
	rm -rf $(LINT)
	$(PY) tests/to_notebooks.py $(LINT) $(CHAPTERS)
	test "$$(ls $(LINT)/*.ipynb | wc -l)" -eq "$(words $(CHAPTERS))"
	$(VENV)/bin/ruff check --config book/ruff.toml $(LINT)/*.ipynb

# Two pytest-xdist workers, one per core; OMP_WAIT_POLICY=PASSIVE keeps the OpenMP threads of
# one worker from spinning on the core that the other one needs.
unit: $(SETUP)
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -n 2 tests

# Every chapter, converted to a git-ignored .ipynb, executed cell by cell by nbval, with the
# book models trained in the same run (tests/train_book_models.py): two pytest-xdist workers,
# one per core; tests/book_schedule.py hands out the models first, the longest first, then the
# chapters, those that load no model first, each chapter whole on one worker, the longest
# first (by their seconds in the last run, kept in CHAPTER_SECONDS). A chapter that loads a
# model still training waits for it. OMP_WAIT_POLICY=PASSIVE keeps the OpenMP threads of one
# process from spinning on the core that the other one needs.
# AIAYN_SITE empty: a chapter never downloads a book model from the published site; the
# build trains the models it publishes. Each chapter's kernel is forked from a process that
# has imported ipykernel, torch and matplotlib (tests/warm_kernels.py), instead of
# importing them again.
CHAPTER_SECONDS := $(BUILD)/chapter-seconds.json
EXECUTE := OMP_WAIT_POLICY=PASSIVE AIAYN_SITE= $(PY) -m pytest --nbval-lax --nbval-current-env -n 2 \
  -p tests.notebook_durations -p tests.book_schedule --chapter-seconds $(CHAPTER_SECONDS) \
  -p tests.warm_kernels tests/train_book_models.py

# The outputs of the chapters that pass are stored in the book's execution cache
# (tests/nbval_book_cache.py), from which the book build renders them; a chapter the cache
# already holds with the same cells (executed since the last change under src/) is not run
# again. The same run exports the explorer's models (the book models of the cover and of
# Looking inside, exported to ONNX and checked against PyTorch before they are written:
# tests/train_book_models.py) into EXPLORER, from which the build copies them into the
# site (book/_ext/explorer_assets.py).
EXPLORER := $(BUILD)/explorer
notebooks: $(SETUP) $(BUILD)/.src-stamp $(BUILD)/.models-stamp
	rm -rf $(NBVAL)
	$(PY) tests/to_notebooks.py $(NBVAL) $(CHAPTERS)
	test "$$(ls $(NBVAL)/*.ipynb | wc -l)" -eq "$(words $(CHAPTERS))"
	AIAYN_RUNS=$(abspath $(RUNS)) AIAYN_EXPLORER=$(abspath $(EXPLORER)) $(EXECUTE) \
	  -p tests.nbval_book_cache --book-cache $(CACHE) $(NBVAL)

# Warnings are errors (-W), every reference must resolve (-n), failing cells raise;
# --all rebuilds every page so that no warning hides behind an earlier build.
STRICT_BUILD = $(JB) build . --all -W -n --keep-going
strict-book: $(SETUP) $(NODE_MODULES) notebooks
	$(STRICT_BUILD)

# One process: two pytest-xdist workers took longer (each starts its own Chromium and
# JupyterLab).
BROWSER_CHECK = $(PY) -m pytest -o addopts=""
browser: $(SETUP) $(NODE_MODULES) chromium
	$(BROWSER_CHECK) tests/browser

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
# a claim that holds for one training run only fails here. The explorer's models are
# exported from those models too, and checked against PyTorch (beside the book's own).
portability: $(SETUP) $(BUILD)/.models-stamp
	export AIAYN_BOOK_SEED=$(OTHER_SEED) AIAYN_RUNS=$(abspath $(OTHER_RUNS)) \
	  AIAYN_EXPLORER=$(abspath $(BUILD)/explorer-other) \
	  ATEN_CPU_CAPABILITY=$$($(PY) tests/other_kernels.py); \
	echo "book models with seed $$AIAYN_BOOK_SEED on the $$ATEN_CPU_CAPABILITY path"; \
	rm -rf $(BUILD)/nbval-other; \
	$(PY) tests/to_notebooks.py $(BUILD)/nbval-other $(MODEL_CHAPTERS); \
	$(EXECUTE) $(BUILD)/nbval-other
	@# the chapters loaded those models: none trained one of its own
	test -z "$$(find $(BUILD)/nbval-other -name '*.pt')"

clean:
	rm -rf $(BUILD)
