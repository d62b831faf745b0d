"""A small client of OpenAI-compatible chat-completions endpoints (OpenAI, vLLM, Ollama,
llama.cpp's server) over httpx: one shared connection pool sized to the job's concurrency,
retries with exponential backoff and jitter on 429, 5xx, timeouts, dropped connections and a 200
whose body is not a chat completion (a proxy or server fault, not the model's answer; honouring
Retry-After), and nothing retried that cannot succeed (4xx other than 429).

What an endpoint may do to the run is bounded: a redirect is never followed (the request, and
its key, would go to another address; the run ends naming where it pointed), an answer is read
for at most the client's timeout in all (an endpoint that trickles its body is a timeout, not a
run that never ends) and up to `max_body_bytes` (a larger body is not read), and the key never
appears in a message the client makes (an endpoint or a proxy that echoes it back, or a key
that no header can carry)."""
from __future__ import annotations

import json
import logging
import os
import random
import re
import threading
import time
from dataclasses import dataclass, field

import httpx

from core.json_limits import lone_surrogates_replaced

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


# What an Authorization header can carry: printable ASCII without spaces. httpx refused a key
# with a newline (an env file's) by quoting the whole header, key and all, in its error.
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")
REDACTED = "[api key]"


def api_key(env_name: str) -> str | None:
    """The key from the environment variable the config names (never from the config),
    without the whitespace around it; a key a header cannot carry is refused without being
    shown."""
    if not env_name:
        return None
    value = (os.environ.get(env_name) or "").strip()
    if not value:
        raise EndpointError(f"the judge reads its API key from ${env_name}, which is not set",
                            fatal=True)
    if not _HEADER_SAFE.fullmatch(value):
        raise EndpointError(f"${env_name} holds a character an HTTP header cannot carry (a "
                            "space, a control character or a non-ASCII letter inside the "
                            "key); the key is not shown", fatal=True)
    return value


# At most this much of an answer is read (a chat completion with `max_tokens` tokens and five
# log-probabilities per token is far smaller); a larger body is the endpoint's fault.
BODY_BYTES_BASE = 1 << 20
BODY_BYTES_PER_TOKEN = 2048


class ChatClient:
    def __init__(self, *, base_url: str, model: str, api_key_env: str = "",
                 concurrency: int = 8, timeout: float = 120.0,
                 retry: RetryPolicy | None = None):
        key = api_key(api_key_env)
        self._key = key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # The path goes before a query the base URL carries (Azure's ?api-version=...): it was
        # appended after it, and every request went to a URL no endpoint serves.
        base = httpx.URL(base_url)
        self.url = base.copy_with(path=base.path.rstrip("/") + "/chat/completions")
        self.model = model
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.http = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout, connect=10.0),
            limits=httpx.Limits(max_connections=concurrency,
                                max_keepalive_connections=concurrency),
            follow_redirects=False,
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
        limit = BODY_BYTES_BASE + BODY_BYTES_PER_TOKEN * max_tokens
        last = ""
        for attempt in range(self.retry.attempts):
            retry_after = None
            try:
                status, headers, data = self._post(body, limit)
            except (httpx.RequestError, _SlowBody) as exc:
                # Timeouts, dropped connections, and a body that does not decode as its
                # Content-Encoding says (DecodingError, no TransportError: it failed the run).
                last = self.redact(f"{type(exc).__name__}: {exc}")
            except _LargeBody as exc:
                # Asked again it would be as large (and paid for again): failed, not retried.
                raise EndpointError(self.redact(str(exc))) from None
            else:
                if status == 200:
                    try:
                        return _answer(data, retries=attempt)
                    except _BrokenBody as exc:
                        # The endpoint's fault (a cut connection, a proxy's error page), not
                        # the model's answer: asked again like a 5xx, never stored as one.
                        last = str(exc)
                elif 300 <= status < 400:
                    where = self.redact(headers.get("location") or "nowhere named")
                    raise EndpointError(
                        f"HTTP {status}: the endpoint redirects to {where}; redirects are not "
                        "followed (the request and its key would go to another address): "
                        "set the judge's base_url to the endpoint itself", fatal=True)
                else:
                    last = f"HTTP {status}: {data.decode('utf-8', errors='replace')[:200]}"
                    if status not in self.retry.retried_statuses:
                        raise EndpointError(last, fatal=status in (401, 403, 404))
                    retry_after = headers.get("retry-after")
            if attempt + 1 < self.retry.attempts:
                self._pause(self.retry.delay(attempt, retry_after), stop)
                if stop is not None and stop.is_set():
                    raise RequestStopped(f"not asked again after {attempt + 1} attempts: the "
                                         f"run was stopped; last: {last}")
        raise EndpointError(f"no answer after {self.retry.attempts} attempts; last: {last}")

    def _post(self, body: dict, limit: int) -> tuple[int, httpx.Headers, bytes]:
        """(status, headers, body) of one request, the body read within the client's timeout
        in all (httpx's own timeout is per read: a body trickled a byte at a time never hit
        it) and up to `limit` bytes."""
        deadline = time.monotonic() + self.timeout
        with self.http.stream("POST", self.url, json=body) as response:
            answer = response.status_code == 200
            declared = response.headers.get("content-length", "")
            if answer and declared.isdigit() and int(declared) > limit:
                raise _LargeBody(f"HTTP 200 with a body of {declared} bytes, over the {limit} "
                                 "an answer may take: not read")
            chunks, size = [], 0
            # Decoded bytes: a small gzip body may unpack to gigabytes.
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    if answer:
                        raise _LargeBody(f"HTTP 200 with a body over the {limit} bytes an "
                                         "answer may take: not read further")
                    break  # an error page: its start says enough
                if time.monotonic() > deadline:
                    raise _SlowBody(f"the answer took more than {self.timeout:g} s to arrive "
                                    f"({size} bytes so far)")
                chunks.append(chunk)
            data = b"".join(chunks)
            if self._key:
                # Whatever is kept of the body (an error's text, a stored answer) never holds
                # the key, whole or cut short.
                data = data.replace(self._key.encode(), REDACTED.encode())
            return response.status_code, response.headers, data

    def redact(self, text: str) -> str:
        """`text` without the key (an endpoint or a proxy may echo it; httpx quotes a header
        it refuses)."""
        return text.replace(self._key, REDACTED) if self._key else text

    def _pause(self, seconds: float, stop: threading.Event | None) -> None:
        """The backoff; with the default sleep, a stop wakes it at once (a Retry-After may be
        20 s)."""
        if stop is not None and self.retry.sleep is time.sleep:
            stop.wait(seconds)
        else:
            self.retry.sleep(seconds)


