"""The query header contract: every query's header agrees with its SQL and its result."""

from __future__ import annotations

import re
import warnings

import pytest
from conftest import NSYS_SCENARIOS, let_go, scenario_of

from tracekit import charts
from tracekit.errors import NoneRecorded, ParamError, QueryError
from tracekit.registry import (
    EVENTS,
    RUN_KINDS,
    TRACED,
    count_sql,
    get_registry,
    parse_header,
    sql_parameters,
)

REG = get_registry()


@pytest.mark.parametrize("name", sorted(REG.queries))
def test_header_declares_exactly_the_parameters_used(name):
    q = REG.queries[name]
    assert q.description, name
    assert sql_parameters(q.sql) == set(q.params), f"{name}: header params vs SQL $params differ"
    assert q.requires, f"{name}: no @requires"


@pytest.mark.parametrize("name", sorted(REG.queries))
def test_the_description_comes_before_the_tags(name):
    """A comment line among the tags would be read as more description (a column's second
    line, say): every header line after the first tag is a tag."""
    header = []
    for line in REG.queries[name].sql.splitlines():
        if line.strip() and not line.strip().startswith("--"):
            break
        header.append(line.strip().removeprefix("--").strip())
    tags = [i for i, body in enumerate(header) if body.startswith("@")]
    assert all(body.startswith("@") or not body for body in header[tags[0]:]), name


def _asked_run(q) -> str:
    """The fixture run an nsys query is asked of: one with what it is about (events nsys records
    only when told: conftest.TRACED_IN; NCCL's kernels, whose sums only such a run has), else the
    mixed HSTU capture."""
    nccl = {"nccl_overlap_sum", "comm_overlap_sum"} & set(q.requires)
    return scenario_of(q) or ("nccl_overlap" if nccl else "hstu_mixed")


@pytest.mark.parametrize("name", [n for n, q in sorted(REG.queries.items()) if q.source in ("nsys", "runs")])
def test_header_documents_exactly_the_result_columns(nsys_db, name):
    q = REG.queries[name]
    run = _asked_run(q) if q.source == "nsys" else None
    params = {"run": run} if "run" in q.params else {}
    if "limit" in q.params:
        params["limit"] = 0
    if "sweep" in q.params:
        params["sweep"] = None  # (every run: what resolve_sweep binds for all)
    kinds = {k for (ks,) in nsys_db.con.execute("SELECT DISTINCT kind FROM runs").fetchall() for k in ks.split(",")}
    if q.kinds <= kinds and "sweep" not in q.params:
        columns = nsys_db.query(name, **params).columns
    else:  # nsys_db holds no sweep, which the query refuses: the columns of its SQL (test_command_sweep: a sweep's)
        unset = {p: None for p in q.params if p not in params}  # (a filter's null: no filter)
        columns = nsys_db.con.sql(q.sql, params={**params, **unset}).columns
    assert columns == list(q.columns), f"{name}: @column list differs from the result's columns"


#: runs asked beside each query's own (_asked_run) whose answers hold the fixtures' blank cells:
#: copies and memsets beside kernels, kernels never queued and kernels outside every range
#: (hstu_mixed), a start/end range ended on another thread and threads with no recorded
#: priority (multithread), copies issued outside every NVTX range (streams, nccl)
NULL_RUNS = ("hstu_mixed", "multithread", "streams", "nccl")


