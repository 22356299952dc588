-- The kernels ncu profiled at each point of a sweep captured under ncu (a program's grid,
-- `tracekit sweep --tool ncu --grid NAME=V1,V2 -- CMD`, or the HSTU workload's bs x nc): per point
-- (its latest captured ok ncu run; sweep=, default the latest sweep) and kernel name, the launches'
-- duration, throughputs and occupancy, as ncu-summary gives them for the point's run, and the
-- duration against its family's at the sweep's first point that profiled one (a family: the
-- kernels one name stands for across tile shapes and template arguments, macro kernel_family, as
-- top-kernels -p group=family groups them; a sweep over sizes and dtypes runs other instances of
-- one kernel at each point): how a kernel's time, its place under the roofline and its
-- occupancy move across the grid.
-- @param sweep   TEXT  the sweep: its id (sweep-20261124T195459.720Z), a run of it (id or name; a run outside any sweep names the runs outside any sweep), latest (the sweep of the latest run ingested from one; where no run is, the runs outside any sweep) or all (per point, the run captured last over every run of the store, sweeps mixed: macro run_captured_us) (default: latest)
-- @param kernel  TEXT  only launches whose kernel name contains this text, case-insensitive (default: null)
-- @column sweep_point             the point's place in its sweep's grid (0 = the first); NULL for a run outside any sweep
-- @column point                   the point's grid values, 'm=1024,dtype=fp16' (macro grid_point)
-- @column run                     name of the point's ncu run
-- @column run_id                  its id
-- @column name                    kernel name (demangled)
-- @column family                  its family (macro kernel_family)
-- @column launches                launches of the kernel ncu profiled at the point
-- @column total_ns                summed duration (gpu__time_duration.sum), ns
-- @column duration_ns             median duration, ns
-- @column vs_first                duration_ns over its family's at the first point that profiled the family (there, of the family's kernel with the most time; rounded to 0.001)
-- @column sm_throughput_pct       median Compute (SM) Throughput (sm__throughput), % of peak
-- @column dram_throughput_pct     median DRAM Throughput (gpu__dram_throughput), % of peak
-- @column achieved_occupancy_pct  median achieved occupancy, % of max warps per SM; NULL for a range or a graph
-- @column registers_per_thread    registers per thread (most launches'); NULL for a range or a graph
-- @column grid_size               blocks in the grid (most launches'); NULL for a range or a graph
-- @display sweep_point, point, launches, duration_ns, vs_first, sm_throughput_pct, dram_throughput_pct, achieved_occupancy_pct, registers_per_thread, family
-- @requires ncu_kernels
WITH points AS (
    SELECT run_id, name AS run,
           json_extract(params, '$.sweep_point')::INTEGER AS sweep_point,
           grid_point(params) AS point,
           coalesce(json_extract_string(params, '$.preset'), '') AS preset
    FROM runs
    WHERE coalesce(json_extract_string(meta, '$.status'), 'ok') = 'ok'
      AND run_id IN (SELECT DISTINCT run_id FROM ncu_kernels)
      AND in_sweep(params, $sweep)
      AND grid_point(params) IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY preset, point
                               ORDER BY run_captured_us(meta) DESC NULLS LAST, run_id DESC) = 1
),
found AS (  -- one row, read first: no such run is an error, not an empty table
    SELECT CASE WHEN count(*) > 0 THEN true
                ELSE error(no_sweep_point('sweep-ncu', $sweep, 'ncu', 'ncu-summary of one ncu report', 'profiled')) END AS ok
    FROM points
),
per_kernel AS (
    SELECT p.run_id, p.sweep_point, p.point, p.run, p.preset, m.name, kernel_family(m.name) AS family,
           count(*) AS launches, sum(m.duration_ns) AS total_ns, median(m.duration_ns) AS duration_ns,
           median(m.sm_throughput_pct) AS sm_throughput_pct, median(m.dram_throughput_pct) AS dram_throughput_pct,
           median(m.achieved_occupancy_pct) AS achieved_occupancy_pct,
           mode(m.registers_per_thread ORDER BY m.kernel_id)::BIGINT AS registers_per_thread,
           mode(m.grid_size ORDER BY m.kernel_id)::BIGINT AS grid_size
    FROM found, points p
    JOIN ncu_kernel_metrics m ON m.run_id = p.run_id
    WHERE found.ok AND ($kernel IS NULL OR contains(lower(m.name), lower($kernel)))
    GROUP BY p.run_id, p.sweep_point, p.point, p.run, p.preset, m.name
),
firsts AS (  -- each family's duration at the first point that profiled it (its kernel with the most time there)
    SELECT family, arg_min(duration_ns, (coalesce(sweep_point, 2147483647), point, preset, -total_ns, name)) AS first_ns
    FROM per_kernel GROUP BY family
),
asked AS (  -- a kernel no point profiled is most likely a typo: an error, not an empty table
    SELECT CASE WHEN $kernel IS NULL OR count(*) > 0 THEN true
                ELSE error('sweep-ncu: no kernel ncu profiled at the sweep''s points has a name containing '''
                           || $kernel || ''' (`tracekit query ncu-kernels --run RUN` lists a point''s)') END AS ok
    FROM per_kernel
)
SELECT k.sweep_point, k.point, k.run, k.run_id, k.name, k.family, k.launches, k.total_ns::BIGINT AS total_ns, k.duration_ns,
       round(k.duration_ns / nullif(f.first_ns, 0), 3) AS vs_first,
       k.sm_throughput_pct, k.dram_throughput_pct, k.achieved_occupancy_pct, k.registers_per_thread, k.grid_size
FROM per_kernel k JOIN firsts f USING (family), asked
WHERE asked.ok
ORDER BY k.sweep_point NULLS LAST, k.point, k.preset, k.duration_ns * k.launches DESC, k.name
