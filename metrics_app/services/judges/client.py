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
that no header can carry).

Where an endpoint may be is bounded too (`address_refusal`, checked at connect time on the
address the host name resolves to, so a name that resolves to an internal address, an IP
written in decimal or hex, or an IPv4-mapped IPv6 address are all seen as what they are):
link-local addresses (the cloud metadata service at 169.254.169.254 and its IPv6 and vendor
variants) never, loopback and private addresses only inside `QAJ_JUDGE_PRIVATE_NETWORKS`. A
judge's config is written by one researcher and its error messages are read by others: an
endpoint at an internal address would let a config read the app's own network (the
metadata's credentials, an internal service's answer quoted in the job's error)."""
from __future__ import annotations

import ipaddress
import json
import logging
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpcore
import httpx

from core.json_limits import lone_surrogates_replaced

from ...domain.judge_prompts import api_key_env_error, base_url_credentials_error, url_redacted

# One INFO line per request from httpx would drown a 5,000-item run's log.
logging.getLogger("httpx").setLevel(logging.WARNING)


class EndpointError(Exception):
    """The endpoint could not answer this request (after retries, or a 4xx that retrying
    cannot fix); the message says what it answered."""

    def __init__(self, message: str, *, fatal: bool = False, paid_unusable: int = 0):
        super().__init__(message)
        self.fatal = fatal  # 401/403/404: every other request would fail the same way
        # Attempts answered 200 whose body could not be used (`ChatAnswer.paid_unusable`).
        self.paid_unusable = paid_unusable


class AddressRefused(Exception):
    """The endpoint's host is (or resolves to) an address judges may not reach."""


class RequestStopped(Exception):
    """A request retrying was given up without asking again because its run was told to stop
    (its job cancelled: core/leases.py `JobCancelled`); not an endpoint failure."""

    def __init__(self, message: str, *, paid_unusable: int = 0):
        super().__init__(message)
        self.paid_unusable = paid_unusable


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
    # Earlier attempts answered 200 with a body that could not be used (cut short, not a chat
    # completion, too slow): the endpoint ran the model for them, so the run charges each its
    # worst case.
    paid_unusable: int = 0


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
    if error := api_key_env_error(env_name):
        raise EndpointError(error, fatal=True)
    value = (os.environ.get(env_name) or "").strip()
    if not value:
        raise EndpointError(f"the judge reads its API key from ${env_name}, which is not set",
                            fatal=True)
    if not _HEADER_SAFE.fullmatch(value):
        raise EndpointError(f"${env_name} holds a character an HTTP header cannot carry (a "
                            "space, a control character or a non-ASCII letter inside the "
                            "key); the key is not shown", fatal=True)
    return value


# Never an endpoint, whatever the setting says: link-local (169.254.0.0/16 holds the metadata
# service of AWS, GCP, Azure and OpenStack, whose answers carry the instance's credentials),
# the other clouds' metadata addresses, "this host" (0.0.0.0 and :: connect to the machine
# itself), multicast and reserved space.
NEVER_NETWORKS = tuple(ipaddress.ip_network(network) for network in (
    "169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "100.100.100.200/32",
    "0.0.0.0/8", "::/128", "224.0.0.0/4", "ff00::/8", "240.0.0.0/4"))
# Words QAJ_JUDGE_PRIVATE_NETWORKS may use besides networks (CIDR) and single addresses.
NETWORK_WORDS = {
    "loopback": ("127.0.0.0/8", "::1/128"),
    "private": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"),
}
SETTING = "QAJ_JUDGE_PRIVATE_NETWORKS"


def private_networks(value) -> tuple:
    """The networks of QAJ_JUDGE_PRIVATE_NETWORKS (comma-separated, or a list: CIDRs, single
    addresses, `loopback`, `private`); EndpointError naming the entry it cannot read."""
    entries = value.split(",") if isinstance(value, str) else list(value or ())
    networks = []
    for entry in (str(entry).strip() for entry in entries):
        if not entry:
            continue
        try:
            networks += [ipaddress.ip_network(network, strict=False)
                         for network in NETWORK_WORDS.get(entry.lower(), (entry,))]
        except ValueError:
            raise EndpointError(f"{SETTING}: {entry!r} is not a network (CIDR such as "
                                "10.0.0.0/8, an address, 'loopback' or 'private')",
                                fatal=True) from None
    return tuple(networks)


