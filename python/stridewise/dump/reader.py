"""Reading a stridewise dump back in Python (records and tensors)."""
from __future__ import annotations

import json
import os
import re


def rank_dirs(root):
    """[(step, rank, path)] under a dump root, sorted."""
    out = []
    for sd in os.listdir(root):
        m = re.fullmatch(r"step(\d+)", sd)
        if not m or not os.path.isdir(os.path.join(root, sd)):
            continue
        for rd in os.listdir(os.path.join(root, sd)):
            r = re.fullmatch(r"rank(\d+)", rd)
            if r:
                out.append((int(m.group(1)), int(r.group(1)), os.path.join(root, sd, rd)))
    return sorted(out)


def read_index(rank_dir, kinds=("tensor",), validate=False):
    """Records of DIR/index.jsonl (kinds: "tensor", "op", "meta", "end"; None for all; a record of
    any other kind is read like these, so a newer writer's kinds can be asked for by name).

    validate: check every record (of any kind) against the shipped JSON Schema
    (stridewise/schemas/dump_index_record.schema.json, the fields sw-compare requires); a record
    that does not match raises :class:`stridewise.schemas.SchemaError` (a ValueError) naming
    ``index.jsonl:LINE``, the failing field and the rule. Off by default: jsonschema takes about
    0.2-0.3 ms a record, 20x the JSON parsing, so it is for checking a dump, not bulk reading.
    """
    path = os.path.join(rank_dir, "index.jsonl")
    out = []
    if validate:
        from .. import schemas
    with open(path, "rb") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                if not line.endswith(b"\n"):
                    break  # incomplete last record of an interrupted capture
                raise ValueError(f"{path}:{no}: invalid JSON record: {e}") from e
            if validate:
                schemas.validate(rec, schemas.DUMP_INDEX_RECORD, f"{path}:{no}")
            elif not isinstance(rec, dict):
                raise ValueError(f"{path}:{no}: record is not a JSON object")
            if kinds is None or rec.get("kind", "tensor") in kinds:
                out.append(rec)
    return out


def load_tensor(rank_dir, rec):
    """The recorded tensor (a CPU torch.Tensor with the stored dtype and shape). ValueError for a
    record without data: skipped, or an input the op does not read ("read": false)."""
    import torch

    from .. import schemas

    schemas.validate(rec, schemas.DUMP_INDEX_RECORD, f"record given to load_tensor({os.fspath(rank_dir)!r})")
    if rec.get("kind", "tensor") != "tensor":
        raise ValueError(f"not a tensor record (kind {rec['kind']!r}): {rec}")
    if rec.get("read") is False:
        raise ValueError(f"no data for {rec.get('op')} call {rec.get('call')} {rec.get('io')} {rec.get('arg')!r}: "
                         "the op does not read this input's values (\"read\": false), so the dump "
                         "stores none (docs/compare.md, 'Inputs an op does not read')")
    if rec.get("skipped"):
        raise ValueError(f"tensor was not stored: {rec['skipped']}")
    from safetensors import safe_open

    with safe_open(os.path.join(rank_dir, rec["file"]), framework="pt") as f:
        t = f.get_tensor(rec["key"])
    if rec.get("stored_as") == "view_as_real":
        t = torch.view_as_complex(t)
    return t
