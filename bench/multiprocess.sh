#!/usr/bin/env bash
# Several processes on one database (issue 22, item 5): bench/soak.sh's mix for SOAK_MINUTES
# (default 5) with two `--role api` processes (the load groups spread over them) and two
# `--role worker` processes claiming from the same tables. soak.sh's closing report answers the
# questions: every ingested lead's 10 deliveries delivered (status counts; pending after the
# wait), duplicate receipts (the same delivery id received twice with a 200 by a healthy or slow
# endpoint), and fairness (per endpoint: received, lag p50/p99).
# Usage: BENCH_DATASET=pp_dataset bash bench/multiprocess.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SOAK_API=${SOAK_API:-2} SOAK_WORKERS=${SOAK_WORKERS:-2} SOAK_MINUTES=${SOAK_MINUTES:-5} exec bash bench/soak.sh
