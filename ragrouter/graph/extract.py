"""Triple extraction (paper App. A.1, Algorithm 1 phase 2, Figure 8).

One LLM call per chunk at temperature 0 returns ``{"triples": [[subject, relation, object], …]}``
with pronouns resolved; entity names are normalised here so the same entity written
differently becomes one node.
"""

from __future__ import annotations

import re
import unicodedata

PROMPT_VERSION = "extract-v3"  # v3: no "at most 15 triples" cap (the paper sets none)

SYSTEM = (
    "You extract a knowledge graph from text. Return JSON {\"triples\": [[subject, relation, object], ...]}. "
    "Each triple states one fact from the text. Subjects and objects are short names of entities "
    "(diseases, treatments, drugs, body parts, people, organisations, places, concepts), never pronouns: "
    "replace 'it', 'they', 'this' by the entity they refer to. Relations are short verb phrases. "
    "Use only facts stated in the text, each fact once.\n"
    "Example. Text: \"Melanoma is a skin cancer. It is often treated with surgery.\" -> "
    "{\"triples\": [[\"melanoma\", \"is a type of\", \"skin cancer\"], "
    "[\"melanoma\", \"is treated with\", \"surgery\"]]}"
)

SCHEMA = {
    "type": "object",
    "properties": {
        "triples": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3},
        }
    },
    "required": ["triples"],
}



def schema(max_triples: int | None = None) -> dict:
    """The reply's JSON schema; ``max_triples`` caps the array (``maxItems``: a grammar-
    constrained server such as llama.cpp then closes the reply after that many triples instead
    of repeating itself up to ``max_tokens``). None: no cap (the paper sets none)."""
    if not max_triples:
        return SCHEMA
    out = {**SCHEMA, "properties": {"triples": {**SCHEMA["properties"]["triples"], "maxItems": int(max_triples)}}}
    return out


_WS = re.compile(r"\s+")
_EDGE = re.compile(r"^[\s\"'`“”‘’()\[\]{}.,;:!?*_-]+|[\s\"'`“”‘’()\[\]{}.,;:!?*_-]+$")
_PRONOUNS = {"it", "they", "them", "he", "she", "this", "that", "these", "those", "we", "you", "i",
             "its", "their", "his", "her", "which", "who"}


def messages(chunk_text: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Text:\n{chunk_text}\n\nReturn the JSON now."}]


def normalise_entity(name: str) -> str:
    """Case-folded, NFKC, whitespace-collapsed, edge punctuation stripped; '' if unusable."""
    name = unicodedata.normalize("NFKC", str(name))
    name = _EDGE.sub("", _WS.sub(" ", name)).strip().casefold()
    if name.startswith("the "):
        name = name[4:]
    if not name or name in _PRONOUNS or len(name) > 200:
        return ""
    return name


def normalise_relation(rel: str) -> str:
    rel = _EDGE.sub("", _WS.sub(" ", unicodedata.normalize("NFKC", str(rel)))).strip().casefold()
    return rel[:200]


def clean_triples(data) -> list[tuple[str, str, str]]:
    """Validated, normalised, de-duplicated triples from the model's JSON (order kept)."""
    raw = data.get("triples", []) if isinstance(data, dict) else data
    out: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str, str]] = set()
    for item in raw or []:
        if isinstance(item, dict):
            item = [item.get("subject"), item.get("relation"), item.get("object")]
        if not isinstance(item, (list, tuple)) or len(item) != 3 or not all(isinstance(x, str) for x in item):
            continue
        s, r, o = normalise_entity(item[0]), normalise_relation(item[1]), normalise_entity(item[2])
        if not s or not o or not r or s == o:
            continue
        key = (s, r, o)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out
