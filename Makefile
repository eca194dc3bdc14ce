# Two commands matter: `make demo` (see it work) and `make test` (lint, types, every test).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Headless Chromium from Debian's packages: tests/docs reads the site as Chromium renders it, and `make docs-check`
# screenshots it. Defined here, before any rule names $(CHROMIUM): make expands a rule's prerequisites as it reads
# the rule, so a variable defined further down is empty there (tests/house/test_makefile.py holds this).
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: test demo bench soak lifetime lint typecheck unit pytest docs docs-check chromium install clean dist

# uv installs the same requirements as pip in seconds where pip takes minutes on a clean clone (it compiles every
# installed module to bytecode; pulumi-aws alone is thousands). The venv starts without pip (ensurepip alone takes
# seconds): the system's pip puts uv in it and uv installs pip beside the rest (the packaging tests use it). If uv
# cannot be had, the venv gets its own pip and pip installs everything.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv --without-pip $(VENV)
	( $(PYTHON) -m pip --python $(PY) install -q --disable-pip-version-check uv \
		&& $(VENV)/bin/uv pip install -q --python $(PY) pip -e ".[dev]" ) \
		|| ( $(PY) -m ensurepip -q && $(PY) -m pip install -q --disable-pip-version-check -e ".[dev]" )
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP)
	$(PY) -m mypy

# The fast part (unit, handler, component, policy, provider tests); `make test` runs every test.
unit: $(STAMP)
	$(PY) -m pytest -q -n 2 -m "not e2e and not model and not slow"

# Every test, on both cores: the local cloud's tests in two groups (tests/e2e, tests/localcloud), each on a worker of
# its own (tests/conftest.py groups them and lets those workers go first where the machine allows); they mostly
# wait, so a third worker computes the rest meanwhile, and each worker takes its share of what is left once its group
# is done. (A third worker beside one group of the local cloud's tests was tried: two computing workers then slowed
# the local cloud more than the suite gained. Here one computes while both groups run.)
pytest: $(STAMP) $(CHROMIUM)
	$(PY) -m pytest -q -n 3 --dist loadgroup

# The documentation site (MkDocs, Material theme) into build/site; strict, so a broken link or a page missing from
# the navigation fails the build (and `make test`).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

test: lint typecheck docs pytest

# Installed when missing (as root, or through sudo): Debian's `chromium` package, about 100 MB with what it needs;
# apt-get update and the install took 2 min 43 s on this 2-core machine under load (2026-11-27). Where apt-get is not
# the package manager, install Chromium by hand so that /usr/bin/chromium exists (Fedora: `dnf install chromium`;
# Arch: `pacman -S chromium`; macOS: a link to the app's binary there), or run `make unit`, which needs no browser.
$(CHROMIUM):
	@command -v apt-get >/dev/null || { echo "make: $(CHROMIUM) is missing and apt-get is not here: install Chromium by hand so that $(CHROMIUM) exists (see the Makefile's note)"; exit 1; }
	@echo "make: installing Debian's chromium package for the rendered-docs tests (apt-get)"
	$(SUDO) apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
chromium: $(CHROMIUM)

# The site built, served on localhost and screenshotted by headless Chromium: build/screenshots/{home,
# configuration,consumers,guarantees}.png; fails on the same traces of unrendered Markdown tests/docs finds.
docs-check: $(STAMP) $(CHROMIUM)
	$(PY) -m tests.docs.site

# The same entry point a user's project gets with the `local` extra (`scheduled-table local up --program DIR`).
demo: $(STAMP)
	$(VENV)/bin/scheduled-table local demo

# Not part of `make test`: minutes of work, and no test asserts a timing. Writes bench/latest.md (and .json) and
# docs/assets/plots/*.png (shown on the docs site's performance page); `make bench BENCH="coldstart scale"` runs a
# subset (its report holds only those).
BENCH ?=
bench: $(STAMP)
	$(PY) -m bench --out bench/latest.md $(BENCH)

# Not part of `make test` either (minutes): every mode end to end in the local cloud at volume, under faults, with
# per-item accounting; writes the Soak section of bench/latest.md and docs/assets/plots/soak_*.png. `make soak
# N=40000` scales it; RATE (items written per second) and FAULTS (the injected fault rate) are stated in the report.
# RATE 10 is what a 2-core machine keeps up with (at 100 the writes fall behind and lateness measures the backlog).
# HERD: items due in one minute in each of two more tables (eventbridge through the local Scheduler's invocation
# throttle, polling fanned out), judged against docs/performance.md's herd arithmetic. Not in the plain soak (its
# burst would be the other modes' lateness): `make soak N=0 HERD=10000` runs the herd alone (about half an hour).
N ?= 20000
RATE ?= 10
FAULTS ?= 0.02
HERD ?= 0
soak: $(STAMP)
	$(PY) -m bench.soak --items $(N) --rate $(RATE) --faults $(FAULTS) --herd $(HERD)

# Not part of `make test` either (long): the lifetime simulation (tests/lifetime) with many more drawn item lives
# than `make test`'s fixed few, new draws from LIFETIME_SEED (the failing example is shrunk and printed with it);
# every delivering mode (eventbridge at minute and second precision, ttl plain and precise, polling) and aggregate;
# writes what it covered (simulated item-days per mode, seed) to bench/lifetime.md. Each example runs on
# LIFETIME_TAIL_DAYS after its last change (ledger entries expiring, TTL days late, reconcile, redeliveries: months of
# a table's life).
LIFETIME_EXAMPLES ?= 500
LIFETIME_SEED ?= 1
LIFETIME_ITEMS ?= 60
LIFETIME_TAIL_DAYS ?= 90
# Which drawn tests (a pytest -k expression), e.g. "over_weeks and not recurring" for a long run of one-time lives.
LIFETIME_ONLY ?= over_weeks
lifetime: $(STAMP)
	LIFETIME_EXAMPLES=$(LIFETIME_EXAMPLES) LIFETIME_SEED=$(LIFETIME_SEED) LIFETIME_ITEMS=$(LIFETIME_ITEMS) \
		LIFETIME_TAIL_DAYS=$(LIFETIME_TAIL_DAYS) LIFETIME_REPORT=bench/lifetime.md \
		$(PY) -m pytest -q -p no:randomly tests/lifetime -k "$(LIFETIME_ONLY)"

# The release's files in dist/: the sdist, then the wheel built from it (so the sdist is known to hold everything the
# wheel needs: the component, the handlers, the local cloud), both checked as PyPI will render and accept them.
# No build isolation: setuptools and wheel come with the dev extra, so this works without reaching an index.
DIST ?= dist
dist: $(STAMP)
	rm -rf $(DIST)
	$(PY) -m build --no-isolation --outdir $(DIST) .
	$(PY) -m twine check --strict $(DIST)/*

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