@pytest.mark.parametrize("name", [n for n, q in sorted(REG.queries.items()) if q.source == "nsys"])
def test_a_column_with_blank_cells_says_when_it_is_null(nsys_db, name):
    """A reader reads a blank cell by its column's doc (a kernel never queued is not a queue
    of 0 ns): every column of an nsys query that is NULL in its answers on the fixtures says
    when in its @column doc. (The ncu queries say it once for all their metric columns:
    missing_metrics names what the report lacks, and those columns are NULL.)"""
    q = REG.queries[name]
    blank: set[str] = set()
    for run in dict.fromkeys((_asked_run(q), *NULL_RUNS)):
        params = {"run": run, **({"limit": 0} if "limit" in q.params else {})}
        try:
            answer = nsys_db.query(name, **params)
        except QueryError:  # (a run without what the query is about: no NCCL kernel, no CPU samples)
            continue
        blank |= {c for c in answer.columns if answer[c].null_count()}
    unsaid = sorted(c for c in blank if "NULL" not in q.columns[c])
    assert not unsaid, f"{name}: NULL on the fixtures, and the doc does not say when: {unsaid}"


#: the columns that hold an NVTX path (nvtx_ranges.path)
PATH_COLUMNS = ("path", "nvtx_path", "peak_nvtx_path")


@pytest.mark.parametrize("name", [n for n, q in sorted(REG.queries.items())
                                  if q.source in ("nsys", "ranks") and set(PATH_COLUMNS) & set(q.columns)])
def test_an_nvtx_path_column_says_how_a_named_domain_reads(nsys_db, name):
    """An NVTX path names a range of a named domain as nsys names the range, domain:text
    (registered_nvtx_domains: iteration/stage/tracekit:pipeline/...; NCCL's own ranges in a
    job's ranks: NCCL:ncclAllReduce), not by its text alone: a reader who matches a path
    against the texts the program pushed is told so."""
    q = REG.queries[name]
    run = "ranks_nccl_rank0" if q.source == "ranks" else "registered_nvtx_domains"
    try:
        answer = nsys_db.query(name, run=run, **({"limit": 0} if "limit" in q.params else {}))
    except QueryError:  # (a run without what the query is about: no CPU samples, no memory events)
        return
    for col in set(PATH_COLUMNS) & set(answer.columns):
        if answer[col].str.contains("tracekit:|NCCL:").any():
            assert "domain:text" in q.columns[col], f"{name}.{col}: holds a named domain's range, the doc says texts"


def _rounded_columns(sql: str) -> dict[str, int]:
    """column -> decimals, for each ``round(expr, N) AS column`` of a query's SQL."""
    out = {}
    for m in re.finditer(r"\bround\(", sql, re.IGNORECASE):
        i, depth = m.end(), 1
        while depth and i < len(sql):
            depth += {"(": 1, ")": -1}.get(sql[i], 0)
            i += 1
        places = re.search(r",\s*(\d+)\s*$", sql[m.end():i - 1])
        named = re.match(r"(?:::\w+)?\s+AS\s+(\w+)", sql[i:], re.IGNORECASE)
        if named:
            out[named.group(1)] = int(places.group(1)) if places else 0
    return out


def test_rounded_columns_are_found():
    assert _rounded_columns("SELECT round(100.0 * sum(a) / nullif(sum(b), 0), 2) AS x_pct, "
                            "round(avg(d))::BIGINT AS d_ns, round(c, 1) FROM t") == {"x_pct": 2, "d_ns": 0}


@pytest.mark.parametrize("name", sorted(REG.queries))
def test_a_column_rounded_to_decimals_says_to_what(name):
    """A reader compares figures by their precision (top-kernels' time_pct, rounded to 0.1 as
    nsys prints it, beside kernels-by-nvtx's): a column whose SQL rounds it to decimals says
    "rounded to" that in its doc, and a doc that says so is what the SQL does."""
    q = REG.queries[name]
    for col, places in _rounded_columns(q.sql).items():
        if col not in q.columns or places == 0:  # (a CTE's column; an estimate rounded to whole ns)
            continue
        said = re.search(r"rounded to (0\.\d+)", q.columns[col])
        assert said, f"{name}.{col}: rounded to {10.0 ** -places:g}, and the doc does not say so"
        assert said.group(1) == f"{10.0 ** -places:.{places}f}", f"{name}.{col}: the doc says {said.group(0)}"


