# The two commands: `make demo` and `make test`. Both set everything up first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck layers unit install bench fuzz reliability clean browser sre-tools screenshots

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/caveat migrate
	$(BIN)/caveat demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

# two workers, each with an embedded PostgreSQL of its own (the suite is bound by one core)
WORKERS ?= 2
unit: $(STAMP) browser sre-tools
	$(BIN)/pytest -q -n $(WORKERS)

test: lint typecheck layers unit

# longer fuzzing than make test's: schemathesis against the HTTP API, and hypothesis
# through the application layer (docs/reliability.md, section 4)
fuzz: $(STAMP)
	CAVEAT_FUZZ_EXAMPLES=500 $(BIN)/pytest -q tests/caveat/test_http_schemathesis.py tests/caveat/test_fuzz.py

# the long runs of issue 14's figures (docs/reliability.md): each bounded, about 30 min in all
reliability: $(STAMP)
	$(BIN)/python -m bench revocation_race --runs 500
	$(BIN)/python -m bench backup
	$(BIN)/python -m bench crash --runs 30  # crash safety, section 5: 2.5 to 4 min
	$(BIN)/python -m bench load --agents 8 --seconds 60  # load, section 6: under 2 min
	$(BIN)/python -m bench replica --runs 50  # read replicas, section 9: about 2 min
	$(BIN)/python -m bench revocation --repeat 6  # revocation as caveat_app, section 7: about 13 min
	CAVEAT_FUZZ_EXAMPLES=500 $(BIN)/pytest -q tests/caveat/test_fuzz.py tests/caveat/test_http_schemathesis.py

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# Debian's Chromium for the SME pages' browser tests (Playwright drives it; no download)
CHROMIUM ?= /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@test -x $(CHROMIUM) || { echo "no Chromium at $(CHROMIUM): install Debian's chromium package" >&2; exit 1; }

# Debian's Prometheus and Alertmanager for the connector tests (tests/stack.py runs them
# on loopback ports; their systemd units are not used)
PROMETHEUS ?= /usr/bin/prometheus
ALERTMANAGER ?= /usr/bin/prometheus-alertmanager
sre-tools:
	@test -x $(PROMETHEUS) -a -x $(ALERTMANAGER) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager >/dev/null; }
	@test -x $(PROMETHEUS) || { echo "no Prometheus at $(PROMETHEUS): install Debian's prometheus package" >&2; exit 1; }
	@test -x $(ALERTMANAGER) || { echo "no Alertmanager at $(ALERTMANAGER): install Debian's prometheus-alertmanager package" >&2; exit 1; }

# docs/images/sme-*.png, from the same browser tests
screenshots: $(STAMP) browser
	CAVEAT_SCREENSHOTS=docs/images $(BIN)/pytest -q tests/caveat/test_web_browser.py
