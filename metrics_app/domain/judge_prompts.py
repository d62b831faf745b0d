"""LLM judges without Django or HTTP: the default prompt of each task kind, how a prompt is
rendered from an item's content, how an answer is parsed into a verdict, a score and (from the
endpoint's log-probabilities) a probability, and what a call costs.

Parse rules (`config["parse"]`):

- `likert`: the first 1–5 digit after "score" (or the first lone 1–5 digit); verdict
  `correct` when the score is 3 or more. Probability: the log-probability mass of the tokens
  3/4/5 over 1–5 at the score's token.
- `yes_no`: the first of yes/correct/true or no/incorrect/false (word bounded); verdict
  correct/incorrect. Probability: P(yes-like) over yes- and no-like tokens at that token.
- `ab`: the first lone A or B (after "answer"/"better"/"choice" when present); probability
  P(A) over A/B at that token.
- `choice`: the first lone A–D (STARC); probability of the chosen letter.
- `json`: a JSON object somewhere in the answer with `verdict` (correct/incorrect, A/B, ...),
  optional `score`, `probability`, `reasoning`.
- `regex`: `config["pattern"]`, a regular expression whose first group is the verdict
  (`config["verdicts"]` maps raw groups to verdicts, e.g. {"1": "correct"}).

Whatever a rule cannot read is `Parsed(ok=False, error=...)`: counted and shown, never dropped.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from core.vocabulary import TASK_KINDS, TaskKind

PARSE_RULES = ("likert", "yes_no", "ab", "choice", "json", "regex")
CORRECT_AT = 3.0

DEFAULT_SYSTEM = "You are a careful grader of answers to questions."
DEFAULT_PROMPTS = {
    TaskKind.LIKERT: (
        "Passage:\n{passage}\n\nQuestion: {question}\nReference answer(s): {references}\n"
        "Candidate answer: {candidate}\n\nUsing the passage and the question, how closely does "
        "the candidate answer capture the same information as the reference answer? "
        "1 Completely wrong, 2 Mostly wrong, 3 Half right, 4 Mostly right, 5 Perfect answer.\n"
        "Reply with one line of reasoning, then a final line 'Score: N'."
    ),
    TaskKind.AB: (
        "Question: {question}\n\nAnswer A:\n{answer_a}\n\nAnswer B:\n{answer_b}\n\n"
        "Which answer is better? Reply with one line of reasoning, then a final line "
        "'Better: A' or 'Better: B'."
    ),
    TaskKind.MC: (
        "Paragraph:\n{paragraph}\n\nQuestion: {question}\nA. {choice_a}\nB. {choice_b}\n"
        "C. {choice_c}\nD. {choice_d}\n\nWhich answer is correct? Reply with one line of "
        "reasoning, then a final line 'Answer: X'."
    ),
}
# Task kind -> the parse rule its verdicts are read with (PARSE_RULES).
DEFAULT_PARSE = {TaskKind.LIKERT: "likert", TaskKind.AB: "ab", TaskKind.MC: "choice"}
FIELDS = {
    TaskKind.LIKERT: ("passage", "question", "references", "candidate"),
    TaskKind.AB: ("question", "answer_a", "answer_b"),
    TaskKind.MC: ("paragraph", "question", "choice_a", "choice_b", "choice_c", "choice_d"),
}


class JudgeConfigError(ValueError):
    """A judge configuration that cannot work; the message names the field."""


def validate_config(config: dict) -> dict:
    """A complete LLM judge configuration (defaults filled in), or JudgeConfigError."""
    if not isinstance(config, dict):
        raise JudgeConfigError("the judge config must be an object")
    known = {"base_url", "model", "api_key_env", "task", "system", "prompt", "temperature",
             "max_tokens", "parse", "pattern", "verdicts", "logprobs", "price"}
    if "api_key" in config:
        raise JudgeConfigError("api_key: never store a key; name its environment variable "
                               "in api_key_env")
    unknown = sorted(set(config) - known)
    if unknown:
        raise JudgeConfigError(f"unknown judge config field(s): {', '.join(unknown)} "
                               f"(known: {', '.join(sorted(known))})")
    out = dict(config)
    task = out.setdefault("task", "likert")
    if task not in TASK_KINDS:
        raise JudgeConfigError(f"task: {task!r} is not one of {', '.join(TASK_KINDS)}")
    for key in ("base_url", "model"):
        if not isinstance(out.get(key), str) or not out[key].strip():
            raise JudgeConfigError(f"{key}: required (a non-empty string)")
    if not out["base_url"].startswith(("http://", "https://")):
        raise JudgeConfigError(f"base_url: {out['base_url']!r} is not an http(s) URL")
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(out["base_url"])
    if parts.username or parts.password or any(
            "key" in name.lower() or "token" in name.lower() for name in parse_qs(parts.query)):
        raise JudgeConfigError("base_url: carries credentials; name the key's environment "
                               "variable in api_key_env instead (configs are stored)")
    env = out.setdefault("api_key_env", "")
    if env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env):
        raise JudgeConfigError(f"api_key_env: {env!r} is not an environment variable name")
    out.setdefault("system", DEFAULT_SYSTEM)
    prompt = out.setdefault("prompt", DEFAULT_PROMPTS[task])
    try:
        render(prompt, {name: "" for name in FIELDS[task]})
    except KeyError as exc:
        raise JudgeConfigError(f"prompt: unknown field {{{exc.args[0]}}} for {task} items "
                               f"(fields: {', '.join(FIELDS[task])})") from None
    temperature = out.setdefault("temperature", 0.0)
    if not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
        raise JudgeConfigError(f"temperature: {temperature!r} is not a number in 0..2")
    max_tokens = out.setdefault("max_tokens", 256)
    if not isinstance(max_tokens, int) or not 1 <= max_tokens <= 32768:
        raise JudgeConfigError(f"max_tokens: {max_tokens!r} is not an integer in 1..32768")
    parse = out.setdefault("parse", DEFAULT_PARSE[task])
    if parse not in PARSE_RULES:
        raise JudgeConfigError(f"parse: {parse!r} is not one of {', '.join(PARSE_RULES)}")
    if parse == "regex":
        try:
            if re.compile(out.get("pattern") or "").groups < 1:
                raise JudgeConfigError("pattern: needs one group (the verdict)")
        except re.error as exc:
            raise JudgeConfigError(f"pattern: {exc}") from None
    out.setdefault("logprobs", False)
    price = out.get("price")
    if price is not None and not (isinstance(price, dict) and
                                  set(price) == {"prompt_per_million", "completion_per_million"}
                                  and all(isinstance(v, int | float) and v >= 0
                                          for v in price.values())):
        raise JudgeConfigError("price: {prompt_per_million: USD, completion_per_million: USD}")
    return out


def render(template: str, fields: dict) -> str:
    """`template` with {field} filled in; KeyError names an unknown field."""
    return template.format_map(_Strict(fields))


class _Strict(dict):
    def __missing__(self, key):
        raise KeyError(key)


def item_fields(task: str, content: dict, *, swap: bool = False) -> dict:
    """The prompt fields of an item's content (A/B: `swap` shows answer B first)."""
    content = content or {}
    if task == TaskKind.LIKERT:
        return {"passage": content.get("passage", "") or "(none)",
                "question": content.get("question", ""),
                "references": " / ".join(content.get("references") or []) or "(none)",
                "candidate": content.get("candidate", "")}
    if task == TaskKind.AB:
        first, second = ("answer_b", "answer_a") if swap else ("answer_a", "answer_b")
        return {"question": content.get("question", ""),
                "answer_a": (content.get(first) or {}).get("text", ""),
                "answer_b": (content.get(second) or {}).get("text", "")}
    answers = list(content.get("answers") or []) + [""] * 4
    return {"paragraph": content.get("paragraph", ""), "question": content.get("question", ""),
            **{f"choice_{letter}": answers[i] for i, letter in enumerate("abcd")}}


