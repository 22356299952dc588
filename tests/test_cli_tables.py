"""Terminal tables and the commands that explain themselves, on real captures: the
bundled example run folder (nsys, H200) and the full ncu report."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys

import polars as pl
import pytest
from conftest import DATA, NSYS_EXPORTS

import tracekit
from tracekit import names, table
from tracekit.cli import main as cli_main
from tracekit.diff import SCOPES
from tracekit.registry import get_registry, parse_header

EXAMPLE = DATA / "hstu_capture_nsys"  # examples/hstu_bs8_nc1024_nsys links to it
NCU = DATA / "ncu_full" / "report.ncu-rep.xz"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """A store with the example run folder (run 'hstu') and the full ncu report (run 'ncu')."""
    path = tmp_path_factory.mktemp("tables") / "t.duckdb"
    with tracekit.open(path) as tk:
        tk.ingest(EXAMPLE, name="hstu")
        tk.ingest(NCU, name="ncu")
    return str(path)


def _run(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli_main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(autouse=True)
def _width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")


def _rows(text: str) -> list[str]:
    """The body lines of a rendered table (between the dashed rule and the footer)."""
    lines = text.rstrip("\n").split("\n")
    rule = next(i for i, line in enumerate(lines) if set(line) <= {"-", " "} and "-" in line)
    return lines[rule + 1 : -1]


# -- the header contract -------------------------------------------------------------


def test_every_query_declares_its_display_columns():
    for q in get_registry().queries.values():
        assert q.display, f"{q.name}: no @display"
        assert set(q.display) <= set(q.columns), q.name
        assert len(set(q.display)) == len(q.display), q.name


def test_display_and_alias_are_parsed_and_checked():
    q = parse_header("x", "nsys", "-- d.\n-- @column a doc\n-- @column b doc\n-- @display b, a\n"
                                  "-- @alias x_sum, y_sum\nSELECT 1 AS a, 2 AS b")
    assert q.display == ["b", "a"] and q.aliases == ["x_sum", "y_sum"]
    with pytest.raises(tracekit.QueryError, match="undeclared column"):
        parse_header("x", "nsys", "-- d.\n-- @column a doc\n-- @display a, nope\nSELECT 1 AS a")


def test_nsys_stats_report_names_are_aliases():
    reg = get_registry()
    assert reg.get("cuda_gpu_kern_sum").name == "top-kernels"
    assert {a: reg.aliases[a] for a in ("cuda_api_sum", "nvtx_sum", "nvtx_gpu_proj_sum", "cuda_kern_exec_sum",
                                        "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum")} == {
        "cuda_api_sum": "api-summary", "nvtx_sum": "nvtx-summary", "nvtx_gpu_proj_sum": "nvtx-gpu-projection",
        "cuda_kern_exec_sum": "kernel-exec", "cuda_gpu_mem_time_sum": "memcpy-time",
        "cuda_gpu_mem_size_sum": "memcpy-size"}
    assert not set(reg.aliases) & set(reg.queries)


def test_an_alias_with_parameters_is_the_query_with_them(db, capsys):
    """nsys stats' nvtx_pushpop_sum is nvtx-summary -p style=PushPop: the name answers as that,
    says so in `tracekit queries`, and another style given with it is an error."""
    _, every, _ = _run(capsys, "--db", db, "query", "nvtx-summary", "--run", "hstu", "-f", "csv")
    for alias, style, rows in (("nvtx_pushpop_sum", "PushPop", 19), ("nvtx_startend_sum", "StartEnd", 0)):
        _, by_alias, _ = _run(capsys, "--db", db, "query", alias, "--run", "hstu", "-f", "csv")
        _, by_param, _ = _run(capsys, "--db", db, "query", "nvtx-summary", "--run", "hstu", "-p", f"style={style}",
                              "-f", "csv")
        assert by_alias == by_param and by_alias.count("\n") == 1 + rows  # (the example pushes and pops only)
    assert every.count("\n") == 20
    rc, out, _ = _run(capsys, "queries", "nvtx_startend_sum")
    assert rc == 0 and out.splitlines()[0] == ("nvtx-summary  [nsys]  (also: nvtx_sum, nvtx_pushpop_sum (style=PushPop), "
                                               "nvtx_startend_sum (style=StartEnd))")
    rc, _, err = _run(capsys, "--db", db, "query", "nvtx_pushpop_sum", "--run", "hstu", "-p", "style=StartEnd")
    assert rc == 2 and err == ("tracekit: error: nvtx_pushpop_sum: is nvtx-summary with style=PushPop; style=StartEnd "
                               "asks for another answer (tracekit query nvtx-summary -p style=StartEnd)\n")
    with pytest.raises(tracekit.QueryError, match=r"@alias x_sum sets nope=1, not a parameter"):
        parse_header("x", "nsys", "-- d.\n-- @column a doc\n-- @alias x_sum(nope=1)\nSELECT 1 AS a")


def test_alias_gives_the_same_csv(db, capsys):
    _, by_name, _ = _run(capsys, "--db", db, "query", "top-kernels", "--run", "hstu", "-f", "csv", "--limit", "0")
    _, by_alias, _ = _run(capsys, "--db", db, "query", "cuda_gpu_kern_sum", "--run", "hstu", "-f", "csv",
                          "--limit", "0")
    assert by_alias == by_name and by_name.count("\n") == 15


# -- tables ------------------------------------------------------------------------------


def test_top_kernels_fits_100_columns_in_human_units(db, capsys):
    rc, out, _ = _run(capsys, "--db", db, "query", "top-kernels", "--run", "hstu", "--limit", "0")
    assert rc == 0
    assert max(map(len, out.splitlines())) <= 100
    df = tracekit.open(db, read_only=True).query("top-kernels", run="hstu", limit=0)
    body = _rows(out)
    assert len(body) == df.height == 14
    # total_ns 175995495 -> total_ms 175.995 (every row, in order)
    totals = [re.findall(r"\d[\d,]*\.\d+", line)[1] for line in body]
    assert totals == [f"{v / 1e6:,.3f}" for v in df["total_ns"]]
    # names: shortened, never two alike, and the full demangled names are gone from the table
    labels = [line[line.rindex("  ") + 2 :] for line in body]
    assert len(set(labels)) == len(labels) == df["name"].n_unique()
    assert not any(line.count("(") for line in body)
    assert out.rstrip().endswith("14 rows; 9 of 11 columns (--all-columns for all)")  # (p95_ns, p99_ns)


README = DATA.parent.parent / "README.md"


def test_readme_table_is_what_the_command_prints(db, capsys):
    """The README's terminal example, on a 100-column terminal, is the command's output."""
    readme = README.read_text()
    command = "tracekit query top-kernels --limit 6"
    shown = readme.split(f"$ {command}\n", 1)[1].split("```", 1)[0]
    rc, out, _ = _run(capsys, "--db", db, *command.split()[1:], "--run", "hstu")
    assert rc == 0 and out == shown


def test_readme_lists_every_diff_scope():
    """The scopes the README's diff example lists are the ones `diff --by` takes, in its order."""
    listed = re.search(r"^tracekit diff .*# scopes: (.*)$", README.read_text(), re.M).group(1).split()
    assert listed == list(SCOPES)


def test_readme_names_every_store_table(db):
    """The README's paragraph on the store names each of its tables: what `tracekit sql` reads."""
    readme = README.read_text()
    paragraph = readme[readme.index("The store (one DuckDB file"):readme.index("Errors on bad input")]
    named = set(re.findall(r"`(\w+)`", paragraph))
    with tracekit.open(db, read_only=True) as tk:
        tables = {t for (t,) in tk.con.execute("SELECT table_name FROM information_schema.tables "
                                               "WHERE table_type = 'BASE TABLE'").fetchall()}
    assert tables - named == set()


