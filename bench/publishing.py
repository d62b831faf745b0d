"""Publishing: 1,000 HITs (one item each) of an MTurk stage through the real boto3 MTurk client
and the platform's retry loop (`annotation.services.stages.stage_publish`) against the local
MTurk-protocol server (`testing/mturk_server.py`) with throttling ("Rate exceeded")
injected at random on 10% of calls and 3 lost responses (the HIT is created, the answer never
arrives). The measurement itself is the providers' `testing.publish_benchmark`; retry backoff
is shortened to 10 ms so the number is the platform's, not the sleep's.

Target: every HIT published exactly once: all open locally with distinct HIT ids, exactly as many
HITs on the server, nothing failed.
"""
from __future__ import annotations

from .runner import Benchmark, Context, Outcome


def run(ctx: Context) -> Outcome:
    from testing.publish_benchmark import publish_benchmark

    n_hits = ctx.size(1000, 20)
    result = publish_benchmark(n_hits=n_hits, throttle_rate=0.10)
    outcome = Outcome(inputs={"hits": n_hits, "throttle_rate": 0.10, "lost_responses": 3,
                              "client": "boto3 mturk", "server": "local MTurk protocol server",
                              "retry_base_s": 0.01})
    outcome.numbers = result
    exactly_once = (result["failed"] == 0 and result["open_locally"] == n_hits
                    and result["distinct_local_ids"] == n_hits
                    and result["hits_on_server"] == n_hits)
    outcome.check("all published exactly once", exactly_once,
                  f"{result['open_locally']} open, {result['distinct_local_ids']} distinct ids, "
                  f"{result['hits_on_server']} on server, {result['failed']} failed")
    outcome.check("throttling was injected", result["throttled"] > 0,
                  f"{result['throttled']} throttled, {result['retries']} retries")
    outcome.notes.append(f"{n_hits} HITs in {result['seconds']} s "
                         f"({result['hits_per_second']} HITs/s)")
    return outcome


BENCHMARK = Benchmark(
    name="publishing", title="Publishing 1,000 HITs to the MTurk protocol with throttling",
    target="all HITs published exactly once; time reported", run=run,
)
