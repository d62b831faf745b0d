"""Annotation data model. One module per concept; import everything public from here."""
from .crowd import (
    Assignment,
    AssignmentItem,
    AssignmentStatus,
    Hit,
    HitItem,
    HitStatus,
    InhouseLink,
    Worker,
    WorkerBlock,
    WorkerQualification,
    WorkerStatus,
)
from .item import Item
from .judgment import Adjudication, AppendOnlyError, Judgment
from .project import DEFAULT_AB_ASPECTS, DEFAULT_LIKERT_LABELS, ExperimentMode, Project, TaskKind
from .provider_calls import ProviderCall, ProviderCallStatus
from .stage import (
    COLLECTION_STAGE_KINDS,
    DATA_STAGE_KINDS,
    NON_DATA_STAGE_KINDS,
    Provider,
    RoutingDraw,
    Stage,
    StageKind,
    StageStatus,
    StageTransition,
)

__all__ = [
    "Adjudication",
    "COLLECTION_STAGE_KINDS",
    "DATA_STAGE_KINDS",
    "NON_DATA_STAGE_KINDS",
    "AppendOnlyError",
    "Assignment",
    "AssignmentItem",
    "AssignmentStatus",
    "DEFAULT_AB_ASPECTS",
    "DEFAULT_LIKERT_LABELS",
    "ExperimentMode",
    "Hit",
    "HitItem",
    "HitStatus",
    "InhouseLink",
    "Item",
    "Judgment",
    "Project",
    "Provider",
    "ProviderCall",
    "ProviderCallStatus",
    "RoutingDraw",
    "Stage",
    "StageKind",
    "StageStatus",
    "StageTransition",
    "TaskKind",
    "Worker",
    "WorkerBlock",
    "WorkerQualification",
    "WorkerStatus",
]