def test_footer_counts_the_rows_a_limit_left_out(db, capsys):
    _, out, _ = _run(capsys, "--db", db, "query", "top-kernels", "--run", "hstu", "--limit", "5")
    assert out.rstrip().splitlines()[-1] == "5 of 14 rows (--limit 0 for all); 9 of 11 columns (--all-columns for all)"
    _, out, _ = _run(capsys, "--db", db, "query", "nvtx-ranges", "--run", "hstu", "--limit", "3")
    n = tracekit.open(db, read_only=True).query("nvtx-ranges", run="hstu", limit=0).height
    assert out.rstrip().splitlines()[-1] == f"3 of {n:,} rows (--limit 0 for all); 7 of 13 columns (--all-columns for all)"


def test_timeunit_and_columns(db, capsys):
    _, out, _ = _run(capsys, "--db", db, "query", "top-kernels", "--run", "hstu", "--timeunit", "ns",
                     "--columns", "name,total_ns,instances")
    header = out.splitlines()[0].split()
    assert header == ["name", "total_ns", "instances"]
    assert "175,995,495" in _rows(out)[0]
    rc, _, err = _run(capsys, "--db", db, "query", "top-kernels", "--columns", "name,bogus")
    assert rc == 2 and "no column 'bogus'" in err and len(err.strip().splitlines()) == 1
    # a time column also by the name the table shows (total_ms for total_ns), in any unit; a file keeps its own name
    _, out, _ = _run(capsys, "--db", db, "query", "top-kernels", "--run", "hstu", "--timeunit", "ms",
                     "--columns", "name,total_ms,avg_s")
    assert out.splitlines()[0].split() == ["name", "total_ms", "avg_ms"] and "175.995" in _rows(out)[0]
    _, out, _ = _run(capsys, "--db", db, "query", "top-kernels", "--run", "hstu", "-f", "csv", "--columns", "total_ms")
    assert out.splitlines()[:2] == ["total_ns", "175995495"]
    rc, _, err = _run(capsys, "--db", db, "query", "top-kernels", "--columns", "total_ms,total_ns")
    assert rc == 2 and "--columns: 'total_ns' named twice (a time column is one column in any unit)" in err
    rc, _, err = _run(capsys, "--db", db, "query", "top-kernels", "--columns", "bogus_ms")
    assert rc == 2 and "no column 'bogus_ms'" in err
    rc, _, err = _run(capsys, "--db", db, "query", "top-kernels", "--timeunit", "hours")
    assert rc == 2 and "--timeunit 'hours'" in err


def test_csv_stays_complete_and_unformatted(db, capsys):
    _, out, _ = _run(capsys, "--db", db, "query", "roofline", "-f", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows[0]) == len(get_registry().get("roofline").columns) == 47
    assert float(rows[0]["flops_per_s"]) > 1e14  # raw FLOP/s, no prefix, no separators


def test_roofline_reads_at_100_columns(db, capsys):
    rc, out, _ = _run(capsys, "--db", db, "query", "roofline")
    assert rc == 0 and max(map(len, out.splitlines())) <= 100
    body = _rows(out)
    assert len(body) == 4
    assert re.search(r"\b781 TFLOP/s\b", body[0]) and "tensor_bf16" in body[0] and "compute" in body[0]
    assert "8 of 47 columns" in out.splitlines()[-1]
    # every column does not fit 100 characters: one block per launch, every value whole
    _, out, _ = _run(capsys, "--db", db, "query", "roofline", "--all-columns")
    assert out.count("-[ row ") == 4 and max(map(len, out.splitlines())) <= 100
    assert re.search(r"^peak_dram_bytes_per_s +4\.81 TB/s$", out, re.M)


def test_runs_fits(db, capsys):
    _, out, _ = _run(capsys, "--db", db, "runs")
    assert max(map(len, out.splitlines())) <= 100
    assert "bs=8 nc=1024" in out and "hstu" in out and "ncu" in out


def test_a_run_name_is_not_shortened_as_a_kernel_name(tmp_path, capsys):
    """`name` is a kernel's in top-kernels but a run's in runs and run-info: a run name
    with parentheses or angle brackets is shown whole, as --run takes it."""
    db = str(tmp_path / "t.duckdb")
    run = "bs8 <nc=1024> (rerun)"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "nsys_capture_range" / "export.sqlite.xz", name=run)
    for query in (["runs"], ["query", "run-info"]):
        _, out, _ = _run(capsys, "--db", db, *query)
        assert f"  {run}  " in _rows(out)[0], out
    # a kernel's name still is: its template arguments go
    _, out, _ = _run(capsys, "--db", db, "query", "top-kernels", "--columns", "name")
    assert "at::native::vectorized_elementwise_kernel" in _rows(out)
    with tracekit.open(db, read_only=True) as tk:
        assert "at::native::vectorized_elementwise_kernel<" in " ".join(tk.query("top-kernels")["name"])


def test_numbers_are_never_cut_on_a_narrow_terminal(db, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "70")
    _, out, _ = _run(capsys, "--db", db, "query", "api-summary", "--run", "hstu")
    df = tracekit.open(db, read_only=True).query("api-summary", run="hstu")
    assert max(map(len, out.splitlines())) <= 70
    assert out.count("-[ row ") == df.height  # too narrow for the columns: one block per row
    shown = re.findall(r"^calls +(\S+)$", out, re.M)
    assert shown == [f"{v:,}" for v in df["calls"]]
    monkeypatch.setenv("COLUMNS", "90")
    _, out, _ = _run(capsys, "--db", db, "query", "api-summary", "--run", "hstu")
    assert max(map(len, out.splitlines())) <= 90 and len(_rows(out)) == df.height


def test_distinct_labels_never_read_alike():
    """Every kernel name of the real captures, shortened to many widths: no two alike, and
    the labels told apart read as a name and its words in brackets, or a name and a number."""
    all_names = set()
    for stats in DATA.glob("*/stats/cuda_gpu_kern_sum.csv"):
        with open(stats) as fh:
            all_names |= {r["Name"] for r in csv.DictReader(fh)}
    all_names = sorted(all_names)
    assert len(all_names) > 40
    for width in (8, 12, 16, 20, 24, 32, 48, 60):
        labels = names.distinct_labels(all_names, width, names.short_name)
        assert len(set(labels)) == len(labels), width
        assert max(map(len, labels)) <= width, width
        # the words that tell names apart stay in their brackets, whole or cut inside them
        # (a number glued to a cut bracket, "vect [elementw #1", read as a word)
        told = [lab for lab in labels if " [" in lab]
        assert all(lab.endswith("]") and lab.count("[") == lab.count("]") for lab in told), (width, told)
        assert told or width < 20, width


def test_a_path_cut_at_its_start_never_reads_as_another_path():
    """The NVTX paths of a real job (tests/data/nsys_ranks) as a diff's keys are labelled:
    ``…/forward`` of warmup/forward would read as step/forward beside it, so such a label is
    told apart from the paths whose end it shows (``…/fo… [warm…]``), as shared labels are."""
    from tracekit.diff import shorten_key

    paths = json.loads((DATA / "nsys_ranks" / "plant.json").read_text())["nvtx_paths"]
    assert {"step/forward", "warmup/forward"} <= set(paths)
    for width in (9, 10, 12, 13, 14):
        labels = dict(zip(paths, names.distinct_labels(paths, width, lambda k, w: shorten_key(k, w, True, False)),
                          strict=True))
        assert len(set(labels.values())) == len(paths) and max(map(len, labels.values())) <= width, width
        for p, lab in labels.items():
            if " [" in lab:  # (told apart: by the words of its own in the brackets)
                continue
            seen = lab.split("…")
            assert lab == p or not any(o != p and o.startswith(seen[0]) and o.endswith(seen[-1]) for o in paths), \
                (width, p, lab)
        assert labels["warmup/forward"] != "…/forward" and "[w" in labels["warmup/forward"] or \
            labels["warmup/forward"] == "warmup/forward", (width, labels)


