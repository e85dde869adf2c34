"""Generate ``schemas.json``: the CloudFormation resource provider schema facts stackflow needs.

The planner decides whether a property change forces a replacement from each resource
type's provider schema (createOnlyProperties and friends). The schemas come from the data
shipped inside the ``cfn-lint`` Python package (license MIT-0), which keeps one JSON file
per schema under ``cfnlint/data/schemas/resources/`` and, per region,
``cfnlint/data/schemas/providers/<region>.json``: an object mapping each resource type name
to the file stem of its schema.

How to run (from the repository root; Python 3.11, standard library plus cfn-lint):

    pip install cfn-lint==1.58.0 && python3 shared/core/data/gen_schemas.py

It writes ``shared/core/data/schemas.json`` next to this script, a compact JSON object:

    {"source": "cfn-lint <version>",
     "types": {"AWS::SQS::Queue": {"c": [...], "cc": [...], "r": [...], "w": [...],
                                   "p": [...], "a": [...]}, ...}}

* ``c``  createOnlyProperties
* ``cc`` conditionalCreateOnlyProperties
* ``r``  readOnlyProperties
* ``w``  writeOnlyProperties
* ``p``  primaryIdentifier
* ``a``  top-level property names the type accepts (keys of ``properties`` that are not
  read-only), in schema order

Paths lose their ``/properties/`` prefix (``/properties/KeySchema/*/AttributeName`` becomes
``KeySchema/*/AttributeName``; ``*`` stands for any list item) and keep the schema's order.
Empty lists are left out. Every type of us-east-1 is covered, followed by the types that
only other regions have (us-east-1's schema wins when a type is in several regions). The
SAM transform's types (``providers/sam.json``) are not deployable resources and are left out.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

import cfnlint

PREFIX = "/properties/"
FIRST_REGION = "us-east-1"
# Provider files that are not a region's list of deployable types.
NOT_REGIONS = {"sam"}

LISTS = (
    ("c", "createOnlyProperties"),
    ("cc", "conditionalCreateOnlyProperties"),
    ("r", "readOnlyProperties"),
    ("w", "writeOnlyProperties"),
    ("p", "primaryIdentifier"),
)


def strip(type_name: str, key: str, pointer: str) -> str:
    """``/properties/A/*/B`` -> ``A/*/B``; anything else is a schema shape we do not know."""
    if not pointer.startswith(PREFIX) or len(pointer) == len(PREFIX):
        sys.exit(f"{type_name}: {key} has an unexpected path {pointer!r}")
    return pointer[len(PREFIX) :]


def dedup(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def summarize(type_name: str, schema: dict) -> dict[str, list[str]]:
    entry: dict[str, list[str]] = {}
    for short, key in LISTS:
        paths = dedup([strip(type_name, key, p) for p in schema.get(key) or []])
        if paths:
            entry[short] = paths
    read_only_top = {p for p in entry.get("r", []) if "/" not in p}
    accepted = [name for name in schema.get("properties") or {} if name not in read_only_top]
    if accepted:
        entry["a"] = accepted
    return entry


def main() -> None:
    schemas_dir = Path(cfnlint.__file__).resolve().parent / "data" / "schemas"
    providers_dir = schemas_dir / "providers"
    resources_dir = schemas_dir / "resources"

    regions = sorted(p.stem for p in providers_dir.glob("*.json") if p.stem not in NOT_REGIONS)
    if FIRST_REGION not in regions:
        sys.exit(f"no provider file for {FIRST_REGION} in {providers_dir}")
    regions.remove(FIRST_REGION)
    regions.insert(0, FIRST_REGION)

    # type name -> schema file stem, first region that has the type wins
    stems: dict[str, str] = {}
    for region in regions:
        mapping = json.loads((providers_dir / f"{region}.json").read_text(encoding="utf-8"))
        for type_name, stem in mapping.items():
            stems.setdefault(type_name, stem)

    types: dict[str, dict[str, list[str]]] = {}
    for type_name, stem in stems.items():
        schema = json.loads((resources_dir / f"{stem}.json").read_text(encoding="utf-8"))
        if schema.get("typeName", type_name) != type_name:
            sys.exit(f"{type_name}: schema {stem}.json is for {schema.get('typeName')}")
        types[type_name] = summarize(type_name, schema)

    out = {"source": f"cfn-lint {metadata.version('cfn-lint')}", "types": types}
    target = Path(__file__).resolve().parent / "schemas.json"
    text = json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    target.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {target}: {len(types)} types, {len(text) + 1} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
