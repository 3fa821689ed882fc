-- attack15: judges an a15_sqlrace.sh database after its drain.
\pset footer off
SELECT 'deliveries left ' || count(*) || ' (pending ' || count(*) FILTER (WHERE status = 'pending')
  || ', delivered ' || count(*) FILTER (WHERE status = 'delivered') || ', failed ' || count(*) FILTER (WHERE status = 'failed')
  || '), deleted by retention ' || (SELECT count(*) FROM a15_deleted)
  || ', claims ' || (SELECT count(*) FROM a15_claims) || ', outcomes ' || (SELECT count(*) FROM a15_out)
  || ', resends ' || (SELECT count(*) FROM a15_resent) || ', disable-failed ' || (SELECT count(*) FROM a15_churn WHERE kind = 'failed')
  || ', recovered ' || (SELECT count(*) FROM a15_churn WHERE kind = 'recovered') AS summary FROM webhook_deliveries;
-- Two live leases: a claim of a delivery made (its $1) before the lease of the delivery's previous
-- claim ran out, with no outcome of that lease, no resend and no disable/recover of the delivery
-- between the two claims.
WITH c AS (
  SELECT id, lease, now, lu, at, lag(lease) OVER w AS plea, lag(lu) OVER w AS plu, lag(at) OVER w AS pat
  FROM a15_claims WINDOW w AS (PARTITION BY id ORDER BY at)),
p AS (
  SELECT c.*, EXISTS (SELECT 1 FROM a15_out o WHERE o.lease = c.plea AND o.at < c.at) AS ended,
    EXISTS (SELECT 1 FROM a15_resent r WHERE r.id = c.id AND r.at BETWEEN c.pat AND c.at) AS resent,
    EXISTS (SELECT 1 FROM a15_churn h WHERE h.id = c.id AND h.at BETWEEN c.pat AND c.at) AS churned
  FROM c WHERE plea IS NOT NULL)
SELECT 'reclaims ' || count(*) || ', under a live lease ' || count(*) FILTER (WHERE now < plu)
  || ' (after its outcome ' || count(*) FILTER (WHERE now < plu AND ended)
  || ', resent ' || count(*) FILTER (WHERE now < plu AND NOT ended AND resent)
  || ', disabled/recovered ' || count(*) FILTER (WHERE now < plu AND NOT ended AND NOT resent AND churned)
  || ', UNEXCUSED ' || count(*) FILTER (WHERE now < plu AND NOT ended AND NOT resent AND NOT churned) || ')'
  || ', same lease token twice ' || (SELECT count(*) - count(DISTINCT lease) FROM a15_claims) AS leases FROM p;
-- Lost: never claimed and not ended by a disable; and the lateness of first claims (claim - max(due,
-- write time)) of the rows due at once (created_at, = due, not after the uuid_v7 write time:
-- a14_sql/tmpl.sql's "ahead" rows draw random() twice, so their created_at is not their due time),
-- never disabled, recovered nor resent.
WITH w AS (
  SELECT id, created_at FROM webhook_deliveries UNION ALL SELECT id, created_at FROM a15_deleted),
f AS (
  SELECT w.id, (SELECT min(at) FROM a15_claims c WHERE c.id = w.id) AS first, w.created_at,
    to_timestamp(('x' || substr(replace(w.id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0) AS wr
  FROM w),
g AS (
  SELECT f.*, first - greatest(created_at, wr) AS late FROM f
  WHERE created_at <= wr + interval '20 ms' AND first IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM a15_churn h WHERE h.id = f.id) AND NOT EXISTS (SELECT 1 FROM a15_resent r WHERE r.id = f.id))
SELECT 'written ' || (SELECT count(*) FROM f) || ', never claimed ' || (SELECT count(*) FROM f WHERE first IS NULL)
  || ' (of them ended by a disable ' || (SELECT count(*) FROM f WHERE first IS NULL AND EXISTS (SELECT 1 FROM a15_churn h WHERE h.id = f.id)) || ')'
  || '; first claim after due (rows due at once, untouched: ' || count(*) || '): p50 '
  || round(extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY late))::numeric * 1000, 1)
  || ' ms, p99 ' || round(extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY late))::numeric * 1000, 1)
  || ' ms, max ' || round(extract(epoch FROM max(late))::numeric * 1000, 1) || ' ms, > 0.5 s '
  || count(*) FILTER (WHERE late > interval '0.5 s') AS lost FROM g;
-- Skips (INSTR=1 only): rows a claim locked (picked) that the same statement did not claim.
SELECT 'picked ' || count(*) || ', picked but not claimed by that statement ' || count(*) FILTER (WHERE NOT EXISTS (
    SELECT 1 FROM a15_claims c WHERE c.xid = p.xid AND c.id = p.id))
  || ' (of them resent between ' || count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM a15_claims c WHERE c.xid = p.xid AND c.id = p.id)
      AND EXISTS (SELECT 1 FROM a15_resent r WHERE r.id = p.id AND r.at BETWEEN p.at - interval '1 s' AND p.at)) || ')' AS skips
FROM a15_picked p WHERE EXISTS (SELECT 1 FROM a15_picked LIMIT 1);
WITH s AS (
  SELECT p.id, p.at, (SELECT min(c.at) FROM a15_claims c WHERE c.id = p.id AND c.at > p.at) AS next
  FROM a15_picked p WHERE NOT EXISTS (SELECT 1 FROM a15_claims c WHERE c.xid = p.xid AND c.id = p.id))
SELECT 'skipped rows claimed later ' || count(next) || ' of ' || count(*) || ', after p50 '
  || coalesce(round(extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY next - at))::numeric * 1000, 1), 0)
  || ' ms, max ' || coalesce(round(extract(epoch FROM max(next - at))::numeric * 1000, 1), 0) || ' ms' AS skipped FROM s
WHERE EXISTS (SELECT 1 FROM a15_picked LIMIT 1);
SELECT 'markers ' || count(*) || ', with nothing pending ' || count(*) FILTER (WHERE NOT EXISTS (
  SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending')) AS markers
FROM webhook_endpoint_queue q;