def test_a_label_cut_again_marks_where_it_cuts_a_word():
    """Every kernel name of the real captures as diff's tables show it (``short_keys``'
    label, narrowed again by ``label_shortener``, as a narrow terminal does): what comes
    before the words in brackets (or a number) keeps each word whole, or ends it with an
    ellipsis; it read "vecto [tanh]" (nsys_jobs' tanh kernel) where a label already cut was
    cut again for its brackets, "vecto #1" where it was numbered; and its brackets pair."""
    from tracekit import diff

    all_names = set()
    for stats in [*DATA.glob("*/stats/cuda_gpu_kern_sum.csv"), *DATA.glob("*/*/stats/cuda_gpu_kern_sum.csv")]:
        with open(stats) as fh:
            all_names |= {r["Name"] for r in csv.DictReader(fh)}
    all_names = sorted(all_names)
    labels = diff.short_keys(all_names)
    shorten = diff.label_shortener(pl.DataFrame({"scope": "kernel", "key": all_names}))
    token = re.compile(r"[A-Za-z0-9]+")
    for width in (8, 12, 14, 16, 18, 20, 24, 30, 40, 60):
        shown = names.distinct_labels([labels[n] for n in all_names], width, shorten)
        assert len(set(shown)) == len(shown) and max(map(len, shown)) <= width, width
        for name, lab in zip(all_names, shown, strict=True):
            if lab.startswith(names.ELLIPSIS):  # (a tail: from where the names part)
                continue
            assert lab.endswith(names.ELLIPSIS) or lab.count("[") == lab.count("]"), (width, lab, name)
            head = re.sub(r" #[0-9]+$", "", lab).rpartition(" [")[0] if lab.endswith("]") else re.sub(r" #[0-9]+$", "", lab)
            whole = set(token.findall(name))
            cut = [m.group() for m in token.finditer(head)
                   if m.group() not in whole and not head[m.end():].startswith(names.ELLIPSIS)]
            assert not cut, (width, lab, name)
    tanh = next(n for n in all_names if "vectorized_elementwise_kernel" in n and "tanh_kernel_cuda" in n)
    shown = dict(zip(all_names, names.distinct_labels([labels[n] for n in all_names], 18, shorten), strict=True))
    assert shown[tanh] == "vectorized… [tanh]"


def test_free_text_gives_up_its_width_first_and_is_wrapped_not_cut():
    """A note narrows before a key or a name does, and is wrapped onto more lines, never cut
    (diff --jobs at 120 columns cut its notes to 'regressed o…', where 80 showed them whole
    one block per row); too narrow to wrap (WRAP_MIN), the table is one block per row."""
    notes = ["host-timed, not judged (+71.8%, p=0.0093)", "host-timed, not judged (+52.7%, p=0.0093)"]
    keys = ["cudaMemcpyAsync_with_a_long_tail", "cudaStreamSynchronize_and_more"]
    rows = table.Rows(["key", "note"], ["VARCHAR", "VARCHAR"], [list(r) for r in zip(keys, notes, strict=True)])
    body = table.render(rows, width=60).splitlines()[2:-1]
    assert len(body) == 4 and max(map(len, body)) <= 60
    assert [line.split("  ")[0] for line in body[::2]] == keys  # the key whole, on the row's first line
    at = len(keys[0]) + 2
    assert [body[i][at:] + " " + body[i + 1][at:] for i in (0, 2)] == notes and not body[1][:at].strip()
    narrow = table.render(rows, width=36)  # (under the key's least width and the note's, WRAP_MIN)
    assert narrow.startswith("-[ row 1 ]") and "note  host-timed, not judged\n      (+71.8%, p=0.0093)\n" in narrow


@pytest.fixture(scope="module")
def stacks_db(tmp_path_factory):
    """A store with the captures whose stacks the reviewer read garbled: nsys_backtrace (OS
    runtime and CUDA API calls' stacks, run 'bt') and nsys_python_hot (Python samples, 'py')."""
    path = tmp_path_factory.mktemp("stacks") / "s.duckdb"
    with tracekit.open(path) as tk:
        tk.ingest(DATA / "nsys_backtrace" / "export.sqlite.xz", name="bt")
        tk.ingest(DATA / "nsys_python_hot" / "export.sqlite.xz", name="py")
    return str(path)


def _last_column(out: str, header: str) -> list[str]:
    """The cells of a table's last column, ``header``: each body line from where the header starts."""
    lines = out.rstrip("\n").split("\n")
    rule = next(i for i, line in enumerate(lines) if set(line) <= {"-", " "} and "-" in line)
    at = lines[rule - 1].rindex(header)
    assert lines[rule - 1].endswith(header), lines[rule - 1]
    return [line[at:] for line in _rows(out)]


@pytest.mark.parametrize("width", [100, 200])
@pytest.mark.parametrize(("query", "run", "params"), [
    ("osrt-stacks", "bt", {"name": "ioctl"}),
    ("api-stacks", "bt", {"name": "synchronize"}),
    ("python-stacks", "py", {"range": "step"})])
def test_stacks_are_cut_from_the_left_keeping_the_innermost_frames(stacks_db, capsys, monkeypatch, width, query,
                                                                    run, params):
    """A stack is cut from its outer end, as the innermost frames say which code made the
    call: a cell is the whole stack or '…' and the stack's end, never a word or a line
    number in brackets added ('o [x7f078c1dd9f4]', 'parse (ns… [31]' read as frames)."""
    monkeypatch.setenv("COLUMNS", str(width))
    args = [a for k, v in params.items() for a in ("-p", f"{k}={v}")]
    _, out, _ = _run(capsys, "--db", stacks_db, "query", query, "--run", run, *args)
    assert max(map(len, out.splitlines())) <= width
    with tracekit.open(stacks_db, read_only=True) as tk:
        stacks = tk.query(query, run=run, **params)["stack"].to_list()
    cells = _last_column(out, "stack")
    assert len(cells) == len(stacks) > 1
    for cell, stack in zip(cells, stacks, strict=True):
        assert cell == stack or (cell.startswith("…") and stack.endswith(cell[1:])), (cell, stack)
        leaf = stack.split(";")[-1]
        assert cell.endswith(leaf)  # (each innermost frame here fits the column)
    if query == "python-stacks" and width == 100:  # parse's line and the one it called, each whole
        assert "…;parse (nsys_python_hot.py:36);_spin (nsys_python_hot.py:31)" in cells
    if query == "api-stacks" and width == 200:  # .item()'s sync: at::native::_local_scalar_dense, as the query says
        assert "_local_scalar_dense_cuda" in cells[0] and cells[0].endswith(";cudaStreamSynchronize")


def test_rule_messages_are_cut_at_the_end(db, capsys, monkeypatch):
    """ncu's rule messages (ncu_full) are sentences: cut where they end, '…' after what is
    kept; no '/' read as a path ('…/or expose the most homogeneous values.' of "and/or"),
    no number or word in brackets ('On a… [19]' of "19.0 of the 32 bytes" in hstu_capture_ncu's)."""
    with tracekit.open(db, read_only=True) as tk:
        messages = tk.query("ncu-rules", run="ncu", type="OPT,WRN", group="kernel")["message"].to_list()
    assert any("and/or" in m for m in messages) and any(re.search(r"\d\.\d of the 32 bytes", m) for m in messages)
    for width in (100, 120, 200):
        monkeypatch.setenv("COLUMNS", str(width))
        _, out, _ = _run(capsys, "--db", db, "query", "ncu-rules", "--run", "ncu", "-p", "type=OPT,WRN",
                         "-p", "group=kernel")
        if "-[ row " in out:  # (too narrow for the columns: one block per row)
            cells = re.findall(r"^message {2,}(.*)$", out, re.M)
        else:
            cells = [c.rstrip() for c in _last_column(out, "message")]
        assert len(cells) == len(messages)
        for cell, message in zip(cells, messages, strict=True):
            assert cell == message or (cell.endswith("…") and message.startswith(cell[:-1])), (width, cell, message)


