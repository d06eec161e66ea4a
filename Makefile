# Two commands do all the set-up on a fresh machine:
#   make demo   set up, then run the main job (the simulation)
#   make test   set up, then run every test
PY := .venv/bin/python
PYTEST_ARGS ?= -n 2

.PHONY: setup test demo lint bench clean

setup:
	bash scripts/setup.sh

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

demo: setup
	bash scripts/demo.sh

lint: setup
	.venv/bin/ruff check .
	.venv/bin/mypy

bench: setup
	bash scripts/bench.sh

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache .hypothesis
