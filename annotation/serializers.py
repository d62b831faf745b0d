"""Serializers of the REST API (annotation/apis.py). Names are unique because drf-spectacular
turns each into an OpenAPI component."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.vocabulary import MC_ROLES

from .domain.aggregation import (
    AGGREGATION_MODELS,
    LIKERT_MODELS,
    NOMINAL_MODELS,
    resolve_aggregation,
)
from .domain.control_characters import control_character_message, find_control_character
from .domain.item_content import (
    ItemContentError,
    redundancy_error,
    validate_gold,
    validate_item_content,
    validate_item_text,
)
from .domain.judge_refs import judge_ref_error
from .models import Item, Judgment, Project, SpotCheck, Stage

MAX_DB_INT = 2**63 - 1


def reject_null_characters(value):
    """Control characters (`annotation.domain.control_characters`: NUL, which PostgreSQL cannot
    store in text or jsonb, and every other one but tab, line feed and carriage return) are a
    400 naming where they are, not a 500 on one database and stored on the other."""
    if (hit := find_control_character(value)) is not None:
        where = f"{hit[0]}: " if hit[0] else ""
        raise serializers.ValidationError(where + control_character_message(hit[1]))
    return value


# --- Projects -----------------------------------------------------------------------------------

PROJECT_SETTING_FIELDS = (
    "instructions", "items_per_hit", "redundancy", "reward_per_hit", "budget_cap",
    "qualification_threshold", "qualification_tolerance", "assignment_timeout_minutes",
    "gold_rate", "scale_labels", "justification_min_length", "aspects", "aspect_preferences",
    "experiment_mode", "bonus_per_correct", "aggregation", "estimates_judge",
)


class ProgressSerializer(serializers.Serializer):
    """`annotation.selectors.Progress`: the same numbers and line as the admin and the cockpit."""

    items = serializers.IntegerField(
        help_text="Items whose judgments are wanted: a data stage's (or project's) released "
                  "items that are not excluded, practice items or gold/attention checks; a "
                  "practice or qualification stage's own items.")
    judgments = serializers.IntegerField(
        help_text="Judgments on those items that count (the counting rule of exports and "
                  "reports; a practice or qualification stage: its accepted work); a project: "
                  "its collection stages' (the imported apart, in `imported`).")
    not_counted = serializers.IntegerField(
        help_text="Judgments collected on those items that do not count (rejected, returned, "
                  "flagged or unverified work, a blocked worker).")
    awaiting = serializers.IntegerField(
        help_text="Of not_counted, the judgments whose work waits for the provider to list or "
                  "verify it (a Prolific session not verified yet; MTurk work admitted over "
                  "its HIT's local count, not yet listed as submitted): they count once it "
                  "does, never if it does not. 0 for a qualification (counted in takers).")
    reoffered = serializers.IntegerField(
        help_text="A stage's redundancy slots given back by work that will never count "
                  "(rejected, a blocked worker, ...) and offered to other workers: served again "
                  "on in-house and Prolific pages, extra assignments on MTurk; 0 for a project.")
    places_added = serializers.IntegerField(
        help_text="Prolific: places the sync added to the study for approved work given back "
                  "(a blocked worker; Prolific reopens a rejected submission's place itself); "
                  "0 elsewhere.")
    imported = serializers.IntegerField(
        help_text="A project's judgments that count gathered elsewhere (imported stages: "
                  "expert labels from a file): data for reports and exports, said apart "
                  "(\"+ 260 imported\"), never in `judgments` nor filling `wanted`; 0 for a "
                  "stage (an imported stage counts its own in `judgments`).")
    wanted = serializers.IntegerField(
        allow_null=True,
        help_text="Judgments the plan asks for: each item × its redundancy (the stage's "
                  "judgments_per_item, else the project's per split); a qualification: every "
                  "item for each of max_takers; null for an imported stage (no plan).")
    percent = serializers.IntegerField(
        help_text="Counted of wanted (a qualification: graded takers of max_takers).")
    takers = serializers.IntegerField(
        allow_null=True, help_text="A qualification's graded takers (not blocked for the "
                                   "project, their qualification work not rejected); null "
                                   "otherwise.")
    passed = serializers.IntegerField(
        allow_null=True, help_text="A qualification's takers who passed; null otherwise.")
    max_takers = serializers.IntegerField(
        allow_null=True, help_text="A qualification's max takers; null otherwise.")
    text = serializers.CharField(
        help_text='The line the admin and the cockpit show, e.g. "5 of 24 judgments counted '
                  '(21%)".')
    assignments = serializers.DictField(
        child=serializers.IntegerField(), help_text="Assignments by status."
    )


class ProjectOutputSerializer(serializers.ModelSerializer):
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    shared_with = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = (
            "id", "slug", "title", "kind", "owner", "shared_with", *PROJECT_SETTING_FIELDS,
            "progress", "created_at", "updated_at",
        )

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, obj: Project) -> dict:
        progress = getattr(obj, "progress", None)
        return progress.as_dict() if progress is not None else None


def _validate_redundancy(value):
    if (error := redundancy_error(value)) is not None:
        raise serializers.ValidationError(error)
    return reject_null_characters(value)


def _validate_str_list(value):
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise serializers.ValidationError("must be a list of strings")
    return reject_null_characters(value)


_AGGREGATION_ALLOWED = (f"Likert projects: {', '.join(LIKERT_MODELS)}; A/B and multiple-choice "
                        f"projects: {', '.join(NOMINAL_MODELS)}")


class ProjectWriteSerializer(serializers.ModelSerializer):
    shared_with = serializers.ListField(
        child=serializers.CharField(), required=False,
        help_text="Usernames the project is shared with (only the owner may change this).",
    )
    aggregation = serializers.ChoiceField(
        choices=AGGREGATION_MODELS, required=False, allow_blank=True,
        help_text="How an item's judgments become its label in aggregated exports and LERC "
                  f"targets ({_AGGREGATION_ALLOWED}); empty: the kind's default (mean, majority).",
        error_messages={"invalid_choice": '"{input}" is not an aggregation model; allowed: '
                        + _AGGREGATION_ALLOWED},
    )

    class Meta:
        model = Project
        fields = ("slug", "title", "kind", "shared_with", *PROJECT_SETTING_FIELDS)

    def validate_redundancy(self, value):
        return _validate_redundancy(value)

    def validate_scale_labels(self, value):
        return _validate_str_list(value)

    def validate_aspects(self, value):
        return _validate_str_list(value)

    def validate_aspect_preferences(self, value):
        return _validate_str_list(value)

    def validate_qualification_threshold(self, value):
        if not 0 <= value <= 1:
            raise serializers.ValidationError("must be between 0 and 1")
        return value

    def validate_estimates_judge(self, value):
        error = judge_ref_error(value, field="estimates_judge")
        if error:
            raise serializers.ValidationError(error)
        return value

    def validate_gold_rate(self, value):
        if not 0 <= value <= 1:
            raise serializers.ValidationError("must be between 0 and 1")
        return value

    def validate(self, attrs):
        attrs = super().validate(attrs)
        kind = attrs.get("kind") or getattr(self.instance, "kind", None)
        if "aggregation" in attrs and kind:
            try:
                attrs["aggregation"] = resolve_aggregation(kind, attrs["aggregation"])
            except ValueError as error:
                raise serializers.ValidationError({"aggregation": [str(error)]}) from None
        return attrs


class RefuseUnknownFieldsMixin:
    """A key the serializer does not take is a 400 naming it, not silently dropped (a typo, a
    read-only field, or `judgments` posted to an items endpoint would otherwise vanish)."""

    refused_reasons: dict[str, str] = {}

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: [self.refused_reasons.get(name, "unknown field")] for name in unknown})
        return super().to_internal_value(data)


class ProjectCreateInputSerializer(RefuseUnknownFieldsMixin, ProjectWriteSerializer):
    refused_reasons = {"owner": "set by who creates the project",
                       "id": "set by the server", "progress": "computed by the server"}

    class Meta(ProjectWriteSerializer.Meta):
        pass


class ProjectUpdateInputSerializer(RefuseUnknownFieldsMixin, ProjectWriteSerializer):
    """A project's changeable fields. Anything else in the body (its slug or kind, a typo) is
    refused by name: a client must not read a 200 as "changed" when nothing was. The owner is
    changed by superusers only (403 for anyone else)."""

    owner = serializers.CharField(
        required=False, help_text="Username of the new owner (superusers only).")

    refused_reasons = {name: "cannot be changed after the project is created"
                       for name in ("id", "slug", "kind", "progress", "created_at",
                                    "updated_at")}

    class Meta(ProjectWriteSerializer.Meta):
        fields = ("title", "owner", "shared_with", *PROJECT_SETTING_FIELDS)


# --- Items --------------------------------------------------------------------------------------

_STR = {"type": "string"}
_ANSWER = {
    "type": "object",
    "required": ["text", "kind"],
    "properties": {
        "text": _STR,
        "kind": {"type": "string", "enum": ["human", "model"]},
        "upvotes": {"type": "integer", "nullable": True},
        "system": {"type": "string", "maxLength": 100,
                   "description": "The system that produced the answer (the leaderboard ranks "
                   "systems); absent: derived from kind, upvotes and the item's source."},
    },
}
_SPAN = {
    "type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
    "nullable": True, "description": "[start, end] character offsets in the paragraph.",
}
ITEM_CONTENT_SCHEMA = {
    "description": "Kind-specific content; must fit the project's kind.",
    "anyOf": [
        {
            "title": "likert",
            "type": "object",
            "required": ["passage", "question", "references", "candidate"],
            "properties": {
                "passage": _STR, "question": _STR, "candidate": _STR,
                "references": {"type": "array", "items": _STR, "minItems": 1},
            },
        },
        {
            "title": "ab",
            "type": "object",
            "required": ["question", "answer_a", "answer_b", "setting"],
            "properties": {
                "question": _STR,
                "evidence": {"type": "array", "items": _STR},
                "answer_a": _ANSWER,
                "answer_b": _ANSWER,
                "setting": {"type": "string", "enum": ["HH", "HM"]},
            },
        },
        {
            "title": "mc",
            "type": "object",
            "required": ["paragraph", "question", "answers"],
            "properties": {
                "paragraph": _STR, "question": _STR,
                "answers": {
                    "type": "array", "items": _STR, "minItems": 4, "maxItems": 4,
                    "description": "Role order: A correct, B misreading, C distractor, "
                    "D unsupported.",
                },
                "critical_span": _SPAN,
                "distractor_span": _SPAN,
            },
        },
    ],
}
ITEM_GOLD_SCHEMA = {
    "description": "Gold answer: likert {score: 1-5}; ab {choice: A|B}; mc {choice: A-D}.",
    "nullable": True,
    "anyOf": [
        {"type": "object", "required": ["score"],
         "properties": {"score": {"type": "number", "minimum": 1, "maximum": 5}}},
        {"type": "object", "required": ["choice"],
         "properties": {"choice": {"type": "string", "enum": list(MC_ROLES)}}},
    ],
}


@extend_schema_field(ITEM_CONTENT_SCHEMA)
class ItemContentField(serializers.JSONField):
    pass


@extend_schema_field(ITEM_GOLD_SCHEMA)
class ItemGoldField(serializers.JSONField):
    pass


ITEM_COLUMNS = ("dataset", "source", "split", "domain", "text_level", "group_key", "design_unit")


class ItemOutputSerializer(serializers.ModelSerializer):
    content = ItemContentField(read_only=True)
    gold = ItemGoldField(read_only=True)

    class Meta:
        model = Item
        fields = (
            "id", "external_id", *ITEM_COLUMNS, "content", "gold", "is_gold_check",
            "is_practice", "excluded", "exclusion_reason", "metadata", "created_at",
        )


class ItemInputSerializer(RefuseUnknownFieldsMixin, serializers.ModelSerializer):
    """One item; `content` and `gold` are checked against the project's kind (from context)."""

    refused_reasons = {
        "judgments": "not taken by the API; import judgments with `manage.py import_data jsonl`",
        "judgment": "not taken by the API; import judgments with `manage.py import_data jsonl`",
        "id": "set by the server",
    }

    content = ItemContentField(
        help_text="Kind-specific fields; see docs/DATA_FORMATS.md and the Item model."
    )
    gold = ItemGoldField(required=False, allow_null=True)
    metadata = serializers.JSONField(required=False)

    class Meta:
        model = Item
        fields = (
            "external_id", *ITEM_COLUMNS, "content", "gold", "is_gold_check", "is_practice",
            "excluded", "exclusion_reason", "metadata",
        )
        # Uniqueness per project is checked by the service (the project is not an input).
        validators: list = []

    def validate_metadata(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be an object")
        return reject_null_characters(value)

    def validate_content(self, value):
        return reject_null_characters(value)

    def validate_gold(self, value):
        return reject_null_characters(value)

    def validate(self, attrs):
        kind = self.context["project"].kind
        errors = {}
        try:
            validate_item_content(kind, attrs.get("content"))
        except ItemContentError as error:
            errors["content"] = [str(error)]
        try:
            validate_gold(kind, attrs.get("gold"))
        except ItemContentError as error:
            errors["gold"] = [str(error)]
        try:
            validate_item_text(attrs)
        except ItemContentError as error:
            field = error.field.split(".", 1)[0].split("[", 1)[0]
            errors.setdefault(field, [str(error)])
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class ItemBulkInputSerializer(RefuseUnknownFieldsMixin, serializers.Serializer):
    items = ItemInputSerializer(many=True, allow_empty=False, max_length=5000)


class ItemBulkOutputSerializer(serializers.Serializer):
    created = serializers.IntegerField(
        help_text="Items this request created: 0 when it repeated a stored request (200).")
    external_ids = serializers.ListField(
        child=serializers.CharField(),
        help_text="The request's items, in its order: created (201) or already stored (200).")


class StageRefField(serializers.CharField):
    """`?stage=`: a stage of the project by its id or its name, the one rule of every door that
    names a stage (`annotation.access_selectors.project_stage_by_ref`: `export_data --stage`,
    `report --stage`, the report and leaderboard APIs); the judgments and items APIs took an
    id only ("A valid integer is required." for the name the export took)."""

    def __init__(self, **kwargs):
        super().__init__(required=False, max_length=200, **kwargs)


class ItemFilterSerializer(serializers.Serializer):
    dataset = serializers.CharField(required=False)
    split = serializers.CharField(required=False)
    source = serializers.CharField(required=False)
    domain = serializers.CharField(required=False)
    text_level = serializers.CharField(required=False)
    stage = StageRefField(help_text="A stage of this project, by id or name: items released in "
                                    "it.")


# --- Stages -------------------------------------------------------------------------------------


class StageOutputSerializer(serializers.ModelSerializer):
    reward = serializers.DecimalField(max_digits=8, decimal_places=2, read_only=True)
    explicit_item_count = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Stage
        fields = (
            "id", "name", "kind", "order", "status", "provider", "judgments_per_item",
            "requires_stage", "agreement_threshold", "reward", "settings",
            "explicit_item_count", "publish_problem", "progress", "created_at", "updated_at",
        )
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.INT)
    def get_explicit_item_count(self, obj: Stage) -> int:
        """Items the stage names itself (0: every non-excluded project item)."""
        return getattr(obj, "explicit_item_count", 0)

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, obj: Stage) -> dict:
        progress = getattr(obj, "progress", None)
        return progress.as_dict() if progress is not None else None


