# Two commands do all the set-up on a fresh machine:
#   make demo   create .venv, install structrag, index the bundled chat, ask sample questions,
#               a live agent memory session, the README as document knowledge
#   make test   lint (ruff), type check (mypy), tests (pytest), and the built wheel installed
#               into a fresh virtual environment and run from outside the checkout
#   make bench LOCOMO=path/to/locomo10.json   recall (in-sample and held-out), perf, report

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DB ?= .demo-index

BENCH_STAMP := $(VENV)/.bench-installed
BENCH_OUT ?= bench-results
BENCH_SIZES ?= 10000,100000,1000000
BENCH_MAX_SECONDS ?= 3600

.PHONY: venv demo test lint typecheck pytest wheel-check bench bench-ingest clean

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "structrag needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	rm -rf $(DEMO_DB)
	$(BIN)/structrag ingest examples/friends_chat.jsonl --db $(DEMO_DB)
	$(BIN)/structrag stats --db $(DEMO_DB)
	$(BIN)/structrag show m11 --db $(DEMO_DB)
	$(BIN)/structrag entities --db $(DEMO_DB) --top 8
	$(BIN)/structrag query 'action(Marco, adopt, *) OR entity:Biscuit' --db $(DEMO_DB) --limit 5
	$(BIN)/structrag ask "When did Marco adopt Biscuit?" --db $(DEMO_DB) --budget 150
	$(BIN)/structrag ask "What did Marco tell Priya about the engine in July 2024?" --db $(DEMO_DB) --budget 200 --explain
	$(BIN)/structrag ask "Who teaches the cooking class, and where did he work before?" --db $(DEMO_DB) --budget 200
	@echo "--- a live agent memory session"
	$(BIN)/structrag memory add "I live in Porto and work at Acme." --db $(DEMO_DB) --agent support-bot --user priya --room dm-priya
	$(BIN)/structrag memory add "I moved to Lisbon last month. I prefer vegetarian food." --db $(DEMO_DB) --agent support-bot --user priya --room dm-priya
	$(BIN)/structrag memory profile --db $(DEMO_DB) --agent support-bot --user priya
	$(BIN)/structrag memory search "Where does Priya live?" --db $(DEMO_DB) --agent support-bot --count 2
	$(BIN)/structrag memory context "Can you book me a table nearby?" --db $(DEMO_DB) --agent support-bot --room dm-priya --user priya --budget 300
	@echo "--- the README as document knowledge"
	$(BIN)/structrag knowledge add README.md --db $(DEMO_DB) --shared
	$(BIN)/structrag knowledge search "Which chat export formats can I ingest?" --db $(DEMO_DB) --count 1

lint: venv
	$(BIN)/ruff check structrag tests benchmarks
	$(BIN)/ruff format --check structrag tests benchmarks

typecheck: venv
	$(BIN)/mypy

pytest: venv
	$(BIN)/pytest -q

wheel-check:
	PYTHON=$(PYTHON) .ci/wheel-check

test: lint typecheck pytest wheel-check

# torch==2.13.0 (a CPU wheel) goes in FIRST: otherwise pip resolves sentence-transformers
# to a multi-GB CUDA build.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	touch $(BENCH_STAMP)

# LoCoMo is not shipped: get locomo10.json from github.com/snap-research/locomo (CC BY-NC 4.0).
bench: $(BENCH_STAMP)
	@test -n "$(LOCOMO)" || { echo "usage: make bench LOCOMO=path/to/locomo10.json" \
		"(github.com/snap-research/locomo, CC BY-NC 4.0)"; exit 2; }
	$(BIN)/structrag bench recall --data $(LOCOMO) --out $(BENCH_OUT)
	$(BIN)/structrag bench loo --data $(LOCOMO) --out $(BENCH_OUT)
	$(BIN)/structrag bench perf --data $(LOCOMO) --out $(BENCH_OUT) \
		--sizes $(BENCH_SIZES) --max-seconds $(BENCH_MAX_SECONDS)
	$(BIN)/structrag bench report $(BENCH_OUT)

bench-ingest: venv
	$(BIN)/python benchmarks/ingest_throughput.py $(LOCOMO)

clean:
	rm -rf $(VENV) $(DEMO_DB) $(BENCH_OUT) .mypy_cache .pytest_cache .ruff_cache
