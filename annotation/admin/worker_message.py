"""The page the message actions open first: subject and message as form fields, with the list of
who will receive it, sent only when the researcher confirms ("Send the message"). Used by the
workers' "Send a message" and the stages' "Message the workers who passed the required
qualification" (annotation/admin/actions.py)."""
from __future__ import annotations

from django import forms
from django.contrib.admin import helpers
from django.template.response import TemplateResponse

# MTurk's NotifyWorkers takes a subject of at most 200 and a message of at most 4,096
# characters; Prolific's messages are kept to the same.
MAX_SUBJECT = 200
MAX_MESSAGE = 4096
CONFIRM_FIELD = "confirm_send"


class WorkerMessageForm(forms.Form):
    message_subject = forms.CharField(label="Subject", max_length=MAX_SUBJECT,
                                      error_messages={"required": "Type a subject."})
    message_body = forms.CharField(label="Message", max_length=MAX_MESSAGE,
                                   widget=forms.Textarea(attrs={"rows": 8, "cols": 80}),
                                   error_messages={"required": "Type the message."})

    def clean_message_body(self):
        body = self.cleaned_data["message_body"]
        bad = sorted({f"U+{ord(c):04X}" for c in body if ord(c) < 32 and c not in "\n\r\t"})
        if bad:
            raise forms.ValidationError(f"The message holds control characters ({', '.join(bad)}"
                                        "); remove them.")
        return body


def message_confirmed(request) -> WorkerMessageForm | None:
    """The form when the researcher pressed "Send the message" on the compose page (bound;
    check `is_valid()`), else None (the action was just chosen: show the page)."""
    if request.POST.get(CONFIRM_FIELD) != "yes":
        return None
    return WorkerMessageForm(request.POST)


def message_compose_response(modeladmin, request, queryset, *, form: WorkerMessageForm | None,
                             recipients: list, subject: str, title: str,
                             notes: list[str] = ()) -> TemplateResponse:
    """The compose page: the form (bound with errors, or prefilled with `subject` and the
    action bar's reason text) and who receives it."""
    if form is None:
        form = WorkerMessageForm(initial={"message_subject": subject,
                                          "message_body": request.POST.get("reason", "").strip()})
    by_provider: dict[str, int] = {}
    for worker in recipients:
        by_provider[worker.provider] = by_provider.get(worker.provider, 0) + 1
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "opts": modeladmin.model._meta,
        "form": form,
        "recipients": recipients,
        "by_provider": sorted(by_provider.items()),
        "notes": list(notes),
        "selected": [str(pk) for pk in queryset.values_list("pk", flat=True)],
        "action": request.POST.get("action", ""),
        "select_across": request.POST.get("select_across", "0"),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "confirm_field": CONFIRM_FIELD,
    }
    return TemplateResponse(request, "admin/annotation/worker_message.html", context)
