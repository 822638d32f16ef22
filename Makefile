# wspc — the two commands a fresh machine needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MPI    := $(VENV)/.installed-mpi

.PHONY: install demo test bench fuzz clean

# the package and its C runtime (built now, so the first `wspc run` compiles only its module)
install: $(STAMP)

# editable_mode=compat: a plain path entry, not setuptools' import hook (~15 ms per start)
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]" --config-settings editable_mode=compat
	$(BIN)/python -m ptowsp.backends.cpu.build
	touch $(STAMP)

# the `mpi` extra (mpi4py and the mpich wheel) for the MPI tests; `make demo` does without it
$(MPI): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[test,mpi]" --config-settings editable_mode=compat
	touch $(MPI)

demo: $(STAMP)
	@echo "== 1. check a program (language.md's first example)"
	$(BIN)/wspc check examples/rmsnorm.wsp
	@echo
	@echo "== 2. run it on random inputs with cpu_sim: C kernels on the multi-threaded runtime"
	$(BIN)/wspc run examples/rmsnorm.wsp --bind B=4 --bind T=64 --random-inputs 0 --stats
	@echo
	@echo "== 3. softmax.wsp through the Python API, checked against the ref back end and NumPy"
	$(BIN)/python examples/demo.py
	@echo
	@echo "== 4. a program with six mistakes: every one is reported, with a fix where one is known"
	@$(BIN)/wspc check examples/errors_demo.wsp; \
	  echo "(wspc exited with status $$?: 1 means the program has errors)"
	@echo
	@echo "== 5. the PTO-WSP seed README's quick start, unchanged, through the pto_wsp Python API"
	$(BIN)/python examples/python/seed_quickstart.py
	@echo
	@echo "== 6. rmsnorm.wsp as a CANN project for an Ascend NPU (build it where CANN is installed)"
	$(BIN)/wspc compile examples/rmsnorm.wsp --target ascend_npu -o build/rmsnorm_npu
	@ls build/rmsnorm_npu
	$(BIN)/wspc run examples/worker_pool.wsp --random-inputs 0 --report build/worker_pool_report.html && echo "== the timeline report of a CSP run: open build/worker_pool_report.html in a browser (docs/tools.md)"
	$(BIN)/wspc tune examples/softmax.wsp --budget 16

test: $(STAMP) $(MPI)
	$(BIN)/python -m pytest -q

bench: $(STAMP) $(MPI)
	$(BIN)/python benchmarks/frontend.py
	$(BIN)/python benchmarks/kernels.py
	$(BIN)/python benchmarks/rope.py
	$(BIN)/python benchmarks/transposed_views.py
	$(BIN)/python benchmarks/gather.py
	$(BIN)/python benchmarks/tasks.py
	$(BIN)/python benchmarks/await_costs.py
	$(BIN)/python benchmarks/compile.py
	$(BIN)/python benchmarks/mesh.py
	$(BIN)/python benchmarks/dynamic.py
	$(BIN)/python benchmarks/csp.py
	$(BIN)/python benchmarks/optimizer.py
	$(BIN)/python benchmarks/trace.py
	$(BIN)/python benchmarks/layer.py
	$(BIN)/python benchmarks/fidelity.py
	$(BIN)/python benchmarks/ascend_sort.py
	$(BIN)/python benchmarks/mesh_mpi.py

# Mutated programs through check and run (fuzz/harness.py); not part of `make test`, which
# runs a fixed slice. FUZZ_ARGS: e.g. --count 10000, --minutes 30, --seed 7.
FUZZ_ARGS ?= --count 1000
fuzz: $(STAMP)
	$(BIN)/python -m fuzz $(FUZZ_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
