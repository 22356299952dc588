-- Top GPU kernels per sweep point: each point's latest ok nsys run of one sweep (sweep=,
-- default the latest sweep; timed requests only, the capture range), kernels grouped by
-- demangled name, ranked by total time.
-- The L2-flush fill between requests (FillFunctor<signed char>) is not workload time and is left out.
-- @param sweep  TEXT     the sweep: its id (sweep-20261124T195459.720Z), a run of it (id or name; a run outside any sweep names the runs outside any sweep), latest (the sweep of the latest run ingested from one; where no run is, the runs outside any sweep) or all (the latest run per point over every run of the store, sweeps mixed) (default: latest)
-- @param limit  INTEGER  kernels per point; 0 = all (default: 20)
-- @column preset          workload preset
-- @column bs              batch size, users per request
-- @column nc              candidates per user
-- @column run             name of the point's nsys run
-- @column rank            rank of the kernel within the point (1 = most time)
-- @column name            kernel name (demangled)
-- @column instances       launches in the captured requests
-- @column total_ns        summed duration, ns
-- @column per_request_us  total time per timed request, us
-- @column time_pct        share of the point's kernel time, % (rounded to 0.1)
-- @display preset, bs, nc, rank, instances, total_ns, per_request_us, time_pct, name
-- @requires kernels, requests
WITH points AS (
    SELECT run_id, name,
           json_extract_string(params, '$.preset') AS preset,
           json_extract(params, '$.bs')::INTEGER AS bs,
           json_extract(params, '$.nc')::INTEGER AS nc
    FROM runs
    WHERE coalesce(json_extract_string(meta, '$.status'), 'ok') = 'ok'
      AND json_extract_string(params, '$.tool') = 'nsys'
      AND run_id IN (SELECT DISTINCT run_id FROM kernels)
      AND in_sweep(params, $sweep)
    QUALIFY row_number() OVER (PARTITION BY preset, bs, nc ORDER BY run_id DESC) = 1
),
found AS (  -- one row, read first: no such run is an error, not an empty table
    SELECT CASE WHEN count(*) > 0 THEN true
                ELSE error('sweep-kernels: no run of the workload captured under nsys '
                           || CASE WHEN $sweep IS NULL THEN '' WHEN $sweep = '' THEN 'outside a sweep '
                                   ELSE 'in ' || $sweep || ' ' END
                           || '(the run folders of '
                           || '`tracekit sweep --tool nsys` or `tracekit capture --tool nsys`, status ok); '
                           || 'ingest them, or ask top-kernels of one nsys export') END AS ok
    FROM points
),
timed AS (
    SELECT run_id, count(*) AS n FROM requests WHERE phase = 'timed' GROUP BY run_id
),
per_kernel AS (
    SELECT p.run_id, p.preset, p.bs, p.nc, p.name AS run, k.name,
           count(*) AS instances, sum(k.dur_ns) AS total_ns
    FROM found, points p
    JOIN kernels k ON k.run_id = p.run_id
    WHERE found.ok AND k.name NOT LIKE '%FillFunctor<signed char>%'
    GROUP BY p.run_id, p.preset, p.bs, p.nc, p.name, k.name
),
ranked AS (
    SELECT *,
           row_number() OVER (PARTITION BY run_id ORDER BY total_ns DESC, name) AS rank,
           total_ns * 100.0 / sum(total_ns) OVER (PARTITION BY run_id) AS pct
    FROM per_kernel
)
SELECT r.preset, r.bs, r.nc, r.run, r.rank, r.name, r.instances, r.total_ns::BIGINT AS total_ns,
       r.total_ns / 1000.0 / nullif(t.n, 0) AS per_request_us,
       round1(r.pct) AS time_pct
FROM ranked r
LEFT JOIN timed t ON t.run_id = r.run_id
WHERE $limit = 0 OR r.rank <= $limit
ORDER BY r.preset, r.bs, r.nc, r.rank
