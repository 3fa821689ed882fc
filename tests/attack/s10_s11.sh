#!/usr/bin/env bash
# S-10/S-11: parser rejections answered with the error body, counted, and no ERROR line.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
RUST_LOG=${RUST_LOG:-info} start_server s10 18440 || exit 1
trap stop_server EXIT
PORT=$PORT TOKEN=$TOKEN python3 "$ATTACK_DIR/s10_s11.py" "$@"
echo "--- 500 malformed requests from one client"
python3 - "$PORT" <<'PY'
import socket, sys
port = int(sys.argv[1])
for i in range(500):
    s = socket.create_connection(("127.0.0.1", port)); s.sendall(b"BAD REQUEST LINE\r\n\r\n"); s.recv(4096); s.close()
PY
echo "ERROR lines in the log: $(grep -c '"level":"ERROR"' "$SERVER_LOG")"
echo "WARN lines in the log:  $(grep -c '"level":"WARN"' "$SERVER_LOG")"
grep '"level":"\(ERROR\|WARN\)"' "$SERVER_LOG" | head -5
curl -s "$METRICS" | grep http_rejected_requests_total
curl -s "$BASE/healthz" -o /dev/null -w 'healthz after: %{http_code}\n'