#: store tables and views filled from CUDA's events (kernels, copies, API calls) or summed from them
CUDA_FED = {"kernels", "api_calls", "memcpy", "memset", "graph_execs", "syncs", "gpu_ops", "api_sum",
            "kernel_exec_sum", "launch_latency_sum", "nvtx_kernel_sum", "nvtx_range_kernel_sum",
            "nvtx_path_kernel_sum", "nccl_overlap_sum", "comm_overlap_sum"}


@pytest.mark.parametrize("name", [n for n, q in sorted(REG.queries.items()) if q.source in ("nsys", "ranks")])
def test_an_nsys_query_about_cuda_events_is_traced_for_them(name):
    """A question about CUDA's events asked of a run captured without CUDA tracing is an error,
    not an empty answer: every nsys query that reads a table of them says @traced for CUDA
    (and nvtx-gpu-projection, whose GPU columns are them); so does a query over a job's
    ranks (rank-summary), asked of each rank."""
    from tracekit.ingest.nsys import CUDA_TABLES

    q = REG.queries[name]
    kinds = {TRACED[t][0] for t in q.traced}
    assert ("CUDA" in kinds) == (bool(CUDA_FED & set(q.requires)) or name == "nvtx-gpu-projection"), name
    assert {t for t, (what, _) in TRACED.items() if what == "CUDA"} == set(CUDA_TABLES)  # (what ingest records)
    assert set(EVENTS) == set(TRACED)  # (each table's events in words, for a run that holds none of them)


@pytest.mark.parametrize("name", [n for n, q in sorted(REG.queries.items())
                                  if "kernels" in q.traced and not q.spans_job and not {"python_samples", "graph_execs"} & set(q.traced)
                                  and not set(RUN_KINDS) & set(q.params)])  # (kernel-headroom: nsys_db has no ncu run)
def test_a_question_about_kernels_of_a_run_without_kernels_says_so(nsys_db, name):
    """copies_only traced CUDA and recorded API calls, copies and memsets, no kernel. A query
    about kernels answers no row there and says that the run holds no kernels; where it also
    reads other CUDA events (the launch calls: kernel-exec) only ``@needs kernels`` makes the
    note name them, so a query that answers no row here must declare it. One that reads
    copies as well (gpu-trace, gpu-gaps) needs nothing and says nothing: the run's copies are
    its answer, or it has none for a reason of its own (no gap past the threshold)."""
    q = REG.queries[name]
    every = {"limit": 0} if "limit" in q.params else {}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if name in ("nccl-overlap", "comm-overlap"):  # (questions for NCCL's kernels: an error where there are none)
            with pytest.raises(QueryError, match=f"^{name}: the run has no NCCL kernels"):
                nsys_db.query(name, run="copies_only")
            return
        rows = nsys_db.query(name, run="copies_only", **every).height
    said = [str(w.message) for w in seen if issubclass(w.category, NoneRecorded)]
    if {"memcpy", "memset"} & set(q.traced):
        assert not q.needs and said == [], (q.needs, said)
    elif "kernels" in q.needs or q.traced == ["kernels"]:
        assert rows == 0, f"{name} declares @needs kernels and answers {rows} rows without one"
        assert len(said) == 1 and re.fullmatch(r"run \d+ \(copies_only\) holds no kernels: its capture traced "
                                               r"CUDA and recorded none", said[0]), said
    else:
        assert rows > 0, f"{name} answers no row of a run without kernels: declare @needs kernels"
        assert said == []


