"""metrics_app data model, one module per concept; import everything public from here."""
from .model_versions import ModelKind, ModelStatus, ModelVersion, ModelVersionEvent
from .reports import Report
from .scores import MetricScore
from .scoring_jobs import ItemScoringJob, ScoringJob, ScoringJobBase, ScoringStatus

__all__ = [
    "ItemScoringJob",
    "MetricScore",
    "ModelKind",
    "ModelStatus",
    "ModelVersion",
    "ModelVersionEvent",
    "Report",
    "ScoringJob",
    "ScoringJobBase",
    "ScoringStatus",
]
