-- The SM clock the GPU ran work at, where both runs sampled the GPU's counters (nsys
-- --gpu-metrics-devices): the mean of the 'GPC Clock Frequency' samples taken inside the
-- launches of that work, per side and: kernel key (the keys in _diff_clock_keys, keyed as
-- samples_kernel.sql keys them, through _diff_keymap), NVTX path (the launches of kernels
-- whose innermost push/pop range's path is it or below it; the paths in _diff_clock_paths)
-- and device (every kernel). A sample counts once for each launch it falls in (a mean over
-- the work's time: a sample inside a long kernel and a short one beside it counts for both;
-- none is lost to the other). Each launch's samples are counted and summed from running
-- sums of the samples in time order, its first and last sample found by ASOF joins: no
-- product of launches and samples. A launch shorter than the sampling period (100 us at
-- nsys's default 10 kHz) may hold no sample.
-- @param base    INTEGER  base run id
-- @param new     INTEGER  new run id
-- @param device  BOOLEAN  the devices' clocks too (every kernel's launches read; else only the
--                         launches of the keys and paths asked for)
-- @column side       0 = base run, 1 = new run
-- @column what       kernel, nvtx or device
-- @column key        the kernel's key id, the NVTX path or the device id, as text
-- @column clock_mhz  mean SM clock over the samples, MHz
-- @column samples    samples inside the launches (a sample once per launch it falls in)
WITH clock AS (
    SELECT DISTINCT run_id, device_id, metric_id FROM gpu_metric_names
    WHERE run_id IN ($base, $new) AND gpu_metric_column(metric) = 'clock'
), samples AS (  -- each device's clock samples in time order, with running counts and sums
    SELECT g.run_id, g.device_id, g.timestamp_ns AS ts, g.value,
           row_number() OVER w AS i, sum(g.value) OVER w AS cum
    FROM gpu_metrics g JOIN clock c USING (run_id, device_id, metric_id)
    WHERE g.run_id IN ($base, $new) AND g.value IS NOT NULL
    WINDOW w AS (PARTITION BY g.run_id, g.device_id ORDER BY g.timestamp_ns ROWS UNBOUNDED PRECEDING)
), launches AS (
    SELECT s.side, k.run_id, coalesce(m.key, k.name_id) AS key, k.device_id, k.start_ns, k.end_ns,
           r.path
    FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
    JOIN _kernels k ON k.run_id = s.run_id
    LEFT JOIN _diff_keymap m ON m.side = s.side AND m.name_id = k.name_id
    LEFT JOIN nvtx_ranges r ON r.run_id = k.run_id AND r.range_id = k.nvtx_range_id
    WHERE k.run_id IN ($base, $new)
), asked AS (  -- the launches whose clocks are asked for
    SELECT * FROM launches WHERE $device
    UNION ALL
    SELECT * FROM launches l
    WHERE NOT $device AND (l.key IN (SELECT key FROM _diff_clock_keys)
                           OR EXISTS (SELECT 1 FROM _diff_clock_paths p
                                      WHERE l.path = p.path OR starts_with(l.path, p.path || '/')))
), first_ AS (  -- the first sample at or after the launch's start
    SELECT l.*, g.i AS i_lo, g.cum - g.value AS cum_lo
    FROM asked l ASOF JOIN samples g ON g.run_id = l.run_id AND g.device_id = l.device_id AND l.start_ns <= g.ts
), per AS MATERIALIZED (  -- and the last at or before its end: the launch's samples, counted and summed
    SELECT f.side, f.key, f.device_id, f.path, g.i - f.i_lo + 1 AS n, g.cum - f.cum_lo AS total
    FROM first_ f ASOF JOIN samples g ON g.run_id = f.run_id AND g.device_id = f.device_id AND f.end_ns >= g.ts
    WHERE g.i >= f.i_lo
)
SELECT side, 'kernel' AS what, key::VARCHAR AS key, sum(total) / sum(n) AS clock_mhz, sum(n) AS samples
FROM per WHERE key IN (SELECT key FROM _diff_clock_keys)
GROUP BY side, key
UNION ALL
SELECT side, 'nvtx', p.path, sum(total) / sum(n), sum(n)
FROM per JOIN _diff_clock_paths p ON per.path = p.path OR starts_with(per.path, p.path || '/')
GROUP BY side, p.path
UNION ALL
SELECT side, 'device', device_id::VARCHAR, sum(total) / sum(n), sum(n)
FROM per WHERE $device
GROUP BY side, device_id