@dataclass
class Parsed:
    ok: bool
    verdict: str = ""
    score: float | None = None
    probability: float | None = None
    reasoning: str = ""
    error: str = ""
    extra: dict = field(default_factory=dict)


_YES = ("yes", "correct", "true")
_NO = ("no", "incorrect", "false", "wrong")


def parse_answer(text: str, config: dict, logprobs: list | None = None) -> Parsed:
    """Read the judge's answer with the config's rule (see the module docstring)."""
    rule = config.get("parse", "likert")
    text = text or ""
    if not text.strip():
        return Parsed(ok=False, error="empty answer")
    try:
        parsed = _RULES[rule](text, config)
    except (ValueError, TypeError) as exc:
        return Parsed(ok=False, error=str(exc), reasoning=text[:2000])
    if parsed.ok and parsed.probability is None and logprobs:
        parsed.probability = probability_from_logprobs(rule, parsed, logprobs)
    if parsed.ok and not parsed.reasoning:
        parsed.reasoning = text.strip()[:2000]
    return parsed


def _likert(text: str, config: dict) -> Parsed:
    match = re.search(r"score\W{0,3}([1-5])(?:\.0)?\b", text, re.IGNORECASE) or \
        re.search(r"(?<![\d.])([1-5])(?![\d.])", text)
    if not match:
        raise ValueError("no score 1-5 found")
    score = float(match.group(1))
    return Parsed(ok=True, verdict="correct" if score >= CORRECT_AT else "incorrect",
                  score=score, extra={"token": match.group(1)})


def _yes_no(text: str, config: dict) -> Parsed:
    match = re.search(r"\b(" + "|".join(_NO + _YES) + r")\b", text, re.IGNORECASE)
    if not match:
        raise ValueError("no yes/no (correct/incorrect) found")
    word = match.group(1).lower()
    yes = word in _YES
    return Parsed(ok=True, verdict="correct" if yes else "incorrect", score=float(yes),
                  extra={"token": match.group(1)})


