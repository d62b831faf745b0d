# QA Judge: one command to run the demo, one to run the tests (see README).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: venv run test test-sqlite test-postgres lint bench

$(VENV)/.installed: requirements.txt
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@mkdir -p var
	@echo "installing pinned requirements into $(VENV) (log: var/pip-install.log) ..."
	@$(PY) -m pip install --upgrade pip > var/pip-install.log 2>&1 && \
	  $(PY) -m pip install -r requirements.txt >> var/pip-install.log 2>&1 || \
	  { tail -30 var/pip-install.log; exit 1; }
	touch $@

venv: $(VENV)/.installed

# make run PORT=8001 HOST=0.0.0.0: another port or interface for the demo's web server.
run: venv
	$(PY) manage.py rundemo $(if $(HOST),--host $(HOST),) $(if $(PORT),--port $(PORT),)

test: venv
	bash scripts/test.sh

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) scripts/check_private_imports.py

bench: venv
	$(PY) -m bench $(if $(B),--only $(B),)
