-- The SM clock the GPU ran each kernel at, where both runs sampled the GPU's counters (nsys
-- --gpu-metrics-devices): the mean of the 'GPC Clock Frequency' samples taken inside the
-- kernel's launches, per side and kernel key (key: as samples_kernel.sql keys it, through
-- _diff_keymap), only for the keys in _diff_clock_keys (the kernels diff would judge
-- changed), and per device over the samples inside any of its kernels (key NULL). A sample
-- counts in the kernel that started last before it on its device (of concurrent kernels on
-- other streams, that one), found by an ASOF join: no product of launches and samples. A
-- launch shorter than the sampling period (100 us at nsys's default 10 kHz) may hold no
-- sample: a kernel with none has no row.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side       0 = base run, 1 = new run
-- @column key        kernel name id (or its match's in the base run); NULL: every kernel of the device
-- @column device_id  CUDA device of a device's row (NULL on a kernel's: over its launches on every device)
-- @column clock_mhz  mean SM clock over the samples, MHz
-- @column samples    samples inside the launches
WITH clock AS (
    SELECT run_id, device_id, metric_id FROM gpu_metric_names
    WHERE run_id IN ($base, $new) AND metric = 'GPC Clock Frequency'
), samples AS (
    SELECT g.run_id, g.device_id, g.timestamp_ns, g.value
    FROM gpu_metrics g JOIN clock c USING (run_id, device_id, metric_id)
    WHERE g.run_id IN ($base, $new)
), launches AS (
    SELECT s.side, coalesce(m.key, k.name_id) AS key, k.run_id, k.device_id, k.start_ns, k.end_ns
    FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
    JOIN _kernels k ON k.run_id = s.run_id
    LEFT JOIN _diff_keymap m ON m.side = s.side AND m.name_id = k.name_id
    WHERE k.run_id IN ($base, $new)
), inside AS (  -- each sample in the kernel that started last before it on its device, if still running
    SELECT l.side, l.key, l.device_id, g.value
    FROM samples g ASOF JOIN launches l
      ON l.run_id = g.run_id AND l.device_id = g.device_id AND g.timestamp_ns >= l.start_ns
    WHERE g.timestamp_ns <= l.end_ns
)
SELECT side, key, NULL::BIGINT AS device_id, avg(value) AS clock_mhz, count(*) AS samples
FROM inside WHERE key IN (SELECT key FROM _diff_clock_keys)
GROUP BY side, key
UNION ALL
SELECT side, NULL, device_id, avg(value), count(*)
FROM inside
GROUP BY side, device_id
