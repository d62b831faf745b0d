"""The vocabulary for every template: `{% if kind == TaskKind.LIKERT %}`,
`{% if provider == Provider.MTURK %}`, never the stored string a second time."""
from __future__ import annotations

from core.vocabulary import Provider, TaskKind

# Plain mappings (member name -> member): the template engine looks `TaskKind.LIKERT` up by key,
# and would try to call an enum class.
_VOCABULARY = {enum.__name__: {member.name: member for member in enum}
               for enum in (TaskKind, Provider)}


def vocabulary(request) -> dict:
    """TaskKind and Provider, member by name (settings TEMPLATES context_processors)."""
    return _VOCABULARY