class StageItemFilterSerializer(RefuseUnknownFieldsMixin, serializers.Serializer):
    """Which items a draft stage releases, by filter: the project's data items of this dataset,
    split and answering system, `count` of them sampled (seeded by the stage); all empty: chosen
    by the stage's kind when it is published. A filter matching nothing is a 400 naming it."""

    dataset = serializers.CharField(required=False, allow_blank=True, max_length=100)
    split = serializers.CharField(required=False, allow_blank=True, max_length=50)
    source = serializers.CharField(required=False, allow_blank=True, max_length=100)
    count = serializers.IntegerField(required=False, allow_null=True, min_value=1,
                                     max_value=1_000_000)


_STATUS_REFUSED = ("set by the stage's lifecycle only: a new stage is a draft, and its status "
                   "changes through Publish, Close and Extend (admin actions), which run "
                   "every check and log who and why")


class StageWriteSerializer(RefuseUnknownFieldsMixin, serializers.ModelSerializer):
    """A stage's changeable fields; `status` is refused by name (never silently dropped)."""

    items = StageItemFilterSerializer(required=False, help_text=(
        "Choose the items by filter (draft stages only)."))
    settings = serializers.JSONField(required=False)
    refused_reasons = {"status": _STATUS_REFUSED, "id": "set by the server",
                       "publish_problem": "written by the publish service",
                       "progress": "computed by the server", "project": "taken from the URL"}

    class Meta:
        model = Stage
        fields = ("name", "kind", "order", "provider", "judgments_per_item", "requires_stage",
                  "agreement_threshold", "reward_per_hit", "settings", "items")
        validators: list = []

    def get_fields(self):
        fields = super().get_fields()
        project = self.context.get("project")
        if project is not None and "requires_stage" in fields:
            # Only this project's stages: a missing id and another project's stage get the same
            # answer (which also says nothing about stages of projects the caller cannot see).
            field = fields["requires_stage"]
            field.queryset = Stage.objects.filter(project=project)
            field.error_messages["does_not_exist"] = (
                f"must be a stage of the same project; {project.slug} has no stage "
                "{pk_value}")
        return fields

    def validate_settings(self, value):
        from .domain.stage_settings import StageSettingError, managed_keys_kept
        from .services.stages import stage_published_settings, stage_settings_problems

        if not isinstance(value, dict):
            raise serializers.ValidationError('must be a JSON object like {"n_items": 200}')
        try:
            # The provider's ids stay whatever the body leaves out (a PATCH replaces the rest).
            value = managed_keys_kept(value, stored=getattr(self.instance, "settings", None))
        except StageSettingError as error:
            raise serializers.ValidationError(str(error)) from None
        # The stage's provider: the instance's, or the one a new stage is created on.
        provider = getattr(self.instance, "provider", None) or self.initial_data.get(
            "provider", Stage._meta.get_field("provider").default)
        errors = stage_settings_problems(reject_null_characters(value), provider=provider,
                                         published_with=stage_published_settings(self.instance))
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def validate(self, attrs):
        from .services.stage_plans import stage_item_filter_errors, stage_items_fixed_refusal
        from .services.stages import stage_identity_errors, stage_requirement_error

        project = self.context["project"]
        instance = self.instance
        why = stage_requirement_error(project=project, required=attrs.get("requires_stage"),
                                      stage_pk=getattr(instance, "pk", None),
                                      provider=attrs.get("provider") or getattr(
                                          instance, "provider",
                                          Stage._meta.get_field("provider").default))
        if why:
            raise serializers.ValidationError({"requires_stage": [why]})
        clashes = stage_identity_errors(project=project, name=attrs.get("name"),
                                        kind=attrs.get("kind"),
                                        stage_pk=getattr(instance, "pk", None))
        if clashes:
            raise serializers.ValidationError({name: [why] for name, why in clashes.items()})
        if "items" in attrs:
            refusal = stage_items_fixed_refusal(instance)
            if refusal:
                raise serializers.ValidationError({"items": [refusal]})
            errors = stage_item_filter_errors(project_id=project.pk, **attrs["items"])
            if errors:
                raise serializers.ValidationError({"items": errors})
        return attrs


