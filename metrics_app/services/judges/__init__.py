"""Judges: LLM judges over chat endpoints, imported verdicts, and the metrics (LERC included)
read as judges; their runs, their alignment with human labels, and their use in the estimates.
One module per job: `versions`, `client`, `runs`, `imports`, `alignment`,
`planning`; reads of judges are metrics_app/judge_selectors.py."""
