"""What a benchmark run measured, from its output to the record the report
draws: the one stated path of netbench's results.

The contract: `benchmark` reads netbench's own output by what it says of
itself (the `# columns:` header, `@ key value` summaries, `# rank`
placement lines, a launcher's report of a dead rank); `osu_imb` and
`netpipe` read those tools' output into the same rows; `container_parity`
reads the container parity check's interleaved rounds and evidence.  A ReFrame check
turns what it parsed into one `record` per case (`record`: the series it
measured with their units, the report section that draws them, the
reference figures and bounds it was judged by, and where and how it ran),
validated against `record.SCHEMA` and stored in ReFrame's run report as
the check's `record` variable.  The report renders from those records
alone, so a session re-rendered years later shows the references it was
judged by, not today's.  Nothing here imports ReFrame or starts a process:
parsers and records are tested on captured output (tests/data/).
"""
