-- Sweep scope SM clock: per grid point (`point_runs`, point_runs.sql, which diff puts before
-- this query), the median SM clock its run's timed requests ran at, where the capture read it
-- (view gpu_timed: NVML after each timed request).
-- @column side          0 = base, 1 = new
-- @column key           'bs=8,nc=1024' ('requests': a run whose params lack bs or nc)
-- @column sm_clock_mhz  median SM clock read after the timed requests, MHz
SELECT p.side, p.key, g.sm_clock_mhz
FROM point_runs p JOIN gpu_timed g ON g.run_id = p.run_id
WHERE g.sm_clock_mhz > 0
