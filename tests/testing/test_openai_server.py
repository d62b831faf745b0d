"""The fake chat-completions endpoint speaks the protocol the judges' client reads, with the
faults it promises (testing/openai_server.py)."""
from __future__ import annotations

import httpx

from testing.openai_server import FakeChatServer


def _ask(url, content, **extra):
    return httpx.post(f"{url}/chat/completions", json={
        "model": "m", "messages": [{"role": "user", "content": content}], **extra}, timeout=10)


LIKERT = "Reference answer(s): on the mat\nCandidate answer: on the mat, surely"


def test_answers_usage_logprobs_and_the_control_routes():
    with FakeChatServer() as server:
        body = _ask(server.url, LIKERT, logprobs=True).json()
        choice = body["choices"][0]
        assert choice["message"]["content"].endswith("Score: 5")
        assert choice["finish_reason"] == "stop" and body["usage"]["prompt_tokens"] > 0
        score = [e for e in choice["logprobs"]["content"] if e["token"] == "5"][0]
        assert {alt["token"] for alt in score["top_logprobs"]} == {"4", "5"}
        assert "logprobs" not in _ask(server.url, LIKERT).json()["choices"][0]
        root = server.url.removesuffix("/v1")
        httpx.post(f"{root}/fake/faults", json={"rate_limit_burst": 2, "fail_next": 1,
                                                 "status": 502})
        statuses = [_ask(server.url, LIKERT).status_code for _ in range(4)]
        assert statuses == [429, 429, 502, 200]
        stats = httpx.get(f"{root}/fake/stats").json()
        assert stats["429"] == 2 and stats["502"] == 1 and stats["requests"] == 6
        assert httpx.get(f"{server.url}/models").json()["data"][0]["id"] == "fake-judge"
        assert _ask(server.url, "x", model="").status_code == 400
        assert httpx.post(f"{server.url}/chat/completions", json={"model": "m"}).status_code \
            == 400


def test_faults_by_rate_and_the_key():
    with FakeChatServer(api_key="k", truncated_rate=1.0) as server:
        assert _ask(server.url, LIKERT).status_code == 401
        answer = httpx.post(f"{server.url}/chat/completions", headers={
            "Authorization": "Bearer k"}, json={"model": "m", "messages": [
                {"role": "user", "content": LIKERT}]}).json()["choices"][0]
        assert answer["finish_reason"] == "length" and "Score" not in answer["message"]["content"]
    with FakeChatServer(broken_body_rate=1.0) as server:
        response = _ask(server.url, LIKERT)
        assert response.status_code == 200 and response.text.endswith("[")
