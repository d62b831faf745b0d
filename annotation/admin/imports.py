"""Import a data file from the browser: upload, preview (a dry run), confirm.

Two pages on the Project admin, for researchers used to Label Studio or Potato:
- Projects → a project → "Import items": into that project (only projects the researcher sees);
- Projects → "Create project from file": a new project owned by the researcher.

The upload is kept in the var directory under a random name while the researcher reads the
preview; the confirm form carries a signed reference to it (user, project, format, options),
so a confirmation cannot be replayed by someone else, nor pointed at another project or file.
Both steps run `annotation.services.import_files.import_file`, the service behind
`manage.py import_data`: the preview is that import rolled back.
"""
from __future__ import annotations

import secrets
import shutil
import time
from pathlib import Path

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.text import get_valid_filename

from annotation.access_selectors import access_project_by_pk
from annotation.importers import FORMAT_MODULES
from annotation.models import TaskKind
from annotation.services.import_files import ImportRefused, NewProject, import_file
from core.background import BrokerUnreachable, task_send_or_fail_fast
from core.uploads import upload_max_bytes, upload_size_error

REPORT_REFRESH_TASK = "worker.tasks.reports.report_refresh"
SIGNING_SALT = "annotation.admin.import-upload"
# A preview must be confirmed within this time; older uploads are deleted.
UPLOAD_MAX_AGE_SECONDS = 3600


def upload_dir() -> Path:
    return Path(settings.VAR_DIR) / "import-uploads"


class ImportFileForm(forms.Form):
    format = forms.ChoiceField(choices=[(name, name) for name in FORMAT_MODULES],
                               help_text="as for manage.py import_data (docs/DATA_FORMATS.md)")
    file = forms.FileField()
    split = forms.CharField(
        required=False, max_length=20,
        help_text="split of every item; empty: from the file (or its name: dev.jsonl → dev)")
    keep_existing_items = forms.BooleanField(
        required=False,
        help_text="attach judgments to items whose external id exists even if their texts differ")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if error := upload_size_error(upload.size, command="manage.py import_data"):
            raise forms.ValidationError(error)
        return upload


class CreateFromFileForm(ImportFileForm):
    slug = forms.SlugField(max_length=80)
    title = forms.CharField(max_length=200, required=False)
    kind = forms.ChoiceField(
        required=False, choices=[("", "the format's kind"), *TaskKind.choices],
        help_text="jsonl, whose files hold any kind: the kind its lines state (an "
                  "export's), else needed")

    field_order = ["slug", "title", "kind", "format", "file", "split", "keep_existing_items"]


def _store_upload(upload) -> tuple[str, Path]:
    """Keep the upload under a random folder, with its own (sanitised) name: importers read the
    split (dev.jsonl) or the dataset from it."""
    root = upload_dir()
    root.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - UPLOAD_MAX_AGE_SECONDS
    for old in root.iterdir():  # previews never confirmed
        if old.is_dir() and old.stat().st_mtime < cutoff:
            shutil.rmtree(old, ignore_errors=True)
    folder = secrets.token_hex(16)
    name = get_valid_filename(Path(upload.name).name)  # Django already dropped "..", "/"
    target = root / folder / name
    target.parent.mkdir()
    with target.open("wb") as handle:
        for chunk in upload.chunks():
            handle.write(chunk)
    return folder, target


def _stored_upload(folder: str, name: str) -> Path:
    if not folder.isalnum() or get_valid_filename(name) != name:
        raise signing.BadSignature("malformed upload reference")
    return upload_dir() / folder / name


def _without_folder(message: str, stored: Path) -> str:
    """Error messages name the uploaded file, not where the server keeps it."""
    return message.replace(f"{stored.parent}/", "")


def _report_refresh_queue(project_pk: int) -> None:
    """Precompute the project report in the background, as import_data does in the foreground;
    without a broker the dashboard's first visit computes it."""
    try:
        task_send_or_fail_fast(REPORT_REFRESH_TASK, args=[project_pk])
    except (BrokerUnreachable, LookupError):
        pass


