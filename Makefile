# The two commands a new user needs: `make run` and `make test`.
# Each creates .venv and installs the project into it when missing (or when pyproject.toml changed).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint format bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,onnx]'
	# An editable install leaves the sources uncompiled; where PYTHONDONTWRITEBYTECODE is
	# set, every process would compile them again (0.1-0.2 s of each start).
	$(BIN)/python -m compileall -q vm compiler serialization benchmarks
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m benchmarks.main_job

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# `make bench BENCH_ARGS="--quick --models mlp,lstm"` passes options to `python -m benchmarks`.
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
