from django.apps import AppConfig


class MetricsAppConfig(AppConfig):
    name = "metrics_app"
    verbose_name = "Metrics, agreement and learned models"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Extends annotation through its explicit hooks (annotation/hooks.py), never by
        # patching its classes: the stage admin lists these after its own actions.
        from annotation.hooks import item_content_reader_register, stage_admin_action_register

        from .judge_selectors import item_imported_verdicts_note
        from .score_selectors import item_metric_scores_note
        from .stage_admin_actions import STAGE_ADMIN_ACTIONS

        for action in STAGE_ADMIN_ACTIONS:
            stage_admin_action_register(action)
        item_content_reader_register(item_metric_scores_note)
        item_content_reader_register(item_imported_verdicts_note)
