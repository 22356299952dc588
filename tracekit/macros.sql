-- Macros shared by the named queries and diff, created on every connection (read-only
-- ones too: TEMP macros live in the connection, so a store written by an older tracekit
-- has them as well).

-- Kernel family: a kernel name without what changes with problem shapes, tuning and
-- library versions, so that kernels of one operation group (top-kernels -p group=family)
-- and match across runs (diff). From the demangled name:
--   * return type ('void ') and anonymous namespaces ('<unnamed>::') dropped;
--   * template arguments and the parameter list cut (at the first '<' or '('): a C++
--     template keeps its function name (at::native::vectorized_elementwise_kernel);
--     CUTLASS's generic wrappers (cutlass::Kernel, cutlass::Kernel2, cutlass::device_kernel)
--     are named by their first template argument instead, which names the operation;
--   * tile and shape tokens (256x128, 64x4, tilesize64x64x8 -> tilesize), cuBLAS/cuDNN tuning
--     tokens (_tilesize, _warpsize, _stage3, _aligna4) and hex hashes of 12+ digits dropped;
--   * of cuBLAS's nvjet kernels, the schedule its heuristic picks per shape as it picks the tile:
--     the raster order (_h, _v) and the cooperative schedule (_coopA, _coopB);
--   * runs of '_' left by the cuts made one, a trailing '_' dropped.
-- Triton kernels keep their function name (it does not change with the configuration):
-- their family is their name. Examples (tests/test_diff.py checks these on real names):
--   nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT -> nvjet_sm90_tst_bz_bias_TNT
--   sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas
--     -> sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_ffma_execute_kernel_5x_cublas
--   void at::native::vectorized_elementwise_kernel<(int)4, at::native::AbsFunctor<float>, ...>(int, T2, T3)
--     -> at::native::vectorized_elementwise_kernel
CREATE OR REPLACE TEMP MACRO _kernel_family_base(n) AS
    CASE WHEN regexp_matches(n, '^cutlass::(Kernel2?|device_kernel)<[A-Za-z_]')
         THEN regexp_extract(n, '^cutlass::(?:Kernel2?|device_kernel)<([A-Za-z_][A-Za-z0-9_:]*)', 1)
         ELSE trim(regexp_extract(n, '^[^<(]*')) END;
CREATE OR REPLACE TEMP MACRO _nvjet_schedule_cut(n) AS
    CASE WHEN starts_with(n, 'nvjet_') THEN regexp_replace(n, '_(h|v|coopA|coopB)(_|$)', '\2', 'g') ELSE n END;
CREATE OR REPLACE TEMP MACRO kernel_family(name) AS
    CASE WHEN name IS NULL THEN NULL ELSE
    coalesce(nullif(regexp_replace(regexp_replace(regexp_replace(regexp_replace(_nvjet_schedule_cut(regexp_replace(
        _kernel_family_base(regexp_replace(regexp_replace(trim(name), '^void\s+', ''),
                                           '<unnamed>::|\(anonymous namespace\)::', '', 'g')),
        '\d+(x\d+)+', '', 'g')),                                  -- tile / shape tokens; nvjet's schedule
        '_(tilesize|warpsize|stage\d+|align[a-z]?\d+)', '', 'g'),  -- cuBLAS / cuDNN tuning tokens
        '_[0-9a-f]{12,}(_|$)', '\1', 'g'),                        -- hashes
        '([^_])_{2,}', '\1_', 'g'),                               -- '__' left by the cuts
        '([^_])_$', '\1'), ''), name) END;

-- A kernel's demangled name as NVIDIA's two demanglers agree on it, to find one kernel in an
-- nsys and an ncu run (kernel-headroom). nsys and an ncu report print
--   void at::native::vectorized_gather_kernel<(int)16, long>(char *, ...)
-- where ncu's CSV pages print
--   void at::vectorized_gather_kernel<16, long>(char *, ...)
-- (ncu 2025.3.1: the casts of template arguments dropped, and namespaces too, unevenly: at::native::
-- becomes at::, at::native::binary_internal:: becomes binary_internal::). The key drops both:
-- every cast of an integral argument and every namespace qualifier (anonymous ones too).
-- On hstu_headroom's 14 kernels the three spellings give the same 14 keys.
CREATE OR REPLACE TEMP MACRO kernel_match_key(name) AS
    regexp_replace(regexp_replace(name,
        '\((?:unsigned |signed )?(?:long long|int|long|bool|char|short)\)(-?[0-9])', '\1', 'g'),
        '(?:\w+::|<unnamed>::|\(anonymous namespace\)::)+', '', 'g');

