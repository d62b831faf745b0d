"""The REST API fuzzed from its own OpenAPI schema with schemathesis, in-process through the WSGI
app with a researcher's token: no 5xx, responses conform to the schema (status codes, content
types, bodies), and every 4xx carries a JSON body that says what is wrong. Both valid
(positive) and schema-violating (negative) requests are generated for every operation."""
from __future__ import annotations

import json

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode, checks

from annotation.models import TaskKind
from testing.factories import item_content, make_item, make_project, make_stage, make_user

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

# Scoring through the API runs real metrics; keep fuzzing to cheap ones so a run stays short.
CHEAP_METRICS = ["em", "f1"]


def _schema():
    loaded = schemathesis.openapi.from_dict(
        json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True),
                              default=str)))
    loaded.app = get_wsgi_application()
    return loaded


SCHEMA = _schema()
OPERATIONS = {f"{op.method.upper()} {op.path}": op
              for op in (result.ok() for result in SCHEMA.get_all_operations())}


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """Like Django's test client: requests must not close the test's database connection (the
    WSGI handler does so at request start and end, which breaks the test transaction)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_token():
    user = make_user("fuzzer")
    project = make_project(TaskKind.LIKERT, owner=user, slug="fuzz")
    make_item(project, content=item_content(TaskKind.LIKERT, 0))
    make_stage(project)
    return Token.objects.create(user=user).key


def four_xx_explains(ctx, response, case):
    """A client error names its cause: a JSON object with a message or per-field errors."""
    if 400 <= response.status_code < 500:
        body = json.loads(response.content or b"null")
        assert isinstance(body, dict) and body, (
            f"{case.method} {case.formatted_path} -> {response.status_code} without an "
            f"explanation: {response.content[:200]!r}")


# Responses must be documented and well-formed. Left out: positive_data_acceptance and
# negative_data_rejection — DRF's paginator reads a garbled `offset` as 0 (a harmless 200), and
# strings with NUL characters are refused with an explained 400 although the schema allows them.
CHECKS = [checks.not_a_server_error, checks.status_code_conformance,
          checks.content_type_conformance, checks.response_schema_conformance,
          four_xx_explains]


def test_schema_lists_every_api_operation():
    assert {"GET /api/projects/", "POST /api/projects/{project_slug}/items/bulk/",
            "POST /api/metrics/score/"} <= set(OPERATIONS)


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_operation_never_fails_on_generated_requests(api_token, name):
    operation = OPERATIONS[name]
    auth = {"Authorization": f"Token {api_token}"}
    strategy = st.one_of(operation.as_strategy(GenerationMode.POSITIVE),
                         operation.as_strategy(GenerationMode.NEGATIVE))

    @settings(max_examples=20, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(case):
        if case.path == "/api/metrics/score/" and isinstance(case.body, dict):
            case.body["metrics"] = CHEAP_METRICS
        case.call_and_validate(headers=auth, checks=CHECKS)

    run()
