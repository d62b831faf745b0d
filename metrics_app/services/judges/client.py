"""A small client of OpenAI-compatible chat-completions endpoints (OpenAI, vLLM, Ollama,
llama.cpp's server) over httpx: one shared connection pool sized to the job's concurrency,
retries with exponential backoff and jitter on 429, 5xx, timeouts, dropped connections and a 200
whose body is not a chat completion (a proxy or server fault, not the model's answer; honouring
Retry-After), and nothing retried that cannot succeed (4xx other than 429)."""
from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field

import httpx

# One INFO line per request from httpx would drown a 5,000-item run's log.
logging.getLogger("httpx").setLevel(logging.WARNING)


class EndpointError(Exception):
    """The endpoint could not answer this request (after retries, or a 4xx that retrying
    cannot fix); the message says what it answered."""

    def __init__(self, message: str, *, fatal: bool = False):
        super().__init__(message)
        self.fatal = fatal  # 401/403/404: every other request would fail the same way


class RequestStopped(Exception):
    """A request retrying was given up without asking again because its run was told to stop
    (its job cancelled: core/leases.py `JobCancelled`); not an endpoint failure."""


@dataclass
class ChatAnswer:
    text: str
    finish_reason: str
    logprobs: list | None
    prompt_tokens: int
    completion_tokens: int
    retries: int = 0
    # The model declined (OpenAI's message.refusal, with content null): `text` holds the
    # refusal, which is no verdict.
    refused: bool = False
    # The body gave both token counts as non-negative integers; otherwise they read 0 and the
    # run charges the call its worst case (a budget must not trust what was not reported).
    usage_known: bool = True


@dataclass
class RetryPolicy:
    attempts: int = 8
    base_delay: float = 0.25
    max_delay: float = 20.0
    retried_statuses: tuple = (408, 409, 425, 429, 500, 502, 503, 504)
    sleep: object = field(default=time.sleep, repr=False)

    def delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(self.max_delay, max(0.0, float(retry_after)))
            except ValueError:
                pass
        return min(self.max_delay, self.base_delay * 2 ** attempt) * (0.5 + random.random())


def api_key(env_name: str) -> str | None:
    """The key from the environment variable the config names (never from the config)."""
    if not env_name:
        return None
    value = os.environ.get(env_name)
    if not value:
        raise EndpointError(f"the judge reads its API key from ${env_name}, which is not set",
                            fatal=True)
    return value


class ChatClient:
    def __init__(self, *, base_url: str, model: str, api_key_env: str = "",
                 concurrency: int = 8, timeout: float = 120.0,
                 retry: RetryPolicy | None = None):
        key = api_key(api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.retry = retry or RetryPolicy()
        self.http = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout, connect=10.0),
            limits=httpx.Limits(max_connections=concurrency,
                                max_keepalive_connections=concurrency),
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def complete(self, *, system: str, prompt: str, temperature: float, max_tokens: int,
                 logprobs: bool, stop: threading.Event | None = None) -> ChatAnswer:
        """One chat completion, retried as the policy says. `stop` set (the run's job was
        cancelled) ends the retries: no new request, each one paid for, is sent after it;
        RequestStopped instead."""
        body = {"model": self.model, "temperature": temperature, "max_tokens": max_tokens,
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": prompt}]}
        if logprobs:
            body.update(logprobs=True, top_logprobs=5)
        last = ""
        for attempt in range(self.retry.attempts):
            retry_after = None
            try:
                response = self.http.post(self.url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    try:
                        return _answer(response, retries=attempt)
                    except _BrokenBody as exc:
                        # The endpoint's fault (a cut connection, a proxy's error page), not
                        # the model's answer: asked again like a 5xx, never stored as one.
                        last = str(exc)
                else:
                    last = f"HTTP {response.status_code}: {response.text[:200]}"
                    if response.status_code not in self.retry.retried_statuses:
                        raise EndpointError(last,
                                            fatal=response.status_code in (401, 403, 404))
                    retry_after = response.headers.get("Retry-After")
            if attempt + 1 < self.retry.attempts:
                self._pause(self.retry.delay(attempt, retry_after), stop)
                if stop is not None and stop.is_set():
                    raise RequestStopped(f"not asked again after {attempt + 1} attempts: the "
                                         f"run was stopped; last: {last}")
        raise EndpointError(f"no answer after {self.retry.attempts} attempts; last: {last}")


    def _pause(self, seconds: float, stop: threading.Event | None) -> None:
        """The backoff; with the default sleep, a stop wakes it at once (a Retry-After may be
        20 s)."""
        if stop is not None and self.retry.sleep is time.sleep:
            stop.wait(seconds)
        else:
            self.retry.sleep(seconds)


class _BrokenBody(Exception):
    """A 200 whose body is not a chat completion."""


def _answer(response: httpx.Response, *, retries: int) -> ChatAnswer:
    try:
        data = response.json()
        choice = data["choices"][0]
        message = choice["message"]
        text = message.get("content") or ""
        refusal = message.get("refusal") if not text else None
        usage = data.get("usage") or {}
        tokens = [_token_count(usage.get(name)) for name in ("prompt_tokens",
                                                             "completion_tokens")]
        known = None not in tokens
        return ChatAnswer(text=text or str(refusal or ""),
                          finish_reason=choice.get("finish_reason") or "",
                          logprobs=(choice.get("logprobs") or {}).get("content"),
                          prompt_tokens=tokens[0] if known else 0,
                          completion_tokens=tokens[1] if known else 0,
                          retries=retries, refused=bool(refusal), usage_known=known)
    except (json.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError,
            ValueError) as exc:
        raise _BrokenBody(f"HTTP 200 with a body that is not a chat completion "
                          f"({type(exc).__name__}): {response.text[:200]}") from None


def _token_count(value) -> int | None:
    """A usage count as reported, or None when it is missing or no count (negative, not a
    whole number): a negative count made a negative cost that undid the budget."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 \
            or not float(value).is_integer():
        return None
    return int(value)
