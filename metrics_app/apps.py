from django.apps import AppConfig


class MetricsAppConfig(AppConfig):
    name = "metrics_app"
    verbose_name = "Metrics, agreement and learned models"
    default_auto_field = "django.db.models.BigAutoField"