def test_what_one_block_more_needs_is_cut_as_a_sentence_never_inside_a_number(tmp_path, capsys, monkeypatch):
    """occupancy's next_needs of the HSTU inference's kernels under ncu (hstu_capture_ncu:
    'registers 168 -> 80; shared memory 213,188 -> 115,712 B') is cut at its end, not told
    apart by a bracketed word or number ('... shar… [213]'), and never inside a number
    ('shared memory 213,18…' reads as another one)."""
    db = str(tmp_path / "o.duckdb")
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "hstu_capture_ncu", name="ncu")
        needs = tk.query("occupancy", limit=0)["next_needs"].to_list()
    assert any(n and "213,188" in n for n in needs)
    for width in (80, 100, 120, 200):
        monkeypatch.setenv("COLUMNS", str(width))
        _, out, _ = _run(capsys, "--db", db, "query", "occupancy", "--columns", "name,limiter,next_occupancy_pct,"
                         "next_needs", "--limit", "0")
        cells = [c.rstrip() for c in _last_column(out, "next_needs")]
        assert len(cells) == len(needs)
        for cell, whole in zip(cells, needs, strict=True):
            whole = whole or ""
            assert cell == whole or (cell.endswith("…") and whole.startswith(cell[:-1])), (width, cell, whole)
            nxt = whole[len(cell) - 1:len(cell) + 1]  # (what follows the cut: a digit, or ',' or '.' before one)
            inside = nxt[:1].isdigit() or (nxt[:1] in ",." and nxt[1:].isdigit())
            assert not (cell.endswith("…") and re.search(r"\d$", cell[:-1]) and inside), cell


def test_every_stack_column_of_the_queries_is_cut_from_the_left():
    """The queries' columns of folded stacks (their docs say 'outermost caller;...') and of
    their frames' modules are cut from the left; their sentences at the end; a kernel
    shortener is left to the columns that hold kernel names."""
    rows = table.Rows([], [], [])
    for q in get_registry().queries.values():
        for col, doc in q.columns.items():
            if "outermost caller;" in doc or "in the same order" in doc:
                assert rows.shortener(col) is names.cut_stack and not rows.told_apart(col), (q.name, col)
    for col in ("message", "title", "finding", "advice", "top_stalls", "varies", "next_needs"):
        assert rows.shortener(col) is names.cut_sentence and not rows.told_apart(col), col
    # a sentence is cut at its end, not inside a number of its own, and keeps a number it ends with
    assert names.cut_sentence("shared memory 213,188 -> 115,712 B", 20) == "shared memory …"
    assert names.cut_sentence("delta -512,000 ns", 11) == "delta …"
    assert names.cut_sentence("the hardware maximum of 16. Reduce", 27) == "the hardware maximum of 16…"
    assert names.cut_sentence("#12345", 4) == "#12…" and names.cut_sentence("注意 12345", 8) == "注意 …"
    assert names.cut_stack("a (x.py:1);b (x.py:2);c", 12) == "… (x.py:2);c"  # whole frames fill < half: the end
    assert names.cut_stack("a (x.py:1);b (x.py:2);c", 15) == "…;b (x.py:2);c"
    assert names.cut_stack("a;b;c", 5) == "a;b;c" and names.cut_stack("outer;inner", 1) == "…"
    assert names.cut_stack("outer;innermost_frame", 8) == "…t_frame"


def test_a_jobs_name_is_cut_keeping_what_tells_it_from_another_job():
    """Every job named by its ranks' path ends alike (``rank*/export``): a table too narrow for
    the whole name keeps the folder above the masked rank and the capture's ``#N``, not only
    the end every job shares (rank-summary beside NCCL's columns left ``…/rank*/export``)."""
    jobs = ["/work/tests/data/nsys_jobs/base/rank*/export", "/work/tests/data/nsys_jobs/base_again/rank*/export#2",
            "/prof/job_rank*", "12345#2"]
    rows = table.Rows(["job", "n"], ["VARCHAR", "BIGINT"], [(j, 4) for j in jobs])
    assert rows.shortener("job") is names.cut_job
    assert [names.cut_job(j, 20) for j in jobs] == ["…/base/rank*/export", "…/base_again/…#2", "/prof/job_rank*",
                                                    "12345#2"]
    assert [names.cut_job(jobs[1], w) for w in (30, 25, 14)] == [
        "…/base_again/rank*/export#2", "…/base_again/rank*/…#2", "…/base_again#2"]
    assert names.cut_job("/prof/x/job_rank*#3", 14) == "…/job_rank*#3"
    text = table.render(rows, width=25)
    assert re.findall(r"^(\S+) +4$", text, re.M) == ["…/base/rank*/export", "…/base_again/rank*/…#2",
                                                     "/prof/job_rank*", "12345#2"], text


def test_si_and_time_formats():
    assert table.si(7.81e14, "FLOP/s") == "781 TFLOP/s"
    assert table.si(999_960, "B") == "1.00 MB"
    assert table.si(4, "B") == "4 B"
    assert table.si(0, "B/s") == "0 B/s"
    rows = table.Rows(["total_ns", "avg_ns", "start_ns"], ["BIGINT", "DOUBLE", "BIGINT"],
                      [(175_995_495, 733_314.6, 12_100_481), (1_000, 500.0, 12_200_000)])
    assert table.time_units(rows) == {"total_ns": "ms", "avg_ns": "us", "start_ns": "ns"}
    assert table.time_units(rows, "s") == dict.fromkeys(rows.columns, "s")
    # no rows (or zeros alone): nothing to choose a unit by, so each column keeps its own
    for body in ([], [(0.0, 0, 0.0)]):
        rows = table.Rows(["median_ms", "total_ns", "p95_ms"], ["DOUBLE", "BIGINT", "DOUBLE"], body)
        assert table.time_units(rows) == {"median_ms": "ms", "total_ns": "ns", "p95_ms": "ms"}
        assert table.render(rows).splitlines()[0].split() == ["median_ms", "total_ns", "p95_ms"]
    # a family of zeros alone beside others (comm-overlap where NCCL overlapped nothing): in
    # their unit, not 0 ns beside ms
    rows = table.Rows(["compute_ns", "overlap_ns", "busy_ns"], ["BIGINT", "BIGINT", "BIGINT"],
                      [(9_587_000, 0, 37_409_000), (9_261_000, 0, 21_599_000)])
    assert table.time_units(rows) == dict.fromkeys(rows.columns, "ms")
    # a value that rounds to zero reads 0.0, not -0.0 (rank-summary's rank at the median)
    assert table.format_column("kernel_vs_median_pct", "DOUBLE", [-0.04, -1.5, 0.0])[1] == ["0.0", "-1.5", "0.0"]
    assert table.format_column("ratio", "DOUBLE", [-0.0001, 2.5])[1] == ["0.00", "2.50"]
    from tracekit.report import _Column

    assert [_Column("kernel_vs_median_pct", pl.Series([-0.0, -0.04, 1.5])).fmt(v) for v in (-0.0, -0.04, 1.5)] == \
        ["0.0", "0.0", "1.5"]  # (the report's table alike)


# -- commands that explain themselves --------------------------------------------------


