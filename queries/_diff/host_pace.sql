-- The host's pace at each point of a sweep comparison: per point run (`point_runs`,
-- point_runs.sql, which diff puts before this query) and CUDA kernel-launch API, its calls
-- and their median duration (api_sum, from ingest). A launch call is a fixed piece of host
-- work (the driver enqueues the kernel; it waits only when the launch queue is full), so
-- its median moves with the host's speed between captures: request latency, host-timed,
-- is read against it. Runs without CUDA API calls have no rows.
-- @column side     0 = base, 1 = new
-- @column key      the point ('bs=8,nc=1024')
-- @column run_id   the point's run
-- @column api      launch API, _vNNNN stripped (cudaLaunchKernel, cuLaunchKernelEx, ...)
-- @column calls    its calls in the run
-- @column med_ns   their median duration, ns (of the recorded name with the most calls)
SELECT p.side, p.key, p.run_id, n.value AS api, sum(a.calls) AS calls, arg_max(a.med_ns, a.calls) AS med_ns
FROM point_runs p
JOIN api_sum a ON a.run_id = p.run_id
JOIN _strings n ON n.string_id = a.name_id
WHERE regexp_matches(n.value, '^cu(da)?Launch(Cooperative)?Kernel(Ex|ExC)?$')
GROUP BY p.side, p.key, p.run_id, n.value