class _BrokenBody(Exception):
    """A 200 whose body is not a chat completion."""


class _SlowBody(Exception):
    """A body still arriving when the request's time was up."""


class _LargeBody(Exception):
    """A body larger than the client reads."""


def _answer(body: bytes, *, retries: int) -> ChatAnswer:
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        message = choice["message"]
        text = _content_text(message.get("content"))
        refusal = message.get("refusal") if not text else None
        usage = data.get("usage") or {}
        tokens = [_token_count(usage.get(name)) for name in ("prompt_tokens",
                                                             "completion_tokens")]
        known = None not in tokens
        return ChatAnswer(text=lone_surrogates_replaced(text or str(refusal or "")),
                          finish_reason=choice.get("finish_reason") or "",
                          logprobs=(choice.get("logprobs") or {}).get("content"),
                          prompt_tokens=tokens[0] if known else 0,
                          completion_tokens=tokens[1] if known else 0,
                          retries=retries, refused=bool(refusal), usage_known=known)
    except (json.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError,
            ValueError, RecursionError) as exc:
        # RecursionError: a body nested a few thousand levels (it failed the whole run).
        raise _BrokenBody(f"HTTP 200 with a body that is not a chat completion "
                          f"({type(exc).__name__}): "
                          f"{body.decode('utf-8', errors='replace')[:200]}") from None


def _content_text(content) -> str:
    """The answer's text: a string, or a list of content parts (some OpenAI-compatible servers
    answer so; the text parts joined, a reasoning part left out). Anything else (a number, an
    object) is no chat completion: TypeError, which `_answer` reads as a broken body. It
    reached the parse rules, whose `.strip()` failed the whole run, unsaved answers lost."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        parts = [part.get("text") for part in content if part.get("type", "text") == "text"]
        if all(isinstance(part, str) for part in parts):
            return "".join(parts)
    raise TypeError(f"message content is a {type(content).__name__}, not text")


# More tokens than any one call uses (the longest context windows hold about 10 million), and
# less than the verdict's token columns hold (PositiveIntegerField: 2**31 - 1 on PostgreSQL).
MAX_REPORTED_TOKENS = 100_000_000


def _token_count(value) -> int | None:
    """A usage count as reported, or None when it is missing or no count (negative, not a
    whole number, more than MAX_REPORTED_TOKENS): a negative count made a negative cost that
    undid the budget, and a count past the column's range failed the batch's write (a
    DataError on PostgreSQL, an OverflowError on SQLite), the run and its unsaved answers."""
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not 0 <= value <= MAX_REPORTED_TOKENS or not float(value).is_integer():
        return None
    return int(value)
