"""The server-owned part of an assignment's draft: its keys, the messages the page shows for
them, and its reader. The assignment services write it; the task selectors read it (the
feedback after a confirmed item), so it lives below both."""
from __future__ import annotations

# Server-owned part of the draft (pilot guesses locked before the paragraph is shown); the
# page's autosave can never overwrite it.
SERVER_DRAFT_KEY = "_server"

# Late confirms refused because others filled the item meanwhile (item id -> message): the page
# counts them as settled and the submit no longer asks for them.
REFUSED_KEY = "refused"

# Prolific comprehension checks (the practice items with a gold answer of a Prolific stage):
# Prolific requires a second attempt after a wrong answer, and a participant who fails twice is
# asked to return the study and must not be rejected for it. Server draft state keys:
ATTEMPTS_KEY = "attempts"  # item id -> [the first, wrong, attempt]

RETURN_KEY = "return_requested"  # when the participant was asked to return the study

# MTurk: the worker accepted the HIT again under a new assignmentId (the external id of the
# assignment that replaced this one); this one takes no more answers.
SUPERSEDED_KEY = "superseded_by"

# MTurk: the pk of the assignment this one replaced (the HIT accepted again). Its typed answers
# are not copied across on the server: MTurk's ids in the URL are not secret and accepted
# assignments cannot be checked with MTurk (GetAssignment knows submitted ones only), so a
# stranger with the worker's id would read them. The page that typed them kept them in the
# browser's storage under that pk, and the new page reads them there.
CONTINUES_KEY = "continues"

# The last autosave stored, as the page numbered it ({"series": one id per page load, "n": its
# count}): an older one of the same page arriving late is not stored over it
# (`assignment_save_draft`).
AUTOSAVE_KEY = "autosave"

RETRY_MESSAGE = ("That answer was not right. Read the question again and answer it once more: "
                 "you have one more attempt.")

RETURN_MESSAGE = ("Your answer to the comprehension question was not right again, so you cannot "
                  "continue with this study. Please return the study on Prolific (\"Stop without "
                  "completing\" / return your submission): you will not be rejected for this. "
                  "There is no completion code.")


def server_state(assignment) -> dict:
    """A copy of the assignment's server-owned draft state (empty when none)."""
    return dict((assignment.draft or {}).get(SERVER_DRAFT_KEY) or {})
