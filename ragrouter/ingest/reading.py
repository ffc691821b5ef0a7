"""Reading the loaders' input files, and building a :class:`~ragrouter.ingest.records.Dataset`.

JSON and JSONL files are read record by record (:class:`_Source`, :class:`_Rec`); anything
malformed raises a :class:`~ragrouter.ingest.records.LoaderError` that names the file, the record
and the problem. :class:`_Builder` collects documents and questions with duplicate-id checks into
a ``Dataset``. The format loaders themselves are in :mod:`ragrouter.ingest.loaders`.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ragrouter.ingest.records import QTYPES, Dataset, Document, LoaderError, Question

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonlines")
MAX_DEPTH = 64
"""Deepest nesting of arrays/objects a record may have (datasets need a handful)."""
INT_RANGE = (-(2 ** 63), 2 ** 63 - 1)
"""Integers a store column or JSON value can hold on DuckDB and PostgreSQL alike (BIGINT)."""


class _NonFinite(float):
    """NaN / Infinity / -Infinity as Python's json module reads them (not JSON): flagged per record."""

    def __new__(cls, name: str):
        obj = super().__new__(cls, float(name.replace("Infinity", "inf")))
        obj.name = name
        return obj


class _DupKeys(dict):
    """An object that repeated a key (json keeps the last value silently): flagged per record."""

    duplicates: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    out = {}
    dups = []
    for key, value in pairs:
        if key in out and key not in dups:
            dups.append(key)
        out[key] = value
    if dups:
        flagged = _DupKeys(out)
        flagged.duplicates = dups
        return flagged
    return out


def _json_loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_pairs, parse_constant=_NonFinite)


def _surrogate_at(text: str) -> int | None:
    """Where a string holds a lone surrogate (not valid Unicode, no store can hold it), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


# The longest id the stores hold (documents/queries.external_id are VARCHAR(300); PostgreSQL
# refuses a longer one, DuckDB would keep it): one limit on both.
MAX_ID_CHARS = 300


def _check_value(value: Any, path: str = "", depth: int = 0) -> str | None:
    """The first problem of a decoded record that the stores would reject or JSON does not allow."""
    if depth > MAX_DEPTH:
        top = path.split("[", 1)[0].split(".", 1)[0]
        return f"nested more than {MAX_DEPTH} levels deep{' in key ' + repr(top) if top else ''}"
    here = f" in key {path!r}" if path else ""
    if isinstance(value, _NonFinite):
        return f"{value.name} is not a JSON number{here} (the stores cannot hold it)"
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        if not INT_RANGE[0] <= value <= INT_RANGE[1]:
            return f"integer {str(value)[:30]}{'…' if len(str(value)) > 30 else ''}{here} is out of range (64-bit)"
        return None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):  # 1e999 overflows to inf
            return f"number out of range{here} (the stores cannot hold it)"
        return None
    if isinstance(value, str):
        nul = value.find("\x00")
        if nul >= 0:
            return f"NUL character (\\u0000) at character {nul}{here} (PostgreSQL cannot store it)"
        bad = _surrogate_at(value)
        if bad is not None:
            return f"key {path!r} holds an unpaired surrogate at character {bad} (not valid Unicode)" if path else \
                f"an unpaired surrogate at character {bad} (not valid Unicode)"
        return None
    if isinstance(value, dict):
        if isinstance(value, _DupKeys):
            return f"duplicate key {value.duplicates[0]!r}{' in ' + repr(path) if path else ''} (JSON keeps only the last value)"
        for key, item in value.items():
            if "\x00" in key:
                return f"NUL character (\\u0000) in a key{here}"
            bad = _surrogate_at(key)
            if bad is not None:
                return (f"a key{here} holds an unpaired surrogate at character {bad} "
                        f"({key.encode('utf-8', 'backslashreplace').decode('ascii', 'replace')[:60]!r}; not valid Unicode)")
            problem = _check_value(item, f"{path}.{key}" if path else key, depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = _check_value(item, f"{path}[{i}]", depth + 1)
            if problem:
                return problem
    return None


def _too_deep(text: str, base_line: int = 1) -> tuple[str, str]:
    """Where a text nests deeper than Python's parser goes: (record label, line)."""
    depth, in_str, esc, index, line = 0, False, False, 0, base_line
    top_array = text.lstrip().startswith("[")
    for ch in text:
        if ch == "\n":
            line += 1
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH + 1:
                break
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 1:
            index += 1
    return (f"record [{index}]" if top_array else "top-level object"), f"line {line}"