class StageCreateInputSerializer(StageWriteSerializer):
    class Meta(StageWriteSerializer.Meta):
        extra_kwargs = {"name": {"required": True}, "kind": {"required": True}}

    def validate(self, attrs):
        from .services.stages import stage_by_hand_errors

        errors = stage_by_hand_errors(kind=attrs.get("kind"), provider=attrs.get("provider"))
        if errors:
            raise serializers.ValidationError({name: [why] for name, why in errors.items()})
        return super().validate(attrs)


class StageUpdateInputSerializer(StageWriteSerializer):
    refused_reasons = {**StageWriteSerializer.refused_reasons,
                       "kind": "cannot be changed after the stage is created",
                       "provider": "cannot be changed after the stage is created"}

    class Meta(StageWriteSerializer.Meta):
        fields = tuple(f for f in StageWriteSerializer.Meta.fields
                       if f not in ("kind", "provider"))


class StageReleaseItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = Item
        fields = ("id", "external_id", "dataset", "split", "source")


class StageReleasePreviewSerializer(serializers.Serializer):
    items = StageReleaseItemSerializer(many=True, help_text="The data items it releases.")
    gold = StageReleaseItemSerializer(many=True, help_text="Gold items mixed into its HITs.")
    n_hits = serializers.IntegerField()
    how = serializers.CharField(help_text="Where the items come from.")
    error = serializers.CharField(help_text="Why it would release nothing (else empty).")


