"""The pipeline's stages in order. Importing this module registers every stage."""

from __future__ import annotations

import importlib

from ragrouter import extras
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


# The config roles whose backends a stage's model calls go through ("generators": every generator).
STAGE_ROLES: dict[str, tuple[str, ...]] = {
    "extract": ("extractor",),
    "embed": ("embedder",),
    "querygen": ("query_generator",),
    "answer": ("generators", "embedder"),
    "judge": ("judge",),
}
# What runs in this process for a backend kind, and for the score stage (BERTScore on the
# scoring encoder): the modules of the [local] extra each needs.
KIND_MODULES: dict[str, tuple[str, ...]] = {"local": ("xllamacpp",),
                                            "local-encoder": ("sentence_transformers", "transformers", "torch")}
SCORE_MODULES: tuple[str, ...] = ("bert_score", "sentence_transformers", "transformers", "torch")


def missing_extra(config, names: list[str]) -> str | None:
    """One line when a stage of ``names`` needs an extra this install lacks (a local model or
    encoder without the [local] extra), naming the stages, the backends and what to do; None
    when every stage can run. Checked before anything runs or is estimated: on a core install
    the stage would otherwise record every unit as failed."""
    needs: dict[str, list[str]] = {}
    for name in names:
        for role in STAGE_ROLES.get(name, ()):
            backends = config.generators() if role == "generators" else [str(config.role(role))]
            for backend in backends:
                kind = str(config.backend(backend).get("kind"))
                if any(not extras.available(m) for m in KIND_MODULES.get(kind, ())):
                    needs.setdefault(name, []).append(f"{backend} ({kind}, roles.{role})")
        if name == "score" and any(not extras.available(m) for m in SCORE_MODULES):
            needs.setdefault(name, []).append(f"BERTScore on scoring.encoder {config.get('scoring.encoder')}")
    if not needs:
        return None
    what = "; ".join(f"{stage}: {', '.join(dict.fromkeys(b))}" for stage, b in needs.items())
    return (f"stage{'s' if len(needs) > 1 else ''} {', '.join(needs)} need{'s' if len(needs) == 1 else ''} the "
            f"[local] extra ({what}): pip install 'ragrouter[local]', or point those roles at an OpenAI-compatible "
            "endpoint (docs/how-to/real-endpoints.md); nothing was run or estimated")