# --------------------------------------------------------------------------- reading files


def _jtype(value: Any) -> str:
    """The JSON name of a decoded value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


_TNAMES = {str: "a string", int: "an integer", bool: "a boolean", list: "an array", dict: "an object",
           float: "a number"}


def _id_hint(value: Any) -> str | None:
    if isinstance(value, dict):
        for key in ("id", "doc_id", "corpus_name", "set_unique_id", "unique_id", "article_id"):
            v = value.get(key)
            if isinstance(v, (str, int)) and not isinstance(v, bool):
                return str(v)
    return None


def _label(where: str, rid: str | None) -> str:
    return where if rid is None else f"{where} (id {rid!r})"


def _has_bad_unicode(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _utf8_error(path: Path, data: bytes, base: int, exc: UnicodeDecodeError) -> LoaderError:
    """Invalid UTF-8 in a JSON file: give the byte offset and, if possible, the record."""
    offset = base + exc.start
    line = data.count(b"\n", 0, offset) + 1
    record = f"line {line}"
    try:  # decode leniently to find which record holds the bad bytes (error path only)
        value = json.loads(data[base:].decode("utf-8", "surrogateescape"))
        items = enumerate(value) if isinstance(value, list) else [(None, value)]
        for i, item in items:
            if _has_bad_unicode(item):
                where = "top-level object" if i is None else f"record [{i}]"
                record = _label(where, _id_hint(item))
                break
    except (ValueError, RecursionError):
        pass
    return LoaderError(
        path, record,
        f"invalid UTF-8 at byte offset {offset} (line {line}): {exc.reason} (byte 0x{data[offset]:02x})",
    )


def _jsonl_lines(path: Path, lines: Iterable[tuple[int, int, bytes]]) -> Iterator[tuple[str, Any]]:
    """Decode and parse JSONL lines given as (line number, byte offset, raw bytes)."""
    for lineno, start, raw in lines:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = raw[exc.start]
            raise LoaderError(
                path, f"line {lineno}",
                f"invalid UTF-8 at byte offset {start + exc.start}: {exc.reason} (byte 0x{bad:02x})",
            ) from None
        if not line.strip():
            continue
        try:
            value = _json_loads(line)
        except json.JSONDecodeError as exc:
            raise LoaderError(
                path, f"line {lineno}", f"not valid JSON at column {exc.colno}: {exc.msg}"
            ) from None
        except RecursionError:
            raise LoaderError(path, f"line {lineno}", f"nested more than {MAX_DEPTH} levels deep") from None
        yield f"line {lineno}", value


def _stream_jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    def raw_lines():
        with path.open("rb") as fh:
            offset = 0
            for lineno, raw in enumerate(fh, 1):
                start = offset
                offset += len(raw)
                if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw, start = raw[3:], start + 3
                yield lineno, start, raw

    yield from _jsonl_lines(path, raw_lines())


def _read_json(path: Path) -> Iterator[tuple[str, Any]]:
    data = path.read_bytes()
    base = 3 if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[base:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _utf8_error(path, data, base, exc) from None
    if not text.strip():
        raise LoaderError(path, None, "file is empty")
    try:
        value = _json_loads(text)
    except RecursionError:
        record, line = _too_deep(text)
        raise LoaderError(path, record, f"nested more than {MAX_DEPTH} levels deep ({line})") from None
    except json.JSONDecodeError as exc:
        first = text.split("\n", 1)[0]
        if exc.msg == "Extra data" and _parses(first):  # JSON Lines under another name
            lines, pos = [], base
            for lineno, line in enumerate(text.split("\n"), 1):
                lines.append((lineno, pos, line.encode("utf-8")))
                pos += len(lines[-1][2]) + 1
            yield from _jsonl_lines(path, lines)
            return
        raise LoaderError(
            path, f"line {exc.lineno} column {exc.colno}", f"not valid JSON: {exc.msg}"
        ) from None
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield f"record [{i}]", item
    else:
        yield "top-level object", value


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return bool(line.strip())


class _Source:
    """One input file; its first record is read ahead to classify the file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise LoaderError(self.path, None, "no such file")
        if not self.path.is_file():
            raise LoaderError(self.path, None, "not a regular file")
        if self.path.name.lower().endswith(JSONL_SUFFIXES):
            self._it = _stream_jsonl(self.path)
        else:
            self._it = _read_json(self.path)
        self.first = next(self._it, None)
        if self.first is None:
            raise LoaderError(self.path, None, "no records (empty file or empty array)")

    def __iter__(self) -> Iterator[_Rec]:
        where, value = self.first
        yield _Rec(self.path, where, value)
        for where, value in self._it:
            yield _Rec(self.path, where, value)