def test_header_parser_rejects_bad_lines():
    with pytest.raises(QueryError, match="@needs names kernels, not among its @traced \\(api_calls, memcpy\\)"):
        parse_header("x", "nsys", "-- d\n-- @traced api_calls, memcpy\n-- @needs api_calls, kernels\nSELECT 1")
    with pytest.raises(QueryError, match="bad @param"):
        parse_header("x", "nsys", "-- d\n-- @param run NOTATYPE doc\nSELECT 1")
    with pytest.raises(QueryError, match="no description"):
        parse_header("x", "nsys", "-- @column a doc\nSELECT 1 AS a")
    with pytest.raises(QueryError, match="@rows names no CTE of the query: 'page'"):
        parse_header("x", "nsys", "-- d\n-- @rows page\nWITH pages AS (SELECT 1 AS a)\nSELECT a FROM pages")
    q = parse_header("x", "nsys", "-- d.\n-- @param limit INTEGER rows (default: 20)\nSELECT $limit")
    assert q.params["limit"].default == "20"


def test_sql_parameters_ignore_comments_and_strings():
    assert sql_parameters("-- $a\nSELECT '$b', $c, $c2 FROM t") == {"c", "c2"}
    # one pass: '--' inside a string is text, and so is a quote inside a comment
    assert sql_parameters("SELECT 'run ncu --csv' || $a, $b -- it's $c\n, $d") == {"a", "b", "d"}


def test_params_with_choices():
    q = parse_header("q", "nsys", "-- A query.\n-- @param g  TEXT  how (one of: name, family) (default: name)\n"
                     "-- @param t  TEXT  which (any of: OPT, WRN, all) (default: all)\nSELECT $g, $t")
    g, t = q.params["g"], q.params["t"]
    assert (g.choices, g.several, g.default) == (("name", "family"), False, "name")
    assert (t.choices, t.several) == (("OPT", "WRN", "all"), True)
    assert g.convert("FAMILY", "q") == "FAMILY" and t.convert("opt, WRN", "q") == "opt, WRN"
    with pytest.raises(ParamError, match="^q: g=kind: choose name or family$"):
        g.convert("kind", "q")
    with pytest.raises(ParamError, match=r"^q: t=OPT,X: choose from OPT, WRN, all \(comma-separated\)$"):
        t.convert("OPT,X", "q")


def test_bad_params_are_errors(nsys_db):
    with pytest.raises(ParamError, match="limit='x' is not an integer$"):
        nsys_db.query("top-kernels", run="hstu_mixed", limit="x")
    # a BIGINT parameter in words, not DuckDB's type name ("is not bigint")
    with pytest.raises(ParamError, match=r"^gpu-utilization: parameter min_gap_ns='1\.5' is not an integer$"):
        nsys_db.query("gpu-utilization", run="hstu_mixed", min_gap_ns="1.5")
    with pytest.raises(ParamError, match="unknown parameter 'bogus'"):
        nsys_db.query("top-kernels", bogus=1)
    with pytest.raises(ParamError, match="^top-kernels: parameter limit True: expected str or int or float, not bool$"):
        nsys_db.query("top-kernels", limit=True)  # (a bool is an int to Python: it would be 1)
    with pytest.raises(ParamError, match="limit must be >= 0"):
        nsys_db.query("top-kernels", limit=-1)
    # a count or a duration below its declared minimum is an error, not an empty table
    for query, param in (("kernels-by-nvtx", "depth"), ("gpu-utilization", "min_gap_ns"), ("nvtx-ranges", "min_dur_ns")):
        with pytest.raises(ParamError, match=rf"^{query}: {param} must be >= 0, got -3$"):
            nsys_db.query(query, run="hstu_mixed", **{param: -3})
    # a share of the time above 100 % is no threshold (every stretch is below it)
    for query in ("low-gpu-utilization", "nsys-rules"):
        with pytest.raises(ParamError, match=rf"^{query}: threshold_pct must be <= 100, got 500$"):
            nsys_db.query(query, run="hstu_mixed", threshold_pct=500)
        # a gap in ms whose ns pass 64 bits (DuckDB's "Overflow in multiplication" before)
        with pytest.raises(ParamError, match=rf"^{'gpu-gaps' if query == 'low-gpu-utilization' else query}: gap_ms "
                                             r"must be <= 9,223,372,036,854, got 9223372036855$"):
            nsys_db.query("gpu-gaps" if query == "low-gpu-utilization" else query, run="hstu_mixed",
                          gap_ms=9_223_372_036_855)
    with pytest.raises(QueryError, match="unknown query 'nope'"):
        nsys_db.query("nope")
    # an unknown name: the names closest to it, and the command that lists them all (not all 71 on a line)
    n = len(get_registry().queries)
    for asked, said in (("top-kernel", "; did you mean top-kernels, nvtx-kernels or sweep-kernels?"),
                        ("kernels_by_nvtx", "; did you mean kernels-by-nvtx?"),
                        ("CUDA-GPU-KERN-SUM", "; did you mean cuda_gpu_kern_sum?"), ("xyzzy", "")):
        with pytest.raises(QueryError) as err:
            nsys_db.query(asked)
        assert str(err.value) == f"unknown query {asked!r}{said} (`tracekit queries` lists all {n} queries)"
    with pytest.raises(QueryError, match=r"^unknown chart 'top-kernel'; did you mean top-kernels\? "
                                         r"\(`tracekit charts` lists all \d+ charts\)$"):
        charts.chart(nsys_db, "top-kernel")
    with pytest.raises(QueryError, match="no run 'missing'"):
        nsys_db.query("top-kernels", run="missing")


