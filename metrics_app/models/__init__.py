"""metrics_app data model, one module per concept; import everything public from here."""
from .judges import Judge, JudgeJob, JudgeKind, JudgeVerdict, JudgeVersion
from .model_versions import ModelKind, ModelStatus, ModelVersion, ModelVersionEvent
from .reports import Report
from .scores import MetricScore
from .scoring_jobs import ItemScoringJob, ScoringJob, ScoringJobBase, ScoringStatus

__all__ = [
    "Judge",
    "JudgeJob",
    "JudgeKind",
    "JudgeVerdict",
    "JudgeVersion",
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
