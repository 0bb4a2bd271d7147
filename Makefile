# The two commands: `make demo` and `make test`. Both set everything up first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck layers unit install bench fuzz reliability clean browser sre-tools screenshots ts-client ts-types examples-venv

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
unit: $(STAMP) browser sre-tools ts-client examples-venv
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
	rm -rf $(VENV) $(EXAMPLES_VENV) .mypy_cache .ruff_cache .pytest_cache
	rm -rf $(TS_CLIENT)/node_modules $(TS_CLIENT)/dist $(TS_CLIENT)/build

# The LangGraph recipe's own environment (tests/caveat/test_recipes.py runs the example
# with its interpreter): langchain-mcp-adapters requires mcp<2, caveat's server mcp 2.x,
# so they cannot share one; they talk MCP over streamable HTTP. About 20 s, 130 MB.
EXAMPLES_VENV := .venv-examples
EXAMPLES_STAMP := $(EXAMPLES_VENV)/.installed
$(EXAMPLES_STAMP): examples/requirements.txt
	$(PYTHON) -m venv $(EXAMPLES_VENV)
	$(EXAMPLES_VENV)/bin/python -m pip install --quiet -r examples/requirements.txt
	touch $(EXAMPLES_STAMP)

examples-venv: $(EXAMPLES_STAMP)

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

# The TypeScript client (clients/typescript, docs/client-typescript.md): Node 18.17 or later and npm
# (Debian's nodejs and npm when missing), and its packages from the committed lockfile
TS_CLIENT := clients/typescript
TS_DEPS   := $(TS_CLIENT)/node_modules/.package-lock.json
ts-client: $(TS_DEPS)

$(TS_DEPS): $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	@command -v node >/dev/null && command -v npm >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; }
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "no node or npm: install Debian's nodejs and npm packages" >&2; exit 1; }
	@node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 18 || (a === 18 && b >= 17) ? 0 : 1)' || { echo "Node $$(node --version) is too old for clients/typescript: 18.17 or later" >&2; exit 1; }
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error
	touch $(TS_DEPS)

# Regenerate the client's types from this checkout's OpenAPI document (commit the result;
# tests/clients/test_typescript.py fails while they differ)
ts-types: $(STAMP) $(TS_DEPS)
	$(BIN)/python clients/openapi.py $(TS_CLIENT)/build/openapi.json
	cd $(TS_CLIENT) && npm run --silent types
