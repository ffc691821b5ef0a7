"""Questions about a user's own documents, from a CSV (or TSV) or a JSON(L) file with a column mapping.

Columns are recognised by their names without regard to case, spaces, underscores, dashes or
camel case (``Source Docs``, ``source_docs`` and ``SourceDocs`` are one name); ``--map
FIELD=COLUMN`` names another:

============  ====================================================  ==========================
field         recognised column names (first one present)           value
============  ====================================================  ==========================
question      question, query, prompt, question text               required, non-empty
answer        answer, gold answer, gold, reference, reference       required unless unanswerable
              answer, expected answer, ground truth
id            id, qid, question id, query id                        optional (else ``q-`` + sha1
                                                                    of the question, 12 digits)
type          type, qtype, question type, query type, category,     optional (see below)
              question category
sources       sources, source, source docs, source documents,       optional: document ids or
              source files, documents, document, docs, doc ids,     globs, ``;``-separated (or
              document ids, supporting doc ids, files, file name    a line each, or a JSON list;
                                                                    ``,`` where each part matches)
evidence      evidence, context, evidence text, gold passage        optional gold passage text
hops          hops                                                  optional integer 1..100
unanswerable  unanswerable                                          optional true/false/yes/no/1/0
============  ====================================================  ==========================

Any other column is kept in the question's meta; :class:`Loaded` ``.columns`` says, per file,
the mapping used and the columns left over (``ingest`` prints both). A file whose questions
have no sources (or no type) but which holds a column left over whose name looks like one
(:func:`looks_like`: ``Doc Name``, ``Evidence Files``; ``Kind``, ``Label``) is refused: name
it with ``--map sources=COLUMN``, or keep it in meta alone with ``--map ignore=COLUMN``.

Sources: each entry names documents by id (``reports/AAPL-Q1.pdf``), by file name
(``AAPL-Q1.pdf``) or by a glob over either (``*AAPL*``, ``reports/2024/*.pdf``; ``*`` also
crosses folders). An entry that matches no document stops the ingest naming the file and row;
one that matches only files skipped as unreadable drops the question with a warning.

Types: the paper's three — ``factual``, ``reasoning``, ``summary`` (also ``single_hop``,
``multi_hop``, ``summarization``); ``--type-map LABEL=TYPE`` maps a label of your own (e.g.
``multi-document=reasoning``). A file whose type column holds labels of another taxonomy is
refused, every such label listed with its count and an example ``--type-map``. A row without
a type gets one by its sources: two or more matched documents → ``reasoning`` (the paper's
reasoning queries chain facts of several documents), one → ``factual`` (a fact from one
place), the question's meta saying ``type_from: sources``; a row without a type and without
sources is ``factual`` with ``type_from: default``. ``summary`` is never guessed.
"""

from __future__ import annotations

import csv
import fnmatch
import hashlib
import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragrouter.ingest.reading import _evidence, _Ids, _Rec, _Source
from ragrouter.ingest.records import UNANSWERABLE_GOLD, LoaderError, Question

FIELDS: dict[str, tuple[str, ...]] = {
    "question": ("question", "query", "prompt", "question_text"),
    "answer": ("answer", "gold_answer", "gold", "reference", "reference_answer", "expected_answer", "ground_truth"),
    "id": ("id", "qid", "question_id", "query_id"),
    "type": ("type", "qtype", "question_type", "query_type", "category", "question_category"),
    "sources": ("sources", "source", "source_docs", "source_doc", "source_documents", "source_document",
                "source_files", "source_file", "documents", "document", "docs", "doc_ids", "document_ids",
                "supporting_doc_ids", "files", "file_name", "filename"),
    "evidence": ("evidence", "context", "evidence_text", "gold_passage"),
    "hops": ("hops",),
    "unanswerable": ("unanswerable",),
}
IGNORE = "ignore"
"""``--map ignore=COLUMN``: keep COLUMN in the questions' meta and ask nothing about it."""

_LOOKS = {
    "sources": {"source", "sources", "doc", "docs", "document", "documents", "file", "files", "filename", "pdf",
                "pdfs", "citation", "citations", "evidence", "context", "supporting", "url", "urls", "link"},
    "type": {"type", "types", "qtype", "category", "categories", "kind", "class", "label", "labels", "taxonomy"},
}
_CUES = (("summar", "summary"), ("overview", "summary"), ("multi", "reasoning"), ("reason", "reasoning"),
         ("compar", "reasoning"), ("trend", "reasoning"), ("analy", "reasoning"), ("why", "reasoning"),
         ("hop", "reasoning"))