def test_integers_as_tables_print_them(nsys_db):
    """A number copied from a table (12,100,481) is a query's integer parameter; a comma
    out of place is an error, not the digits run together (tracekit.numbers)."""
    first = nsys_db.query("gpu-trace", run="hstu_mixed", limit=0)["start_ns"].sort()
    cut = int(first[len(first) // 2])
    plain = nsys_db.query("gpu-trace", run="hstu_mixed", from_ns=cut, limit=0)
    assert 0 < plain.height < first.len()
    for text in (f"{cut:,}", f"{cut:_}", f" {cut} ", f"+{cut}"):
        assert nsys_db.query("gpu-trace", run="hstu_mixed", from_ns=text, limit=0).equals(plain), text
    assert nsys_db.query("top-kernels", run="hstu_mixed", limit="1,000").equals(
        nsys_db.query("top-kernels", run="hstu_mixed", limit=1000))
    for bad in ("1,2", "12,34,567", "1,000,00", ",100", "1_", "1 000", "0x10", "1e3"):
        with pytest.raises(ParamError, match=rf"^gpu-trace: parameter from_ns='{bad}' is not an integer$"):
            nsys_db.query("gpu-trace", run="hstu_mixed", from_ns=bad)


def test_kernel_queries_of_whole_graph_launches_say_what_they_leave_out(nsys_db, capsys, monkeypatch):
    """nsys --cuda-graph-trace=graph records a graph launch as one op, not the kernels it
    ran: a query about kernels of such a run answers as nsys does and warns once, with the
    launches, the graphs and their GPU time; a query that counts the launches
    (gpu-utilization), a query that fails, and a run captured with --cuda-graph-trace=node
    say nothing."""
    import warnings

    from tracekit.cli import main as cli_main
    from tracekit.errors import CaptureWarning

    launches, graphs, gpu_ns = nsys_db.sql(
        "SELECT count(*) AS n, count(DISTINCT graph_id) AS g, sum(dur_ns)::BIGINT AS t FROM graph_execs "
        "JOIN runs USING (run_id) WHERE name = 'graphs_graph'").row(0)
    node = nsys_db.sql("SELECT count(*) AS n FROM graph_execs JOIN runs USING (run_id) WHERE name = 'graphs_node'")
    assert (launches, graphs, node["n"][0]) == (7, 2, 0)
    said = (rf"^run \d+ \(graphs_graph\) made 7 launches of 2 CUDA graphs traced whole \(nsys "
            rf"--cuda-graph-trace=graph\), {gpu_ns / 1e6:.3f} ms on the GPU: nsys did not trace the kernels they ran "
            r"apiece, so kernel times and counts leave them out \(GPU busy time counts them: gpu-utilization\); "
            r"capture with --cuda-graph-trace=node to see them$")
    for name in ("top-kernels", "kernel-exec", "gpu-trace", "gpu-summary", "launch-overhead", "kernels-by-nvtx"):
        with pytest.warns(CaptureWarning, match=said) as seen:
            nsys_db.query(name, run="graphs_graph")
        assert len(seen) == 1 and seen[0].filename == __file__  # (the line that asked)
    with warnings.catch_warnings(record=True) as seen:  # (Python's default: once a line, as a warning of its own)
        warnings.simplefilter("default")
        for _ in range(2):
            nsys_db.query("top-kernels", run="graphs_graph")
    assert [w.lineno for w in seen] == [seen[0].lineno] and seen[0].filename == __file__
    # a window asked of gpu-trace: the launches in it (ending after its start, starting before its end)
    spans = nsys_db.sql("SELECT start_ns, end_ns FROM graph_execs JOIN runs USING (run_id) "
                        "WHERE name = 'graphs_graph' ORDER BY start_ns").rows()
    first, last = spans[0], spans[-1]
    with pytest.warns(CaptureWarning, match=r"made 1 launch of 1 CUDA graph in the window asked traced whole") as seen:
        nsys_db.query("gpu-trace", run="graphs_graph", from_ns=first[0], to_ns=first[0] + 1)
    assert len(seen) == 1
    before = nsys_db.sql("SELECT min(start_ns) AS s FROM gpu_ops JOIN runs USING (run_id) "
                         "WHERE runs.name = 'graphs_graph'")["s"][0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        if before < first[0]:  # a window before the first launch: nothing of theirs left out there
            nsys_db.query("gpu-trace", run="graphs_graph", from_ns=before - 1, to_ns=first[0])
        nsys_db.query("gpu-trace", run="graphs_graph", from_ns=last[1], limit=0)  # (after the last)
        nsys_db.query("gpu-utilization", run="graphs_graph")
        nsys_db.query("top-kernels", run="graphs_node")
        with pytest.raises(QueryError, match="no GPU op of the run has a name containing 'nosuch'"):
            nsys_db.query("gpu-trace", run="graphs_graph", name="nosuch")
    monkeypatch.setenv("COLUMNS", "250")
    let_go(nsys_db)  # (the command opens the store file)
    assert cli_main(["--db", str(nsys_db.path), "query", "top-kernels", "--run", "graphs_graph"]) == 0
    out, err = capsys.readouterr()
    assert "at::native::vectorized_elementwise_kernel" in out
    lines = err.splitlines()
    assert len(lines) == 1 and re.match(said.replace("^", "^tracekit: warning: "), lines[0])


def test_run_resolution(nsys_db):
    runs = nsys_db.runs()
    last = runs["run_id"].max()
    by_default = nsys_db.query("top-kernels", limit=0)
    by_id = nsys_db.query("top-kernels", run=str(last), limit=0)
    assert by_default.equals(by_id)
    assert runs["name"].to_list() == NSYS_SCENARIOS


@pytest.mark.parametrize("name", sorted(REG.queries))
def test_a_query_spans_runs_exactly_when_its_sql_reads_run_null_as_all(name):
    """`--run all` is accepted where the run parameter's doc offers it; the SQL must then
    read a NULL run as every run, and a query that does not offer it must not."""
    q = REG.get(name)
    handles_null = re.search(r"\$run\s+IS\s+NULL", q.sql, re.IGNORECASE) is not None
    assert q.spans_runs == handles_null


@pytest.mark.parametrize("name", [n for n, q in sorted(REG.queries.items()) if q.source == "nsys" and "limit" in q.params
                                  and not set(RUN_KINDS) & set(q.params)])  # (test_kernel_headroom's own)
def test_the_row_count_under_a_limit_is_every_row(nsys_db, name):
    """A terminal table cut by --limit says how many rows the query has in all: counted
    without the final sort (which DuckDB keeps under the LIMIT expression), the same
    number as fetching every row."""
    run = _asked_run(REG.queries[name])
    every = len(nsys_db.query(name, run=run, limit=0))
    rows = REG.fetch(nsys_db, name, run=run, limit=1)
    assert len(rows.rows) == min(every, 1)
    if every >= 1:
        assert rows.total == every, name
    assert "$limit" not in count_sql(REG.queries[name]), name  # (counted without the sort)


@pytest.mark.parametrize("name", [None, 1, b"top-kernels", ["top-kernels"], {"top-kernels": 1}])
def test_a_query_name_of_another_type_is_an_error(nsys_db, name):
    with pytest.raises(QueryError, match=r"^query name .*: expected str, not \w+$"):
        nsys_db.query(name)


@pytest.mark.parametrize("params, message", [
    ({"limit": b"5"}, r"top-kernels: parameter limit b'5': expected str or int or float, not bytes"),
    ({"limit": True}, r"top-kernels: parameter limit True: expected str or int or float, not bool"),
    ({"limit": [5]}, r"top-kernels: parameter limit \[5\]: expected str or int or float, not list"),
    ({"group": 1.5}, r"top-kernels: parameter group 1.5: expected str or int, not float"),
    ({"run": b"1"}, r"top-kernels: run b'1': expected str or int or None, not bytes"),
])
def test_a_parameter_of_another_type_is_an_error(nsys_db, params, message):
    """From Python a parameter is its type or its text (what the command line gives): bytes,
    a bool or a list is no row count, not read as one (int(b"5") is 5)."""
    with pytest.raises(QueryError, match=f"^{message}$"):
        nsys_db.query("top-kernels", **params)
    assert nsys_db.query("top-kernels", run="hstu_mixed", limit="2").height == 2  # the command line's text
    assert nsys_db.query("top-kernels", run="hstu_mixed", limit=2.0).height == 2


def test_a_closed_store_is_not_opened_again(small_store):
    """After close() every method is an error saying how to open the store again, not a
    silent reopening (which would take the store's lock again); closing twice is fine."""
    import tracekit

    for read_only in (True, False):
        tk = tracekit.open(small_store, read_only=read_only)
        assert tk.runs().height == 2
        tk.close()
        tk.close()
        for name, args in (("runs", ()), ("query", ("top-kernels",)), ("sql", ("SELECT 1",)), ("con", None),
                           ("diff", (1, 1)), ("rename_run", (1, "x")), ("resolve", (1,))):
            with pytest.raises(tracekit.TracekitError, match=r"this Tracekit is closed; open the store again "
                                                             r"with tracekit\.open\(\.\.\.\)$"):
                attr = getattr(tk, name)  # (the connection: a property)
                attr(*args)
    with tracekit.open(small_store) as tk:
        tk.runs()
    with pytest.raises(tracekit.TracekitError, match="is closed"):
        tk.runs()


def test_threads_sharing_a_store_take_turns(small_store):
    """The object's one DuckDB connection refuses a second call while one runs: the
    methods of a store used from several threads run one at a time instead."""
    import threading

    import tracekit

    errors, shapes = [], []
    with tracekit.open(small_store, read_only=True) as tk:
        want = tk.query("top-kernels", run="nsys_run", limit=3).shape

        def work():
            try:
                for _ in range(5):
                    shapes.append(tk.query("top-kernels", run="nsys_run", limit=3).shape)
                    tk.sql("SELECT count(*) FROM kernels")
            except Exception as err:  # noqa: BLE001 - collected for the assertion
                errors.append(err)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == [] and shapes == [want] * 20
