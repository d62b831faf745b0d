"""Where a judge's endpoint may be (metrics_app/services/judges/client.py:address_refusal): a
researcher's base_url pointing at the cloud metadata service or the deployment's own network is
refused at connect time, on the address the host resolves to, whatever form the URL writes it
in; loopback and private networks only as QAJ_JUDGE_PRIVATE_NETWORKS says."""
from __future__ import annotations

import socket

import httpcore
import pytest
from django.test import override_settings

from annotation.models import TaskKind
from metrics_app.domain.judge_prompts import JudgeConfigError, validate_config
from metrics_app.models import Judge, JudgeKind, JudgeVerdict, JudgeVersion
from metrics_app.services.judges.client import (
    EndpointError,
    RetryPolicy,
    address_refusal,
    private_networks,
)
from metrics_app.services.judges.runs import judge_project
from metrics_app.services.judges.versions import config_hash, judge_version_create
from testing.factories import item_content, make_item, make_project
from testing.openai_server import FakeChatServer

FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.01)
EVERYTHING = private_networks("loopback,private,0.0.0.0/0,::/0")


@pytest.mark.parametrize("address", [
    "169.254.169.254", "169.254.170.2", "fe80::1", "fe80::1%eth0", "fd00:ec2::254",
    "100.100.100.200", "0.0.0.0", "::", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe",
    "2002:a9fe:a9fe::1", "224.0.0.1", "255.255.255.255",
])
def test_metadata_and_link_local_addresses_are_never_an_endpoint(address):
    """Not even when the setting lists every network."""
    assert "may never be" in address_refusal(address, EVERYTHING)


@pytest.mark.parametrize(("address", "allowed"), [
    ("127.0.0.1", "loopback"), ("127.1.2.3", "loopback"), ("::1", "loopback"),
    ("::ffff:127.0.0.1", "loopback"), ("10.1.2.3", "private"), ("192.168.0.7", "10.0.0.0/8,private"),
    ("172.16.5.4", "172.16.5.4"), ("100.64.0.1", "private"), ("fd12:3456::1", "private"),
    ("2002:0a01:0203::1", "10.1.2.3"),
])
def test_loopback_and_private_addresses_need_the_setting(address, allowed):
    refused = address_refusal(address, private_networks(""))
    assert "QAJ_JUDGE_PRIVATE_NETWORKS" in refused
    assert address_refusal(address, private_networks(allowed)) is None
    assert address_refusal(address, private_networks("192.0.2.0/24")) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "::ffff:8.8.8.8", "2606:4700::1111",
                                     "104.18.6.192"])
def test_public_addresses_are_always_allowed(address):
    assert address_refusal(address, private_networks("")) is None


def test_a_setting_that_names_no_network_is_refused_naming_it():
    with pytest.raises(EndpointError, match="QAJ_JUDGE_PRIVATE_NETWORKS: 'lab' is not"):
        private_networks("loopback, lab")


def _project():
    project = make_project(TaskKind.LIKERT)
    for i in range(3):
        make_item(project, content=item_content(TaskKind.LIKERT, i))
    return project


def _judge(base_url, name):
    return judge_version_create(name=name, config={"base_url": base_url,
                                                   "model": "fake-judge"})[0]


@pytest.mark.django_db
@pytest.mark.reliability
@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "0x7f.0.0.1", "127.1",
                                  "localhost", "[::ffff:127.0.0.1]"])
def test_an_endpoint_on_this_machine_is_refused_in_every_spelling_without_the_setting(host):
    """The fake endpoint stands for an internal service (the app, Redis, a metadata proxy):
    it must see no request, so nothing it answers can reach the job's error."""
    project = _project()
    with FakeChatServer() as server, override_settings(QAJ_JUDGE_PRIVATE_NETWORKS=""):
        version = _judge(f"http://{host}:{server.httpd.server_address[1]}/v1", f"internal-{len(host)}")
        with pytest.raises(EndpointError) as refused:
            judge_project(project=project, version=version, concurrency=2, retry=FAST)
        assert server.stats["requests"] == 0
    assert refused.value.fatal
    assert "loopback or private address" in str(refused.value)
    assert "QAJ_JUDGE_PRIVATE_NETWORKS" in str(refused.value)
    assert not JudgeVerdict.objects.filter(judge_version=version).exists()


