# Attention Lab — every target sets itself up: it creates .venv and installs the
# project on first use (and again when pyproject.toml changes).
PYTHON ?= python3
VENV   := .venv
BIN    := $(CURDIR)/$(VENV)/bin
STAMP  := $(VENV)/.installed
ASSIGNMENTS := $(notdir $(wildcard source/*))
LAB_PORT ?= 8888
LAB_ARGS ?=
# `make hub`: where the class lives, who is in it, and the port on 127.0.0.1 (0 = a free one)
HUB_ROOT ?= /srv/attention-lab
HUB_INSTRUCTOR ?= instructor
HUB_STUDENTS ?= student1 student2
HUB_PORT ?= 0
HUB_ARGS ?=
# where `make hub-envs` builds the hub users' two environments ahead (empty: /var/tmp/attention-lab-hub-envs/<this
# checkout>, where tests/test_hub.py looks); `make hub` keeps them in $(HUB_ROOT) unless this is set
HUB_ENVS ?=
ifneq ($(HUB_ENVS),)
export ATTENTION_LAB_HUB_ENVS := $(abspath $(HUB_ENVS))
endif
GRADE_ARGS ?=
COHORT_ARGS ?=
REPORT_ARGS ?=
# the version of Node's configurable-http-proxy (JupyterHub's proxy) that `make proxy` installs; needs Node >= 18
PROXY_VERSION := 5.1.0

# nbgrader shells out to `alembic` and starts `python3` kernels: the venv's bin/ comes first.
export PATH := $(BIN):$(PATH)
# On 2 cores, OpenBLAS threads oversubscribe and make small matrix products 10-50x slower.
export OPENBLAS_NUM_THREADS := 1

.PHONY: install lab test test-fast release grade new-cohort class-report check bench-grading demo report student-env worked-cases train-gpt lite clean sandbox hub hub-envs hub-teardown proxy

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,lite]'
	touch $(STAMP)

## lab: open the course in JupyterLab on the start page (learners work on copies in workspace/)
lab: $(STAMP)
	$(BIN)/python -m attention_lab.lab --ServerApp.port=$(LAB_PORT) $(LAB_ARGS)

## test: the whole test suite, on three pytest-xdist workers on 2 cores (a third runs while the others wait on wall-clock limits, browsers and servers: 761 s against 815 s with two, 2026-12-03; each test file on one worker: module fixtures build once; the longest modules first: tests/conftest.py)
test: $(STAMP) sandbox
	$(BIN)/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder

## test-fast: the in-process tier only (no kernels, nbgrader runs, sandbox, browser or hub), for development
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" -n 2 --dist loadfile --no-loadscope-reorder

## release: regenerate release/ from source/ with nbgrader generate_assignment
release: $(STAMP)
	$(BIN)/python -m autograder release $(ASSIGNMENTS)

## grade: autograde a real class: submitted/<student>/<assignment>/*.ipynb, on every core
## (GRADE_ARGS="--workers N" for N at once, "--force" to grade unchanged submissions again,
## "--scheduler tcp://host:8786" to grade on a Dask cluster's workers: README, "Grading past one machine")
grade: $(STAMP) sandbox
	$(BIN)/python -m autograder grade $(ASSIGNMENTS) $(GRADE_ARGS)

## new-cohort: move the gradebook, submitted/, autograded/ and feedback/ to cohorts/<date>/ and rotate the hidden
## cases' seed (cohort.json); COHORT_ARGS="--label spring-2027", "--seed N", or "--restore LABEL" to bring one back
new-cohort: $(STAMP)
	$(BIN)/python -m autograder new-cohort $(COHORT_ARGS)

## class-report: per graded assignment, class-report/<assignment>/report.html (PNG plots, no script) and its CSVs:
## for every assignment in the gradebook (REPORT_ARGS="ASSIGNMENT ..." for some): scores per step, the most
## frequent named mistakes with their hints, who was not graded and why, manual scores, the legend of mistake keys
class-report: $(STAMP)
	$(BIN)/python -m autograder class-report $(REPORT_ARGS)

## check: grade your own workspace/ notebooks with the hidden tests (A=01 for one assignment), in workspace/.check/
A ?=
check: $(STAMP)
	$(BIN)/python -m autograder check $(A)

## demo: grade the embedded example class in a temporary course directory
demo: $(STAMP) sandbox
	$(BIN)/python -m autograder demo

## report: grade every correct variant, known mistake and hostile submission; write reports/grader_report.md
report: $(STAMP) sandbox
	$(BIN)/python -m autograder report

## student-env: the student edition without the grader, in dist/attention-lab-student/
student-env: $(STAMP)
	$(BIN)/python -m autograder student-env

## worked-cases: regenerate the worked cases the visible self-checks show (attention_lab/aNN_*/worked_cases.json) from the specs
worked-cases: $(STAMP)
	$(BIN)/python -m autograder worked-cases

## train-gpt: retrain assignment 9's tiny GPT from its fixed seeds (about 3-4 minutes on 2 cores, at most 15;
## not part of the test suite); rewrites attention_lab/a09_tiny_gpt/{weights.npz,training.json}, then run
## `python -m autograder.assignments.a09_tiny_gpt.design` and the tests (DESIGN.md and the findings are checked)
train-gpt: $(STAMP)
	$(BIN)/python -m autograder.assignments.a09_tiny_gpt.train

## hub: JupyterHub for a class on this machine (run as root): creates the Unix users, the course directory
## with nbgrader's exchange and the users' two environments under $(HUB_ROOT) (in $(HUB_ENVS) when set),
## then runs the hub on 127.0.0.1
hub: $(STAMP) sandbox proxy
	$(BIN)/python -m autograder hub up --root $(HUB_ROOT) --instructor $(HUB_INSTRUCTOR) \
	  --students $(HUB_STUDENTS) --port $(HUB_PORT) $(if $(HUB_ENVS),--envs $(HUB_ENVS)) $(HUB_ARGS)

## hub-envs: an install step (run as root): the hub users' two environments built ahead with pip, kept while
## current, in $(HUB_ENVS) (default /var/tmp/attention-lab-hub-envs/<checkout>, where tests/test_hub.py finds them;
## there it also removes the folders of checkouts that no longer exist)
hub-envs: $(STAMP)
	$(BIN)/python -m autograder hub envs

## hub-teardown: remove the Unix users `make hub` created (add HUB_ARGS=--purge to delete $(HUB_ROOT) too)
hub-teardown: $(STAMP)
	$(BIN)/python -m autograder hub teardown --root $(HUB_ROOT) $(HUB_ARGS)

## proxy: configurable-http-proxy, JupyterHub's proxy, from the npm registry (installed when run as root)
proxy:
	@command -v configurable-http-proxy >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v npm >/dev/null 2>&1; then \
	    echo "Installing configurable-http-proxy@$(PROXY_VERSION) with npm ..."; \
	    npm install --global --silent configurable-http-proxy@$(PROXY_VERSION); \
	  else \
	    echo "JupyterHub needs configurable-http-proxy: install Node.js and npm, then" >&2; \
	    echo "  npm install --global configurable-http-proxy@$(PROXY_VERSION)" >&2; \
	    exit 1; \
	  fi; }

## lite: the course as a static JupyterLite site (Pyodide kernel in the browser) in dist/lite/, for any static host
lite: $(STAMP)
	@command -v npm >/dev/null 2>&1 || { echo "make lite fetches Pyodide's core with npm: install Node.js and npm (Debian: apt-get install npm)" >&2; exit 1; }
	$(BIN)/python -m autograder lite

## bench-grading: classes of 10, 20, 40 of assignment 1: plain nbgrader against 2 workers, the floor; writes benchmarks/grading_throughput.md
bench-grading: $(STAMP) sandbox
	$(BIN)/python benchmarks/grading_throughput.py

## sandbox: bubblewrap (bwrap), in which grading runs learners' notebooks; installed with apt-get when run as root
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing bubblewrap (the grading sandbox) with apt-get ..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else \
	    echo "Grading runs learners' notebooks in a bubblewrap sandbox, but bwrap is not installed." >&2; \
	    echo "Install it (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf install bubblewrap), then run make again." >&2; \
	    exit 1; \
	  fi; }

clean:
	rm -rf $(VENV) demo-output test-artifacts *.egg-info build dist
