-- Both runs' per-instance distributions of one key, summarised for the diff: counts,
-- totals, variances, median and p95 (linear interpolation, as DuckDB's median and
-- quantile_cont), a 95 % distribution-free interval of each median (order statistics
-- n/2 -+ 0.98 sqrt(n), 1-based, clamped to the sample), and the ingredients of the
-- Mann-Whitney U test: the base run's rank sum in the pooled sample (ties get their mean
-- rank) and the tie term sum(t^3 - t) over groups of equal values. Reads `samples`
-- (side 0 = base, 1 = new; key; value), which diff puts before it as a CTE. One pass:
-- samples grouped by (key, value), then running counts per key in value order.
-- @column key          the key the samples carry
-- @column n_base       instances in the base run
-- @column n_new        instances in the new run
-- @column total_base   summed value, base run
-- @column total_new    summed value, new run
-- @column var_base     sample variance of the value, base run (NULL below 2 instances)
-- @column var_new      sample variance of the value, new run
-- @column med_base     median, base run
-- @column med_new      median, new run
-- @column med_lo_base  lower end of the 95 % interval of the base median
-- @column med_hi_base  upper end of the 95 % interval of the base median
-- @column med_lo_new   lower end of the 95 % interval of the new median
-- @column med_hi_new   upper end of the 95 % interval of the new median
-- @column p95_base     95th percentile, base run
-- @column p95_new      95th percentile, new run
-- @column min_base     smallest value, base run
-- @column max_base     largest value, base run
-- @column min_new      smallest value, new run
-- @column max_new      largest value, new run
-- @column rank_sum_base  sum of the base instances' ranks in the pooled sample
-- @column tie_term     sum over groups of equal pooled values of t^3 - t
WITH g AS (
    SELECT key, value, count(*) FILTER (WHERE side = 0) AS nb, count(*) FILTER (WHERE side = 1) AS nn
    FROM samples
    GROUP BY key, value
), c AS (
    SELECT key, value::DOUBLE AS value, nb, nn,
           sum(nb + nn) OVER w - (nb + nn) AS below,  -- pooled instances with a smaller value
           sum(nb) OVER w AS cb,                      -- base instances up to this value
           sum(nn) OVER w AS cn,                      -- new instances up to this value
           sum(nb) OVER (PARTITION BY key) AS n_b,
           sum(nn) OVER (PARTITION BY key) AS n_n
    FROM g
    WINDOW w AS (PARTITION BY key ORDER BY value ROWS UNBOUNDED PRECEDING)
), q AS (  -- 0-based positions of the order statistics
    SELECT *,
           floor((n_b - 1) / 2) AS b_lo, ceil((n_b - 1) / 2) AS b_hi,
           floor((n_n - 1) / 2) AS n_lo, ceil((n_n - 1) / 2) AS n_hi,
           greatest(floor(n_b / 2 - 0.98 * sqrt(n_b)) - 1, 0) AS b_ci_lo, least(ceil(n_b / 2 + 0.98 * sqrt(n_b)) - 1, n_b - 1) AS b_ci_hi,
           greatest(floor(n_n / 2 - 0.98 * sqrt(n_n)) - 1, 0) AS n_ci_lo, least(ceil(n_n / 2 + 0.98 * sqrt(n_n)) - 1, n_n - 1) AS n_ci_hi,
           0.95 * (n_b - 1) AS b_95, 0.95 * (n_n - 1) AS n_95
    FROM c
), a AS (
    SELECT key, any_value(n_b)::BIGINT AS n_base, any_value(n_n)::BIGINT AS n_new,
           sum(nb * value) AS total_base, sum(nn * value) AS total_new,
           sum(nb * value * value) AS sq_base, sum(nn * value * value) AS sq_new,
           (min(value) FILTER (WHERE cb > b_lo) + min(value) FILTER (WHERE cb > b_hi)) / 2 AS med_base,
           (min(value) FILTER (WHERE cn > n_lo) + min(value) FILTER (WHERE cn > n_hi)) / 2 AS med_new,
           min(value) FILTER (WHERE cb > b_ci_lo) AS med_lo_base, min(value) FILTER (WHERE cb > b_ci_hi) AS med_hi_base,
           min(value) FILTER (WHERE cn > n_ci_lo) AS med_lo_new, min(value) FILTER (WHERE cn > n_ci_hi) AS med_hi_new,
           min(value) FILTER (WHERE cb > floor(b_95)) AS b95_lo, min(value) FILTER (WHERE cb > ceil(b_95)) AS b95_hi,
           min(value) FILTER (WHERE cn > floor(n_95)) AS n95_lo, min(value) FILTER (WHERE cn > ceil(n_95)) AS n95_hi,
           any_value(b_95) AS b_95, any_value(n_95) AS n_95,
           min(value) FILTER (WHERE nb > 0) AS min_base, max(value) FILTER (WHERE nb > 0) AS max_base,
           min(value) FILTER (WHERE nn > 0) AS min_new, max(value) FILTER (WHERE nn > 0) AS max_new,
           sum(nb * (below + (nb + nn + 1) / 2)) AS rank_sum_base,
           sum(power((nb + nn)::DOUBLE, 3) - (nb + nn)) AS tie_term
    FROM q
    GROUP BY key
)
SELECT key, n_base, n_new, total_base, total_new,
       CASE WHEN n_base > 1 THEN greatest(sq_base - total_base * total_base / n_base, 0) / (n_base - 1) END AS var_base,
       CASE WHEN n_new > 1 THEN greatest(sq_new - total_new * total_new / n_new, 0) / (n_new - 1) END AS var_new,
       med_base, med_new, med_lo_base, med_hi_base, med_lo_new, med_hi_new,
       b95_lo + (b_95 - floor(b_95)) * (b95_hi - b95_lo) AS p95_base,
       n95_lo + (n_95 - floor(n_95)) * (n95_hi - n95_lo) AS p95_new,
       min_base, max_base, min_new, max_new, rank_sum_base, tie_term
FROM a
