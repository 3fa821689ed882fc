"""Verifies captured deliveries with the official libraries a partner would use.

Reads JSON from stdin: a list of {"body": <base64 of the raw body>, "headers": {name: value},
"secret": <endpoint secret>, "standard": <bool: whether Standard Webhooks headers are expected>}.
For each: Stripe's SDK (`stripe.WebhookSignature.verify_header`) must accept X-Partner-Signature;
when "standard", the Standard Webhooks library (`standardwebhooks.Webhook(secret).verify`) must
accept the webhook-* headers, and must refuse a tampered body. Prints one line per case; exits
non-zero on the first failure. Run by tests/api/standard_webhooks.rs with .ci/venv's python.
"""

import base64
import json
import sys

import standardwebhooks
import stripe


def main() -> int:
    cases = json.load(sys.stdin)
    for i, case in enumerate(cases):
        body = base64.b64decode(case["body"])
        headers = {k.lower(): v for k, v in case["headers"].items()}
        secret = case["secret"]
        # Stripe's SDK: the partner's documented way (docs/webhooks.md).
        stripe.WebhookSignature.verify_header(
            body.decode("utf-8"), headers["x-partner-signature"], secret, tolerance=300
        )
        if case["standard"]:
            wh = standardwebhooks.Webhook(secret)
            wh.verify(body, headers)
            try:
                wh.verify(body + b" ", headers)
            except standardwebhooks.webhooks.WebhookVerificationError:
                pass
            else:
                print(f"case {i}: a tampered body verified", file=sys.stderr)
                return 1
        elif any(h.startswith("webhook-") for h in headers):
            print(f"case {i}: webhook-* headers on an older secret", file=sys.stderr)
            return 1
        print(f"case {i}: verified (standard={case['standard']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
