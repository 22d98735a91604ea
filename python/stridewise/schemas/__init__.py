"""JSON Schemas of the file formats stridewise writes and reads back, shipped with the package.

- ``audit_report.schema.json``: the audit's ``--json`` report (schema ``stridewise-audit/1``),
  read back by ``--verify-repros-from`` (docs/audit.md)
- ``dump_index_record.schema.json``: one record (line) of a dump's ``index.jsonl``, read back by
  ``stridewise.dump.read_index`` (docs/compare.md); the same fields sw-compare requires

Validation is jsonschema's (Draft 2020-12); a document that does not match raises
:class:`SchemaError` naming the file (``source``), the JSON path of the failing value and the
rule it breaks. The schema files are package data, loaded with importlib.resources, so they
ship in the wheel.
"""
from __future__ import annotations

import functools
import json
from importlib import resources

AUDIT_REPORT = "audit_report.schema.json"
DUMP_INDEX_RECORD = "dump_index_record.schema.json"


class SchemaError(ValueError):
    """A document does not match its schema. ``source``: the file (and line); ``path``: the JSON
    path of the failing value (``$.repro_check[0].script``); ``reason``: the rule it breaks."""

    def __init__(self, source: str, path: str, reason: str, schema: str):
        self.source, self.path, self.reason, self.schema = source, path, reason, schema
        super().__init__(f"{source}: {path}: {reason} (schema {schema})")


@functools.lru_cache(maxsize=None)
def load(name: str) -> dict:
    """The schema ``name`` (a file of this package) as a dict."""
    return json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def validator(name: str):
    """A jsonschema validator of the schema ``name`` (the schema itself checked once)."""
    from jsonschema import Draft202012Validator

    schema = load(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def problem(doc, name: str):
    """(JSON path, message) of the most relevant way ``doc`` breaks schema ``name``, or None."""
    from jsonschema.exceptions import best_match

    err = best_match(validator(name).iter_errors(doc))
    if err is None:
        return None
    return err.json_path, err.message


def validate(doc, name: str, source: str = "<document>") -> None:
    """Raise :class:`SchemaError` when ``doc`` does not match schema ``name``."""
    bad = problem(doc, name)
    if bad is not None:
        raise SchemaError(source, bad[0], _short(bad[1]), name)


def _short(msg: str, n: int = 300) -> str:
    return msg if len(msg) <= n else msg[:n - 3] + "..."


__all__ = ["AUDIT_REPORT", "DUMP_INDEX_RECORD", "SchemaError", "load", "validator", "problem", "validate"]