TYPE_NAMES = {"factual": "factual", "reasoning": "reasoning", "summary": "summary", "summarization": "summary",
              "single_hop": "factual", "multi_hop": "reasoning"}
_TRUE, _FALSE = {"true", "yes", "y", "1"}, {"false", "no", "n", "0", ""}
_GLOB = re.compile(r"[*?\[]")


def _norm_label(label: str) -> str:
    return re.sub(r"[\s\-]+", "_", label.strip().lower())


def _words(name: str) -> list[str]:
    """A column name's words: ``Source Docs``, ``source_docs``, ``SourceDocs`` → ``[source, docs]``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", str(name))
    return [w for w in re.split(r"[^0-9a-z]+", spaced.lower()) if w]


def column_key(name: str) -> str:
    """The name a column is recognised by: its words run together (``sourcedocs``)."""
    return "".join(_words(name))


def looks_like(column: str) -> str | None:
    """``"sources"`` or ``"type"`` when a column's name has a word of one (``Doc Name``, ``Kind``)."""
    words = set(_words(column))
    for name, cues in _LOOKS.items():
        if words & cues:
            return name
    return None


def _type_example(label: str, multi_source: float = 0.0) -> str:
    """The type a label's example in the message maps to: a cue in its name, else reasoning
    when most of its rows name two or more sources (the rule for a row without a type), else
    factual."""
    low = label.lower()
    return next((t for cue, t in _CUES if cue in low), "reasoning" if multi_source > 0.5 else "factual")


