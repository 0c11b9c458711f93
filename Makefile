# LLM Ops Console. `make run` and `make test` set everything up from a bare Python >= 3.11.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PORT   ?= 8000
export PORT

TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_BROKER_URL   ?= redis://127.0.0.1:6379/15
# The drills' own pytest process (see `test`): another database and Redis database. The
# drills replay scenarios in scaled real time, so the rest of the suite runs niced: on two
# cores a drill's probe cycle must not wait behind a browser test. A drill that still fails
# beside the busy suite runs once more alone after it (starved of CPU, a scaled scenario's
# timing is not the scenario's); a drill that fails alone fails the run.
TEST_DRILL_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/drills
TEST_DRILL_BROKER_URL   ?= redis://127.0.0.1:6379/14
PYTEST_ARGS       ?= --durations=25
# Persistent connections would outlive the live-server threads of the browser test.
export DB_CONN_MAX_AGE = 0

.PHONY: install run test test-embedded browser tools lint bench eval fuzz audit soak clean messages

$(STAMP): pyproject.toml requirements.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --constraint requirements.lock --editable ".[dev]"
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap
	$(PY) manage.py demo_fleet
	@echo ""
	@echo "  LLM Ops Console: http://127.0.0.1:$(PORT)/   (sign in as admin; password above)"
	@echo "  Ctrl-C stops the web server, the worker and beat."
	@echo ""
	exec $(PY) manage.py console --port $(PORT)

# Chromium for the browser test: Debian's package when we are root with apt, else Playwright's.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else $(PY) -m playwright install chromium; fi; }

# nginx and promtool, which the config generators' tests run, systemd-analyze, which checks
# the agent's unit, gettext, which the catalogue
# check runs, and a CJK font for the Chinese screenshots: Debian's packages (root with apt).
# Without them those tests fail, saying what to install.
tools: browser
	@missing=""; \
	{ command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } || missing="$$missing nginx-light"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v systemd-analyze >/dev/null 2>&1 || missing="$$missing systemd"; \
	command -v msgmerge >/dev/null 2>&1 || missing="$$missing gettext"; \
	fc-list 2>/dev/null | grep -qi "CJK" || missing="$$missing fonts-noto-cjk"; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

test: install tools
	@rc=0; $(PY) tests/preflight.py || rc=$$?; \
	if [ $$rc = 2 ]; then exit 1; fi; \
	if [ $$rc = 0 ]; then \
	  echo "== suite on PostgreSQL + Redis; the drills run beside it, their output follows"; \
	  scratch=$$(mktemp -d); \
	  DATABASE_URL=$(TEST_DRILL_DATABASE_URL) CELERY_BROKER_URL=$(TEST_DRILL_BROKER_URL) \
	    $(PY) -m pytest -m drill -o cache_dir=$$scratch/cache $(PYTEST_ARGS) >$$scratch/log 2>&1 & drills=$$!; \
	  DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) \
	    nice -n 10 $(PY) -m pytest -m "not drill" $(PYTEST_ARGS); main=$$?; \
	  wait $$drills; drc=$$?; echo "== the drills (-m drill)"; cat $$scratch/log; \
	  if [ $$drc != 0 ]; then \
	    echo "== the drills that failed beside the suite, once more with the machine to themselves"; \
	    DATABASE_URL=$(TEST_DRILL_DATABASE_URL) CELERY_BROKER_URL=$(TEST_DRILL_BROKER_URL) \
	      $(PY) -m pytest -m drill --last-failed -o cache_dir=$$scratch/cache $(PYTEST_ARGS); drc=$$?; \
	  fi; \
	  rm -rf $$scratch; \
	  [ $$main = 0 ] && [ $$drc = 0 ] || exit 1; \
	else \
	  echo "== PostgreSQL or Redis missing: the whole suite on the embedded default"; \
	  $(MAKE) --no-print-directory test-embedded PYTEST_MARK= || exit 1; \
	fi; \
	$(MAKE) --no-print-directory test-embedded

PYTEST_MARK ?= -m embedded
test-embedded: install
	@echo "== embedded default: SQLite + filesystem broker"
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	env -u CELERY_BROKER_URL OPS_VAR_DIR=$$tmp DATABASE_URL=sqlite:///$$tmp/test.sqlite3 \
	  $(PY) -m pytest $(PYTEST_MARK) $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/djlint templates --lint --profile=django

# Refresh every catalogue from the sources, then compile them (docs/i18n.md).
messages: install
	$(PY) manage.py makemessages --locale zh_Hans
	$(PY) manage.py compilemessages --ignore .venv

bench: install
	$(PY) -m benchmarks

# The triage's honest score on real published logs: the development half and the test half
# (split once by source thread), precision per category, the development half's confusion.
eval: install
	$(PY) -m tests.triage.corpus_eval
	$(PY) -m tests.triage.learned_baseline
	$(PY) -m tests.sizing_eval.scratch_eval

# The fuzz properties (tests/fuzz) with fresh seeds and 50x the examples `make test` runs.
fuzz: install
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) HYPOTHESIS_PROFILE=fuzz \
	  $(PY) -m pytest -m fuzz tests/fuzz $(PYTEST_ARGS)

# The pinned dependencies against known vulnerabilities: fetch the advisory database from PyPI
# when it can be reached (else keep the cached copy in var/advisories/), then check offline.
audit: install
	$(PY) -m tools.advisory_fetch
	$(PY) -m tools.dependency_audit

# The whole console as `make run` starts it (web, worker, beat, the simulator over 200
# instances) under cycling faults and 5 Alertmanager payloads a second for SOAK_SECONDS, in a
# fresh embedded default under /tmp; then checked: memory flat, no lost alert, no stuck probe
# cycle, no unhandled exception, processes up and stopped cleanly (docs/soak.md).
SOAK_SECONDS ?= 600
soak: install
	SOAK_SECONDS=$(SOAK_SECONDS) $(PY) -m soak

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
