"""Demo projects written for QA Judge (no third-party data): one per task kind, plus a STARC
pilot, each with a published in-house "full" stage and a few in-house demo workers.

Each demo worker gets a personal in-house link per project (`demo_links()` lists them).
`demo_data_load()` is idempotent: it goes through the same import service as real data, so
running it again finds everything in place and creates nothing.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction

from annotation.domain.item_content import text_key
from annotation.importers.base import ItemRecord, validate_record
from annotation.models import (
    ExperimentMode,
    InhouseLink,
    Project,
    Provider,
    StageKind,
    TaskKind,
    Worker,
)
from annotation.services.imports import import_records

DEMO_WORKERS = [
    ("demo-expert-1", "Demo expert Ada"),
    ("demo-expert-2", "Demo expert Ben"),
    ("demo-expert-3", "Demo expert Chloé"),
]

# --- Likert correctness (MOCHA-style): passage, question, reference, candidates from several
# generation sources; the gold scores are the authors' own judgments on the 1–5 scale.
_LIKERT_PASSAGES = [
    {
        "id": "lighthouse",
        "dataset": "demo-narrative",
        "passage": (
            "Every evening for thirty years, Marta climbed the hundred and twelve steps of the "
            "Kessel Point lighthouse to light the lamp. When the harbour board installed an "
            "automatic beacon, she kept climbing anyway, now only to polish the old lens, "
            "because she said a lighthouse that nobody looked after would forget what it was for."
        ),
        "question": "Why did Marta keep climbing the lighthouse after the beacon was automated?",
        "reference": "to polish the old lens and look after the lighthouse",
        "candidates": [
            ("c1", "She went up to clean the old lens so the lighthouse stayed cared for.",
             "backtranslation", 5),
            ("c2", "To light the lamp every evening.", "gpt2", 2),
            ("c3", "Because the harbour board asked her to.", "mhpg", 1),
        ],
    },
    {
        "id": "bakery",
        "dataset": "demo-narrative",
        "passage": (
            "The bakery on Linden Street opened at five, but Tomas arrived at three to start the "
            "rye dough, which needed two hours to rise in the cold back room. By the time the "
            "first customers queued outside, the loaves had cooled enough to slice, and the "
            "smell had drifted as far as the tram stop."
        ),
        "question": "What time did Tomas arrive at the bakery?",
        "reference": "at three",
        "candidates": [
            ("c1", "3 a.m.", "backtranslation", None),
            ("c2", "He came in at five, when the bakery opened.", "gpt2", None),
            ("c3", "Two hours before the dough rose.", "mhpg", None),
        ],
    },
    {
        "id": "volcano",
        "dataset": "demo-science",
        "passage": (
            "Shield volcanoes, such as those in Hawaii, are built almost entirely from fluid lava "
            "flows. Because the lava is runny, it spreads far before it cools, producing broad, "
            "gently sloping mountains rather than the steep cones formed by thick, sticky lava "
            "that traps gas and erupts explosively."
        ),
        "question": "Why do shield volcanoes have gentle slopes?",
        "reference": "because their fluid lava spreads far before cooling",
        "candidates": [
            ("c1", "The runny lava travels a long way before it hardens.", "gpt2", 5),
            ("c2", "Because their lava is thick and traps gas.", "mhpg", None),
            ("c3", "They are made of lava flows.", "backtranslation", None),
        ],
    },
    {
        "id": "orchestra",
        "dataset": "demo-social",
        "passage": (
            "Priya had practised the violin solo for weeks, but at the dress rehearsal her hands "
            "shook so badly that she stopped halfway. The conductor waited, smiled, and asked "
            "the whole orchestra to play the opening bars again so she could come in a second "
            "time without anyone watching only her."
        ),
        "question": "How would Priya probably feel after the conductor's reaction?",
        "reference": "relieved and grateful",
        "candidates": [
            ("c1", "thankful that he gave her another chance", "backtranslation", None),
            ("c2", "angry at the orchestra", "gpt2", None),
            ("c3", "a little calmer", "mhpg", None),
        ],
    },
]

# --- A/B preference (long-form QA): question, two answers labelled human/model with upvotes.
_AB_ITEMS = [
    ("sky-sunset", "Physics", "HM",
     "Why is the sky red at sunset but blue at noon?",
     ("At sunset the light crosses much more air to reach you. Air scatters short blue "
      "wavelengths most strongly, so by the time the light arrives most of the blue has been "
      "scattered out of the beam and the reds and oranges are what is left.", "human", 412),
     ("Sunlight is made of many colours. During the day blue light is scattered in all "
      "directions by gas molecules, which is why the sky looks blue. At sunset the sun is low, "
      "its light passes through more atmosphere, and the remaining light is mostly red and "
      "orange.", "model", None)),
    ("ice-float", "Chemistry", "HH",
     "Why does ice float when most solids sink in their own liquid?",
     ("Water molecules in ice lock into a hexagonal lattice held by hydrogen bonds, and that "
      "lattice has more empty space than liquid water, so ice is about 9% less dense.",
      "human", 230),
     ("Because ice has air bubbles in it.", "human", 3)),
    ("inflation-print", "Economics", "HM",
     "If printing money causes inflation, how do governments pay for things without it?",
     ("They mostly tax and borrow. Borrowing moves existing money from lenders to the "
      "government instead of creating new money, so it does not by itself raise prices.",
      "human", 158),
     ("Governments fund spending through taxes, borrowing by selling bonds, and sometimes "
      "fees. Inflation becomes a risk mainly when the central bank creates new money to buy "
      "that debt faster than the economy grows, because more money then chases the same goods.",
      "model", None)),
    ("cat-purr", "Biology", "HM",
     "How do cats purr?",
     ("Nobody is completely sure. It seems to come from the muscles of the larynx twitching "
      "very fast, about 25 times a second, which makes the vocal folds separate and snap "
      "together as the cat breathes in and out.", "human", 96),
     ("Cats purr by vibrating their vocal cords with their lungs when they are happy.",
      "model", None)),
    ("castle-moat", "History", "HH",
     "Did castle moats really have crocodiles or anything dangerous in them?",
     ("No crocodiles. Most moats were dry ditches; wet ones were dangerous mainly because they "
      "stopped siege towers and made mining under the walls hard. They often filled with "
      "sewage, which was unpleasant enough.", "human", 540),
     ("Yes, some kings put alligators in them.", "human", 12)),
    ("contract-minor", "Law", "HM",
     "Can a 16-year-old sign a binding contract?",
     ("In many places minors can sign contracts but can usually cancel them, except for "
      "necessities like food or housing. The details depend a lot on the country and state.",
      "human", 87),
     ("Generally, contracts signed by minors are voidable: the minor may cancel them, while "
      "the adult party stays bound. Exceptions often include necessities and court-approved "
      "agreements such as employment contracts for child actors. Local law decides the age of "
      "majority and the exceptions.", "model", None)),
    ("wifi-walls", "TechCS", "HH",
     "Why does Wi-Fi get so much worse through a couple of walls?",
     ("Wi-Fi uses microwaves around 2.4 or 5 GHz. Water, metal mesh, and concrete absorb or "
      "reflect them, and each wall can cut the signal strength by half or more, so two walls "
      "can leave only a quarter of it.", "human", 301),
     ("Routers are cheap.", "human", 4)),
    ("muscle-sore", "Biology", "HH",
     "Why are muscles sore two days after exercise rather than right away?",
     ("The soreness comes from tiny tears in the muscle fibres and the repair process. The "
      "inflammation and the sensitisation of nerve endings build up over a day or two, so "
      "the pain peaks around 24–72 hours later.", "human", 188),
     ("It's lactic acid building up.", "human", 20)),
    ("bridge-expand", "Physics", "HM",
     "Why do bridges have those metal teeth gaps in the road?",
     ("Expansion joints. Steel and concrete grow in summer and shrink in winter; without a "
      "gap the bridge would buckle or crack.", "human", 275),
     ("Those are expansion joints. Bridge materials expand when heated and contract when "
      "cooled, and a long span can change length by many centimetres over a year. The "
      "interlocking teeth let the deck move while keeping a smooth surface for tyres.",
      "model", None)),
    ("tea-clipper", "History", "HM",
     "Why were tea clippers built for speed when tea does not spoil quickly?",
     ("The first tea of the season sold at a large premium in London, and merchants bet on "
      "which ship would arrive first, so speed was worth money even if the cargo would have "
      "survived a slower trip.", "human", 64),
     ("Tea spoils quickly in humid holds, so the ships had to be fast.", "model", None)),
]

# --- STARC multiple choice: paragraph, question, answers in role order (A correct, B
# misreading of the critical span, C refers to the distractor span, D unsupported), the
# critical and distractor sentences (located in the paragraph to make the spans).
_MC_PARAGRAPHS = [
    {
        # The practice paragraph: a text of its own, in no other item (a practice item is a
        # reading of its paragraph, so none of its other items could be served as data).
        "id": "kite", "level": "Ele", "practice": True,
        "paragraph": (
            "Every spring the village holds a kite festival on the hill above the river. Most "
            "kites are made at home from paper and thin sticks, and a prize goes to the kite "
            "that stays up the longest. Last year the winner was a red fish that flew for "
            "almost three hours."
        ),
        "questions": [
            ("Which kite won last year?",
             ["A red fish that flew for almost three hours",
              "A paper kite made from thin sticks by the river",
              "The kite that was made at home fastest",
              "A blue bird bought in a shop"],
             "Last year the winner was a red fish that flew for almost three hours.",
             "Most kites are made at home from paper and thin sticks"),
        ],
    },
    {
        "id": "garden", "level": "Ele",
        "paragraph": (
            "The school garden started with three boxes of soil behind the gym. The children "
            "planted beans because they grow quickly and can be eaten raw. After the first "
            "harvest, the cook added a salad bar to the lunch room. Now the garden has twelve "
            "boxes and a small greenhouse that a parent built from old windows."
        ),
        "questions": [
            ("Why did the children plant beans?",
             ["They grow fast and can be eaten without cooking",
              "They grow in boxes of raw soil",
              "The cook needed them for the salad bar",
              "Beans were the cheapest seeds in the shop"],
             "The children planted beans because they grow quickly and can be eaten raw.",
             "After the first harvest, the cook added a salad bar to the lunch room."),
            ("Who built the greenhouse?",
             ["A parent",
              "The children, using old windows",
              "The school cook",
              "A local garden centre"],
             "a small greenhouse that a parent built from old windows",
             "the cook added a salad bar to the lunch room"),
        ],
    },
    {
        "id": "bees", "level": "Int",
        "paragraph": (
            "City beekeeping has grown popular, but researchers warn that too many hives can "
            "harm wild bees. Honeybees compete with wild species for the same flowers, and in "
            "some neighbourhoods there are now more hives than the local plants can support. "
            "The researchers suggest planting more flowering trees before adding new hives."
        ),
        "questions": [
            ("What do the researchers recommend?",
             ["Planting more flowering trees before adding hives",
              "Adding hives so that the trees get more flowers",
              "Keeping wild bees away from the neighbourhoods",
              "Banning beekeeping in cities"],
             "The researchers suggest planting more flowering trees before adding new hives.",
             "in some neighbourhoods there are now more hives than the local plants can support"),
            ("Why can city hives harm wild bees?",
             ["Honeybees compete with them for the same flowers",
              "Wild bees compete with honeybees for the same hives",
              "Some areas have more hives than plants can feed",
              "Honeybees spread diseases to wild species"],
             "Honeybees compete with wild species for the same flowers",
             "there are now more hives than the local plants can support"),
        ],
    },
    {
        "id": "train", "level": "Adv",
        "paragraph": (
            "When the night train between the two capitals was cancelled a decade ago, the "
            "operator blamed falling demand. A new company has now revived the route, betting "
            "that travellers who want to avoid short flights will pay for a sleeper cabin. "
            "Tickets for the first month sold out within a week, although critics note that the "
            "prices are higher than most budget airlines charge."
        ),
        "questions": [
            ("What is the new company betting on?",
             ["Travellers avoiding short flights will pay for sleeper cabins",
              "Short flights will be cancelled because demand is falling",
              "Its tickets will be cheaper than budget airlines",
              "The government will subsidise the route"],
             "betting that travellers who want to avoid short flights will pay for a sleeper "
             "cabin",
             "although critics note that the prices are higher than most budget airlines charge"),
            ("Why was the night train cancelled originally?",
             ["The operator said demand was falling",
              "Travellers preferred to avoid short flights",
              "Its prices were higher than budget airlines",
              "The sleeper cabins needed repairs"],
             "the operator blamed falling demand",
             "although critics note that the prices are higher than most budget airlines charge"),
        ],
    },
    {
        "id": "library", "level": "Int",
        "paragraph": (
            "The town library began lending tools two years ago. Residents can borrow drills, "
            "ladders and sewing machines for a week with the same card they use for books. The "
            "librarian says the most popular item is a carpet cleaner, which is booked almost "
            "every weekend, while the telescope has been borrowed only twice."
        ),
        "questions": [
            ("What is borrowed most often?",
             ["The carpet cleaner",
              "The library card used for books",
              "The telescope",
              "The ladders"],
             "the most popular item is a carpet cleaner, which is booked almost every weekend",
             "while the telescope has been borrowed only twice"),
            ("What do residents need to borrow a tool?",
             ["The same card they use for books",
              "A week's notice before borrowing",
              "A booking made for the weekend",
              "A deposit paid to the librarian"],
             "with the same card they use for books",
             "which is booked almost every weekend"),
        ],
    },
    {
        "id": "glacier", "level": "Adv",
        "paragraph": (
            "Scientists measuring an Alpine glacier found that it lost more ice last summer than "
            "in any year since records began. A heatwave in July was partly responsible, but the "
            "team pointed to the thin winter snow as the bigger problem: without a thick layer of "
            "snow, the darker ice underneath absorbed more sunlight and melted faster."
        ),
        "questions": [
            ("What did the team see as the main cause of the record loss?",
             ["The thin winter snow that left darker ice exposed",
              "The thick snow that absorbed more sunlight",
              "The July heatwave",
              "Tourists walking on the glacier"],
             "the team pointed to the thin winter snow as the bigger problem",
             "A heatwave in July was partly responsible"),
            ("Why does darker ice melt faster?",
             ["It absorbs more sunlight",
              "It lies under a thick layer of snow",
              "Heatwaves happen more often in July",
              "It contains more salt than white ice"],
             "the darker ice underneath absorbed more sunlight and melted faster",
             "A heatwave in July was partly responsible"),
        ],
    },
]


def _span(paragraph: str, sentence: str) -> list[int]:
    start = paragraph.find(sentence)
    if start < 0:  # a bug in the demo text itself
        raise ValueError(f"demo span {sentence!r} not in paragraph")
    return [start, start + len(sentence)]


def likert_records() -> list[ItemRecord]:
    records = []
    for passage in _LIKERT_PASSAGES:
        for candidate_id, candidate, source, gold in passage["candidates"]:
            records.append(ItemRecord(
                external_id=f"demo-{passage['id']}-{candidate_id}",
                kind=TaskKind.LIKERT,
                content={"passage": passage["passage"], "question": passage["question"],
                         "references": [passage["reference"]], "candidate": candidate},
                dataset=passage["dataset"], source=source, split="dev",
                group_key=text_key(passage["passage"]),
                gold=None if gold is None else {"score": gold},
                is_gold_check=gold is not None,
            ))
    return records


def ab_records() -> list[ItemRecord]:
    records = []
    for key, domain, setting, question, answer_a, answer_b in _AB_ITEMS:
        content = {"question": question, "evidence": [], "setting": setting}
        for name, (text, kind, upvotes) in (("answer_a", answer_a), ("answer_b", answer_b)):
            content[name] = {"text": text, "kind": kind, "upvotes": upvotes}
        records.append(ItemRecord(
            external_id=f"demo-{key}", kind=TaskKind.AB, content=content, dataset="demo-lfqa",
            source="human" if setting == "HH" else "demo-model", domain=domain,
        ))
    return records


def mc_records() -> list[ItemRecord]:
    records = []
    for paragraph in _MC_PARAGRAPHS:
        text = paragraph["paragraph"]
        for number, (question, answers, critical, distractor) in enumerate(
            paragraph["questions"], start=1
        ):
            records.append(ItemRecord(
                external_id=f"demo-{paragraph['id']}-q{number}-{paragraph['level']}",
                kind=TaskKind.MC,
                content={"paragraph": text, "question": question, "answers": answers,
                         "critical_span": _span(text, critical),
                         "distractor_span": _span(text, distractor)},
                dataset="demo-starc", text_level=paragraph["level"],
                group_key=f"demo-{paragraph['id']}-{paragraph['level']}",
                # The text a participant reads (STARC: each once); its questions are its
                # conditions, so each annotator answers one question of each paragraph.
                design_unit=f"demo-{paragraph['id']}",
                gold={"choice": "A"},
                # The practice paragraph's question is the practice item.
                is_practice=bool(paragraph.get("practice")),
            ))
    return records


@dataclass(frozen=True)
class DemoProject:
    slug: str
    title: str
    kind: str
    instructions: str
    records: Callable[[], list[ItemRecord]]
    experiment_mode: str = ""
    justification_min_length: int = 0


DEMO_PROJECTS = [
    DemoProject(
        "demo-likert", "Demo: answer correctness (MOCHA-style)", TaskKind.LIKERT,
        "Read the passage and the question, then the correct answer and the predicted answer. "
        "Using the passage and the question, pick the score that best reflects how closely the "
        "predicted answer captures the same information as the correct answer.",
        likert_records,
    ),
    DemoProject(
        "demo-ab", "Demo: long-form answer preference", TaskKind.AB,
        "Read the question and both answers. Choose the better answer, say whether the choice "
        "was difficult, and explain your choice in a few sentences. Tick the aspects that "
        "decided it.",
        ab_records, justification_min_length=30,
    ),
    DemoProject(
        "demo-mc-qa", "Demo: STARC reading comprehension (QA)", TaskKind.MC,
        "Read the paragraph, then answer the question by choosing one of the four answers. "
        "After you confirm, you will see whether your answer was correct.",
        mc_records, experiment_mode=ExperimentMode.QA,
    ),
    DemoProject(
        "demo-mc-pilot", "Demo: STARC pilot (guess, read, answer)", TaskKind.MC,
        "First guess the answer without the paragraph. Then read the paragraph. Finally answer "
        "the question again with the paragraph hidden.",
        mc_records, experiment_mode=ExperimentMode.PILOT,
    ),
]


def demo_project_slugs() -> list[str]:
    """The slugs of the projects `rundemo` creates (generated and real-data demos)."""
    from annotation.services.demo_real_data import REAL_DEMOS

    return [spec.slug for spec in DEMO_PROJECTS] + [demo.slug for demo in REAL_DEMOS]


def demo_workers_ensure() -> list[Worker]:
    workers = []
    for external_id, name in DEMO_WORKERS:
        worker, _ = Worker.objects.get_or_create(
            provider=Provider.INHOUSE, external_id=external_id,
            defaults={"display_name": name},
        )
        workers.append(worker)
    return workers


@transaction.atomic
def demo_data_load() -> list[Project]:
    """Create (once) the demo projects, their items, a published in-house full stage each,
    and the demo in-house workers with a personal link each. Returns the demo projects."""
    from annotation.services.access import inhouse_link_create

    workers = demo_workers_ensure()
    projects = []
    for spec in DEMO_PROJECTS:
        project, created = Project.objects.get_or_create(
            slug=spec.slug,
            defaults={
                "title": spec.title, "kind": spec.kind, "instructions": spec.instructions,
                "experiment_mode": spec.experiment_mode or ExperimentMode.QA,
                "justification_min_length": spec.justification_min_length,
                "items_per_hit": 5,
                "redundancy": {"default": 3},
            },
        )
        records = [validate_record(r, path="demo", index=r.external_id) for r in spec.records()]
        # keep_existing_items: a researcher may have edited a demo item; never fail on it.
        import_records(project=project, records=records, keep_existing_items=True,
                       progress=False)
        stage = project.stages.filter(kind=StageKind.FULL).order_by("id").first()
        if stage is None:
            from annotation.services.stages import stage_create, stage_publish

            stage = stage_create(project=project, kind=StageKind.FULL, name="full", order=1,
                                 provider=Provider.INHOUSE, judgments_per_item=3)
            # Published as at every other door (the same checks, HITs and logged moves), so
            # the demo shows a stage as a researcher's publish leaves it.
            stage_publish(stage=stage, actor="demo data (rundemo)")
        for worker in workers:
            if not InhouseLink.objects.filter(worker=worker, project=project, stage=stage,
                                              revoked=False).exists():
                inhouse_link_create(worker=worker, project=project, stage=stage)
        projects.append(project)
    return projects


def demo_walk_worker(slug: str) -> str:
    """The demo worker whose link `rundemo` prints for a demo project: Ada everywhere but the
    STARC pilot, which Ben takes. The two STARC demos hold the same paragraphs, and a
    participant who read them in the QA demo is never served them again in the pilot (a
    guess after reading is no guess): one participant per experiment, as in STARC."""
    return "demo-expert-2" if slug == "demo-mc-pilot" else "demo-expert-1"


def demo_links() -> list[tuple[Project, Worker, str]]:
    """(project, worker, URL path) of every live personal link of the demo workers."""
    from annotation.services.access import inhouse_link_path

    links = InhouseLink.objects.filter(
        project__slug__in=[spec.slug for spec in DEMO_PROJECTS],
        worker__external_id__in=[external_id for external_id, _ in DEMO_WORKERS],
        worker__provider=Provider.INHOUSE, revoked=False,
    ).select_related("project", "worker").order_by("project__slug", "worker__external_id")
    return [(link.project, link.worker, inhouse_link_path(link=link)) for link in links]