class _Rec:
    """A JSON object at a known place in a file, with typed accessors that raise LoaderError."""

    def __init__(self, path: Path, where: str, value: Any, checked: bool = False):
        self.path = path
        self.where = where
        self.rid: str | None = None
        if not isinstance(value, dict):
            raise LoaderError(path, _label(where, None), f"expected a JSON object, got {_jtype(value)}")
        self.d: dict = value
        if not checked:  # once per top-level record: what JSON or the stores do not allow
            problem = _check_value(value)
            if problem:
                raise LoaderError(path, _label(where, _id_hint(value)), problem)

    @property
    def label(self) -> str:
        return _label(self.where, self.rid)

    @property
    def at(self) -> str:
        return f"{self.path}: {self.label}"

    def error(self, problem: str) -> LoaderError:
        return LoaderError(self.path, self.label, problem)

    def child(self, key: str, index: int | None = None) -> _Rec:
        """The nested object ``self[key]`` or ``self[key][index]`` as a record."""
        where = f"{self.label} {key}" if index is None else f"{self.label} {key}[{index}]"
        value = self.d[key] if index is None else self.d[key][index]
        return _Rec(self.path, where, value, checked=True)

    def get(self, key: str, types: type | tuple[type, ...], *, required: bool = True,
            default: Any = None) -> Any:
        if key not in self.d:
            if required:
                raise self.error(f"missing key {key!r}")
            return default
        value = self.d[key]
        types = types if isinstance(types, tuple) else (types,)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            want = " or ".join(_TNAMES.get(t, t.__name__) for t in types)
            raise self.error(f"key {key!r} must be {want}, got {_jtype(value)}")
        return value

    def string(self, key: str, *, required: bool = True, default: str = "",
               nonempty: bool = False, what: str | None = None) -> str:
        value = self.get(key, str, required=required, default=default)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise self.error(
                f"key {key!r} holds an unpaired surrogate at character {exc.start} (not valid Unicode)"
            ) from None
        if nonempty and not value.strip():
            raise self.error(f"{what or repr(key)} is empty")
        return value

    def count(self, key: str, *, lo: int = 1, hi: int = 100, required: bool = False) -> int | None:
        """An integer setting of the record in [lo, hi] (e.g. ``hops``), None when absent."""
        value = self.get(key, int, required=required, default=None)
        if value is not None and not lo <= value <= hi:
            raise self.error(f"key {key!r} must be between {lo} and {hi}, got {value}")
        return value

    def ident(self, key: str) -> str:
        """The record's id (a string or integer, kept as a string); sets :attr:`rid`."""
        value = self.get(key, (str, int))
        rid = str(value)
        if not rid.strip():
            raise self.error(f"key {key!r} (the id) is empty")
        if len(rid) > MAX_ID_CHARS:
            raise self.error(f"key {key!r} (the id) is {len(rid)} characters long; the stores hold at most "
                             f"{MAX_ID_CHARS} (starts {rid[:40]!r})")
        self.rid = rid
        return rid

    def strings(self, key: str, *, required: bool = True) -> list[str]:
        value = self.get(key, list, required=required, default=[])
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"key {key!r}[{i}] must be a string, got {_jtype(item)}")
        return list(value)

    def rest(self, *consumed: str) -> dict:
        """The keys not consumed by the loader, for ``meta``."""
        return {k: v for k, v in self.d.items() if k not in consumed}


class _Ids:
    """Detects duplicate ids, remembering where each was first seen."""

    def __init__(self, what: str):
        self.what = what
        self.seen: dict[str, str] = {}

    def add(self, rec: _Rec, rid: str) -> None:
        if rid in self.seen:
            raise rec.error(f"duplicate {self.what} id {rid!r} (first seen at {self.seen[rid]})")
        self.seen[rid] = rec.at

    def __contains__(self, rid: str) -> bool:
        return rid in self.seen


