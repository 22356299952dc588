-- Names of the new run that the base run holds under another id: in a Parquet dataset
-- each run numbers its names itself (tracekit.dataset), in the store one name has one
-- id (then this is empty). The kernel and API scopes key by name id: these rows make a
-- new run's id the base run's id of the same text. The table is _kernels or _api_calls.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side     1 = new run
-- @column name_id  the new run's name id (_strings)
-- @column key      the base run's id of the same name
WITH b AS (
    SELECT s.string_id, s.value
    FROM (SELECT DISTINCT name_id FROM {table} WHERE run_id = $base) d
    JOIN _strings s ON s.string_id = d.name_id
), n AS (
    SELECT s.string_id, s.value
    FROM (SELECT DISTINCT name_id FROM {table} WHERE run_id = $new) d
    JOIN _strings s ON s.string_id = d.name_id
)
SELECT 1::INTEGER AS side, n.string_id AS name_id, min(b.string_id) AS key
FROM n JOIN b ON b.value = n.value
WHERE b.string_id <> n.string_id
GROUP BY n.string_id
ORDER BY n.string_id