def parse_map(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``FIELD=COLUMN`` pairs → {field: column}, and ``ignore`` → [columns]; ValueError names
    the bad pair."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, column = pair.partition("=")
        name = name.strip().lower()
        if not sep or not column.strip():
            raise ValueError(f"--map {pair!r}: expected FIELD=COLUMN, e.g. question=Q")
        if name == IGNORE:
            out.setdefault(IGNORE, []).append(column.strip())
            continue
        if name not in FIELDS:
            raise ValueError(f"--map {pair!r}: unknown field {name!r} (fields: {', '.join(FIELDS)}; "
                             f"{IGNORE}=COLUMN keeps a column in meta only)")
        out[name] = column.strip()
    return out


def parse_type_map(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``LABEL=TYPE`` pairs → {normalised label: query type}; ValueError names the bad pair."""
    out = {}
    for pair in pairs:
        label, sep, qtype = pair.rpartition("=")
        if not sep or not label.strip():
            raise ValueError(f"--type-map {pair!r}: expected LABEL=TYPE, e.g. multi-document=reasoning")
        target = TYPE_NAMES.get(_norm_label(qtype))
        if target is None:
            raise ValueError(f"--type-map {pair!r}: {qtype.strip()!r} is not a query type "
                             "(factual, reasoning or summary)")
        out[_norm_label(label)] = target
    return out


class Catalog:
    """The documents a question's sources may name: the readable ones, and those skipped."""

    def __init__(self, ids: list[str], skipped: list[str] | None = None):
        self.ids = list(dict.fromkeys(ids))
        self.skipped = list(skipped or [])
        self._set = set(self.ids)

    @staticmethod
    def _matches(pattern: str, ids: list[str]) -> list[str]:
        if _GLOB.search(pattern):
            return [d for d in ids if fnmatch.fnmatchcase(d, pattern)
                    or fnmatch.fnmatchcase(d.rsplit("/", 1)[-1], pattern)]
        return [d for d in ids if d == pattern or d.rsplit("/", 1)[-1] == pattern]

    def match(self, pattern: str) -> list[str]:
        if pattern in self._set:
            return [pattern]
        return self._matches(pattern, self.ids)

    def match_skipped(self, pattern: str) -> list[str]:
        return self._matches(pattern, self.skipped)


@dataclass
class Columns:
    """How one questions file was read: field → its column, and the columns left over."""

    path: Path
    used: dict[str, str]
    unused: list[str]
    labels: dict[str, tuple[str, int]] = field(default_factory=dict)
    """A type label of the user's own → (query type, questions)."""

    def describe(self) -> str:
        used = ", ".join(f"{f} ← {c!r}" for f, c in self.used.items())
        line = f"{self.path}: columns {used}"
        if self.unused:
            line += f"; not used (kept in each question's meta): {', '.join(map(repr, self.unused))}"
        if self.labels:
            line += "; type labels " + ", ".join(f"{lab!r} → {t} x {n}" for lab, (t, n) in self.labels.items())
        return line


@dataclass
class Loaded:
    questions: list[Question] = field(default_factory=list)
    dropped: dict[str, list[str]] = field(default_factory=dict)
    """Skipped document id → labels ("FILE: line N") of the questions dropped for it."""
    columns: list[Columns] = field(default_factory=list)
    """Per questions file, the mapping it was read with."""


# --------------------------------------------------------------------------- reading rows


def _sniff_delimiter(header: str, suffix: str) -> str:
    if suffix == ".tsv":
        return "\t"
    counts = {d: header.count(d) for d in (",", ";", "\t")}
    return max(counts, key=lambda d: (counts[d], d == ","))


def _csv_rows(path: Path) -> Iterator[_Rec]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise LoaderError(path, f"line {line}", f"invalid UTF-8 at byte offset {exc.start} (byte "
                                                f"0x{data[exc.start]:02x}); save the file as UTF-8") from None
    if not text.strip():
        raise LoaderError(path, None, "file is empty")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_sniff_delimiter(text.split("\n", 1)[0],
                                                                                   path.suffix.lower()))
    try:
        header = [h.strip() for h in next(reader)]
        if len({h.lower() for h in header}) != len(header):
            dup = next(h for h in header if [x.lower() for x in header].count(h.lower()) > 1)
            raise LoaderError(path, "line 1", f"the header names column {dup!r} twice")
        start = reader.line_num + 1
        for row in reader:
            where = f"line {start}"
            start = reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue
            if len(row) > len(header):
                raise LoaderError(path, where, f"{len(row)} fields, the header has {len(header)} columns "
                                               "(a value holding the delimiter needs quotes)")
            yield _Rec(path, where, dict(zip(header, row + [""] * (len(header) - len(row)))))
    except csv.Error as exc:
        raise LoaderError(path, f"line {reader.line_num}", f"not valid CSV: {exc}") from None


def records(path: Path) -> Iterator[_Rec]:
    """The rows of a questions file as records (CSV/TSV by suffix, else JSON or JSONL)."""
    if path.suffix.lower() in (".csv", ".tsv"):
        yield from _csv_rows(path)
    else:
        yield from _Source(path)


def _columns(path: Path, first: _Rec, mapping: dict[str, Any], per_record: bool = False) -> dict[str, str]:
    """field → column name of this file (a CSV header), or of this record (JSON, whose records may
    differ in their keys), by the mapping or the recognised names (:func:`column_key`)."""
    def error(problem: str) -> LoaderError:
        return first.error(problem) if per_record else LoaderError(path, None, problem)

    names = [k for k in first.d]
    by_lower = {str(k).lower(): k for k in names}
    by_key: dict[str, Any] = {}
    for k in names:
        by_key.setdefault(column_key(str(k)), k)
    out: dict[str, str] = {}
    for name in FIELDS:  # named ones first: a recognised name never takes a named column
        if name in mapping:
            column = by_lower.get(mapping[name].lower(), by_key.get(column_key(mapping[name])))
            if column is None:
                raise error(f"--map {name}={mapping[name]}: no such column (columns: {', '.join(map(str, names))})")
            out[name] = column
    taken = set(out.values()) | {by_lower.get(c.lower(), by_key.get(column_key(c))) for c in mapping.get(IGNORE, [])}
    for name, names_of in FIELDS.items():
        if name in out:
            continue
        column = next((by_key[k] for k in map(column_key, names_of) if k in by_key and by_key[k] not in taken), None)
        if column is not None:
            out[name] = column
            taken.add(column)
    if "question" not in out:
        raise error(f"no question column (looked for {', '.join(FIELDS['question'])}; columns: "
                    f"{', '.join(map(str, names))}); name it with --map question=COLUMN")
    return out


def _unmapped_check(path: Path, cols: dict[str, str], columns: list[str], mapping: dict[str, Any]) -> None:
    """A file without sources (or types) but with a left-over column that looks like them is refused."""
    ignored = {column_key(c) for c in mapping.get(IGNORE, [])}
    left = [c for c in columns if c not in cols.values() and column_key(str(c)) not in ignored]
    for name in ("sources", "type"):
        if name in cols:
            continue
        like = [c for c in left if looks_like(str(c)) == name]
        if like:
            what = "document ids or globs" if name == "sources" else "question types"
            raise LoaderError(path, None, f"column {like[0]!r} looks like the questions' {name} ({what}) but no "
                                          f"{name} column is recognised; name it with --map {name}='{like[0]}', or "
                                          f"keep it in meta only with --map {IGNORE}='{like[0]}'")


def _label_check(path: Path, rows: list[tuple[_Rec, dict[str, str]]], type_map: dict[str, str]) -> dict:
    """The type labels of the user's own (label → (type, count)); labels neither a query type nor
    in ``type_map`` refuse the file, each listed with its count."""
    counts: Counter = Counter()
    multi: Counter = Counter()  # rows of the label that name two or more sources
    column = None
    for rec, cols in rows:
        if "type" in cols:
            raw = _text(rec, cols["type"]).strip()
            if raw:
                counts[raw] += 1
                column = column or cols["type"]
                if "sources" in cols:
                    try:
                        multi[raw] += len(_sources(rec, cols["sources"])) >= 2
                    except LoaderError:  # a malformed sources cell is reported where it is read
                        pass
    unknown = [(lab, n) for lab, n in counts.most_common()
               if _norm_label(lab) not in type_map and _norm_label(lab) not in TYPE_NAMES]
    if unknown:
        shown = ", ".join(f"{lab!r} x {n}" for lab, n in unknown[:12]) + (
            f" and {len(unknown) - 12} more" if len(unknown) > 12 else "")
        example = " ".join(f"--type-map '{lab}={_type_example(lab, multi[lab] / n)}'" for lab, n in unknown[:3])
        raise LoaderError(path, None, f"column {column!r} holds {len(unknown)} type label(s) that are not query types: "
                                      f"{shown}; map each to factual, reasoning or summary, e.g. {example}")
    return {lab: (type_map.get(_norm_label(lab)) or TYPE_NAMES[_norm_label(lab)], n)
            for lab, n in counts.most_common() if _norm_label(lab) not in TYPE_NAMES}


def _text(rec: _Rec, column: str | None) -> str:
    if column is None:
        return ""
    value = rec.d.get(column)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise rec.error(f"column {column!r} must be text, got {type(value).__name__}")
    return str(value)


def _sources(rec: _Rec, column: str) -> list[str]:
    value = rec.d.get(column)
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise rec.error(f"column {column!r} starts like a JSON list but is not one ({exc.msg})") from None
    if value is None:
        return []
    if isinstance(value, str):
        return [s.strip() for s in re.split(r"[;\n]", value) if s.strip()]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return [s.strip() for s in value if s.strip()]
    raise rec.error(f"column {column!r} must hold document ids or globs (';'-separated or a list of strings)")


def _flag(rec: _Rec, column: str | None) -> bool:
    if column is None:
        return False
    value = rec.d.get(column)
    if isinstance(value, bool):
        return value
    text = _text(rec, column).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise rec.error(f"column {column!r} must be true or false, got {text!r}")


def _hops(rec: _Rec, column: str | None) -> int | None:
    text = _text(rec, column).strip()
    if not text:
        return None
    try:
        hops = int(text)
    except ValueError:
        raise rec.error(f"column {column!r} must be a whole number, got {text!r}") from None
    if not 1 <= hops <= 100:
        raise rec.error(f"column {column!r} must be between 1 and 100, got {hops}")
    return hops


def _qtype(rec: _Rec, column: str | None, type_map: dict[str, str], n_docs: int) -> tuple[str, dict]:
    raw = _text(rec, column).strip()
    if not raw:
        if not n_docs:
            return "factual", {"type_from": "default"}
        return ("reasoning" if n_docs >= 2 else "factual"), {"type_from": "sources"}
    label = _norm_label(raw)
    qtype = type_map.get(label) or TYPE_NAMES.get(label)
    if qtype is None:
        raise rec.error(f"unknown question type {raw!r} in column {column!r} (known: factual, reasoning, summary, "
                        f"single_hop, multi_hop; map a label of your own with --type-map '{raw}=reasoning')")
    return qtype, ({"type_label": raw} if label not in TYPE_NAMES else {})


# --------------------------------------------------------------------------- questions


def load_questions(paths: list[Path], catalog: Catalog, mapping: dict[str, str] | None = None,
                   type_map: dict[str, str] | None = None) -> Loaded:
    """Every row of ``paths`` as a Question whose sources are resolved against ``catalog``."""
    mapping, type_map = mapping or {}, type_map or {}
    out = Loaded()
    ids = _Ids("question")
    for path in paths:
        per_record = path.suffix.lower() not in (".csv", ".tsv")
        recs = list(records(path))
        if not recs:
            raise LoaderError(path, None, "no questions in the file (only a header?)")
        header = _columns(path, recs[0], mapping) if not per_record else None
        rows = [(rec, header if header is not None else _columns(path, rec, mapping, True)) for rec in recs]
        columns = list(dict.fromkeys(k for rec, _c in rows[:1 if header is not None else None] for k in rec.d))
        used = {f: c for _r, cols in rows for f, c in cols.items()}
        _unmapped_check(path, used, columns, mapping)
        labels = _label_check(path, rows, type_map)
        out.columns.append(Columns(path, {f: str(c) for f, c in sorted(used.items(), key=lambda fc: list(FIELDS)
                                                                                  .index(fc[0]))},
                                   [str(c) for c in columns if c not in used.values()], labels))
        for rec, cols in rows:
            question = _text(rec, cols["question"])
            if not question.strip():
                raise rec.error(f"the question (column {cols['question']!r}) is empty")
            if "id" in cols:
                rid = _text(rec, cols["id"]).strip()
                if not rid:
                    raise rec.error(f"the id (column {cols['id']!r}) is empty")
            else:
                rid = "q-" + hashlib.sha1(question.strip().encode("utf-8", "replace")).hexdigest()[:12]
            if len(rid) > 300:
                raise rec.error(f"the id is {len(rid)} characters long; the stores hold at most 300")
            rec.rid = rid
            ids.add(rec, rid)
            unanswerable = _flag(rec, cols.get("unanswerable"))
            answer = _text(rec, cols.get("answer"))
            if not answer.strip():
                if not unanswerable:
                    where = f"column {cols['answer']!r}" if "answer" in cols else (
                        f"no answer column: looked for {', '.join(FIELDS['answer'])}")
                    raise rec.error(f"the answer is empty ({where}); mark a question the documents do not answer "
                                    "with an unanswerable column set to true")
                answer = UNANSWERABLE_GOLD
            docs, lost = [], []
            for pattern in _sources(rec, cols["sources"]) if "sources" in cols else []:
                found = catalog.match(pattern)
                if not found and "," in pattern:  # a comma-separated list (a file name may hold a comma)
                    parts = [catalog.match(p.strip()) for p in pattern.split(",") if p.strip()]
                    if parts and all(parts):
                        found = list(dict.fromkeys(d for part in parts for d in part))
                if not found:
                    skipped = catalog.match_skipped(pattern)
                    if not skipped:
                        shown = ", ".join(repr(d) for d in catalog.ids[:3])
                        raise rec.error(f"source {pattern!r} matches no document (of {len(catalog.ids)}: {shown}"
                                        f"{', …' if len(catalog.ids) > 3 else ''})")
                    lost += skipped
                docs += [d for d in found if d not in docs]
            if lost:
                for did in dict.fromkeys(lost):
                    out.dropped.setdefault(did, []).append(rec.label)
                continue
            qtype, type_meta = _qtype(rec, cols.get("type"), type_map, len(docs))
            evidence = _evidence(rec, cols["evidence"]) if "evidence" in cols else []
            mapped = set(cols.values())
            meta: dict[str, Any] = {**{str(k): v for k, v in rec.d.items() if k not in mapped and v not in ("", None)},
                                    **type_meta}
            out.questions.append(Question(rid, question.strip(), answer.strip(), qtype, _hops(rec, cols.get("hops")),
                                          docs, evidence, meta, unanswerable))
    return out