def _ab(text: str, config: dict) -> Parsed:
    match = re.search(r"(?:better|answer|choice|winner)\W{0,3}([AB])\b", text, re.IGNORECASE) \
        or re.search(r"\b([AB])\b", text)
    if not match:
        raise ValueError("no choice A or B found")
    letter = match.group(1).upper()
    return Parsed(ok=True, verdict=letter, score=1.0 if letter == "A" else 0.0,
                  extra={"token": match.group(1)})


def _choice(text: str, config: dict) -> Parsed:
    match = re.search(r"(?:answer|choice)\W{0,3}([ABCD])\b", text, re.IGNORECASE) or \
        re.search(r"\b([ABCD])\b", text)
    if not match:
        raise ValueError("no choice A-D found")
    return Parsed(ok=True, verdict=match.group(1).upper(), extra={"token": match.group(1)})


def _json(text: str, config: dict) -> Parsed:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object found")
    try:
        data = json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("verdict"), str | bool):
        raise ValueError("the JSON object has no string 'verdict'")
    verdict = data["verdict"]
    if isinstance(verdict, bool):
        verdict = "correct" if verdict else "incorrect"
    verdict = verdict.strip()
    lowered = verdict.lower()
    if lowered in _YES:
        verdict = "correct"
    elif lowered in _NO:
        verdict = "incorrect"
    score, probability = data.get("score"), data.get("probability")
    for name, value in (("score", score), ("probability", probability)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"{name} {value!r} is not a number")
    if probability is not None and not 0 <= probability <= 1:
        raise ValueError(f"probability {probability} is outside 0..1")
    return Parsed(ok=True, verdict=verdict, score=None if score is None else float(score),
                  probability=None if probability is None else float(probability),
                  reasoning=str(data.get("reasoning") or ""))


def _regex(text: str, config: dict) -> Parsed:
    match = re.search(config["pattern"], text, re.IGNORECASE)
    if not match:
        raise ValueError("the pattern does not match")
    raw = match.group(1)
    mapping = config.get("verdicts") or {}
    verdict = mapping.get(raw, mapping.get(raw.lower(), raw))
    try:
        score = float(raw)
    except ValueError:
        score = None
    return Parsed(ok=True, verdict=str(verdict), score=score, extra={"token": raw})


_RULES = {"likert": _likert, "yes_no": _yes_no, "ab": _ab, "choice": _choice, "json": _json,
          "regex": _regex}


# Each rule's candidate tokens, 1 for the positive outcome (the answer is correct / A is better)
# and 0 for the negative; "choice" is positive for the parsed letter only.
_POSITIVE_TOKENS = {
    "likert": {"1": 0, "2": 0, "3": 1, "4": 1, "5": 1},
    "yes_no": {**{w: 1 for w in _YES}, **{w: 0 for w in _NO}},
    "ab": {"a": 1, "b": 0},
}


def probability_from_logprobs(rule: str, parsed: Parsed, logprobs: list) -> float | None:
    """The probability of the positive outcome from the chat-completions `logprobs.content`
    list ({token, logprob, top_logprobs: [{token, logprob}]}): at the first token that reads
    as the parsed verdict, the normalized mass of the positive tokens among the rule's
    candidate tokens. None when the endpoint gave no usable alternatives."""
    token = str(parsed.extra.get("token", "")).strip().lower()
    if not token:
        return None
    if rule == "choice":
        groups = {letter: int(letter == token) for letter in "abcd"}
    elif rule in _POSITIVE_TOKENS:
        groups = _POSITIVE_TOKENS[rule]
    else:
        return None
    for entry in logprobs:
        if not isinstance(entry, dict) or str(entry.get("token", "")).strip().lower() != token:
            continue
        mass = {0: 0.0, 1: 0.0}
        alternatives = entry.get("top_logprobs") or [entry]
        seen = set()
        for alt in alternatives:
            word = str(alt.get("token", "")).strip().lower()
            if word in groups and word not in seen and isinstance(alt.get("logprob"),
                                                                   int | float):
                seen.add(word)
                mass[groups[word]] += math.exp(alt["logprob"])
        total = mass[0] + mass[1]
        return mass[1] / total if total > 0 else None
    return None


def call_cost(prompt_tokens: int, completion_tokens: int, price: dict | None) -> float | None:
    """USD of one call at `price` ({prompt_per_million, completion_per_million}); None
    without a price."""
    if not price:
        return None
    return (prompt_tokens * price["prompt_per_million"]
            + completion_tokens * price["completion_per_million"]) / 1e6


def worst_case_cost(prompt: str, max_tokens: int, price: dict | None) -> float | None:
    """An upper bound of a call's cost before sending it: every UTF-8 byte of the prompt (the
    system message included) a token (byte-level tokenizers never give more tokens than bytes;
    they average 3-4 characters per token) plus 32 for the chat template, and all
    `max_tokens` in the answer."""
    return call_cost(len(prompt.encode("utf-8")) + 32, max_tokens, price)
