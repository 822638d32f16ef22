# wspc — the two commands a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean

# editable_mode=compat: a plain path entry, not setuptools' import hook (~15 ms per start)
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]" --config-settings editable_mode=compat
	touch $(STAMP)

demo: $(STAMP)
	@echo "== 1. check a correct program (language.md's first example)"
	$(BIN)/wspc check examples/rmsnorm.wsp
	@echo
	@echo "== 2. the checked program as wspc sees it (wspc compile --emit ast)"
	$(BIN)/wspc compile examples/rmsnorm.wsp --emit ast
	@echo
	@echo "== 3. a program with six mistakes: every one is reported, with a fix where one is known"
	@$(BIN)/wspc check examples/errors_demo.wsp; \
	  echo "(wspc exited with status $$?: 1 means the program has errors)"

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/frontend.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
