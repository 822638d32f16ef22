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
	@echo "== wspc check examples/rmsnorm.wsp"
	$(BIN)/wspc check examples/rmsnorm.wsp
	@echo "== wspc compile examples/rmsnorm.wsp --emit ast (first lines)"
	@$(BIN)/wspc compile examples/rmsnorm.wsp --emit ast | head -n 20
	@echo "== a program with mistakes: wspc check reports every one (exit status 1 is expected)"
	-$(BIN)/wspc check examples/errors_demo.wsp

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/frontend.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
