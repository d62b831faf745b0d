"""The real OneStopQA data and the page helpers the STARC design tests share."""
from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse

from annotation.models import Item
from tests.support.paths import shared_data_path

ONESTOPQA = shared_data_path() / "onestopqa" / "onestop_qa.json"


def natural_unit(unit: str) -> tuple[int, int]:
    """A OneStopQA paragraph id (os<article>_<paragraph>) in natural order."""
    article, paragraph = unit[2:].split("_")
    return int(article), int(paragraph)


def exposures(rows):
    """(participant, paragraph, (question, level)) of (participant, item) rows."""
    return [(who, item.design_unit, (item.metadata["question"], item.text_level))
            for who, item in rows]


def shown_items(config) -> list[Item]:
    """The items a task page's config holds."""
    return list(Item.objects.filter(pk__in=config["items"]))


def mturk_page(client, stage, hit, worker, assignment):
    """The stage's MTurk ExternalQuestion page as an accepted assignment opens it."""
    return client.get(reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk}) + "?"
                      + urlencode({"assignmentId": assignment, "hitId": hit,
                                   "workerId": worker,
                                   "turkSubmitTo": "https://workersandbox.mturk.com"}))
