# Conveniences over plain cargo; the README's commands need nothing but cargo.

# Run the server on demo data (prints a token and example requests): the README's run command.
run:
    cargo run -p partner-server -- demo

# Run the server with your settings (PARTNER_TOKEN_PEPPER, PARTNER_INTERNAL_TOKEN, or a .env file).
serve:
    cargo run -p partner-server -- serve

# All tests (needs PostgreSQL on 127.0.0.1:5432, user postgres, trust auth).
test:
    cargo test --workspace --locked

# CI exactly as it runs: starts PostgreSQL when it is down.
ci:
    bash .ci/run

# Regenerate the committed OpenAPI documents (docs/openapi/partner.json, internal.json).
openapi:
    cargo run -q -p partner-server -- openapi --out docs/openapi

# The conformance run: OpenAPI validation and schemathesis against a live demo server.
conformance:
    bash .ci/conformance

fmt:
    cargo fmt --all

lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Leads listing benchmark (1,000,000 leads; wrk vs pgbench). Needs PostgreSQL; installs wrk.
bench-leads:
    bash bench/leads.sh

# Operator lead ingest against pgbench of its own transaction (issue 14).
bench-ingest:
    bash bench/ingest.sh

# Coupon issuance (10,000 codes) and CSV export benchmark.
bench-coupons:
    bash bench/coupons.sh

# Webhook delivery benchmark: nginx as the HTTPS receiver on loopback, 20,000 events (pre-filled
# and live), latency at 200 events/s, a hanging endpoint among 10, a fresh delivery behind a backlog.
bench-webhooks:
    bash bench/webhooks.sh

# Durability drill: SIGKILL the delivering process twice during 10,000 deliveries; 0 lost.
drill-kill9:
    bash bench/drill-kill9.sh

# Drill 1's long form (issue 24): a PostgreSQL of its own stopped 10 s under ingest, reads and
# deliveries; checks extensions §11 and that nothing is lost (docs/reliability.md).
drill-pg-restart:
    bash bench/drills/pg-restart.sh

# Rate-limiter overhead: in-process vs Redis on GET /api/v1/leads. Needs PostgreSQL, Redis, wrk.
bench-ratelimit:
    bash bench/ratelimit.sh

# One client floods the embedded view: a partner's leads p99 against idle (S-12). Needs wrk.
bench-public-flood:
    bash bench/public-flood.sh

# Realistic-volume database (issue 22): 2,000 partners, 5,000,000 leads, ~10,000,000 deliveries,
# deterministic, into pp_dataset (DATASET_SCALE=0.01 for a quick one). The benchmarks below run on it.
dataset:
    bash bench/dataset.sh

# Partner reads on the dataset against pgbench of their own SQL (leads, delivery log, coupons, feed).
bench-reads:
    BENCH_DATASET=${BENCH_DATASET:-pp_dataset} bash bench/reads.sh

# A partner with 1,000,000 coupons among 2,000 (the coupon part of the dataset, into pp_coupons),
# then its listing against pgbench and its whole CSV export.
bench-coupons-scale:
    bash bench/coupons-dataset.sh
    BENCH_DATASET=pp_coupons BENCH_CASES="coupons-json-first coupons-json-p1000 coupons-csv-first coupons-csv-p201 coupons-redeemed-p100" bash bench/reads.sh
    BENCH_DATASET=pp_coupons bash bench/coupons.sh

# Webhook delivery to 10 endpoints among the dataset's 20,000.
bench-webhooks-dataset:
    BENCH_DATASET=${BENCH_DATASET:-pp_dataset} bash bench/webhooks-dataset.sh

# Mixed load at about half capacity on the dataset, reported per minute (SOAK_MINUTES, default 30).
soak:
    BENCH_DATASET=${BENCH_DATASET:-pp_dataset} bash bench/soak.sh

# The outbox's churn by pgbench on a copy of a dataset: each webhook_deliveries index's size and
# pgstatindex() as the rows turn over (docs/capacity.md, "Index sizes under retention").
bench-index-churn:
    CHURN_FROM=${CHURN_FROM:-pp_dataset} CHURN_DB=${CHURN_DB:-pp_churn} bash bench/index-churn.sh

# The soak's mix with two API and two worker processes for 5 minutes.
bench-multiprocess:
    BENCH_DATASET=${BENCH_DATASET:-pp_dataset} bash bench/multiprocess.sh

# Statements, WAL bytes and CPU per ingested lead, delivery and page (docs/capacity.md).
bench-unit-costs:
    BENCH_DATASET=${BENCH_DATASET:-pp_dataset} bash bench/unit-costs.sh

# The claim statement's cached generic plan by table size, without statistics, on main and here.
bench-claim-plan:
    cargo build --release --locked -p partner-server
    bash bench/claim-plan.sh ec0ab56 HEAD

# Every benchmark.
bench: bench-leads bench-coupons bench-webhooks

# Regenerate crates/partner-postgres/src/schema.rs from the migrations (needs diesel_cli:
# `cargo install diesel_cli --no-default-features --features postgres`).
schema:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/pp_schema_gen diesel database reset --migration-dir migrations
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/pp_schema_gen diesel print-schema > crates/partner-postgres/src/schema.rs
    psql -q postgres://postgres@127.0.0.1:5432/postgres -c 'DROP DATABASE IF EXISTS pp_schema_gen WITH (FORCE)'
