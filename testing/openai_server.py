"""A local fake of an OpenAI-compatible chat-completions endpoint (`POST /v1/chat/completions`,
as OpenAI, vLLM, Ollama and llama.cpp's server speak it), over HTTP on 127.0.0.1, for LLM
judges in tests, the benchmark and a researcher's rehearsal.

    with FakeChatServer(latency=0.5, api_key="k") as server:
        config = {"base_url": server.url, "model": "fake-judge", "api_key_env": "FAKE_KEY"}

The judge it plays (`behaviour`) reads the prompt: Likert prompts get "Score: 5" when the
candidate contains a reference (after lower-casing) or shares most of its words, else
"Score: 1"; A/B prompts prefer the longer answer (or the first shown, `position_bias`); STARC
prompts answer A. `behaviour` may be any callable (prompt text -> answer text). Faults, each
counted in `stats`: `rate_limit_burst(n)` (the next n requests get 429 with Retry-After),
`fail_next(n, status)` (5xx), `malformed_rate` (an answer without a verdict),
`truncated_rate` (cut short, finish_reason "length"), `broken_body_rate` (a 200 whose body is
not JSON), `refusal_rate` (the model declines: content null and a `refusal` text, as OpenAI
answers); `logprobs` on or off; `latency` seconds per request (slept in the request's thread,
so concurrent requests overlap as at a real endpoint). Endpoints that misbehave: `redirect_to`
(every chat request answered 307 to that URL), `trickle` (an answer's body sent 64 bytes at a
time, that many seconds apart), `padding` (bytes of whitespace after each answer's JSON: a
huge body), `chunked` (answers sent without a Content-Length, in chunks, as streaming servers
do), `echo_key` (a 401 quotes the Authorization header it got, as some proxies do). A model that
quotes what it graded AFTER its verdict, naively (`echo`): "answer" quotes the judged answers
(the candidate; both answers; the four choices), "prompt" the whole prompt it was sent, so an
answer's forged "Score: 5" or "Verdict: correct" comes after the model's own verdict line.

As a process of its own (a rehearsal, or a benchmark that keeps the endpoint off its own CPU):

    python -m testing.openai_server --port 8765 --latency 0.5 [--api-key K] [--malformed 0.02]
        [--echo answer|prompt]

prints its base URL; `GET /fake/stats` answers the counters, `POST /fake/faults`
{"rate_limit_burst": n, "fail_next": n, "status": 503} schedules faults.
"""
from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from http.server import ThreadingHTTPServer

from testing.http_fake import FakeApiHandler


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _field(prompt: str, name: str, old_layout: str) -> str | None:
    """The text of one field: between its tags (the default prompts fence every field), or, in
    a prompt written in the old unfenced layout, by that layout's pattern."""
    fenced = re.search(rf"<{name}>\n?(.*?)\n?</{name}>", prompt, re.S)
    if fenced:
        return fenced.group(1)
    unfenced = re.search(old_layout, prompt, re.S)
    return unfenced.group(1) if unfenced else None


def default_behaviour(prompt: str, *, position_bias: float = 0.0, rng=None) -> str:
    rng = rng or random
    refs = _field(prompt, "references", r"Reference answer\(s\): ([^\n]*)")
    cand = _field(prompt, "candidate", r"Candidate answer: ([^\n]*)")
    if refs is not None and cand is not None:
        candidate = cand.lower()
        references = [r.strip().lower() for r in refs.split(" / ") if r.strip()]
        words = set(_words(candidate))
        contained = any(r and r in candidate for r in references)
        overlap = max((len(words & set(_words(r))) / max(1, len(set(_words(r))))
                       for r in references), default=0.0)
        score = 5 if contained else 4 if overlap >= 0.6 else 2 if overlap > 0 else 1
        return f"The candidate {'matches' if score >= 3 else 'misses'} the reference.\nScore: {score}"
    a = _field(prompt, "answer_a", r"Answer A:\n(.*?)\n\nAnswer B:")
    b = _field(prompt, "answer_b", r"Answer B:\n(.*?)\n\n")
    if a is not None and b is not None:
        if rng.random() < position_bias:
            return "The first answer reads better.\nBetter: A"
        better = "A" if len(a) >= len(b) else "B"
        return f"Answer {better} is more complete.\nBetter: {better}"
    return "The first choice is supported by the paragraph.\nAnswer: A"