def _resolving(monkeypatch, name: str, address: str) -> list:
    """`name` resolves to `address` (a DNS record an attacker controls); every connect made is
    recorded."""
    real = socket.getaddrinfo
    connects = []

    def getaddrinfo(host, port, *args, **kwargs):
        return real(address if host == name else host, port, *args, **kwargs)

    real_connect = httpcore.SyncBackend.connect_tcp

    def connect_tcp(self, host, port, *args, **kwargs):
        connects.append(host)
        return real_connect(self, host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", connect_tcp)
    return connects


@pytest.mark.django_db
@pytest.mark.reliability
def test_a_host_name_that_resolves_to_the_metadata_service_is_refused_before_connecting(
        monkeypatch):
    connects = _resolving(monkeypatch, "metadata.judge.test", "169.254.169.254")
    with override_settings(QAJ_JUDGE_PRIVATE_NETWORKS="loopback,private"):
        version = _judge("http://metadata.judge.test/latest/meta-data", "metadata")
        with pytest.raises(EndpointError) as refused:
            judge_project(project=_project(), version=version, concurrency=1, retry=FAST)
    assert refused.value.fatal and connects == []
    assert "metadata.judge.test resolves to 169.254.169.254" in str(refused.value)
    assert "may never be" in str(refused.value)


@pytest.mark.django_db
@pytest.mark.reliability
def test_a_host_name_is_resolved_once_and_the_checked_address_is_the_one_connected(
        monkeypatch):
    """The name resolves to loopback: refused without the setting; with it, the run reaches
    the fake endpoint at the address that was checked (no second lookup that a rebinding
    DNS server could answer differently)."""
    connects = _resolving(monkeypatch, "lab-vllm.judge.test", "127.0.0.1")
    project = _project()
    with FakeChatServer() as server:
        version = _judge(f"http://lab-vllm.judge.test:{server.httpd.server_address[1]}/v1", "lab")
        with override_settings(QAJ_JUDGE_PRIVATE_NETWORKS=""), \
                pytest.raises(EndpointError, match="lab-vllm.judge.test resolves to 127.0.0.1"):
            judge_project(project=project, version=version, concurrency=1, retry=FAST)
        assert server.stats["requests"] == 0 and connects == []
        with override_settings(QAJ_JUDGE_PRIVATE_NETWORKS="127.0.0.1"):
            detail = judge_project(project=project, version=version, concurrency=1, retry=FAST)
        assert detail["calls"] == 3 and server.stats["requests"] == 3
    assert set(connects) == {"127.0.0.1"}


@pytest.mark.parametrize("env", ["DJANGO_SECRET_KEY", "PROLIFIC_API_TOKEN", "database_url",
                                 "AWS_SECRET_ACCESS_KEY"])
def test_a_judge_cannot_read_its_key_from_the_deployments_own_secrets(env):
    with pytest.raises(JudgeConfigError, match=f"api_key_env: \\${env} holds this deployment"):
        validate_config({"base_url": "https://api.example.com/v1", "model": "m",
                         "api_key_env": env})


@pytest.mark.django_db
@pytest.mark.reliability
def test_a_stored_judge_naming_a_deployment_secret_sends_nothing(monkeypatch):
    """A version stored before the rule: the key is refused when it is read, and the endpoint
    (whoever runs it) never sees the secret."""
    monkeypatch.setenv("PROLIFIC_API_TOKEN", "prolific-secret-123")
    with FakeChatServer() as server:
        judge = Judge.objects.create(name="old-secret", kind=JudgeKind.LLM)
        config = {"base_url": server.url, "model": "fake-judge",
                  "api_key_env": "PROLIFIC_API_TOKEN", "task": "likert",
                  "system": "", "prompt": "<candidate>{candidate}</candidate>",
                  "temperature": 0, "max_tokens": 16, "parse": "likert", "logprobs": False}
        version = JudgeVersion.objects.create(judge=judge, version="1", config=config,
                                              config_hash=config_hash(config))
        with pytest.raises(EndpointError, match="holds this deployment's own secret") as refused:
            judge_project(project=_project(), version=version, concurrency=1, retry=FAST)
        assert server.stats["requests"] == 0
    assert refused.value.fatal and "prolific-secret-123" not in str(refused.value)
