"""`Stage.settings` as typed admin fields, built from the schema (annotation/domain/stage_settings.py)
for the stage's task kind and provider: a Likert MTurk stage shows MTurk's fields and routing, never
Prolific's or STARC's. Keys without a field (unknown ones, the providers' ids, Prolific filters)
stay in an "advanced" JSON box; saving keeps them."""
from __future__ import annotations

from decimal import Decimal
from functools import lru_cache

from django import forms

from annotation.domain.prolific_screeners import (
    MANAGED_FILTER_IDS,
    SCREENERS,
    Screener,
    ScreenerError,
    filters_with_screeners,
    filters_without_screeners,
    screener_check,
    screeners_from_filters,
)
from annotation.domain.stage_settings import (
    GROUPS,
    NO_LOCALES,
    SettingSpec,
    StageSettingError,
    managed_keys_kept,
    setting_check,
    settings_for,
    settings_without,
    stage_settings_merge,
    value_at,
)
from core.vocabulary import Provider

PREFIX = "setting__"
SCREENER_PREFIX = "screener__"
FILTERS_KEY = "prolific_filters"


def field_name(spec: SettingSpec) -> str:
    return PREFIX + spec.key.replace(".", "__")


def _help(spec: SettingSpec) -> str:
    default = f" Empty: {spec.default}." if spec.default else ""
    return f"{spec.help}{default} (settings key “{spec.key}”)"


def _form_field(spec: SettingSpec) -> forms.Field:
    common = {"label": spec.label, "required": False, "help_text": _help(spec)}
    low = spec.minimum if spec.above is None else None
    if spec.type == "int":
        return forms.IntegerField(min_value=low, max_value=spec.maximum, **common)
    if spec.type == "float":
        return forms.FloatField(min_value=low, max_value=spec.maximum, **common)
    if spec.type == "decimal":
        return forms.DecimalField(min_value=low, max_value=spec.maximum, max_digits=12,
                                  decimal_places=2, **common)
    if spec.type == "bool":
        default = spec.default or "default"
        widget = forms.NullBooleanSelect()
        widget.choices = [("unknown", f"Default ({default})"), ("true", "Yes"), ("false", "No")]
        return forms.NullBooleanField(widget=widget, **common)
    if spec.type == "choice":
        return forms.ChoiceField(choices=[("", f"Default ({spec.default})")]
                                 + [(c, c) for c in spec.choices], **common)
    if spec.type == "str_list" and spec.choices:
        return forms.MultipleChoiceField(choices=[(c, c) for c in spec.choices],
                                         widget=forms.CheckboxSelectMultiple, **common)
    if spec.type in ("str", "str_list"):
        widget = forms.Textarea(attrs={"rows": 3}) if (spec.max_length or 0) > 200 else None
        return forms.CharField(max_length=spec.max_length, widget=widget, **common)
    raise AssertionError(f"no form field for {spec.type}")


def _screener_field(screener: Screener) -> forms.Field:
    common = {"label": screener.label, "required": False,
              "help_text": f"{screener.help} Empty: no such screener. (settings key "
                           f"“{FILTERS_KEY}”, filter_id “{screener.filter_id}”)"}
    if screener.kind == "range":
        return forms.IntegerField(min_value=screener.minimum, max_value=screener.maximum,
                                  **common)
    return forms.CharField(max_length=2000, **common)


def _initial(spec: SettingSpec, value):
    if value is None:
        return None
    if spec.type == "str_list" and not spec.choices and isinstance(value, list):
        return ", ".join(value) if value else NO_LOCALES
    if spec.type == "decimal":
        try:
            return Decimal(str(value))
        except ArithmeticError:
            return value
    return value


def _stored(spec: SettingSpec, value):
    """The cleaned form value as it is stored in the JSON (None: remove the key)."""
    if value in (None, "", []):
        return None
    if spec.type == "str_list" and not spec.choices:
        if value.strip().lower() == NO_LOCALES:
            return []
        return [part.strip().upper() for part in value.split(",") if part.strip()]
    if spec.type == "decimal":
        return str(value)
    return value


