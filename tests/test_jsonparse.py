"""Model-reply JSON: json-repair as the repair fallback, jsonschema validation, the salvage of
cut-off replies kept (issue 16, item 8)."""

from __future__ import annotations

import pytest

from ragrouter.llm.jsonparse import JSONParseError, parse_json, parse_reply, validate


# --------------------------------------------------------------------------- json-repair, jsonschema (issue 16)


@pytest.mark.parametrize("reply, expected", [
    ('{label: "correct", reason: "ok"}', {"label": "correct", "reason": "ok"}),        # unquoted keys
    ('{"a": 1, // a comment\n "b": 2}', {"a": 1, "b": 2}),                              # // comments
    ('{"reason": "he said "hi" to me", "label": "correct"}',
     {"reason": 'he said "hi" to me', "label": "correct"}),                             # inner quotes
])
def test_json_repair_is_the_fallback(reply, expected):
    import json_repair

    assert parse_json(reply) == expected == json_repair.loads(reply)


def test_cut_off_replies_keep_the_projects_salvage():
    # json-repair alone would invent ["d", "e"]; the salvage keeps complete triples only
    assert parse_json('{"triples": [["a", "b", "c"], ["d", "e') == {"triples": [["a", "b", "c"]]}


def test_jsonschema_enforces_max_length_and_more():
    import jsonschema

    schema = {"type": "object", "required": ["label", "reason"],
              "properties": {"label": {"enum": ["correct", "incorrect"]},
                             "reason": {"type": "string", "maxLength": 200, "pattern": "^[A-Z]"},
                             "n": {"type": "integer", "minimum": 0}}}
    ok = {"label": "correct", "reason": "Fine."}
    assert validate(ok, schema) == []
    jsonschema.validate(ok, schema)
    long = {"label": "correct", "reason": "A" + "x" * 250}
    assert validate(long, schema) == ["$.reason: has 251 characters, more than maxLength=200"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(long, schema)
    assert validate({"label": "correct", "reason": "lower"}, schema) == ["$.reason: 'lower' does not match '^[A-Z]'"]
    assert validate({"label": "correct", "reason": "Ok", "n": -1}, schema) == [
        "$.n: -1 is less than the minimum of 0"]
    with pytest.raises(JSONParseError) as info:
        parse_reply('{"label": "correct", "reason": "%s"}' % ("B" * 300), schema)
    assert info.value.reason == "schema_mismatch" and "maxLength=200" in info.value.detail