class _Builder:
    """Accumulates documents, questions and drop counts with id checks."""

    def __init__(self) -> None:
        self.documents: list[Document] = []
        self.questions: list[Question] = []
        self.dropped: Counter[str] = Counter()
        self.doc_ids = _Ids("document")
        self.q_ids = _Ids("question")
        self._by_content: dict[tuple[str, str], str] = {}

    def document(self, rec: _Rec, doc: Document) -> None:
        self.doc_ids.add(rec, doc.external_id)
        self.documents.append(doc)

    def paragraph(self, rec: _Rec, title: str, text: str, meta: dict | None = None) -> str:
        """Add a (title, text) passage once; return its content-hash id."""
        key = (title, text)
        if key in self._by_content:
            self.dropped["duplicate_paragraph"] += 1
            return self._by_content[key]
        did = content_id(title, text)
        self.document(rec, Document(did, title, text, meta or {}))
        self._by_content[key] = did
        return did

    def question(self, rec: _Rec, q: Question) -> None:
        assert q.qtype in QTYPES, q.qtype
        self.q_ids.add(rec, q.external_id)
        self.questions.append(q)

    def check_supporting(self, rec: _Rec, ids: list[str]) -> None:
        """With a corpus loaded, every supporting id must name one of its documents."""
        if not self.documents:
            return
        for did in ids:
            if did not in self.doc_ids:
                raise rec.error(f"supporting document id {did!r} is not in the corpus files")

    def result(self) -> Dataset:
        return Dataset(self.documents, self.questions, dict(sorted(self.dropped.items())))


def content_id(title: str, text: str) -> str:
    """Stable id for a passage that has none: the first 16 hex digits of sha1(title NUL text)."""
    return hashlib.sha1(f"{title}\x00{text}".encode()).hexdigest()[:16]


def _classify(paths: Iterable[str | Path], decide: Callable[[Any], str | None],
              expect: str) -> tuple[list[_Source], list[_Source]]:
    """Open every file and split them into (corpus files, question files) by their first record.

    ``decide(first_value)`` returns "corpus", "questions" or None; ``expect`` describes the
    keys that tell them apart, for the error message.
    """
    paths = list(paths)
    if not paths:
        raise ValueError("no input files given")
    corpora, questions = [], []
    for path in paths:
        src = _Source(path)
        where, value = src.first
        if not isinstance(value, dict):
            raise LoaderError(src.path, where, f"expected a JSON object, got {_jtype(value)}")
        kind = decide(value)
        if kind is None:
            raise LoaderError(
                src.path, _label(where, _id_hint(value)),
                f"cannot tell whether this is a corpus or a questions file: first record has keys "
                f"{sorted(value)}; expected {expect}",
            )
        (corpora if kind == "corpus" else questions).append(src)
    return corpora, questions


def _by_keys(corpus_keys: tuple[str, ...], question_keys: tuple[str, ...]):
    def decide(value: dict) -> str | None:
        if any(k in value for k in question_keys):
            return "questions"
        if any(k in value for k in corpus_keys):
            return "corpus"
        return None

    return decide


def _qtype(rec: _Rec, key: str, mapping: dict[str, str], dropped: dict[str, str] | None = None
           ) -> str | None:
    """Map the dataset's question type; None means "drop" (counted by the caller)."""
    raw = rec.get(key, str)
    if dropped and raw in dropped:
        return None
    if raw not in mapping:
        known = sorted(set(mapping) | set(dropped or ()))
        raise rec.error(f"unknown question type {raw!r} in key {key!r} (expected one of {known})")
    return mapping[raw]


def _evidence(rec: _Rec, key: str) -> list[str]:
    """Evidence given as a string, a list of strings or a list of [s, r, o] triples."""
    value = rec.get(key, (str, list), required=False, default=[])
    if isinstance(value, str):
        return [value] if value.strip() else []
    out = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, list) and all(isinstance(x, str) for x in item):
            out.append(" | ".join(item))
        else:
            raise rec.error(f"key {key!r}[{i}] must be a string or a list of strings, got {_jtype(item)}")
    return out