# --- Judgments ----------------------------------------------------------------------------------


class JudgmentOutputSerializer(serializers.ModelSerializer):
    item_external_id = serializers.CharField(source="item.external_id", read_only=True)
    worker = serializers.CharField(source="worker.external_id", read_only=True)
    worker_provider = serializers.CharField(source="worker.provider", read_only=True)
    stage_kind = serializers.CharField(source="stage.kind", read_only=True)
    item_is_practice = serializers.BooleanField(
        source="item.is_practice", read_only=True,
        help_text="A practice item's answer (not data: only with include_qualification).")
    assignment_status = serializers.CharField(
        source="assignment.status", read_only=True, allow_null=True, default=None,
        help_text="Where the review of the work stands (as the export's column): what tells "
                  "rejected, returned and flagged work apart with include_rejected; null for "
                  "imported judgments.")
    counts = serializers.BooleanField(
        read_only=True, help_text="Whether the study counts this judgment (false, with "
                                  "include_rejected, for unaccepted work, a blocked worker's "
                                  "and unverified Prolific sessions'), as the export's column.")

    class Meta:
        model = Judgment
        fields = (
            "id", "item", "item_external_id", "item_is_practice", "worker", "worker_provider",
            "stage", "stage_kind", "assignment", "assignment_status", "counts", "score", "choice", "choices", "difficult", "justification", "aspects",
            "extra", "presented_order", "time_spent_ms", "server_time_ms", "client_started_at",
            "created_at",
        )


