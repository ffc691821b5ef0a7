"""The pipeline's stages in order. Importing this module registers every stage."""

from __future__ import annotations

import importlib

from ragrouter.stages.base import STAGES, Stage

# Modules that define and register stages, in pipeline order.
STAGE_MODULES: list[str] = ["ragrouter.corpus.stages", "ragrouter.querygen.stages", "ragrouter.stages.answer",
                             "ragrouter.evaluation.stages"]


def all_stages() -> dict[str, Stage]:
    """Every stage in pipeline order: the order of STAGE_MODULES, then of registration within a
    module (whichever module some caller happened to import first)."""
    for module in STAGE_MODULES:
        importlib.import_module(module)
    rank = {m: i for i, m in enumerate(STAGE_MODULES)}
    order = sorted(enumerate(STAGES.values()),
                   key=lambda item: (rank.get(type(item[1]).__module__, len(rank)), item[0]))
    return {stage.name: stage for _, stage in order}