def test_no_arguments_prints_help_and_exits_0():
    proc = subprocess.run([sys.executable, "-m", "tracekit.cli"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout and "Traceback" not in proc.stderr and not proc.stderr.strip()


def test_version(capsys):
    rc, out, _ = _run(capsys, "--version")
    assert rc == 0 and out.strip() == f"tracekit {tracekit.__version__}"


def test_queries_describes_one(capsys):
    rc, out, _ = _run(capsys, "queries", "cuda_gpu_kern_sum")
    assert rc == 0 and out.startswith("top-kernels  [nsys]  (also: cuda_gpu_kern_sum)")
    assert re.search(r"^  limit +integer +rows to return; 0 = all \(default: 20\)$", out, re.M)
    assert re.search(r"^  \* total_ns +summed duration, ns$", out, re.M)
    rc, _, err = _run(capsys, "queries", "nope")
    assert rc == 2 and "unknown query 'nope'" in err


def test_queries_list_ends_descriptions_at_a_sentence(capsys):
    _, out, _ = _run(capsys, "queries")
    flat = " ".join(out.split())
    assert "NVTX range paths (e.g. hstu.request/hstu.layer3/hstu_attention). launch-overhead" in flat
    assert all(not line.endswith("…") for line in out.splitlines())
    assert max(map(len, out.splitlines())) <= 100


@pytest.mark.parametrize("width", [100, 60])
def test_charts_lists_what_each_needs(capsys, monkeypatch, width):
    """One entry per chart, its description wrapped to the terminal (as `tracekit queries`)."""
    monkeypatch.setenv("COLUMNS", str(width))
    rc, out, err = _run(capsys, "charts")
    assert rc == 0 and err == ""
    assert max(map(len, out.splitlines())) <= width
    out = re.sub(r"\n +", " ", out)  # each chart's entry on one line again
    assert re.search(r"^roofline .*query roofline, needs an ncu run$", out, re.M)
    assert re.search(r"^kernel-headroom .*query kernel-headroom, needs an nsys run and an ncu run$", out, re.M)
    assert re.search(r"^sweep-latency .*needs runs of a sweep$", out, re.M)
    assert re.search(r"^diff .*tracekit diff's comparison, needs two runs or two sweeps$", out, re.M)
    assert re.search(r"^timeline .*; queries nvtx-ranges and gpu-trace with whole CUDA graph launches, needs an nsys run$", out, re.M)
    from tracekit.charts import CHARTS

    assert all(spec.source for spec in CHARTS.values() if spec.query is None)  # (each says where its data comes from)


HEAVY = ("polars", "pyarrow", "altair", "numpy", "pydantic", "rich", "torch", "triton")


def _imports(*args: str, heavy: tuple[str, ...] = (*HEAVY, "tracekit.capture")) -> str:
    """The ``heavy`` modules (and their submodules) a command imports, in a fresh process."""
    code = ("import sys; from tracekit.cli import main; "
            f"rc = main({list(args)!r}); "
            f"print(sorted(m for m in sys.modules if m.startswith({tuple(h + '.' for h in heavy)!r}) "
            f"or m in {heavy!r}), file=sys.stderr); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("args", [
    ["query", "top-kernels", "--limit", "3", "-p", "group=name"],
    ["query", "roofline", "--run", "ncu", "--timeunit", "us", "--all-columns", "-o", "{tmp}/r.txt"],
    ["runs"],
    ["queries", "top-kernels"],
    ["--version"],
])
def test_light_commands_import_nothing_heavy(db, tmp_path, args):
    """Neither Polars/Arrow/Altair nor Pydantic (Typer converts values through it;
    tracekit.cli_params does it for plain values) nor rich nor capture."""
    assert _imports("--db", db, *(a.format(tmp=tmp_path) for a in args)) == "[]"


def test_help_imports_neither_duckdb_nor_polars():
    """The help is Typer's rich layout (rich is imported), listing capture's commands
    (tracekit.capture.cli, standard library only), nothing more."""
    assert _imports("--help", heavy=("duckdb", *(h for h in HEAVY if h != "rich"))) == "[]"


def test_a_command_line_makes_only_the_command_it_runs(db, capsys):
    """Reading every command's signature and options took ~20 ms of each `tracekit query`:
    the group makes the command invoked; the help and an unknown name make all, in the
    order of creation, as Typer would."""
    import typer

    from tracekit import cli

    group = cli.built_lazily(cli.app)
    assert group.commands == {}
    group(args=["--db", db, "queries", "top-kernels"], prog_name="tracekit", standalone_mode=False)
    assert "top-kernels" in capsys.readouterr().out
    assert list(group.commands) == ["queries"]
    eager = typer.main.get_command(cli.app)
    assert group.list_commands(None) == eager.list_commands(None)
    assert eager.list_commands(None)[-2:] == ["capture", "sweep"]  # (imported only when asked for)
    with pytest.raises(Exception, match=r"No such command 'querys'\. Did you mean 'query', 'queries'\?"):
        group(args=["querys"], prog_name="tracekit", standalone_mode=False)
    made = {n: [p.name for p in c.params] for n, c in group.commands.items()}
    assert made == {n: [p.name for p in c.params] for n, c in eager.commands.items()}


def test_a_query_asked_by_name_parses_its_header_alone(monkeypatch):
    """`tracekit query top-kernels` parses one query's header, not all 71; an alias or an
    unknown name needs them all."""
    from tracekit import registry

    parsed = []
    real = registry.parse_header
    monkeypatch.setattr(registry, "parse_header", lambda name, *a: parsed.append(name) or real(name, *a))
    reg = registry.get_registry.__wrapped__()
    assert reg.get("top-kernels").name == "top-kernels" and parsed == ["top-kernels"]
    assert reg.get("cuda_gpu_kern_sum").name == "top-kernels"
    assert sorted(parsed) == sorted(reg.queries) and len(parsed) == len(reg.queries) > 60
    with pytest.raises(registry.QueryError, match="did you mean top-kernels"):
        reg.get("top-kernel")


def test_values_are_converted_and_bad_ones_named(db, capsys, tmp_path):
    rc, out, _ = _run(capsys, "--db", db, "query", "top-kernels", "--limit", " 2", "-p", "group=name",
                      "-f", "csv", "-o", str(tmp_path / "k.csv"))
    assert rc == 0 and len((tmp_path / "k.csv").read_text().splitlines()) == 3
    for bad in ("x", "\u0663", "1.0"):  # (an Arabic-Indic 3 is no integer here, as for -p limit)
        rc, _, err = _run(capsys, "--db", db, "query", "top-kernels", "--limit", bad)
        assert (rc, err) == (2, f"tracekit: error: Invalid value for '--limit': {bad!r} is not a valid integer.\n")
    rc, _, _ = _run(capsys, "--db", db, "query", "top-kernels", "--limit", "1,000")  # (as tables print it)
    assert rc == 0
    rc, _, err = _run(capsys, "--db", db, "diff", "hstu", "hstu", "--threshold", "5%")
    assert (rc, err) == (2, "tracekit: error: Invalid value for '--threshold': '5%' is not a valid number.\n")


# -- runs: rename, rm, the same capture however reached ----------------------------------


def _counts(tk, run_id: int) -> dict[str, int]:
    tables = [r[0] for r in tk.con.execute(
        "SELECT DISTINCT table_name FROM duckdb_columns() WHERE column_name = 'run_id' AND table_name IN "
        "(SELECT table_name FROM duckdb_tables())").fetchall()]
    return {t: tk.con.execute(f'SELECT count(*) FROM "{t}" WHERE run_id = ?', [run_id]).fetchall()[0][0]
            for t in tables}


def test_runs_rename_and_rm(tmp_path, capsys):
    path = tmp_path / "r.duckdb"
    with tracekit.open(path) as tk:
        a = tk.ingest(EXAMPLE, name="a")
        b = tk.ingest(NCU, name="b")
        before_b = _counts(tk, b.run_id)
    assert sum(before_b.values()) > 1000
    rc, out, _ = _run(capsys, "--db", str(path), "runs", "rename", "a", "hstu")
    assert rc == 0 and out.strip() == "run 1: renamed 'a' to 'hstu'"
    rc, out, _ = _run(capsys, "--db", str(path), "runs", "rm", "hstu")
    assert rc == 0 and out.strip() == "removed run 1 (hstu)"
    with tracekit.open(path, read_only=True) as tk:
        assert sum(_counts(tk, a.run_id).values()) == 0
        assert _counts(tk, b.run_id) == before_b
        assert tk.runs()["name"].to_list() == ["b"]
    for args, msg in ((["runs", "rm", "nope"], "no run 'nope'"), (["runs", "rename", "b", " "], "cannot be empty"),
                      (["runs", "rm", "²"], "no run '²'"), (["runs", "rename", "²", "x"], "no run '²'"),
                      (["runs", "rename", "b", "7"], "'7' cannot name a run: --run reads it as a run id"),
                      (["runs", "rename", "b", "Latest"], "'Latest' cannot name a run"),
                      (["runs", "rename", "b", "all"], "'all' cannot name a run"),
                      (["runs", "rename", "b", "sweep-20261122T012018.110Z"], "it reads as a sweep id"),
                      (["runs", "rename", "b", "x\n\x1b[31m"], "'x\\n\\x1b[31m' cannot name a run: it holds control"),
                      # a path here: diff and compare read it as the file (ingesting it), --run as the name
                      (["runs", "rename", "b", str(EXAMPLE)], "cannot name a run: it is a file here, which diff and "
                                                              "compare read as that file"),
                      (["ingest", str(EXAMPLE), "--name", str(DATA / "nsys_diff_base_a" / "export.sqlite.xz")],
                       "cannot name a run: it is a file here"),
                      (["ingest", str(EXAMPLE), "--name", "latest", "--workers", "2"], "'latest' cannot name a run")):
        rc, _, err = _run(capsys, "--db", str(path), *args)
        assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1
    with tracekit.open(path, read_only=True) as tk:
        assert tk.runs()["name"].to_list() == ["b"]
    # a path diff reads as no file to compare (a folder with nothing to ingest), or the run's own input: a name
    with tracekit.open(tmp_path / "own.duckdb") as tk:
        run = tk.ingest(EXAMPLE, name=str(EXAMPLE)).run_id
        tk.rename_run(run, str(tmp_path))
        assert tk.runs()["name"].to_list() == [str(tmp_path)]


def test_rm_of_a_shared_name_asks_for_an_id(tmp_path, capsys):
    path = tmp_path / "r.duckdb"
    with tracekit.open(path) as tk:  # (names shared: a store of a tracekit that allowed it)
        tk.ingest(EXAMPLE, name="x")
        tk.ingest(NCU)
        tk.con.execute("UPDATE runs SET name = 'x'")
    rc, _, err = _run(capsys, "--db", str(path), "runs", "rm", "x")
    assert rc == 2 and "shared by runs 1, 2" in err
    # every reference is resolved first: a bad one after good ones removes nothing
    for args in (["2", "x"], ["1", "nope"], ["2", "999"]):
        rc, out, err = _run(capsys, "--db", str(path), "runs", "rm", *args)
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, (args, out, err)
    rc, out, _ = _run(capsys, "--db", str(path), "runs", "rm", "1", "1")  # the same run twice: removed once
    assert rc == 0 and out.strip() == "removed run 1 (x)"
    with tracekit.open(path, read_only=True) as tk:
        assert tk.runs()["run_id"].to_list() == [2]


def test_ingest_name_renames_an_ingested_run(tmp_path, capsys):
    path = str(tmp_path / "r.duckdb")
    assert _run(capsys, "--db", path, "ingest", str(NCU))[0] == 0
    rc, out, _ = _run(capsys, "--db", path, "ingest", str(NCU), "--name", "full")
    assert rc == 0 and "already ingested as run 1 (full, renamed from 'report')" in out
    assert tracekit.open(path, read_only=True).runs()["name"].to_list() == ["full"]
    for bad in ("7", "all", "latest", " "):  # what --run would read as something else
        rc, _, err = _run(capsys, "--db", path, "ingest", str(NCU), "--name", bad)
        assert rc == 2 and err.count("\n") == 1 and "name" in err
    assert tracekit.open(path, read_only=True).runs()["name"].to_list() == ["full"]


def test_a_file_name_that_cannot_name_a_run_gives_one_that_can(tmp_path, capsys):
    """Without --name a run is named by its file's stem (``.hidden.csv.xz``: ``.hidden``);
    where --run would read the stem as something else (an id, a keyword), by
    the file's name uncompressed; control characters are escaped, on the terminal and in
    the name."""
    sources = [DATA / f for f in ("ncu_sections/details.csv.xz", "ncu_diff_a/details_labels.csv.xz",
                                  "ncu_diff_b/details_labels.csv.xz", "ncu_source/details_labels.csv.xz")]
    files = ["7.csv.xz", ".hidden.csv.xz", "All.csv.xz", "ev\nil\x1b[2J.csv.xz"]
    for src, name in zip(sources, files, strict=True):
        (tmp_path / name).write_bytes(src.read_bytes())
    db = str(tmp_path / "r.duckdb")
    rc, out, _ = _run(capsys, "--db", db, "ingest", *(str(tmp_path / n) for n in files))
    assert rc == 0 and len(out.splitlines()) == 4 and "\x1b" not in out, out
    assert tracekit.open(db, read_only=True).runs()["name"].to_list() == [
        "7.csv", ".hidden", "All.csv", "ev\\nil\\x1b[2J"]
    assert names.derived_run_name("all") == "run-all" and names.derived_run_name(" 12 ") == "run-12"


def test_a_run_folders_export_is_the_same_run(tmp_path):
    """The .sqlite.xz inside an ingested run folder is that run; ingested alone first,
    the folder's run takes its place (same id, its rows, its metadata)."""
    with tracekit.open(tmp_path / "a.duckdb") as tk:
        folder = tk.ingest(EXAMPLE)
        again = tk.ingest(EXAMPLE / "nsys.sqlite.xz")
        assert again.skipped and again.run_id == folder.run_id
        assert tk.runs().height == 1
    with tracekit.open(tmp_path / "b.duckdb") as tk:
        alone = tk.ingest(EXAMPLE / "nsys.sqlite.xz", name="mine")
        folder = tk.ingest(EXAMPLE)
        assert not folder.skipped and folder.replaced == alone.run_id == folder.run_id
        runs = tk.runs()
        assert runs["name"].to_list() == ["mine"] and runs["kind"].to_list() == ["nsys,timing"]
        assert tk.sql("SELECT count(*) AS n FROM requests")["n"][0] > 0
        kernels = tk.sql("SELECT count(*) AS n FROM _kernels")["n"][0]
    with tracekit.open(tmp_path / "a.duckdb") as tk:
        assert tk.sql("SELECT count(*) AS n FROM _kernels")["n"][0] == kernels


def test_sql_table_shows_the_first_thousand_rows(db, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    _, out, _ = _run(capsys, "--db", db, "sql", "SELECT range_id, dur_ns FROM nvtx_ranges ORDER BY range_id")
    n = tracekit.open(db, read_only=True).sql("SELECT count(*) AS n FROM nvtx_ranges")["n"][0]
    assert n > 1000 and len(_rows(out)) == 1000
    assert out.rstrip().splitlines()[-1] == f"1,000 of {n:,} rows (-f csv for all, or LIMIT in the SQL)"
    _, out, _ = _run(capsys, "--db", db, "sql", "SELECT range_id FROM nvtx_ranges", "-f", "csv")
    assert out.count("\n") == n + 1
    # a result larger than memory (4e9 BIGINTs, 32 GB): its first rows, the rest counted, not held
    _, out, _ = _run(capsys, "--db", db, "sql", "SELECT * FROM range(4000000000)")
    assert len(_rows(out)) == 1000
    assert out.rstrip().splitlines()[-1] == "1,000 of 4,000,000,000 rows (-f csv for all, or LIMIT in the SQL)"
    with tracekit.open(db, read_only=True) as tk:
        head, total = tk.sql_head("SELECT range_id FROM nvtx_ranges ORDER BY range_id DESC", rows=3)
        assert head["range_id"].to_list() == sorted(head["range_id"].to_list(), reverse=True) and total == n
        assert tk.sql_head("SELECT 1 AS a", rows=3)[0].height == 1 and tk.sql_head("CHECKPOINT", rows=3)[1] == 0


def test_display_columns_without_a_value_are_left_out(db, capsys, tmp_path):
    """ncu-source shows its instruction columns by instruction only: by line they hold no
    value, and the footer counts them among the hidden columns and names them; so does
    nvtx-memory its NVTX path and time held where every allocation (hstu_capture_mem's) was
    made outside NVTX ranges and none was freed."""
    rc, by_line, _ = _run(capsys, "--db", db, "query", "ncu-source", "--run", "ncu", "-p", "kernel=softmax",
                          "--limit", "3")
    header = by_line.split("\n-")[0]
    assert rc == 0 and "location" in header and "sass" not in header and "offset" not in header
    rc, by_inst, _ = _run(capsys, "--db", db, "query", "ncu-source", "--run", "ncu", "-p", "kernel=softmax",
                          "-p", "by=instruction", "--limit", "3")
    assert rc == 0 and "sass" in by_inst.split("\n-")[0]
    counted = [re.search(r"; ([0-9]+) of [0-9]+ columns \((.*)\)$", out.rstrip()) for out in (by_line, by_inst)]
    assert int(counted[0][1]) == int(counted[1][1]) - 2
    assert counted[0][2].endswith("pc_offset, sass; --all-columns for all") and "sass" not in counted[1][2]
    mem = str(tmp_path / "m.duckdb")
    assert _run(capsys, "--db", mem, "ingest", str(DATA / "hstu_capture_mem"))[0] == 0
    rc, out, _ = _run(capsys, "--db", mem, "query", "nvtx-memory")
    assert rc == 0 and out.rstrip().endswith("columns (no value in nvtx_path, held_ns; --all-columns for all)"), out
    # (--limit: what the rows shown lack, which rows past them may hold: nsys_mem's first row is outside ranges)
    assert _run(capsys, "--db", mem, "ingest", str(NSYS_EXPORTS["mem"]))[0] == 0
    rc, out, _ = _run(capsys, "--db", mem, "query", "nvtx-memory", "--limit", "1")
    assert rc == 0 and "(no value in these rows' nvtx_path" in out.splitlines()[-1], out


def test_an_nvtx_range_without_text_reads_unnamed_in_tables_and_diffs(tmp_path, capsys):
    """A range pushed with no text (nsys_odd_nvtx) has the empty path: in a terminal table
    and a diff's display it reads `(unnamed)`, not a blank cell; the data (csv, the library's
    frames) keep the name as nsys has it."""
    from conftest import NSYS_EXPORTS

    db = str(tmp_path / "odd.duckdb")
    assert _run(capsys, "--db", db, "ingest", str(NSYS_EXPORTS["odd_nvtx"]))[0] == 0
    rc, out, _ = _run(capsys, "--db", db, "query", "kernels-by-nvtx", "--limit", "0")
    assert rc == 0
    row = next(line for line in out.splitlines() if " 1,248 " in line)  # the unnamed range's one kernel
    assert "(unnamed)" in row and out.count("(unnamed)") == 1, out
    rc, out, _ = _run(capsys, "--db", db, "query", "kernels-by-nvtx", "--limit", "0", "-f", "csv")
    assert rc == 0 and '\n"",1,1,1248,' in out and "(unnamed)" not in out
    rc, out, _ = _run(capsys, "--db", db, "diff", "1", "1", "--by", "nvtx", "--limit", "0")
    keys = [line.split()[1] for line in out.splitlines()[2:-1]]
    assert rc == 0 and keys[:5] == ["(unnamed)"] * 5 and "" not in keys, out
    with tracekit.open(db, read_only=True) as tk:
        assert tk.diff(1, 1, by="nvtx").filter(pl.col("key") == "").height == 5


@pytest.mark.parametrize("query", ["ncu-kernels", "roofline", "occupancy", "speed-of-light", "memory-workload",
                                   "warp-stalls", "ncu-rules", "ncu-source", "ncu-summary", "compute-workload"])
def test_run_all_of_an_ncu_query_shows_the_run_of_each_row(tmp_path, capsys, monkeypatch, query):
    """Two ncu reports (ncu_diff_a, _b: kernels 0, 1, 2 each): with --run all the table's
    first column is the run, so kernel 0 of one is told from kernel 0 of the other; asked
    of one run, no such column."""
    monkeypatch.setenv("COLUMNS", "400")
    db = str(tmp_path / "two.duckdb")
    with tracekit.open(db) as tk:
        for side in ("a", "b"):
            tk.ingest(DATA / f"ncu_diff_{side}" / "report.ncu-rep.xz", name=f"ncu_{side}")
    rc, out, err = _run(capsys, "--db", db, "query", query, "--run", "all", "--limit", "0")
    assert rc == 0 and err == ""
    lines = out.splitlines()
    rule = next(i for i, line in enumerate(lines) if set(line) <= {"-", " "} and "-" in line)
    assert lines[rule - 1].split()[0] == "run_id", out  # (the header's last line, above the rule)
    assert {line.split()[0] for line in _rows(out)} == {"1", "2"}
    rc, out, _ = _run(capsys, "--db", db, "query", query, "--limit", "0")
    assert rc == 0 and "run_id" not in out


def test_the_occupancy_table_names_the_block_size_that_holds_more_warps(tmp_path, capsys, monkeypatch):
    """ncu_occupancy_b's Triton GEMM, held at 6.25 % by its shared memory at 128 threads a block,
    would hold twice the warps at 256: the occupancy table at the default width is a grid of
    rows (not one block per row) and shows that size beside what one block more needs."""
    monkeypatch.setenv("COLUMNS", "120")
    db = str(tmp_path / "o.duckdb")
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "ncu_occupancy_b" / "report.ncu-rep.xz", name="occupancy_b")
    rc, out, _ = _run(capsys, "--db", db, "query", "occupancy")
    assert rc == 0 and "-[ row 1 ]" not in out, out
    head = [line.split() for line in out.splitlines()[:3]]  # (the name's header on the last line only)
    assert [head[0][-1], head[1][-1], head[2][-2]] == ["best_", "block_", "size"], out
    gemm = [line.split() for line in _rows(out) if line.endswith("matmul_kernel")]
    assert len(gemm) == 2 and all(r[1] == "128" and r[3] == "6.2" and r[-2] == "256" for r in gemm), out


def test_sweep_point_settings_and_kernels_outside_ranges_read_plainly(db, capsys):
    """The example capture (bs 8, nc 1024, L2 flushes launched outside every NVTX range): nc
    reads 1024 as `tracekit runs` writes it (nc=1024), not 1,024 (a setting, not a count);
    nvtx-kernels names the kernels outside every range (no range) as kernels-by-nvtx does."""
    rc, out, _ = _run(capsys, "--db", db, "query", "sweep-latency", "--columns", "bs,nc,requests")
    assert rc == 0 and _rows(out)[0].split() == ["8", "1024", "30"]
    rc, out, _ = _run(capsys, "--db", db, "query", "nvtx-kernels", "--run", "hstu", "--columns", "range,name",
                      "--limit", "1")
    assert rc == 0 and _rows(out)[0].startswith("(no range) ")
    rc, out, _ = _run(capsys, "--db", db, "query", "kernels-by-nvtx", "--run", "hstu", "--columns", "path",
                      "--limit", "0")
    assert "(no range)" in _rows(out)


def test_names_of_the_same_words_in_another_order_are_told_apart_by_where_they_part():
    """nsys's operation names "[CUDA memcpy Unified Host-to-Device]" and "... Device-to-Host]"
    have the same words: told apart by where they part (they were "#1" and "#2")."""
    ops = ["[CUDA memcpy Unified Host-to-Device]", "[CUDA memcpy Unified Device-to-Host]",
           "[CUDA memcpy Host-to-Device]", "[CUDA memcpy Device-to-Host]", "[CUDA memset]"]
    for width in (12, 16, 20):
        labels = names.distinct_labels(ops, width)
        assert len(set(labels)) == len(labels) and max(map(len, labels)) <= width
        assert not any("#" in lab for lab in labels), (width, labels)
    assert names.distinct_labels(ops, 16)[:2] == ["…Host-to-Device]", "…Device-to-Host]"]


def test_a_name_without_a_word_of_its_own_is_told_by_the_identifier_where_it_parts():
    """PyTorch's index_elementwise_kernel for indexing and for index_put (the HSTU workload's
    reference attention, real): every word of the first is in the second, so it was told apart
    by its tail ("…kernel_impl<at::native::OpaqueType<(int)4>>(at::Tensor…"); now by the
    identifier where the two names part."""
    stats = next((DATA / "hstu_nsys_sweep" / "reference" / "runs").glob("*bs4-nc512*")) / "stats"
    with open(stats / "cuda_gpu_kern_sum.csv") as fh:
        index = sorted({r["Name"] for r in csv.DictReader(fh) if "index_elementwise_kernel" in r["Name"]})
    get = next(n for n in index if "index_kernel_impl<at::native::OpaqueType<(int)4>>" in n)
    put = next(n for n in index if "index_put_kernel_impl" in n)
    assert names.distinct_labels([get, put], 60, names.short_name) == [
        "at::native::index_elementwise_kernel [index_kernel_impl]", "at::native::index_elementwise_kernel [put]"]


def test_escape_sequences_in_a_captures_names_are_shown_escaped(tmp_path, capsys):
    """A kernel name and an NVTX range text holding terminal escapes (clear the screen,
    retitle the window, an 8-bit CSI): a table shows them escaped, whatever the query or
    command, so reading a capture cannot act on the terminal; CSV keeps the names as they are."""
    import sqlite3

    from conftest import NSYS_EXPORTS

    from tracekit.ingest import materialized

    export = tmp_path / "evil.sqlite"
    with materialized(NSYS_EXPORTS["odd_nvtx"]) as src:
        export.write_bytes(src.read_bytes())
    kernel = "softmax_warp_forward\x1b]0;pwned\x07\x1b[2J\x9b31m"
    with sqlite3.connect(export) as con:
        (sid,) = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                             "ON s.id = k.shortName WHERE s.value = 'softmax_warp_forward'").fetchone()
        con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (kernel, sid))
        con.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text = 'deep'", ("deep\x1b[2J\x9b31m",))
    db = str(tmp_path / "evil.duckdb")
    assert _run(capsys, "--db", db, "ingest", str(export))[0] == 0
    for args in (["query", "top-kernels"], ["query", "top-kernels", "--all-columns"], ["query", "nvtx-summary"],
                 ["query", "kernels-by-nvtx", "--limit", "0"], ["query", "gpu-trace", "--limit", "0"],
                 ["diff", "1", "1", "--by", "kernel", "--by", "nvtx", "--limit", "0"],
                 ["sql", "SELECT name FROM kernels"]):
        rc, out, err = _run(capsys, "--db", db, *args)
        assert rc == 0, (args, err)
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", out + err), (args, out)
    rc, out, _ = _run(capsys, "--db", db, "query", "nvtx-summary", "--columns", "range")
    assert ":deep\\x1b[2J\\x9b31m" in out
    rc, out, _ = _run(capsys, "--db", db, "query", "top-kernels", "-f", "csv")
    assert rc == 0 and kernel in out  # the data as the capture has it


@pytest.mark.parametrize("width", [100, 40, 33])
def test_wide_characters_take_two_columns_and_stay_aligned(tmp_path, capsys, monkeypatch, width):
    """nsys_odd_nvtx has a range named `注意力 → attention`: each CJK character takes two
    columns of a terminal, so the table measures, cuts and pads by columns, not characters:
    every line's numbers end in the same column, none past the width."""
    from conftest import NSYS_EXPORTS

    monkeypatch.setenv("COLUMNS", str(width))
    db = str(tmp_path / "odd.duckdb")
    assert _run(capsys, "--db", db, "ingest", str(NSYS_EXPORTS["odd_nvtx"]))[0] == 0
    rc, out, _ = _run(capsys, "--db", db, "query", "nvtx-summary", "--limit", "0",
                      "--columns", "range,total_ns,instances")
    assert rc == 0
    lines = _rows(out)
    cjk = next(line for line in lines if "注" in line)
    assert len({names.text_width(line) for line in lines}) == 1, out  # (instances ends every line)
    assert names.text_width(cjk) <= width
    if width == 33:  # cut to the column's 13: ':注意力 → at…'
        assert cjk.startswith(":注意力 → at…  ")
    assert names.cut_end("注意力 → attention", 6) == "注意…"


def test_a_time_too_small_for_its_columns_unit_does_not_read_as_zero(tmp_path, capsys):
    """nsys_cpu_hot's stream 7 ran one 992 ns op: in gpu-utilization's span column, in seconds
    (the other streams span 3.6 s), it reads <0.001, not 0.000, which its gaps (none: 0) read;
    csv keeps the ns."""
    from conftest import NSYS_EXPORTS

    db = str(tmp_path / "cpu.duckdb")
    assert _run(capsys, "--db", db, "ingest", str(NSYS_EXPORTS["cpu_hot"]))[0] == 0
    rc, out, _ = _run(capsys, "--db", db, "query", "gpu-utilization", "--columns", "stream_id,ops,span_ns,gap_total_ns")
    assert rc == 0 and out.splitlines()[0].split() == ["stream_id", "ops", "span_s", "gap_total_s"]
    cells = {r.split()[0]: r.split()[1:] for r in _rows(out) if r.split()[0] in ("7", "13")}
    assert cells["7"] == ["1", "<0.001", "0.000"] and cells["13"][1] == "3.551"
    rc, out, _ = _run(capsys, "--db", db, "query", "gpu-utilization", "-f", "csv", "--columns", "stream_id,span_ns")
    assert "\n7,992\n" in out


def test_columns_left_empty_for_want_of_metrics_are_said(db, tmp_path, capsys):
    """ncu_sections (LaunchStats, Occupancy, SpeedOfLight_RooflineChart: FP32/FP64 and DRAM
    counters, no FP16 or tensor ones) gives no summed FLOP rate: the roofline's display
    columns without a value are named under the table with where to read why, not dropped
    without a word; a complete report's table says nothing of the kind."""
    sections = str(tmp_path / "s.duckdb")
    assert _run(capsys, "--db", sections, "ingest", str(DATA / "ncu_sections" / "report.ncu-rep.xz"))[0] == 0
    rc, out, _ = _run(capsys, "--db", sections, "query", "roofline")
    assert rc == 0 and out.splitlines()[-2].endswith(
        "(no value in precision, flops_per_s, ai_dram, roof_pct, bound; --all-columns for all)")
    assert out.splitlines()[-1] == "the report lacks metrics (--columns missing_metrics names them)"
    rc, out, _ = _run(capsys, "--db", sections, "query", "roofline", "--columns", "kernel_id,missing_metrics")
    assert rc == 0 and "smsp__sass_thread_inst_executed_op_{hadd,hmul,hfma}" in out and "no value in" not in out
    rc, out, _ = _run(capsys, "--db", db, "query", "roofline", "--run", "ncu")
    assert rc == 0 and "no value in" not in out and out.splitlines()[-1].startswith("4 rows")
