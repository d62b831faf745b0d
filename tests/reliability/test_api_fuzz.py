"""The REST API fuzzed from its own OpenAPI schema with schemathesis, in-process through the WSGI
app with a researcher's token: no 5xx, responses conform to the schema (status codes, content
types, bodies), and every 4xx carries a JSON body that says what is wrong. Both valid
(positive) and schema-violating (negative) requests are generated for every operation, once
under the test settings and once under every setting production changes (its middleware and
CSP, HTTPS behind a proxy, strict cookies, a strong key, DEBUG off)."""
from __future__ import annotations

import importlib
import json
import os
import secrets

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client, override_settings
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
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _production_overrides() -> dict:
    """Every setting config/settings/production.py sets differently from base.py, except the
    database (the test database stays)."""
    os.environ.setdefault("QAJ_FUZZ_SECRET_KEY", secrets.token_urlsafe(64))
    previous = os.environ.get("DJANGO_SECRET_KEY")
    os.environ["DJANGO_SECRET_KEY"] = os.environ["QAJ_FUZZ_SECRET_KEY"]
    try:
        production = importlib.reload(importlib.import_module("config.settings.production"))
    finally:
        if previous is None:
            os.environ.pop("DJANGO_SECRET_KEY")
        else:
            os.environ["DJANGO_SECRET_KEY"] = previous
    base = importlib.import_module("config.settings.base")
    names = [name for name in dir(production) if name.isupper() and name != "DATABASES"]
    return {name: getattr(production, name) for name in names
            if getattr(production, name) != getattr(base, name, object())}


@pytest.fixture(params=["test-settings", "production-settings"])
def deployment(request):
    """The WSGI app under the test settings, or under production's with requests arriving
    over HTTPS through the proxy (the header production trusts)."""
    if request.param == "test-settings":
        yield {}
        return
    overrides = _production_overrides()
    assert overrides["SECURE_SSL_REDIRECT"] and not overrides.get("DEBUG", False)
    with override_settings(**overrides):
        # Really production's behaviour: plain HTTP is sent to HTTPS, and answers carry the CSP.
        assert Client().get("/api/projects/").status_code == 301
        secure = Client().get("/api/projects/", HTTP_X_FORWARDED_PROTO="https")
        assert secure.status_code == 401 and "frame-ancestors 'none'" in secure[
            "Content-Security-Policy"]
        # The test client connects Django's connection closing again after each request.
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        previous, SCHEMA.app = SCHEMA.app, WSGIHandler()  # middleware is read at creation
        try:
            yield {"X-Forwarded-Proto": "https"}
        finally:
            SCHEMA.app = previous


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
def test_operation_never_fails_on_generated_requests(api_token, deployment, name):
    operation = OPERATIONS[name]
    auth = {"Authorization": f"Token {api_token}", **deployment}
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


def test_verdict_import_on_the_researchers_project_never_fails(api_token):
    """The fuzz above mostly meets unknown slugs (a 404); the verdict import reads files and
    JSON bodies, so here every generated body (a multipart file or a JSON list) reaches the
    researcher's own project: an explained 400 or a stored version, never a 5xx."""
    operation = OPERATIONS["POST /api/metrics/projects/{slug}/judges/verdicts/"]
    auth = {"Authorization": f"Token {api_token}"}

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(operation.as_strategy(GenerationMode.POSITIVE),
                     operation.as_strategy(GenerationMode.NEGATIVE)))
    def run(case):
        case.path_parameters = {"slug": "fuzz"}
        case.call_and_validate(headers=auth, checks=CHECKS)

    run()
