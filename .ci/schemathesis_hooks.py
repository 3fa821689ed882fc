"""Schemathesis hooks of the conformance run (loaded through SCHEMATHESIS_HOOKS by .ci/conformance).

A fresh `Idempotency-Key` for every call that carries a valid one: schemathesis draws keys from
a small space and reuses them with other bodies, which the server rightly answers 422
`idempotency_key_reused` (extensions §8.3), a rule about request history that no schema can state.
Invalid keys (negative data) are sent as generated, so their 400 is still checked.
"""

import re
import uuid

import schemathesis

VALID_KEY = re.compile(r"^[!-~]{1,255}$")


@schemathesis.hook
def before_call(context, case, kwargs):
    headers = case.headers
    if not headers:
        return
    for name in list(headers):
        if name.lower() == "idempotency-key":
            value = headers[name]
            if isinstance(value, str) and VALID_KEY.match(value):
                headers[name] = f"conformance-{uuid.uuid4()}"