class StageSettingsFormMixin:
    """Typed settings fields (declared by `stage_settings_form_class`) read from and written back
    to `settings`; the `settings` field itself is the advanced box of keys without a field."""

    setting_specs: tuple[SettingSpec, ...] = ()
    screeners: tuple[Screener, ...] = ()  # Prolific stages: typed entries of prolific_filters

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        stored = self.instance.settings if self.instance.pk else {}
        for spec in self.setting_specs:
            self.initial.setdefault(field_name(spec), _initial(spec, value_at(stored, spec.key)))
        self.initial["settings"] = settings_without(stored, [s.key for s in self.setting_specs])
        if self.screeners:
            values = screeners_from_filters((stored or {}).get(FILTERS_KEY))
            for screener in self.screeners:
                value = values.get(screener.name)
                self.initial.setdefault(SCREENER_PREFIX + screener.name,
                                        ", ".join(value) if isinstance(value, list) else value)
            if isinstance((stored or {}).get(FILTERS_KEY), list):  # else shown as it is
                rest = filters_without_screeners(stored[FILTERS_KEY])
                self.initial["settings"] = stage_settings_merge(self.initial["settings"],
                                                                {FILTERS_KEY: rest or None})
        box = self.fields["settings"]
        box.label = "Other settings (JSON)"
        box.required = False
        box.help_text = ("Keys without a field above: unknown keys, the ids the provider wrote "
                         "at publish, Prolific filters. Kept as they are when you save.")

    def _posted(self, spec: SettingSpec) -> bool:
        name = field_name(spec)
        widget = self.fields[name].widget
        return not widget.value_omitted_from_data(self.data, self.files, self.add_prefix(name))

    def clean_stage_settings(self, cleaned: dict) -> None:
        advanced = cleaned.get("settings")
        if advanced is None:
            advanced = {}
        if not isinstance(advanced, dict):
            self.add_error("settings", 'must be a JSON object like {"n_items": 200}')
            return
        stored = self.instance.settings if self.instance.pk else {}
        try:
            # The box shows the providers' ids: kept as stored, refused when typed or changed.
            advanced = managed_keys_kept(advanced, stored=stored)
        except StageSettingError as exc:
            self.add_error("settings", str(exc))
            return
        # Keys with a field are not in the box: start from their stored values.
        merged = stage_settings_merge(advanced, {
            spec.key: value_at(stored, spec.key) for spec in self.setting_specs
            if value_at(advanced, spec.key) is None})
        typed = {}
        for spec in self.setting_specs:
            name = field_name(spec)
            if not self._posted(spec) or name not in cleaned:
                continue  # not on the page (or already refused): the stored value stays
            if value_at(advanced, spec.key) is not None:
                self.add_error("settings", f"{spec.key} has its own field ({spec.label}): set "
                                           "it there, not in the JSON")
                continue
            value = _stored(spec, cleaned[name])
            if value is not None:
                try:
                    value = setting_check(spec, value)
                except StageSettingError as exc:
                    self.add_error(name, str(exc))
                    continue
            typed[spec.key] = value
        screened = self._screened_filters(cleaned, advanced, stored)
        if self.errors:
            return
        merged = stage_settings_merge(merged, typed)
        if screened is not None:
            merged = stage_settings_merge(merged, {FILTERS_KEY: screened or None})
        provider = cleaned.get("provider") or getattr(self.instance, "provider", None)
        from annotation.services.stages import stage_published_settings, stage_settings_problems

        published = stage_published_settings(self.instance)
        for message in stage_settings_problems(merged, provider=provider,
                                               published_with=published):
            self.add_error(None if typed else "settings", message)
        cleaned["settings"] = merged


    def _screened_filters(self, cleaned: dict, advanced: dict, stored: dict) -> list | None:
        """`prolific_filters` with the screener fields' entries (None: no screener fields).
        The box's filters are kept; a screener typed in the box too is refused."""
        if not self.screeners:
            return None
        boxed = advanced.get(FILTERS_KEY)
        if boxed is not None and not isinstance(boxed, list):
            return None  # stage_settings_errors names it
        doubled = sorted({f.get("filter_id") for f in boxed or [] if isinstance(f, dict)}
                         & MANAGED_FILTER_IDS)
        if doubled:
            self.add_error("settings", f"{FILTERS_KEY}: {', '.join(doubled)} has its own field "
                                       "(Prolific screeners): set it there, not in the JSON")
            return None
        values = screeners_from_filters((stored or {}).get(FILTERS_KEY))
        for screener in self.screeners:
            name = SCREENER_PREFIX + screener.name
            widget = self.fields[name].widget
            if widget.value_omitted_from_data(self.data, self.files, self.add_prefix(name)):
                continue  # not on the page: the stored value stays
            if name not in cleaned:
                continue  # already refused by the field
            value = cleaned[name]
            if value in (None, ""):
                values.pop(screener.name, None)
                continue
            try:
                values[screener.name] = screener_check(screener, value)
            except ScreenerError as exc:
                self.add_error(name, str(exc))
        return filters_with_screeners(boxed or [], values)


def settings_fieldsets(specs) -> list[tuple[str, dict]]:
    """Admin fieldsets of the typed fields, by group, in schema order (the Prolific screeners
    after the Prolific settings)."""
    sets = [(group, {"fields": [field_name(s) for s in specs if s.group == group]})
            for group in GROUPS if any(s.group == group for s in specs)]
    if any(s.providers == (Provider.PROLIFIC,) for s in specs):
        sets.append(("Prolific screeners",
                     {"fields": [SCREENER_PREFIX + s.name for s in SCREENERS]}))
    return sets


@lru_cache(maxsize=64)
def stage_settings_form_class(base: type, kind: str | None, provider: str | None) -> type:
    """`base` (the stage ModelForm, with StageSettingsFormMixin) plus a typed field for every
    setting of this task kind and provider."""
    specs = tuple(settings_for(kind=kind, provider=provider))
    attrs = {field_name(spec): _form_field(spec) for spec in specs}
    attrs["setting_specs"] = specs
    if any(s.providers == (Provider.PROLIFIC,) for s in specs):
        attrs.update({SCREENER_PREFIX + s.name: _screener_field(s) for s in SCREENERS})
        attrs["screeners"] = SCREENERS
    return type(f"{base.__name__}_{kind or 'any'}_{provider or 'any'}", (base,), attrs)
