"""Fakes of the world outside QA Judge that tests and benchmarks share: a local MTurk-protocol
server (`mturk_server`), a fake of Prolific's API (`prolific_server`), simulated crowd workers
who work through the task pages (`workers_sim`), the publishing benchmark run against the MTurk
server (`publish_benchmark`) and model factories for test and benchmark data (`factories`).
Nothing here is imported by the product, except the MTurk server by `manage.py mturk_rehearsal`
(a researcher's local rehearsal; an import-linter contract keeps it the only one)."""
