// Runs the Node.js snippets of docs/webhooks.md against real deliveries.
//
// Every ```js block of the document whose first line is `// tested: <name>` defines
// `verifyDelivery(rawBody: Buffer, headers: object, secret: string)`. Usage:
// `node snippets.js <directory whose node_modules holds stripe and standardwebhooks>`, with JSON on
// stdin: {"document": <path of docs/webhooks.md>, "expect": [<names>], "cases": [{"body": <base64
// of the raw body>, "headers": {lower-case name: value}, "secret": <secret>, "standard": <bool>}]}.
// Each snippet (the `standardwebhooks` ones only on "standard" cases) must return the body's JSON
// and must throw on a tampered body. Exits non-zero on the first failure. Run by
// tests/api/standard_webhooks.rs; .ci/run installs the packages into target/node-verify.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");
const assert = require("assert");

const requireThere = createRequire(path.join(path.resolve(process.argv[2]), "package.json"));
const given = JSON.parse(fs.readFileSync(0, "utf8"));
const text = fs.readFileSync(given.document, "utf8");
const found = {};
for (const m of text.matchAll(/^```js\n([\s\S]*?)^```/gm)) {
  const first = m[1].split("\n", 1)[0];
  if (first.startsWith("// tested: ")) found[first.slice("// tested: ".length).trim()] = m[1];
}
assert.deepStrictEqual(Object.keys(found).sort(), [...given.expect].sort(), "tested snippets");
for (const [name, source] of Object.entries(found)) {
  const module_ = { exports: {} };
  new Function("require", "module", source + "\nmodule.exports = verifyDelivery;")(requireThere, module_);
  const verify = module_.exports;
  given.cases.forEach((c, i) => {
    if (name.includes("standardwebhooks") && !c.standard) return;
    const body = Buffer.from(c.body, "base64");
    const event = verify(body, { ...c.headers }, c.secret);
    assert.deepStrictEqual(event, JSON.parse(body.toString("utf8")), `${name}, case ${i}`);
    assert.throws(() => verify(Buffer.concat([body, Buffer.from(" ")]), { ...c.headers }, c.secret),
      `${name}, case ${i}: a tampered body verified`);
    console.log(`${name}, case ${i}: verified`);
  });
}
