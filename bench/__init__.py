"""`make bench`: performance benchmarks with targets, run side by side on one machine.

    make bench                 # every benchmark, ~10-15 minutes on a 2-core machine
    make bench B=reports       # one benchmark (comma-separate several)
    .venv/bin/python -m bench --quick --output-dir var/bench-quick   # tiny inputs (the smoke test)
    .venv/bin/python -m bench --only reports --profile var/profiles   # pyinstrument profiles

Each benchmark is a module here exposing `BENCHMARK` (a `runner.Benchmark`); the runner makes a
throwaway database, runs them, prints a table, writes `bench/results.json` and regenerates
`docs/PERFORMANCE.md`. Not part of the pytest suite: speed goals live here.
"""