class SpotCheckOutputSerializer(serializers.ModelSerializer):
    """One spot check as the export's row names it (`export_data --spot-checks`), with the
    judgment's, item's and stage's ids as the judgments list gives them."""

    item = serializers.IntegerField(source="judgment.item_id", read_only=True)
    item_external_id = serializers.CharField(source="judgment.item.external_id", read_only=True)
    stage = serializers.IntegerField(source="judgment.stage_id", read_only=True)
    worker = serializers.CharField(source="judgment.worker.external_id", read_only=True)
    checked_by = serializers.CharField(
        source="checked_by.get_username", read_only=True, allow_null=True, default=None,
        help_text="The researcher who checked it (null when their account is gone).")
    checked_at = serializers.DateTimeField(source="created_at", read_only=True)

    class Meta:
        model = SpotCheck
        fields = ("id", "judgment", "item", "item_external_id", "stage", "worker", "verdict",
                  "note", "checked_by", "checked_at")


class JudgmentFilterSerializer(serializers.Serializer):
    stage = StageRefField(help_text="A stage of this project, by id or name.")
    worker = serializers.CharField(required=False, help_text="Worker external id.")
    item = serializers.CharField(required=False, help_text="Item external id.")
    dataset = serializers.CharField(required=False)
    split = serializers.CharField(required=False)
    source = serializers.CharField(required=False)
    after_id = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_DB_INT,
        help_text="Only judgments with a larger id (incremental pulls).",
    )
    include_qualification = serializers.BooleanField(
        required=False, default=False,
        help_text="Also practice and qualification judgments: those stages' and the practice "
                  "items' in any stage (`stage_kind` and `item_is_practice` say which). "
                  "Without it, only the judgments that count, as in every export and report.")
    include_rejected = serializers.BooleanField(
        required=False, default=False,
        help_text="Audit: also rejected, returned and flagged work and blocked workers' "
                  "judgments.")
