-- The SM clock the GPU ran work at, where both runs sampled the GPU's counters (nsys
-- --gpu-metrics-devices): the mean of the 'GPC Clock Frequency' samples taken while that
-- work ran, per side and: kernel key (its launches; the keys in _diff_clock_keys, keyed as
-- samples_kernel.sql keys them, through _diff_keymap), NVTX path (the launches of kernels
-- whose innermost push/pop range's path is it or below it; the paths in _diff_clock_paths)
-- and device (every kernel's launches). Each one's launches are merged into disjoint spans
-- first (a sample inside two overlapping launches counts once; one inside a short launch on
-- another stream still counts in the long one), then the samples inside each span are
-- counted and summed from running sums of the samples in time order, the span's first and
-- last sample found by ASOF joins: no product of spans and samples. A launch shorter than
-- the sampling period (100 us at nsys's default 10 kHz) may hold no sample.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side       0 = base run, 1 = new run
-- @column what       kernel, nvtx or device
-- @column key        the kernel's key id, the NVTX path or the device id, as text
-- @column clock_mhz  mean SM clock over the samples, MHz
-- @column samples    samples inside the spans
WITH clock AS (
    SELECT DISTINCT run_id, device_id, metric_id FROM gpu_metric_names
    WHERE run_id IN ($base, $new) AND metric = 'GPC Clock Frequency'
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
), spans AS (
    SELECT side, run_id, 'kernel' AS what, key::VARCHAR AS key, device_id, start_ns, end_ns
    FROM launches WHERE key IN (SELECT key FROM _diff_clock_keys)
    UNION ALL
    SELECT l.side, l.run_id, 'nvtx', p.path, l.device_id, l.start_ns, l.end_ns
    FROM launches l JOIN _diff_clock_paths p ON l.path = p.path OR starts_with(l.path, p.path || '/')
    UNION ALL
    SELECT side, run_id, 'device', device_id::VARCHAR, device_id, start_ns, end_ns FROM launches
), marked AS (  -- a span starts where a launch starts after every earlier one of its group ended
    SELECT *, CASE WHEN start_ns <= max(end_ns) OVER (PARTITION BY side, what, key, device_id ORDER BY start_ns, end_ns
                                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                   THEN 0 ELSE 1 END AS new
    FROM spans
), merged AS (
    SELECT side, run_id, what, key, device_id, min(start_ns) AS s, max(end_ns) AS e
    FROM (SELECT *, sum(new) OVER (PARTITION BY side, what, key, device_id ORDER BY start_ns, end_ns
                                   ROWS UNBOUNDED PRECEDING) AS span FROM marked)
    GROUP BY side, run_id, what, key, device_id, span
), first_ AS (  -- the first sample at or after the span's start
    SELECT m.*, g.i AS i_lo, g.cum - g.value AS cum_lo
    FROM merged m ASOF JOIN samples g ON g.run_id = m.run_id AND g.device_id = m.device_id AND m.s <= g.ts
), last_ AS (  -- and the last at or before its end
    SELECT f.*, g.i AS i_hi, g.cum AS cum_hi
    FROM first_ f ASOF JOIN samples g ON g.run_id = f.run_id AND g.device_id = f.device_id AND f.e >= g.ts
)
SELECT side, what, key, sum(cum_hi - cum_lo) / sum(i_hi - i_lo + 1) AS clock_mhz, sum(i_hi - i_lo + 1) AS samples
FROM last_ WHERE i_hi >= i_lo
GROUP BY side, what, key
