# Two commands do all set-up on a fresh machine:
#   make demo   - install, index the bundled sample corpus, search it
#   make test   - install, lint, run the test suite
PYTHON ?= python3
INDEX ?= out/sample-index

.PHONY: setup demo test lint bench

setup: .setup-done

.setup-done: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh
	touch .setup-done

demo: setup
	ckqti index ckqti/data/sample/corpus.jsonl --out $(INDEX) --force
	ckqti search "what is the daily life of thai people" --index $(INDEX) -k 10

test: setup
	ruff check ckqti indexer retriever scripts tests
	$(PYTHON) -m pytest -q tests

lint:
	ruff check ckqti indexer retriever scripts tests

bench: setup
	$(PYTHON) scripts/bench_search.py
