"""netbench's tools, run by hand or by `make`, never by a check: the
NetPIPE side-by-side (`netpipe`, `bench`: `make bench`), the link
benchmark (`linkbench`: `make bench-link`), the sweep's cost and its
thresholds' calibration (`sweepbench`, `sweepcalibrate`), publishing at
scale (`reportbench`: `make bench-report`), the verdicts on a loaded
cluster (`verdictbench`: `make bench-verdict`), the tuning demo
(`tunedemo`: `make tune-demo`), the benchmark built and launched outside
ReFrame (`benchrun`), and the image build (`image`: `make container`).

Nothing in netbench/ or reframe_checks/ imports this package.
"""
