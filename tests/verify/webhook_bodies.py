"""Checks captured deliveries against the OpenAPI document's `webhooks` section.

Reads JSON from stdin: {"document": <path of docs/openapi/partner.json>, "deliveries": [{"body":
<base64 of the raw body>, "headers": {name: value}}]}. For each delivery, the entry of
`webhooks` named by its X-Partner-Event must exist; the body must validate (JSON Schema 2020-12,
formats checked) against that entry's request body schema, with `$ref`s resolved in the document;
every header parameter the entry marks required must be present, and every header parameter
present must validate against its schema. Every webhook of the document must be seen once at
least. Prints one line per delivery; exits non-zero on the first failure. Run by
tests/api/webhook_schemas.rs with .ci/venv's python.
"""

import base64
import json
import sys

import jsonschema


def validator(document: dict, schema: dict):
    # The document's components beside the schema, so `#/components/...` resolves.
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": document["components"], **schema}
    return jsonschema.Draft202012Validator(root, format_checker=jsonschema.FormatChecker())


def main() -> int:
    given = json.load(sys.stdin)
    with open(given["document"], encoding="utf-8") as f:
        document = json.load(f)
    webhooks = document.get("webhooks", {})
    seen = set()
    for i, d in enumerate(given["deliveries"]):
        headers = {k.lower(): v for k, v in d["headers"].items()}
        event = headers.get("x-partner-event")
        op = webhooks.get(event, {}).get("post")
        if op is None:
            print(f"delivery {i}: no webhook {event!r} in the document", file=sys.stderr)
            return 1
        seen.add(event)
        body = json.loads(base64.b64decode(d["body"]))
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        errors = list(validator(document, schema).iter_errors(body))
        if errors:
            for e in errors:
                print(f"delivery {i} ({event}): {list(e.absolute_path)}: {e.message}", file=sys.stderr)
            return 1
        for p in op.get("parameters", []):
            name = p["name"].lower()
            if name not in headers:
                if p.get("required"):
                    print(f"delivery {i} ({event}): no {p['name']} header", file=sys.stderr)
                    return 1
                continue
            errs = list(validator(document, p["schema"]).iter_errors(headers[name]))
            if errs:
                print(f"delivery {i} ({event}): {p['name']}: {errs[0].message}", file=sys.stderr)
                return 1
        print(f"delivery {i}: {event} matches the document")
    missing = set(webhooks) - seen
    if missing:
        print(f"no delivery of {sorted(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