-- An ncu query's `kernel` filter (text a kernel name contains, case-insensitive): true where
-- it is not given or some launch of the run (NULL: of any run) matches it; otherwise an
-- error naming it, not an empty table that reads as "no findings" or "no stalls".
CREATE OR REPLACE TEMP MACRO ncu_kernel_asked(query, run, kernel) AS
    kernel IS NULL OR (
        SELECT CASE WHEN count(*) > 0 THEN true
                    ELSE error(query || ': no kernel of ' || CASE WHEN run IS NULL THEN 'any run' ELSE 'the run' END
                               || ' has a name containing ''' || kernel || ''' (`tracekit query ncu-kernels` '
                               || 'lists them)') END
        FROM ncu_kernels WHERE (run IS NULL OR run_id = run) AND contains(lower(name), lower(kernel)));

-- 'what: a / b' naming the distinct values of a list (ascending, NULLs ignored) where it holds
-- more than one, else NULL: which launch settings differ between a kernel's launches.
CREATE OR REPLACE TEMP MACRO values_differ(what, l) AS
    CASE WHEN len(list_distinct(l)) > 1
         THEN what || ': ' || array_to_string(list_sort(list_distinct(l)), ' / ') END;

-- A run as an error names it: 'run 5 (its name)'.
CREATE OR REPLACE TEMP MACRO run_label(run) AS
    'run ' || run || ' (' || coalesce((SELECT name FROM runs WHERE run_id = run), '?') || ')';

-- The start of an ncu query's error where the report lacks what it needs, naming the run
-- (NULL: every run): 'roofline: run 5 (name) has no ' || what, or 'roofline: no run has ' || what.
CREATE OR REPLACE TEMP MACRO ncu_lacks(query, run, what) AS
    query || ': ' || CASE WHEN run IS NULL THEN 'no run has ' ELSE run_label(run) || ' has no ' END || what;

-- A roofline query's check of its inputs over the launches asked (``rows`` of them, ``with_flop``
-- with a FLOP rate, ``with_bytes`` with a byte rate at some level; ``csv_details``: every one
-- from ncu's details CSV page): true where there are none or it has both, else an error naming
-- what the run lacks and how to profile for it (``sections``: the ncu sections that collect it),
-- not rows of blanks.
CREATE OR REPLACE TEMP MACRO ncu_roofline_inputs(query, run, rows, with_flop, with_bytes, csv_details, sections) AS
    CASE WHEN rows = 0 OR (with_flop > 0 AND with_bytes > 0) THEN true
         ELSE error(ncu_lacks(query, run, 'roofline input: ')
                    || concat_ws(' and ',
                           CASE WHEN with_flop = 0 THEN 'no FLOP rate (smsp__sass_thread_inst_executed_op_*_pred_on.sum.'
                                                        || 'per_cycle_elapsed, sm__ops_path_tensor_*)' END,
                           CASE WHEN with_bytes = 0 THEN 'no byte rate (dram__bytes.sum.per_second, lts__lts2xbar_cycles_'
                                                         || 'active.sum.per_second, l1tex__lsu_writeback_active_*)' END)
                    || CASE WHEN csv_details
                            THEN '; ncu''s details CSV page prints no FLOP counters: ingest the .ncu-rep (or '
                                 || 'ncu -i REPORT --csv --page raw), and where it lacks them too, profile with '
                            ELSE '; profile with ' END
                    || 'ncu ' || sections || ' (or --set full)') END;

-- Whether a run (its params) belongs to sweep `sweep`, as the sweep queries' sweep parameter
-- resolves it (registry.resolve_sweep): a sweep id; '' for the runs outside any sweep
-- (`tracekit capture` runs); NULL for every run (sweep=all). The sweep queries pick each
-- point's latest run among the runs of the sweep asked, never from another sweep: the
-- latest run per point over the whole store would show a newer sweep's numbers in an
-- older sweep's grid.
CREATE OR REPLACE TEMP MACRO in_sweep(run_params, sweep) AS
    sweep IS NULL OR coalesce(json_extract_string(run_params, '$.sweep'), '') = sweep;

-- Whether a kernel is the HSTU workload's L2-flush fill between requests (FillFunctor<signed char>:
-- its flush buffer zeroed before each request, where the run did not turn flush_l2 off): not
-- workload time, left out of the sweep's kernel views (sweep-kernels, sweep-points). A program's
-- sweep (params.sweep_grid) keeps every kernel: a fill there is the program's own.
CREATE OR REPLACE TEMP MACRO l2_flush_fill(run_params, name) AS
    json_extract(run_params, '$.bs') IS NOT NULL AND json_extract_string(run_params, '$.sweep_grid') IS NULL
    AND coalesce(json_extract(run_params, '$.flush_l2')::BOOLEAN, true)
    AND name LIKE '%FillFunctor<signed char>%';

-- Why a sweep query of the points captured under `tool` (nsys, ncu) found none (`label` names
-- the query, `single` what to ask of one capture instead, `did` what an ok capture of a point
-- does: recorded, profiled), as the sweep parameter resolved (in_sweep): none asked (NULL),
-- the runs outside any sweep (''), or the sweep named.
CREATE OR REPLACE TEMP MACRO no_sweep_point(label, sweep, tool, single, did) AS
    label || ': no point of a sweep captured under ' || tool || ' '
    || CASE WHEN sweep IS NULL
            THEN '(the run folders of `tracekit sweep --tool ' || tool || '`, status ok, whose params give the '
                 || 'grid''s values); ingest them, or ask ' || single
            WHEN sweep = ''  -- (sweep= named a run outside any sweep, or no sweep is in the store)
            THEN 'outside a sweep: no ok ' || tool || ' run outside any sweep has grid values (a program''s --grid, '
                 || 'or bs and nc); name a sweep (-p sweep=ID, `tracekit runs`), or ask ' || single
            ELSE 'in ' || sweep || ': none of its runs in the store is an ok ' || tool || ' capture that ' || did
                 || ' a kernel (`tracekit runs` lists them and their status)' END;

-- A run's point of its sweep's grid, 'm=1024,dtype=fp16': its values of the names params.sweep_grid
-- lists (`tracekit sweep --grid ... -- CMD`), else its bs and nc ('bs=8,nc=1024': the HSTU workload's
-- grid); NULL for a run with neither. diff's sweep comparisons key points by it, sweep-points shows it.
-- A value that holds what separates the key's parts (, = and diff's ': ' after the point), a
-- space, a quote or a backslash is written as a JSON string (shape="1024,1024", from a --config
-- grid): no two points of a grid share a key (sweep_points.grid_point writes a manifest's points so too).
CREATE OR REPLACE TEMP MACRO grid_value(v) AS
    CASE WHEN regexp_matches(v, '[,=:"\\\s]') OR v = '' THEN to_json(v)::VARCHAR ELSE v END;

CREATE OR REPLACE TEMP MACRO grid_point(run_params) AS
    CASE WHEN json_extract_string(run_params, '$.sweep_grid') IS NOT NULL
         THEN array_to_string(list_transform(string_split(json_extract_string(run_params, '$.sweep_grid'), ','),
                                             lambda g: g || '=' || coalesce(grid_value(json_extract_string(
                                                                                run_params, '$."' || g || '"')),
                                                                            '?')), ',')
         WHEN json_extract(run_params, '$.bs') IS NOT NULL AND json_extract(run_params, '$.nc') IS NOT NULL
         THEN format('bs={},nc={}', json_extract(run_params, '$.bs')::INTEGER, json_extract(run_params, '$.nc')::INTEGER)
    END;

-- The column a GPU metric (gpu_metric_names.metric) stands for in the per-range views of the
-- GPU's sampled counters (nvtx-gpu-metrics, export trace --gpu-metrics, diff's clock lookup):
-- clock, active, issue, tensor, read, write; NULL for the others.
CREATE OR REPLACE TEMP MACRO gpu_metric_column(metric) AS
    CASE WHEN metric = 'GPC Clock Frequency' THEN 'clock' WHEN metric = 'SMs Active' THEN 'active'
         WHEN metric = 'SM Issue' THEN 'issue' WHEN metric ILIKE 'Tensor%Active' THEN 'tensor'
         WHEN metric = 'DRAM Read Bandwidth' THEN 'read' WHEN metric = 'DRAM Write Bandwidth' THEN 'write' END;

-- What a trace query asks checked before it reads (gpu-trace, api-trace, kernel-exec-trace,
-- nvtx-ranges): true, or the error that says what is wrong, not an empty answer. An empty
-- window (from_ns not before to_ns; either may be NULL: no bound), then a name= no WHAT of
-- the run has (found: whether one has; the query LISTING lists them).
CREATE OR REPLACE TEMP MACRO trace_asked(query, from_ns, to_ns, name, found, what, listing) AS
    CASE WHEN from_ns >= to_ns
         THEN error(query || ': from_ns=' || from_ns || ' is not before to_ns=' || to_ns
                    || ': the window is empty; give from_ns < to_ns')
         WHEN name IS NOT NULL AND NOT found
         THEN error(query || ': no ' || what || ' of the run has a name containing ''' || name
                    || ''' (`tracekit query ' || listing || '` lists them)')
         ELSE true END;