class ProjectImportMixin:
    """Adds the import pages to the Project admin (see the module docstring)."""

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("import/", view(self.create_from_file_view),
                 name="annotation_project_import_new"),
            path("<path:object_id>/import/", view(self.import_items_view),
                 name="annotation_project_import"),
            *super().get_urls(),
        ]

    def _import_page(self, request, *, form, title, project=None, outcome=None, token="",
                     error=""):
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta, "title": title, "form": form, "project": project,
            "original": project, "outcome": outcome, "token": token, "error": error,
            "max_mb": upload_max_bytes() // 1024 // 1024,
        }
        return TemplateResponse(request, "admin/annotation/project/import.html", context,
                                status=400 if error else 200)

    def import_items_view(self, request, object_id):
        project = access_project_by_pk(request.user, object_id)
        if not self.has_change_permission(request, project):
            raise PermissionDenied
        return self._import_flow(request, project=project,
                                 title=f"Import items into {project.title}")

    def create_from_file_view(self, request):
        if not self.has_add_permission(request):
            raise PermissionDenied
        return self._import_flow(request, project=None, title="Create a project from a file")

    def _import_flow(self, request, *, project, title):
        form_class = ImportFileForm if project is not None else CreateFromFileForm
        if request.method == "POST" and request.POST.get("confirm"):
            return self._confirm(request, project=project, form_class=form_class, title=title)
        if request.method != "POST":
            return self._import_page(request, form=form_class(), title=title, project=project)
        form = form_class(request.POST, request.FILES)
        if not form.is_valid():
            return self._import_page(request, form=form, title=title, project=project)
        data = form.cleaned_data
        folder, stored = _store_upload(data["file"])
        reference = {
            "user": request.user.pk, "project": project.pk if project is not None else None,
            "folder": folder, "name": stored.name, "format": data["format"],
            "split": data["split"] or None, "keep": data["keep_existing_items"],
        }
        if project is None:
            reference["new"] = {"slug": data["slug"], "title": data["title"],
                                "kind": data["kind"] or None}
        kept = False  # the upload waits for the confirmation only when the preview worked
        try:
            outcome = self._run(request, reference, stored, project=project, dry_run=True)
            kept = True
        except ImportRefused as exc:
            return self._import_page(request, form=form, title=title, project=project,
                                     error=f"Nothing imported: {_without_folder(str(exc), stored)}")
        finally:
            if not kept:  # refused, or failed in a way nobody foresaw: never left behind
                shutil.rmtree(stored.parent, ignore_errors=True)
        token = signing.dumps(reference, salt=SIGNING_SALT)
        return self._import_page(request, form=form, title=title, project=project,
                                 outcome=outcome, token=token)

    def _run(self, request, reference, stored, *, project, dry_run):
        new_project = None
        if project is None:
            new = reference["new"]
            new_project = NewProject(slug=new["slug"], title=new["title"], kind=new["kind"],
                                     owner=request.user)
        return import_file(
            format_name=reference["format"], path=stored, project=project,
            new_project=new_project, split=reference["split"],
            keep_existing_items=reference["keep"], dry_run=dry_run,
        )

    def _confirm(self, request, *, project, form_class, title):
        try:
            reference = signing.loads(request.POST.get("token", ""), salt=SIGNING_SALT,
                                      max_age=UPLOAD_MAX_AGE_SECONDS)
            stored = _stored_upload(reference["folder"], reference["name"])
        except (signing.BadSignature, KeyError, TypeError):
            reference, stored = None, None
        expected_project = project.pk if project is not None else None
        if (reference is None or reference["user"] != request.user.pk
                or reference["project"] != expected_project or not stored.is_file()):
            return self._import_page(
                request, form=form_class(), title=title, project=project,
                error="This preview has expired or does not belong to this page; upload the "
                      "file again.")
        try:
            outcome = self._run(request, reference, stored, project=project, dry_run=False)
        except ImportRefused as exc:
            return self._import_page(request, form=form_class(), title=title, project=project,
                                     error=f"Nothing imported: {_without_folder(str(exc), stored)}")
        finally:
            shutil.rmtree(stored.parent, ignore_errors=True)
        if outcome.summary.created_anything:
            _report_refresh_queue(outcome.project.pk)
        verb = "Created project" if outcome.project_created else "Imported into"
        self.message_user(
            request, f"{verb} {outcome.project.slug!r} from {stored.name}: "
                     f"{outcome.summary.as_text()}", messages.SUCCESS)
        return redirect(reverse("admin:annotation_project_change", args=[outcome.project.pk]))