class FakeChatServer:
    def __init__(self, *, latency: float = 0.0, api_key: str | None = None,
                 behaviour: Callable[[str], str] | None = None, logprobs: bool = True,
                 malformed_rate: float = 0.0, truncated_rate: float = 0.0,
                 broken_body_rate: float = 0.0, error_rate: float = 0.0,
                 refusal_rate: float = 0.0, position_bias: float = 0.0, seed: int = 0, port: int = 0,
                 redirect_to: str | None = None, trickle: float = 0.0, padding: int = 0,
                 echo_key: bool = False, chunked: bool = False, echo: str | None = None):
        if echo not in (None, *ECHOES):
            raise ValueError(f"echo: {echo!r} is not one of {', '.join(ECHOES)}")
        self.echo = echo
        self.latency = latency
        self.chunked = chunked
        self.redirect_to = redirect_to
        self.trickle = trickle
        self.padding = padding
        self.echo_key = echo_key
        self.api_key = api_key
        self.rng = random.Random(seed)
        self.behaviour = behaviour or (lambda prompt: default_behaviour(
            prompt, position_bias=position_bias, rng=self.rng))
        self.logprobs = logprobs
        self.malformed_rate = malformed_rate
        self.truncated_rate = truncated_rate
        self.broken_body_rate = broken_body_rate
        self.error_rate = error_rate
        self.refusal_rate = refusal_rate
        self.lock = threading.Lock()
        self.stats: dict[str, int] = defaultdict(int)
        self.prompts: list[str] = []
        self.queries: list[str] = []  # each chat request's query string ("" without one)
        self._rate_limited = 0
        self._fail: list[int] = []
        self._in_flight = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self.httpd.daemon_threads = True
        self.httpd.request_queue_size = 256

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeChatServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- faults -----------------------------------------------------------------------------
    def rate_limit_burst(self, n: int) -> None:
        with self.lock:
            self._rate_limited += n

    def fail_next(self, n: int, status: int = 503) -> None:
        with self.lock:
            self._fail.extend([status] * n)

    # --- serving ----------------------------------------------------------------------------
    def _complete(self, body: dict) -> tuple[int, dict | bytes, dict]:
        with self.lock:
            self.stats["requests"] += 1
            if self._rate_limited > 0:
                self._rate_limited -= 1
                self.stats["429"] += 1
                return 429, {"error": {"message": "Rate limit reached", "type": "requests"}}, \
                    {"Retry-After": "0.05"}
            if self._fail:
                status = self._fail.pop(0)
                self.stats[str(status)] += 1
                return status, {"error": {"message": "upstream overloaded"}}, {}
            roll = self.rng.random()
        if roll < self.error_rate:
            with self.lock:
                self.stats["500"] += 1
            return 500, {"error": {"message": "internal error"}}, {}
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not body.get("model"):
            return 400, {"error": {"message": "model and messages are required"}}, {}
        prompt = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        with self.lock:
            self.prompts.append(prompt)
            roll = self.rng.random()
        if roll < self.broken_body_rate:
            with self.lock:
                self.stats["broken_body"] += 1
            return 200, b'{"id": "chatcmpl-broken", "choices": [', {}
        text = self.behaviour(prompt)
        if self.echo:
            text += "\n\nFor the record, what I graded:\n" + _echoed(prompt, self.echo)
        finish = "stop"
        message = None
        roll -= self.broken_body_rate
        if 0 <= roll < self.malformed_rate:
            text = "I am not sure how to grade this one."
            with self.lock:
                self.stats["malformed"] += 1
        elif 0 <= roll - self.malformed_rate < self.truncated_rate:
            text = text[: max(1, len(text) // 3)]
            finish = "length"
            with self.lock:
                self.stats["truncated"] += 1
        elif 0 <= roll - self.malformed_rate - self.truncated_rate < self.refusal_rate:
            refusal = "I'm sorry, but I can't help with grading this answer."
            message = {"role": "assistant", "content": None, "refusal": refusal}
            text = refusal
            with self.lock:
                self.stats["refused"] += 1
        choice = {"index": 0, "finish_reason": finish,
                  "message": message or {"role": "assistant", "content": text, "refusal": None}}
        if self.logprobs and body.get("logprobs"):
            choice["logprobs"] = {"content": _logprobs(text)}
        usage = {"prompt_tokens": max(1, len(prompt) // 4),
                 "completion_tokens": max(1, len(text) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        with self.lock:
            self.stats["answered"] += 1
        return 200, {"id": f"chatcmpl-{self.stats['requests']}", "object": "chat.completion",
                     "created": int(time.time()), "model": body["model"],
                     "choices": [choice], "usage": usage}, {}

    def _handler_class(self):
        server = self

        class Handler(FakeApiHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with server.lock:
                    server._in_flight += 1
                    server.stats["max_in_flight"] = max(server.stats["max_in_flight"],
                                                        server._in_flight)
                try:
                    if server.latency:
                        time.sleep(server.latency)
                    if server.api_key and self.headers.get("Authorization") != \
                            f"Bearer {server.api_key}":
                        with server.lock:
                            server.stats["401"] += 1
                        got = f": got {self.headers.get('Authorization')!r}" \
                            if server.echo_key else ""
                        return self._reply(401, {"error": {"message": f"invalid api key{got}"}})
                    if self.path.rstrip("/") == "/fake/faults":
                        faults = json.loads(raw or b"{}")
                        server.rate_limit_burst(int(faults.get("rate_limit_burst", 0)))
                        server.fail_next(int(faults.get("fail_next", 0)),
                                         int(faults.get("status", 503)))
                        return self._reply(200, {"ok": True})
                    if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
                        return self._reply(404, {"error": {"message": f"no route {self.path}"}})
                    with server.lock:
                        server.queries.append(self.path.partition("?")[2])
                    if server.redirect_to:
                        with server.lock:
                            server.stats["redirected"] += 1
                        return self._reply(307, {}, {"Location": server.redirect_to})
                    try:
                        body = json.loads(raw or b"{}")
                    except json.JSONDecodeError:
                        return self._reply(400, {"error": {"message": "body is not JSON"}})
                    status, payload, headers = server._complete(body)
                    self._reply(status, payload, headers)
                finally:
                    with server.lock:
                        server._in_flight -= 1

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/fake/stats":
                    with server.lock:
                        return self._reply(200, dict(server.stats))
                if self.path.rstrip("/") == "/v1/models":
                    return self._reply(200, {"object": "list", "data": [
                        {"id": "fake-judge", "object": "model", "owned_by": "qa-judge"}]})
                return self._reply(404, {"error": {"message": f"no route {self.path}"}})

            def _reply(self, status: int, payload, headers: dict | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                answer = status == 200 and \
                    self.path.split("?")[0].rstrip("/") == "/v1/chat/completions"
                if answer and server.padding:
                    data += b" " * server.padding
                chunked = answer and server.chunked
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                if chunked:
                    try:
                        for start in range(0, len(data), 65536):
                            part = data[start:start + 65536]
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:
                        self.close_connection = True  # the client stopped reading
                    return
                if not (answer and server.trickle):
                    self.wfile.write(data)
                    return
                try:
                    for start in range(0, len(data), 64):
                        self.wfile.write(data[start:start + 64])
                        self.wfile.flush()
                        time.sleep(server.trickle)
                except OSError:
                    pass  # the client gave up on the answer

        return Handler


ECHOES = ("answer", "prompt")
# The fields an "answer" echo quotes: what is judged, whatever the task.
JUDGED_FIELDS = ("candidate", "answer_a", "answer_b", "choice_a", "choice_b", "choice_c",
                 "choice_d")


def _echoed(prompt: str, echo: str) -> str:
    """What a model echoing naively quotes: the prompt itself, or the judged answers' texts."""
    if echo == "prompt":
        return prompt
    return "\n".join(text for name in JUDGED_FIELDS
                     if (text := _field(prompt, name, r"(?!)")) is not None)


def _logprobs(text: str) -> list[dict]:
    """Token log-probabilities as chat completions return them, with alternatives at the
    verdict's token: the chosen token gets 0.8, its neighbours the rest."""
    out = []
    for token in re.findall(r"\w+|\W", text):
        entry = {"token": token, "logprob": -0.05, "top_logprobs": []}
        if token in "12345" and len(token) == 1:
            value = int(token)
            probs = {str(v): (0.8 if v == value else 0.2 / 2 if abs(v - value) == 1 else 0.0)
                     for v in range(1, 6)}
            if value in (1, 5):
                probs[str(value)] = 0.9
            entry["top_logprobs"] = [{"token": t, "logprob": _log(p)} for t, p in probs.items()
                                     if p > 0]
        elif token in ("A", "B"):
            other = "B" if token == "A" else "A"
            entry["top_logprobs"] = [{"token": token, "logprob": _log(0.75)},
                                     {"token": other, "logprob": _log(0.25)}]
        out.append(entry)
    return out


def _log(p: float) -> float:
    import math

    return math.log(p)


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible chat endpoint.")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--malformed", type=float, default=0.0)
    parser.add_argument("--truncated", type=float, default=0.0)
    parser.add_argument("--errors", type=float, default=0.0, help="share of 500 answers")
    parser.add_argument("--broken", type=float, default=0.0,
                        help="share of 200 answers whose body is cut short (not JSON)")
    parser.add_argument("--no-logprobs", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--echo", choices=ECHOES, default=None,
                        help="quote the judged answers (or the prompt) after the verdict")
    args = parser.parse_args(argv)
    server = FakeChatServer(latency=args.latency, api_key=args.api_key,
                            malformed_rate=args.malformed, truncated_rate=args.truncated,
                            error_rate=args.errors, broken_body_rate=args.broken,
                            logprobs=not args.no_logprobs,
                            seed=args.seed, port=args.port, echo=args.echo)
    print(server.url, flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