def _embedded_ipv4(address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (IPv4-mapped ::ffff:a.b.c.d, 6to4, NAT64
    64:ff9b::/96), which is where a connection to it may end up."""
    if address.version != 6:
        return None
    if address.ipv4_mapped or address.sixtofour:
        return address.ipv4_mapped or address.sixtofour
    if address in ipaddress.ip_network("64:ff9b::/96"):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_refusal(address: str, allowed: tuple) -> str | None:
    """None when a judge endpoint may be at `address` (an IP, as resolved), else why not:
    NEVER_NETWORKS always; an address that is not public (loopback, private, shared, ...)
    unless it lies in `allowed` (QAJ_JUDGE_PRIVATE_NETWORKS)."""
    ip = ipaddress.ip_address(address.split("%")[0])  # without an IPv6 scope ("fe80::1%eth0")
    embedded = _embedded_ipv4(ip)
    seen = (ip, embedded) if embedded else (ip,)
    if any(one in network for one in seen for network in NEVER_NETWORKS):
        return (f"{address}, a link-local, metadata or reserved address, which a judge "
                "endpoint may never be at (the cloud metadata service answers there)")
    # An address carrying an IPv4 one is where that one is (::ffff:8.8.8.8 is public).
    if (embedded or ip).is_global or any(
            one in network for one in seen for network in allowed):
        return None
    return (f"{address}, a loopback or private address; a judge endpoint may be there only "
            f"when {SETTING} includes it (e.g. {SETTING}=loopback for a model served on this "
            "machine, or the lab server's network, 10.0.0.0/8)")


class _GuardedBackend(httpcore.SyncBackend):
    """httpcore's socket backend that resolves the host itself, refuses the connection when
    any address it resolves to is refused (`address_refusal`) and connects to the address it
    checked: a name resolved twice (checked, then connected) could answer differently the
    second time (DNS rebinding). TLS still verifies the certificate against the host name."""

    def __init__(self, allowed: tuple):
        self.allowed = allowed

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"{host}: {exc}") from None
        addresses = list(dict.fromkeys(info[4][0] for info in infos))
        for address in addresses:
            if reason := address_refusal(address, self.allowed):
                shown = "" if host == address else f"{host} resolves to "
                raise AddressRefused(f"the judge's endpoint is refused: {shown}{reason}")
        failure = httpcore.ConnectError(f"{host}: no address")
        for address in addresses:
            try:
                return super().connect_tcp(address, port, timeout=timeout,
                                           local_address=local_address,
                                           socket_options=socket_options)
            except httpcore.ConnectError as exc:
                failure = exc
        raise failure


def guarded_transport(allowed: tuple, limits: httpx.Limits) -> httpx.HTTPTransport:
    """An httpx transport whose every connection goes through `_GuardedBackend`. httpx takes
    no network backend of its own, so its pool's is replaced. Environment proxies are not
    used: through one, the proxy would reach the address the policy refuses."""
    transport = httpx.HTTPTransport(limits=limits)
    transport._pool._network_backend = _GuardedBackend(allowed)
    return transport


# At most this much of an answer is read (a chat completion with `max_tokens` tokens and five
# log-probabilities per token is far smaller); a larger body is the endpoint's fault.
BODY_BYTES_BASE = 1 << 20
BODY_BYTES_PER_TOKEN = 2048


class ChatClient:
    def __init__(self, *, base_url: str, model: str, api_key_env: str = "",
                 concurrency: int = 8, timeout: float = 120.0,
                 retry: RetryPolicy | None = None, allowed_networks=None):
        """`allowed_networks`: the loopback and private networks the endpoint may be in
        (`private_networks`), QAJ_JUDGE_PRIVATE_NETWORKS when None."""
        if allowed_networks is None:
            from django.conf import settings

            allowed_networks = private_networks(getattr(settings, SETTING, ""))
        if error := base_url_credentials_error(base_url):
            # A version stored before such URLs were refused: not sent (httpx would send the
            # userinfo as a Basic header to wherever the URL points) nor shown.
            raise EndpointError(error, fatal=True)
        key = api_key(api_key_env)
        self._key = key
        self._key_forms = _escaped_forms(key) if key else ()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # The path goes before a query the base URL carries (Azure's ?api-version=...): it was
        # appended after it, and every request went to a URL no endpoint serves.
        try:
            base = httpx.URL(base_url)
        except httpx.InvalidURL as exc:
            # "http://0251.0376.0251.0376/v1" passes the config's URL check, not httpx's.
            raise EndpointError(f"base_url: {url_redacted(str(exc))}", fatal=True) from None
        self.url = base.copy_with(path=base.path.rstrip("/") + "/chat/completions")
        self.model = model
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.http = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout, connect=10.0),
            transport=guarded_transport(allowed_networks, httpx.Limits(
                max_connections=concurrency, max_keepalive_connections=concurrency)),
            follow_redirects=False,
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def complete(self, *, system: str, prompt: str, temperature: float, max_tokens: int,
                 logprobs: bool, stop: threading.Event | None = None,
                 pay_again: Callable[[], bool] | None = None) -> ChatAnswer:
        """One chat completion, retried as the policy says. `stop` set (the run's job was
        cancelled) ends the retries: no new request, each one paid for, is sent after it;
        RequestStopped instead. A 200 whose body cannot be used was paid for (counted in
        `paid_unusable` of the answer or the error); it is asked again only when `pay_again()`
        says the budget covers another paid answer (it reserves it)."""
        body = {"model": self.model, "temperature": temperature, "max_tokens": max_tokens,
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": prompt}]}
        if logprobs:
            body.update(logprobs=True, top_logprobs=5)
        limit = BODY_BYTES_BASE + BODY_BYTES_PER_TOKEN * max_tokens
        last = ""
        paid_unusable = 0
        for attempt in range(self.retry.attempts):
            retry_after = None
            paid_now = False
            try:
                status, headers, data = self._post(body, limit)
            except (httpx.RequestError, _SlowBody) as exc:
                # Timeouts, dropped connections, and a body that does not decode as its
                # Content-Encoding says (DecodingError, no TransportError: it failed the run).
                last = self.redact(f"{type(exc).__name__}: {exc}")
                paid_now = getattr(exc, "answered", False)
            except AddressRefused as exc:
                # Every request goes to the same host: the run ends at the first.
                raise EndpointError(str(exc), fatal=True) from None
            except _LargeBody as exc:
                # Asked again it would be as large (and paid for again): failed, not retried.
                raise EndpointError(self.redact(str(exc)),
                                    paid_unusable=paid_unusable + 1) from None
            else:
                if status == 200:
                    try:
                        answer = _answer(data, retries=attempt)
                    except _BrokenBody as exc:
                        # The endpoint's fault (a cut connection, a proxy's error page), not
                        # the model's answer: asked again like a 5xx, never stored as one.
                        last = self.redact(str(exc))
                        paid_now = True
                    else:
                        # The key JSON-escaped in the body ("\u0073k-...", "ab\/cd") is the
                        # key again once decoded: the stored answer never holds it.
                        answer.text = self.redact(answer.text)
                        answer.paid_unusable = paid_unusable
                        return answer
                elif 300 <= status < 400:
                    where = self.redact(headers.get("location") or "nowhere named")
                    raise EndpointError(
                        f"HTTP {status}: the endpoint redirects to {where}; redirects are not "
                        "followed (the request and its key would go to another address): "
                        "set the judge's base_url to the endpoint itself", fatal=True)
                else:
                    last = f"HTTP {status}: {self.redact(_body_text(data))[:200]}"
                    if status not in self.retry.retried_statuses:
                        raise EndpointError(last, fatal=status in (401, 403, 404))
                    retry_after = headers.get("retry-after")
            paid_unusable += paid_now
            if attempt + 1 < self.retry.attempts:
                if paid_now and pay_again is not None and not pay_again():
                    raise EndpointError(
                        f"not asked again after {attempt + 1} attempts: the budget cannot "
                        f"cover another paid answer; last: {last}", paid_unusable=paid_unusable)
                self._pause(self.retry.delay(attempt, retry_after), stop)
                if stop is not None and stop.is_set():
                    raise RequestStopped(f"not asked again after {attempt + 1} attempts: the "
                                         f"run was stopped; last: {last}",
                                         paid_unusable=paid_unusable)
        raise EndpointError(f"no answer after {self.retry.attempts} attempts; last: {last}",
                            paid_unusable=paid_unusable)

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
                                    f"({size} bytes so far)", answered=answer)
                chunks.append(chunk)
            data = b"".join(chunks)
            for form in self._key_forms:
                # Whatever is kept of the body (an error's text, a stored answer) never holds
                # the key, whole or cut short, as written or JSON-escaped.
                data = data.replace(form, REDACTED.encode())
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


def _escaped_forms(key: str) -> tuple[bytes, ...]:
    """The key as a body may spell it: as is, JSON-escaped (a quote or a backslash; PHP's
    "\\/"), or every character a \\u escape."""
    forms = {key, json.dumps(key)[1:-1], json.dumps(key)[1:-1].replace("/", "\\/"),
             "".join(f"\\u{ord(char):04x}" for char in key)}
    return tuple(sorted((form.encode() for form in forms), key=len, reverse=True))


def _body_text(data: bytes) -> str:
    """An error body as text to show: a JSON body decoded (its escapes read, so the key
    spelt in escapes is redacted as the key), else the bytes as UTF-8."""
    try:
        return json.dumps(json.loads(data), ensure_ascii=False)
    except (ValueError, RecursionError):
        return data.decode("utf-8", errors="replace")


class _BrokenBody(Exception):
    """A 200 whose body is not a chat completion."""


class _SlowBody(Exception):
    """A body still arriving when the request's time was up (`answered`: a 200's)."""

    def __init__(self, message: str, *, answered: bool):
        super().__init__(message)
        self.answered = answered


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
