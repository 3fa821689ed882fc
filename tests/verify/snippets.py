"""Runs the Python snippets of docs/webhooks.md against real deliveries.

Every ```python block of the document whose first line is `# tested: <name>` defines
`verify_delivery(raw_body: bytes, headers: dict, secret: str) -> dict`. Reads JSON from stdin:
{"document": <path of docs/webhooks.md>, "expect": [<names>], "cases": [{"body": <base64 of the
raw body>, "headers": {lower-case name: value}, "secret": <secret>, "standard": <bool>}]}. Each
snippet (the `standardwebhooks` ones only on "standard" cases) must return the body's JSON and
must raise on a tampered body. Exits non-zero on the first failure. Run by
tests/api/standard_webhooks.rs with .ci/venv's python.
"""

import base64
import json
import re
import sys


def snippets(text: str) -> dict:
    found = {}
    for block in re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        first = block.split("\n", 1)[0]
        if first.startswith("# tested: "):
            found[first[len("# tested: "):].strip()] = block
    return found


def main() -> int:
    given = json.load(sys.stdin)
    with open(given["document"], encoding="utf-8") as f:
        found = snippets(f.read())
    if sorted(found) != sorted(given["expect"]):
        print(f"tested snippets: {sorted(found)}, expected {sorted(given['expect'])}", file=sys.stderr)
        return 1
    for name, source in found.items():
        scope: dict = {}
        exec(compile(source, f"docs/webhooks.md ({name})", "exec"), scope)
        verify = scope["verify_delivery"]
        for i, case in enumerate(given["cases"]):
            if "standardwebhooks" in name and not case["standard"]:
                continue
            body = base64.b64decode(case["body"])
            event = verify(body, dict(case["headers"]), case["secret"])
            if event != json.loads(body):
                print(f"{name}, case {i}: answered {event!r}", file=sys.stderr)
                return 1
            try:
                verify(body + b" ", dict(case["headers"]), case["secret"])
            except Exception:  # noqa: BLE001 - each library raises its own error
                pass
            else:
                print(f"{name}, case {i}: a tampered body verified", file=sys.stderr)
                return 1
            print(f"{name}, case {i}: verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
