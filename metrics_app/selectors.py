"""Temporary: the judgment loaders moved to annotation.judgment_selectors."""
from annotation.judgment_selectors import item_gold_scores as item_gold_scores
from annotation.judgment_selectors import judgment_rows as judgment_rows
from annotation.models import NON_DATA_STAGE_KINDS as NON_DATA_STAGE_KINDS
