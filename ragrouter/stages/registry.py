"""The pipeline's stages in order. Importing this module registers every stage."""

from __future__ import annotations

import importlib

from ragrouter.stages.base import STAGES, Stage

# Modules that define and register stages, in pipeline order.
STAGE_MODULES: list[str] = ["ragrouter.corpus.stages", "ragrouter.querygen.stages", "ragrouter.stages.answer",
                             "ragrouter.evaluation.stages"]


def all_stages() -> dict[str, Stage]:
    for module in STAGE_MODULES:
        importlib.import_module(module)
    return STAGES
