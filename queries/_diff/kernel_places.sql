-- The place of each kernel that has no namesake in the other run (listed in the
-- registered table _diff_unmatched(side, name_id)): the NVTX path of the innermost
-- push/pop range around its launches and its position among that range instance's
-- kernel launches (launch-call order), the most common such place over the first 16
-- range instances it runs in (a kernel of a loop has the same place in every iteration;
-- reading 16 keeps this a small window whatever the run's size). Kernels launched
-- outside every range have no place (path and position NULL).
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side      0 = base run, 1 = new run
-- @column name_id   kernel name id (_strings)
-- @column name      kernel name (demangled)
-- @column family    kernel_family(name)
-- @column path      NVTX path of its most common place
-- @column position  0-based position among the kernel launches of that range instance
-- @column launches  its launches in the run
WITH k AS (
    SELECT s.side, s.run_id, k.name_id, k.nvtx_range_id, k.api_start_ns, k.start_ns
    FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
    JOIN _kernels k ON k.run_id = s.run_id
    WHERE k.run_id IN ($base, $new)
), u AS (  -- launches of the unmatched kernels
    SELECT k.* FROM k SEMI JOIN _diff_unmatched d ON d.side = k.side AND d.name_id = k.name_id
), r AS (  -- the first 16 range instances each unmatched kernel runs in
    SELECT DISTINCT side, nvtx_range_id FROM (
        SELECT DISTINCT side, name_id, nvtx_range_id FROM u WHERE nvtx_range_id IS NOT NULL
        QUALIFY row_number() OVER (PARTITION BY side, name_id ORDER BY nvtx_range_id) <= 16)
), placed AS (
    SELECT side, run_id, name_id, nvtx_range_id,
           row_number() OVER (PARTITION BY side, nvtx_range_id ORDER BY api_start_ns, start_ns) - 1 AS position
    FROM k SEMI JOIN r USING (side, nvtx_range_id)
), places AS (
    SELECT p.side, p.name_id, n.path, p.position, count(*) AS launches
    FROM placed p
    SEMI JOIN _diff_unmatched d ON d.side = p.side AND d.name_id = p.name_id
    JOIN nvtx_ranges n ON n.run_id = p.run_id AND n.range_id = p.nvtx_range_id
    GROUP BY ALL
), best AS (  -- the most common place (ties: the first path and position)
    SELECT side, name_id, path, position FROM places
    QUALIFY row_number() OVER (PARTITION BY side, name_id ORDER BY launches DESC, path, position) = 1
), n AS (
    SELECT side, name_id, count(*) AS launches FROM u GROUP BY ALL
)
SELECT n.side, n.name_id, s.value AS name, kernel_family(s.value) AS family, b.path, b.position, n.launches
FROM n
JOIN _strings s ON s.string_id = n.name_id
LEFT JOIN best b ON b.side = n.side AND b.name_id = n.name_id
ORDER BY n.side, n.name_id
