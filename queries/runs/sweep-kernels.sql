-- Top GPU kernels per point of a sweep of any grid: the HSTU workload's bs x nc or a program's
-- (`tracekit sweep --grid NAME=V1,V2 -- CMD`); each point's latest captured ok nsys run of one
-- sweep (sweep=, default the latest sweep; the capture range: the HSTU workload's timed requests),
-- kernels grouped by demangled name, ranked by total time.
-- A point is its run's values of the sweep's grid (macro grid_point, as sweep-points keys it).
-- The HSTU workload's L2-flush fill between requests (macro l2_flush_fill) is not workload time
-- and is left out; a program's kernels are all kept.
-- @param sweep  TEXT     the sweep: its id (sweep-20261124T195459.720Z), a run of it (id or name; a run outside any sweep names the runs outside any sweep), latest (the sweep of the latest run ingested from one; where no run is, the runs outside any sweep) or all (per point, the run captured last over every run of the store, sweeps mixed: macro run_captured_us) (default: latest)
-- @param limit  INTEGER  kernels per point; 0 = all (default: 20)
-- @column sweep_point     the point's place in its sweep's grid (0 = the first; the first grid parameter's values change slowest); NULL for a run outside any sweep
-- @column point           the point's grid values, 'bs=8,nc=1024' or 'm=1024,dtype=fp16' (macro grid_point)
-- @column run             name of the point's nsys run
-- @column rank            rank of the kernel within the point (1 = most time)
-- @column name            kernel name (demangled)
-- @column instances       launches in the capture (the HSTU workload's: in its timed requests)
-- @column total_ns        summed duration, ns
-- @column per_request_us  total time per timed request, us; NULL for a program's run (no requests)
-- @column time_pct        share of the point's kernel time, % (rounded to 0.1)
-- @display point, rank, instances, total_ns, per_request_us, time_pct, name
-- @requires kernels
WITH points AS (
    SELECT run_id, name AS run,
           json_extract(params, '$.sweep_point')::INTEGER AS sweep_point,
           grid_point(params) AS point,
           coalesce(json_extract_string(params, '$.preset'), '') AS preset, params
    FROM runs
    WHERE coalesce(json_extract_string(meta, '$.status'), 'ok') = 'ok'
      AND json_extract_string(params, '$.tool') = 'nsys'
      AND run_id IN (SELECT DISTINCT run_id FROM kernels)
      AND in_sweep(params, $sweep)
      AND grid_point(params) IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY preset, point
                               ORDER BY run_captured_us(meta) DESC NULLS LAST, run_id DESC) = 1
),
found AS (  -- one row, read first: no such run is an error, not an empty table
    SELECT CASE WHEN count(*) > 0 THEN true
                ELSE error(no_sweep_point('sweep-kernels', $sweep, 'nsys', 'top-kernels of one nsys export', 'recorded')) END AS ok
    FROM points
),
timed AS (
    SELECT run_id, count(*) AS n FROM requests WHERE phase = 'timed' GROUP BY run_id
),
per_kernel AS (
    SELECT p.run_id, p.sweep_point, p.point, p.preset, p.run, k.name,
           count(*) AS instances, sum(k.dur_ns) AS total_ns
    FROM found, points p
    JOIN kernels k ON k.run_id = p.run_id
    WHERE found.ok AND NOT l2_flush_fill(p.params, k.name)
    GROUP BY p.run_id, p.sweep_point, p.point, p.preset, p.run, k.name
),
ranked AS (
    SELECT *,
           row_number() OVER (PARTITION BY run_id ORDER BY total_ns DESC, name) AS rank,
           total_ns * 100.0 / sum(total_ns) OVER (PARTITION BY run_id) AS pct
    FROM per_kernel
)
SELECT r.sweep_point, r.point, r.run, r.rank, r.name, r.instances, r.total_ns::BIGINT AS total_ns,
       r.total_ns / 1000.0 / nullif(t.n, 0) AS per_request_us,
       round1(r.pct) AS time_pct
FROM ranked r
LEFT JOIN timed t ON t.run_id = r.run_id
WHERE $limit = 0 OR r.rank <= $limit
ORDER BY r.sweep_point NULLS LAST, r.point, r.preset, r.rank
