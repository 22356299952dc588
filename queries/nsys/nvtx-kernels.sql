-- The kernels launched inside each NVTX range, per range name and launching thread: which
-- kernels a region runs and how long they take. Same numbers as `nsys stats -r
-- nvtx_kern_sum` (computed at ingest, in nvtx_range_kernel_sum): a kernel counts in every
-- range of its thread that contains its launch call, so nested ranges each count it (the
-- totals of nested ranges overlap), and a range of a name that nests in itself counts it
-- twice. Kernels launched outside every range have a row with no range.
-- @param run    TEXT     run id or name (default: latest run)
-- @param range  TEXT     only ranges of this name: :hstu.layer0, or hstu.layer0 in the default domain (default: null)
-- @param limit  INTEGER  rows to return; 0 = all (default: 50)
-- @column range             'domain:text' as nsys names it (':name' in the default domain); NULL: no range
-- @column style             PushPop or StartEnd; NULL: no range
-- @column pid               process of the launching thread
-- @column tid               launching thread
-- @column range_instances   ranges of that name that contain one of the kernels
-- @column kernel_instances  kernel launches
-- @column total_ns          summed kernel time, ns
-- @column avg_ns            mean kernel time, ns (rounded to 0.1)
-- @column med_ns            median kernel time, ns (rounded to 0.1)
-- @column min_ns            shortest launch, ns
-- @column max_ns            longest launch, ns
-- @column stddev_ns         sample standard deviation, ns (rounded to 0.1)
-- @column name              kernel name (demangled)
-- @display range, tid, range_instances, kernel_instances, total_ns, avg_ns, med_ns, name
-- @alias nvtx_kern_sum
-- @requires nvtx_range_kernel_sum, nvtx_ranges
-- @traced nvtx_ranges, kernels
-- @needs  kernels
WITH asked AS (  -- a range name the run does not have is an error, not an empty table
    SELECT CASE WHEN $range IS NULL OR EXISTS (SELECT 1 FROM nvtx_ranges WHERE run_id = $run
                                                 AND (name = $range OR name = ':' || $range)) THEN true
                ELSE error('nvtx-kernels: the run has no NVTX range named ''' || $range || ''' (`tracekit query '
                           || 'nvtx-summary` lists them; a named domain''s are domain:name)') END AS ok
)
SELECT range, style, pid, tid, range_instances, kernel_instances, total_ns, round1(avg_ns) AS avg_ns,
       round1(med_ns) AS med_ns, min_ns, max_ns, round1(stddev_ns) AS stddev_ns, name
FROM asked, nvtx_range_kernel_sum
WHERE asked.ok AND run_id = $run AND ($range IS NULL OR range = $range OR range = ':' || $range)
ORDER BY range NULLS FIRST, pid, tid, total_ns DESC, name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
