"""Publishing many HITs against the local MTurk-protocol server with injected throttling.

    from testing.publish_benchmark import publish_benchmark
    result = publish_benchmark(n_hits=1000, throttle_rate=0.10)   # needs a Django test DB

Builds a project with one item per HIT, publishes an MTurk stage through the real boto3 client
and the real retry loop, and checks the outcome against the server: every local HIT open with a
distinct HIT id, exactly as many HITs on the server, none created twice.
"""
from __future__ import annotations

import os
import time
from decimal import Decimal

from django.test import override_settings

from annotation.models import HitStatus, Provider, StageKind, StageStatus, TaskKind
from annotation.providers import override_provider


def publish_benchmark(*, n_hits: int = 1000, throttle_rate: float = 0.10, seed: int = 7,
                      lost_responses: int = 3, retry_base_seconds: float = 0.01) -> dict:
    from annotation.providers.mturk import MTurkProvider
    from annotation.services.stages import stage_publish
    from testing.factories import make_item, make_project, make_stage
    from testing.mturk_server import MTurkServer

    project = make_project(TaskKind.LIKERT, items_per_hit=1, redundancy={"default": 3},
                           reward_per_hit=Decimal("0.10"))
    for n in range(n_hits):
        make_item(project, split="test", group_key=f"g{n}")
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT,
                       provider=Provider.MTURK, settings={"locales": []})
    env = {"AWS_ACCESS_KEY_ID": "AKIDBENCH", "AWS_SECRET_ACCESS_KEY": "bench"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with MTurkServer(throttle_rate=throttle_rate, seed=seed) as server, override_settings(
            MTURK_ENDPOINT_URL=server.url, MTURK_RETRY_BASE_SECONDS=retry_base_seconds,
            MTURK_MAX_ATTEMPTS=12,
        ):
            server.lose_response_next["CreateHITWithHITType"] = lost_responses
            provider = MTurkProvider()
            with override_provider(Provider.MTURK, provider):
                started = time.perf_counter()
                result = stage_publish(stage=stage, check_balance=False)
                elapsed = time.perf_counter() - started
            hits = list(stage.hits.all())
            local_ids = [h.external_id for h in hits]
            remote_type = stage.settings["mturk_hit_type_id"]
            remote = [h for h in server.state.hits.values() if h["HITTypeId"] == remote_type]
            return {
                "n_hits": n_hits,
                "seconds": round(elapsed, 2),
                "hits_per_second": round(n_hits / elapsed, 1) if elapsed else None,
                "created": result.report.created,
                "already_created": result.report.already_created,
                "failed": result.report.failed,
                "open_locally": sum(h.status == HitStatus.OPEN for h in hits),
                "distinct_local_ids": len(set(local_ids)),
                "hits_on_server": len(remote),
                "throttled": server.stats["throttled"],
                "lost_responses": server.stats["lost_responses"],
                "retries": provider.retries_done,
                "stage_status": result.stage.status,
            }
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
