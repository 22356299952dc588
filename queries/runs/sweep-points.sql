-- GPU kernel time per point of a sweep of any grid: a program's (`tracekit sweep --grid NAME=V1,V2
-- -- CMD`) or the HSTU workload's bs x nc; each point's latest captured ok nsys run (sweep=,
-- default the latest sweep), every kernel its capture recorded but the HSTU workload's L2-flush fill between
-- requests (macro l2_flush_fill: not workload time, as sweep-kernels leaves it out) (name=: only
-- those whose demangled name contains the text), against the sweep's first point.
-- A point is its run's values of the sweep's grid (macro grid_point: params.sweep_grid names the grid;
-- a run without one, such as an HSTU capture, its bs and nc; a run with neither is no point).
-- @param sweep  TEXT  the sweep: its id (sweep-20261124T195459.720Z), a run of it (id or name; a run outside any sweep names the runs outside any sweep), latest (the sweep of the latest run ingested from one; where no run is, the runs outside any sweep) or all (per point, the run captured last over every run of the store, sweeps mixed: macro run_captured_us) (default: latest)
-- @param name   TEXT  only the kernels whose demangled name contains this text, case-insensitive (default: null)
-- @column sweep_point     the point's place in its sweep's grid (0 = the first; the first grid parameter's values change slowest); NULL for a run outside any sweep
-- @column point           the point's grid values, 'm=1024,dtype=fp16' (as diff's sweep scope keys a point; a value with a comma, =, :, a space or a quote in it as a JSON string, shape="1024,1024")
-- @column run             name of the point's nsys run
-- @column kernels         distinct kernels (by demangled name); 0 where none of the point's matches name=
-- @column launches        kernel launches
-- @column kernel_total_ns summed kernel duration, ns
-- @column kernel_med_ns   median launch duration, ns (rounded to 0.1); NULL where no kernel matches
-- @column vs_first        kernel_total_ns over the first point's (rounded to 0.001; NULL where the first point's is 0)
-- @column top_kernel      the kernel with the most time (demangled; the first by name of equals); NULL where none
-- @column top_kernel_pct  its share of the point's kernel_total_ns, % (rounded to 0.1)
-- @display sweep_point, point, launches, kernel_total_ns, kernel_med_ns, vs_first, top_kernel_pct, top_kernel
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
                ELSE error(no_sweep_point('sweep-points', $sweep, 'nsys', 'top-kernels of one nsys export', 'recorded')) END AS ok
    FROM points
),
per_kernel AS (
    SELECT p.run_id, k.name, count(*) AS launches, sum(k.dur_ns) AS total_ns
    FROM found, points p
    JOIN kernels k ON k.run_id = p.run_id
    WHERE found.ok AND NOT l2_flush_fill(p.params, k.name) AND ($name IS NULL OR contains(lower(k.name), lower($name)))
    GROUP BY p.run_id, k.name
),
named AS (  -- a name no point's kernel has is most likely a typo: an error, not a table of zeros
    SELECT CASE WHEN $name IS NULL OR count(*) > 0 THEN true
                ELSE error('sweep-points: no kernel of the sweep''s points has a name containing '''
                           || $name || ''' (`tracekit query top-kernels --run RUN` lists a point''s kernels)') END AS ok
    FROM per_kernel
),
per_point AS (
    SELECT p.run_id, p.sweep_point, p.point, p.run, p.preset,
           (SELECT count(*) FROM per_kernel c WHERE c.run_id = p.run_id) AS kernels,
           coalesce((SELECT sum(launches) FROM per_kernel c WHERE c.run_id = p.run_id), 0)::BIGINT AS launches,
           coalesce((SELECT sum(total_ns) FROM per_kernel c WHERE c.run_id = p.run_id), 0)::BIGINT AS kernel_total_ns,
           (SELECT round1(median(k.dur_ns)) FROM kernels k
            WHERE k.run_id = p.run_id AND NOT l2_flush_fill(p.params, k.name)
              AND ($name IS NULL OR contains(lower(k.name), lower($name)))) AS kernel_med_ns,
           (SELECT arg_max(c.name, (c.total_ns, -rank_of_name)) FROM (
                SELECT name, total_ns, row_number() OVER (ORDER BY name) AS rank_of_name
                FROM per_kernel WHERE run_id = p.run_id) c) AS top_kernel,
           (SELECT max(total_ns) FROM per_kernel c WHERE c.run_id = p.run_id) AS top_ns
    FROM found, named, points p
    WHERE found.ok AND named.ok
)
SELECT sweep_point, point, run, kernels, launches, kernel_total_ns, kernel_med_ns,
       round(kernel_total_ns / nullif(first_value(kernel_total_ns) OVER (
           ORDER BY sweep_point NULLS LAST, point, preset
           ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), 0), 3) AS vs_first,
       top_kernel,
       round1(top_ns * 100.0 / nullif(kernel_total_ns, 0)) AS top_kernel_pct
FROM per_point
ORDER BY sweep_point NULLS LAST, point, preset
