"""ncu ingest: every export of the same real report gives the same launches and metrics;
bad input is a one-line InputError (exit code 2) and leaves the database unchanged."""

from __future__ import annotations

import csv
import io
import lzma
import random
import re
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.cli import main as cli_main
from tracekit.errors import InputError
from tracekit.ingest import ncu

DATA = Path(__file__).parent / "data"
NVTX = ["ncu/gemm_bf16", "ncu/elementwise_fp32", "ncu/triton_softmax", "ncu/reduction"]
SOURCES = [
    "report.ncu-rep",
    "raw.csv",
    "raw_default_units.csv",
    "details.csv",
    "details_labels.csv",
]


def unxz(src: Path, dst_dir: Path, name: str | None = None) -> Path:
    out = dst_dir / (name or src.name.removesuffix(".xz"))
    out.write_bytes(lzma.decompress(src.read_bytes()))
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """Every committed ncu fixture, decompressed: (variant, file) -> path."""
    out = {}
    for variant in ("full", "sections"):
        d = tmp_path_factory.mktemp(f"ncu_{variant}")
        for f in SOURCES:
            out[(variant, f)] = unxz(DATA / f"ncu_{variant}" / f"{f}.xz", d)
    return out


def metrics_of(parsed) -> pl.DataFrame:
    return pl.from_arrow(parsed.tables["ncu_metrics"])


def kernels_of(parsed) -> pl.DataFrame:
    return pl.from_arrow(parsed.tables["ncu_kernels"])


@pytest.mark.parametrize("variant", ["full", "sections"])
@pytest.mark.parametrize("source", SOURCES)
def test_every_export_reads_the_same_launches(plain, variant, source):
    path = plain[(variant, source)]
    with open(path, "rb") as fh:
        assert ncu.sniff(path, fh.read(64 * 1024))
    p = ncu.read(path)
    assert p.kind == "ncu"
    # rule results from a report or a details page; the raw page has none; instruction-level
    # data from a report of launches with Source Counters (--set full) only
    rules = not source.startswith("raw")
    instructions = {"ncu_source", "ncu_source_stalls", "ncu_source_lines"}
    assert set(p.tables) == ({"ncu_kernels", "ncu_metrics"} | ({"ncu_rules"} if rules else set())
                             | (instructions if source.startswith("report") and variant == "full" else set()))
    assert ("source_launches" in p.meta) == (source.startswith("report") and variant == "full")
    assert ("rule_results" in p.meta) == rules
    assert all("run_id" not in t.column_names for t in p.tables.values())
    k = kernels_of(p)
    assert k["kernel_id"].to_list() == [0, 1, 2, 3]
    assert k["nvtx_path"].to_list() == NVTX
    assert k["nvtx_range"].to_list() == [n.split("/")[1] for n in NVTX]
    assert k["nvtx_ranges"].to_list()[0] == ["ncu", "gemm_bf16"]
    assert k.select("grid_x", "grid_y", "grid_z").rows() == [
        (2, 66, 1),
        (16384, 1, 1),
        (4096, 1, 1),
        (1, 528, 1),
    ]
    assert k.select("block_x", "block_y", "block_z").rows() == [
        (384, 1, 1),
        (128, 1, 1),
        (128, 1, 1),
        (512, 1, 1),
    ]
    assert k["cc"].to_list() == ["9.0"] * 4
    assert k["stream_id"].to_list() == [7] * 4
    assert k["device_id"].to_list() == [0] * 4
    assert k["name"][0] == "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
    assert k["name"][2] == "softmax_kernel"
    assert "addcmul" in k["name"][1] and "reduce_kernel" in k["name"][3]
    m = metrics_of(p)
    regs = m.filter(pl.col("metric") == "launch__registers_per_thread").sort("kernel_id")
    assert regs["value"].to_list() == [168, 40, 23, 32]
    assert regs["unit"].to_list() == ["register/thread"] * 4
    dur = m.filter(pl.col("metric") == "gpu__time_duration.sum")
    if not (
        variant == "sections" and source.startswith("details")
    ):  # details print no SOL section there
        assert dur["unit"].to_list() == ["ns"] * 4
        assert dur["value"].min() > 5_000 and dur["value"].max() < 500_000


def test_report_kernel_names_and_ids(plain):
    k = kernels_of(ncu.read(plain[("full", "report.ncu-rep")]))
    assert k["mangled_name"][1].startswith("_ZN2at6native29vectorized_elementwise_kernel")
    assert k["function_name"].to_list()[2] == "softmax_kernel"


def _compare(a: pl.DataFrame, b: pl.DataFrame, rel: float, abs_: float) -> pl.DataFrame:
    """Rows of b whose value differs from a's (same kernel, metric) beyond tolerance."""
    j = a.join(b, on=["kernel_id", "metric"], suffix="_b")
    assert j.height == b.height, "every metric of the CSV is in the report"
    diff = (pl.col("value") - pl.col("value_b")).abs()
    return j.filter(
        (pl.col("value").is_null() != pl.col("value_b").is_null())
        | (diff > abs_ + rel * pl.col("value").abs())
    ).filter(
        ~pl.col("metric").str.starts_with("derived_")
    )  # instanced helper metrics ncu aggregates inconsistently


def test_csv_values_equal_report_values_in_base_units(plain):
    rep = metrics_of(ncu.read(plain[("full", "report.ncu-rep")]))
    base = metrics_of(ncu.read(plain[("full", "raw.csv")]))
    # --print-units base prints 2 decimals: equal to the report within that rounding
    assert _compare(rep, base, 1e-12, 0.0051).height == 0
    assert base.height > 8000
    # display units (Ghz, Mbyte, us, sector/ns, ...) converted back to base units
    disp = metrics_of(ncu.read(plain[("full", "raw_default_units.csv")]))
    bad = _compare(rep, disp, 2e-3, 0.0051)
    assert bad.height <= 6, bad  # a few display values keep only 3 significant digits
    row = disp.filter(
        (pl.col("kernel_id") == 0) & (pl.col("metric") == "dram__cycles_elapsed.avg.per_second")
    )
    assert row["unit"][0] == "hz" and row["value"][0] == pytest.approx(3.198729e9, rel=1e-6)
    # details with labels: mapped back to metric names, values rounded as printed
    lab = metrics_of(ncu.read(plain[("full", "details_labels.csv")]))
    names = metrics_of(ncu.read(plain[("full", "details.csv")]))
    assert sorted(lab["metric"].unique()) == sorted(names["metric"].unique())
    assert _compare(rep, lab, 5e-3, 0.0051).height == 0


def test_text_and_na_values(plain):
    m = metrics_of(ncu.read(plain[("full", "raw.csv")]))
    gpu = m.filter(pl.col("metric") == "device__attribute_display_name")
    assert gpu["text_value"].unique().to_list() == ["NVIDIA H200"] and gpu["value"].is_null().all()
    nodata = m.filter(pl.col("text_value") == "no data")
    assert nodata.height > 0 and nodata["value"].is_null().all()


def test_a_value_ncu_could_not_compute_is_null_as_on_the_raw_page(plain):
    """A metric ncu could not compute is missing, not a number. ncu_report gives NaN for
    derived_tempMetric4 of every launch of ncu_full, which ncu's raw page prints as "nan"
    (and launch__occupancy_limit_shared_mem of every launch of a public Jetson Xavier
    report, which broke the occupancy query): the report and the page store the same rows,
    value NULL and the text "nan", and no value is NaN or infinite."""
    rep = metrics_of(ncu.read(plain[("full", "report.ncu-rep")]))
    raw = metrics_of(ncu.read(plain[("full", "raw.csv")]))
    assert not rep["value"].is_nan().any() and not rep["value"].is_infinite().any()

    def tmp(m):
        return m.filter(pl.col("metric") == "derived_tempMetric4").sort("kernel_id").select(
            "kernel_id", "value", "text_value")

    assert tmp(rep).rows() == tmp(raw).rows() == [(k, None, "nan") for k in range(4)]


def test_the_report_says_which_ncu_made_it(plain, tmp_path):
    """runs.tool_version of an ncu run: what the report says (its "Nsight Compute Target"
    entry, written by ncu 2020.3 and later); a CSV page does not say, nor did reports of
    ncu 2020.1 and older (public V100 and Jetson Xavier reports): NULL, not guessed. A run
    folder's CSV page takes the version from the report beside it."""
    rep = plain[("full", "report.ncu-rep")]
    assert ncu.read(rep).meta["tool_version"] == "2025.3.1.0 (build 36398880)"
    assert "tool_version" not in ncu.read(plain[("full", "raw.csv")]).meta
    assert "tool_version" not in ncu.read(plain[("full", "details.csv")]).meta
    data = rep.read_bytes()
    assert data.count(b"Nsight Compute Target") == 1
    older = tmp_path / "older.ncu-rep"  # the entry renamed (same length): a report that does not say
    older.write_bytes(data.replace(b"Nsight Compute Target", b"Nsight Compute Xarget"))
    assert "tool_version" not in ncu.read(older).meta
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "meta.json").write_text('{"name": "folder", "params": {}}')  # (no versions: the capture's ncu --version)
    for f in ("raw.csv", "report.ncu-rep"):
        (folder / f).write_bytes(plain[("sections", f)].read_bytes())
    with tracekit.open(tmp_path / "t.duckdb") as tk:
        for path, name in ((rep, "report"), (plain[("full", "raw.csv")], "csv"), (older, "older"), (folder, "folder")):
            tk.ingest(path, name=name)
        versions = dict(tk.sql("SELECT name, tool_version FROM runs").rows())
        assert versions == {"report": "2025.3.1.0 (build 36398880)", "csv": None, "older": None,
                            "folder": "2025.3.1.0 (build 36398880)"}
        assert tk.sql("SELECT json_extract_string(meta, '$.ncu_export') FROM runs WHERE name = 'folder'").item() \
            == "csv-raw"


def test_every_committed_report_says_which_ncu_made_it(tmp_path):
    """A block header may list several components ("CUDA Version", "PerfWorks", "Nsight
    Compute Target" as repeated entries of one system field, as ncu_app_range's report
    does) or one per block (the other reports): the version is found either way. Taking
    only the first entry left tool_version NULL for the app-range report."""
    from tracekit.ingest.ncu_rep import NCU_COMPONENT, check_container

    reports = sorted(DATA.glob("*/report.ncu-rep.xz")) + [DATA / "hstu_capture_ncu" / "ncu.ncu-rep.xz"]
    assert len(reports) > 10
    for src in reports:
        rep = unxz(src, tmp_path, f"{src.parent.name}.ncu-rep")
        versions = check_container(rep).versions
        assert versions.get(NCU_COMPONENT) == "2025.3.1.0 (build 36398880) (public-release)", (src, versions)
        assert versions.get("CUDA Version") == "13.0", (src, versions)
    rep = tmp_path / "ncu_app_range.ncu-rep"
    assert ncu.read(rep).meta["tool_version"] == "2025.3.1.0 (build 36398880)"


# -- the store ---------------------------------------------------------------


def test_two_reports_in_one_process_keep_their_own_units(tmp_path):
    """NVIDIA's ncu_report keeps metric definitions per process: read after ncu_sections,
    ncu_full's derived metrics took ncu_sections' units. Each report's units are the ones
    its own raw CSV (ncu --page raw --csv) prints."""
    def csv_units(scen):
        lines = lzma.open(DATA / scen / "raw.csv.xz", "rt").read().splitlines()[:2]
        header, units = csv.reader(lines)
        return {h: u for h, u in zip(header, units, strict=True) if h.startswith("derived__") and u}

    with tracekit.open(tmp_path / "t.duckdb") as tk:
        for scen in ("ncu_sections", "ncu_full", "ncu_sections"):
            run = tk.ingest(DATA / scen / "report.ncu-rep.xz").run_id
            want = csv_units(scen)
            got = dict(tk.sql(f"SELECT DISTINCT metric, unit FROM ncu_metrics WHERE run_id = {run} "
                              "AND metric LIKE 'derived__%'").rows())
            assert want and {m: got[m] for m in want if m in got} == want, scen


def test_store_ingest_compressed_report(tmp_path):
    tk = tracekit.open(tmp_path / "t.duckdb")
    r = tk.ingest(DATA / "ncu_full" / "report.ncu-rep.xz", name="full")
    assert (r.kind, r.rows) == ("ncu", {"ncu_kernels": 4, "ncu_metrics": 8972, "ncu_rules": 46, "ncu_source": 5448,
                                        "ncu_source_stalls": 923, "ncu_source_lines": 0})
    runs = tk.sql("SELECT kind, gpu FROM runs").rows()
    assert runs == [("ncu", "NVIDIA H200")]
    again = tk.ingest(DATA / "ncu_full" / "report.ncu-rep.xz")
    assert again.skipped and again.run_id == r.run_id
    assert tk.sql("SELECT count(*) FROM ncu_kernels").item() == 4


# -- bad input ---------------------------------------------------------------


def _localize(text: str) -> str:
    """German number format: 1.234.567,89 for ncu's 1,234,567.89."""

    def swap(m):
        return m.group(0).replace(",", "\0").replace(".", ",").replace("\0", ".")

    rows = list(csv.reader(text.splitlines()))
    out = []
    for row in rows:
        out.append([re.sub(r"^[-+]?[\d,]+(\.\d+)?$", swap, c) for c in row])
    import io

    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(out)
    return buf.getvalue()


def _rewrite_raw(
    src: Path, dst: Path, drop: set[str] = frozenset(), na: dict | None = None, rows=None
) -> Path:
    data = list(csv.reader(src.read_text().splitlines()))
    keep = [i for i, h in enumerate(data[0]) if h not in drop]
    out = [[r[i] for i in keep] for r in data]
    for (row, col), v in (na or {}).items():
        out[row][out[0].index(col)] = v
    if rows is not None:
        out = out[:rows]
    with open(dst, "w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(out)
    return dst


def _bad_inputs(plain, d: Path) -> dict[str, tuple[Path, str]]:
    raw = plain[("full", "raw.csv")]
    rep = plain[("full", "report.ncu-rep")].read_bytes()
    cases = {}
    p = d / "localized.csv"
    p.write_text(_localize(raw.read_text()))
    cases["localized"] = (p, "localized number")
    p = d / "truncated.ncu-rep"
    p.write_bytes(rep[: len(rep) // 2])
    cases["truncated"] = (p, "truncated report")
    p = d / "corrupt.ncu-rep"
    p.write_bytes(rep[:150] + b"\xff" * 40 + rep[190:])
    cases["corrupt-header"] = (p, "corrupt block header")
    p = d / "corrupt-payload.ncu-rep"
    p.write_bytes(rep[:30000] + bytes(b ^ 0x5A for b in rep[30000:31000]) + rep[31000:])
    cases["corrupt-payload"] = (p, "damaged")
    flipped = bytearray(rep)  # bytes flipped all over (a bad disk or copy): results without names or metrics
    rng = random.Random(0)
    for i in rng.sample(range(len(rep)), 40):
        flipped[i] ^= 0xFF
    p = d / "flipped.ncu-rep"
    p.write_bytes(bytes(flipped))
    cases["flipped-bytes"] = (p, "the report is damaged")
    p = d / "empty.ncu-rep"
    p.write_bytes(rep[:23618])  # session and source blocks, no result block
    cases["empty-report"] = (p, "no profiled launches")
    cases["empty-csv"] = (_rewrite_raw(raw, d / "empty.csv", rows=2), "no profiled launches")
    other = d / "other_page.csv"
    det = list(csv.reader(plain[("full", "details.csv")].read_text().splitlines()))
    with open(other, "w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows([r[:13] + r[17:] for r in det])
    cases["other-ncu-page"] = (other, "page tracekit does not read")
    cases["other-tool"] = (
        DATA / "nsys_hstu_mixed" / "stats" / "cuda_gpu_kern_sum.csv",
        "not a recognised profile",
    )
    p = d / "zero.csv"
    p.write_bytes(b"")
    cases["empty-file"] = (p, "empty file")
    # ncu's --print-summary page (launches aggregated per kernel, no IDs: ncu_triton_detailed's), and
    # what `ncu -i REP --csv --page raw --print-details all > FILE` writes: ncu's refusal alone
    # (both were "not a recognised profile")
    cases["summary-page"] = (DATA / "ncu_triton_detailed" / "details_summary.csv.xz",
                             "an ncu CSV export made with --print-summary: its launches aggregated per kernel")
    # the Source page (a launch's SASS, and a function's source lines beside its SASS), which
    # tracekit reads from the report (was "not a recognised profile")
    for page in ("ncu_full/source_sass", "ncu_source/source_cuda_sass"):
        cases[page] = (DATA / f"{page}.csv.xz", "an ncu Source page export (--page source): tracekit reads the "
                       "Source page's numbers from the .ncu-rep report")
    p = d / "messages.csv"
    p.write_text("==ERROR== Option '--print-details' is only supported for the details page.\n")
    cases["ncu-messages"] = (p, "ncu's messages alone, no CSV (ncu wrote: Option '--print-details' is only "
                                "supported for the details page.)")
    return cases


def test_bad_input_is_one_line_error_and_db_unchanged(plain, tmp_path):
    db = tmp_path / "t.duckdb"
    tk = tracekit.open(db)
    tk.ingest(DATA / "ncu_sections" / "report.ncu-rep.xz", name="ok")
    before = tk.sql("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM ncu_metrics)").rows()
    for case, (path, needle) in _bad_inputs(plain, tmp_path).items():
        with pytest.raises(InputError) as exc:
            tk.ingest(path)
        msg = str(exc.value)
        assert "\n" not in msg and needle in msg, (case, msg)
        assert (
            tk.sql("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM ncu_metrics)").rows()
            == before
        )
    tk.close()


def test_cli_exit_code_2_and_fresh_db_not_created(plain, tmp_path, capsys):
    db = tmp_path / "fresh.duckdb"
    cases = _bad_inputs(plain, tmp_path)
    for case in ("localized", "truncated", "empty-report", "summary-page", "ncu-messages"):
        assert cli_main(["--db", str(db), "ingest", str(cases[case][0])]) == 2, case
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and cases[case][1] in err
    assert not db.exists()


def test_ncus_output_around_the_csv_and_odd_line_separators_in_names(plain, tmp_path):
    """``ncu --csv ... > FILE`` writes ncu's messages and the profiled program's own output to
    the same stdout as the CSV: before its header (refused as "not a recognised profile" where a
    program line stood there) and after it (refused as a short row). And a kernel name or NVTX
    text holding U+2028 or U+0085 was split there as a line end and read back as a line feed;
    now kept as it is."""
    raw = plain[("full", "raw.csv")].read_text()
    expected = kernels_of(ncu.read(plain[("full", "raw.csv")]))
    wrapped = tmp_path / "stdout.csv"
    wrapped.write_text("==PROF== Connected to process 870 (/usr/bin/python3.11)\nstep 0 loss 2.31\n\n"
                       "==PROF== Profiling \"gemm\" - 0: 0%....50%....100% - 39 passes\n" + raw
                       + "\n==PROF== Disconnected from process 870\n==WARNING== No kernels were profiled.\n")
    assert kernels_of(ncu.read(wrapped)).equals(expected)
    with tracekit.open(tmp_path / "s.duckdb") as tk:
        assert tk.ingest(wrapped).kind == "ncu"  # (the file found for what it is, as the plain page)
    rows = list(csv.reader(io.StringIO(raw, newline="")))
    name = rows[0].index("Kernel Name")
    rows[2][name] = "gemm\u2028half\x85two"
    text = io.StringIO()
    csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    odd = tmp_path / "odd.csv"
    odd.write_text(text.getvalue())
    names = kernels_of(ncu.read(odd))["name"].to_list()
    assert names[0] == "gemm\u2028half\x85two" and names[1:] == expected["name"].to_list()[1:]


def test_missing_columns_and_na_still_ingest(plain, tmp_path):
    raw = plain[("full", "raw.csv")]
    p = _rewrite_raw(
        raw,
        tmp_path / "partial.csv",
        drop={"sm__throughput.avg.pct_of_peak_sustained_elapsed", "gpu__time_duration.sum"},
        na={(2, "lts__throughput.avg.pct_of_peak_sustained_elapsed"): "n/a"},
    )
    m = metrics_of(ncu.read(p))
    assert m.filter(pl.col("metric") == "gpu__time_duration.sum").height == 0
    na = m.filter(
        (pl.col("kernel_id") == 0)
        & (pl.col("metric") == "lts__throughput.avg.pct_of_peak_sustained_elapsed")
    )
    assert na["value"].to_list() == [None] and na["text_value"].to_list() == ["n/a"]


# -- damaged CSVs (issue 13, point 7) -----------------------------------------


def _with_field(lines: list[str], row: int, column: str, value: str) -> str:
    """The CSV ``lines`` with ``column`` of line ``row`` set to ``value``."""
    header = next(csv.reader([lines[0]]))
    cells = next(csv.reader([lines[row]]))
    cells[header.index(column)] = value
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(cells)
    return "".join(lines[:row]) + out.getvalue() + "".join(lines[row + 1:])


def _damaged_csvs(plain, d: Path) -> dict[str, tuple[Path, str]]:
    """The committed real raw and details CSVs, cut, duplicated or with a bad launch ID."""
    raw = plain[("full", "raw.csv")].read_text()
    det = plain[("full", "details.csv")].read_text()
    rl, dl = raw.splitlines(keepends=True), det.splitlines(keepends=True)
    last = len(raw) - len(rl[-1])
    texts = {
        # cut after a closing quote half-way through the last launch: 1,094 of 1,288 metrics
        "raw-cut-at-field": (raw[: last + rl[-1].rindex('","', 0, len(rl[-1]) // 2) + 1], "fields where the header has"),
        "raw-cut-in-field": (raw[:-3], "truncated"),
        "raw-two-fields": (raw + '"9","870"\n', "line 7 has 2 fields"),
        "raw-launch-twice": (raw + rl[3], "launch ID 1 is in two rows"),
        "raw-id-1e23": (raw.replace('\n"1",', '\n"1e23",', 1), "bad launch ID '1e23'"),
        "raw-id-overflow": (raw.replace('\n"1",', '\n"99999999999999999999",', 1), "bad launch ID"),
        "raw-id-underscore": (raw.replace('\n"1",', '\n"1_0",', 1), "bad launch ID '1_0'"),
        # past the store's 32-bit kernel_id and device_id (DuckDB's conversion error; an internal error)
        "raw-id-past-32-bits": (raw.replace('\n"1",', '\n"2147483648",', 1), "bad launch ID '2147483648'"),
        "raw-device-past-32-bits": (_with_field(rl, 3, "Device", "2147483648"),
                                    "launch 1: Device '2147483648' is not a whole number below 2**31"),
        "raw-stream-superscript": (_with_field(rl, 2, "Stream", "²"), "Stream '²' is not a whole number"),
        # a dimension no launch has: past 64 bits (it was an internal error) or negative (its "-" was not read)
        "raw-grid-past-64-bits": (_with_field(rl, 3, "Grid Size", "(99999999999999999999, 1, 1)"),
                                  "launch 1: Grid Size '(99999999999999999999, 1, 1)' holds a dimension no launch has"),
        "details-block-negative": (_with_field(dl, 1, "Block Size", "(-384, 1, 1)"),
                                   "launch 0: Block Size '(-384, 1, 1)' holds a dimension no launch has"),
        # the units row left out or blanked (a hand-made CSV): units unknown, never guessed
        "raw-no-units-row": ("".join(rl[:1] + rl[2:]), "no units row under the header"),
        "raw-blank-units-row": ("".join(rl[:1] + [",".join('""' for _ in next(csv.reader([rl[0]]))) + "\n"] + rl[2:]),
                                "the units row gives no unit for gpu__time_duration.sum"),
        "details-cut-at-field": (det[: len(det) - len(dl[-1]) + dl[-1].rindex('","') + 1], "fields where the header has"),
        "details-metric-twice": (det + dl[5], "twice"),
        "details-id-1e23": (det.replace('\n"2",', '\n"1e23",', 1), "bad launch ID '1e23'"),
        # a negative time (no ncu time metric is negative: sectors and % derived by subtraction can be)
        "raw-negative-duration": (_with_field(rl, 3, "gpu__time_duration.sum", "-45,216"),
                                  "launch ID 1: gpu__time_duration.sum is -45216 ns; a time is never negative"),
        "details-negative-duration": (_with_field(dl, 6, "Metric Value", "-175,904"),
                                      "launch ID 0: gpu__time_duration.sum is -175904 ns"),
        # a count past a 64-bit integer (no query could read it as one) or negative
        "raw-registers-1e23": (_with_field(rl, 3, "launch__registers_per_thread", "1e23"),
                               "launch ID 1: launch__registers_per_thread is 1e+23; a count is 0 or more and below 2**63"),
        "details-registers-negative": (_with_field(dl, 57, "Metric Value", "-168"),
                                       "launch ID 0: launch__registers_per_thread is -168; a count is 0 or more"),
        # a unit ncu does not write, where tracekit scales or reads the values as times
        "raw-duration-not-a-time": (_with_field(rl, 1, "gpu__time_duration.sum", "furlong"),
                                    "unit 'furlong' of metric gpu__time_duration.sum (launch ID 0) is not a time"),
        "raw-unit-usec": (_with_field(rl, 1, "gpu__time_duration.sum", "usec"),
                          "unit 'usec' of metric gpu__time_duration.sum (launch ID 0) is not one ncu writes"),
        "raw-unit-MHz": (_with_field(rl, 1, "dram__cycles_elapsed.avg.per_second", "MHz"),
                         "unit 'MHz' of metric dram__cycles_elapsed.avg.per_second (launch ID 0) is not one ncu"),
        "details-unit-KiB": (_with_field(dl, 28, "Metric Unit", "KiB"),
                             "unit 'KiB' of metric launch__persisting_l2_cache_size (launch ID 0) is not one ncu"),
    }
    out = {}
    for case, (text, needle) in texts.items():
        p = d / f"{case}.csv"
        p.write_text(text)
        out[case] = (p, needle)
    return out


def test_damaged_csvs_are_refused(plain, tmp_path):
    db = tmp_path / "t.duckdb"
    with tracekit.open(db) as tk:
        tk.ingest(DATA / "ncu_sections" / "details.csv.xz", name="ok")
        count = "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM ncu_metrics)"
        before = tk.sql(count).rows()
        for case, (path, needle) in _damaged_csvs(plain, tmp_path).items():
            with pytest.raises(InputError) as exc:
                tk.ingest(path)
            msg = str(exc.value)
            assert "\n" not in msg and needle in msg and str(path) in msg, (case, msg)
            assert tk.sql(count).rows() == before, case


def test_damaged_csv_cli_exit_2(plain, tmp_path, capsys):
    path, needle = _damaged_csvs(plain, tmp_path)["raw-id-overflow"]
    assert cli_main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_run_info_of_a_bare_report_has_its_gpus_size_and_clock(plain, tmp_path):
    """A report or raw page ingested alone (no run folder, no GPU table): run-info's SM
    count, device memory and maximum SM clock are the profiled device's, as ncu's raw page
    prints its attributes (device__attribute_multiprocessor_count, _total_memory,
    _clock_rate in kHz, which the page prints without a unit); NULL from a details page,
    which has none."""
    import csv

    with open(plain[("full", "raw.csv")], newline="") as fh:
        rows = list(csv.DictReader(fh))
    first = rows[1]  # (rows[0] holds the units)
    expected = (int(first["device__attribute_multiprocessor_count"].replace(",", "")),
                int(first["device__attribute_total_memory"].replace(",", "")),
                int(first["device__attribute_clock_rate"].replace(",", "")) / 1e3)
    assert expected[2] == 1980.0  # (CUDA's clock-rate attribute is in kHz: the H200's 1,980 MHz)
    with tracekit.open(tmp_path / "t.duckdb") as tk:
        for path, name in ((plain[("full", "report.ncu-rep")], "report"), (plain[("full", "raw.csv")], "raw"),
                           (plain[("full", "details.csv")], "details")):
            tk.ingest(path, name=name)
        for name, want in (("report", expected), ("raw", expected), ("details", (None, None, None))):
            info = tk.query("run-info", run=name).row(0, named=True)
            assert (info["sm_count"], info["gpu_memory_bytes"], info["max_sm_clock_mhz"]) == want, name


@pytest.mark.parametrize("page", ["details.csv", "raw.csv"])
def test_a_launch_ncu_did_not_measure_has_no_grid_or_block(plain, page):
    """ncu prints "(0, 0, 0)" as the grid and block of a launch whose launch metrics it did
    not collect (every value "n/a" or "nan": seen in a public report of an A10G): from a
    page as from the report, which has none, that is unknown (NULL), not a grid of 0."""
    text = plain[("full", page)].read_text()
    header, *rows = text.splitlines(keepends=True)
    cols = next(csv.reader([header]))
    grid, block = cols.index("Grid Size"), cols.index("Block Size")
    out = [header]
    for line in rows:
        cells = next(csv.reader([line]))
        if len(cells) > grid and cells[0] == "1":
            cells[grid] = cells[block] = "(0, 0, 0)"
            buf = io.StringIO()
            csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(cells)
            line = buf.getvalue()
        out.append(line)
    edited = plain[("full", page)].with_name(f"unmeasured_{page}")
    edited.write_text("".join(out))
    k = kernels_of(ncu.read(edited)).sort("kernel_id")
    dims = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
    assert k.filter(pl.col("kernel_id") == 1).select(dims).row(0) == (None,) * 6
    assert k.filter(pl.col("kernel_id") != 1).select(dims).rows() == [(2, 66, 1, 384, 1, 1), (4096, 1, 1, 128, 1, 1),
                                                                       (1, 528, 1, 512, 1, 1)]


def test_the_reader_child_reads_with_this_tracekit(tmp_path, monkeypatch, reports_read_each_time):
    """The child interpreter that reads a .ncu-rep imports the tracekit this process runs, not
    another found first on its path (a checkout put on sys.path by a script, with none or an
    older one installed): else the child fails at import, or reads with other code, and a good
    report is said to be damaged ("ncu_report failed reading it (ModuleNotFoundError: ...)")."""
    from tracekit.ingest import ncu_rep

    if ncu_rep._child_env() is None:
        pytest.skip("tracekit installed as a package: its child finds it where this process did")
    other = tmp_path / "other" / "tracekit"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("raise ImportError('another tracekit, first on the path')\n")
    monkeypatch.setenv("PYTHONPATH", str(other.parent))
    report = tmp_path / "report.ncu-rep"
    with lzma.open(DATA / "ncu_sections" / "report.ncu-rep.xz") as src:
        report.write_bytes(src.read())
    meta, kernels, *_ = ncu_rep.read_report(report)
    assert kernels.height > 0


def test_a_reader_child_that_dies_with_a_line_of_its_own_is_a_damaged_report(tmp_path, monkeypatch):
    """The child that reads a .ncu-rep refuses a report with one line naming it (exit 2);
    a child that dies otherwise with status 2 (NVIDIA's ncu_report on a report with bytes
    flipped once left a bare "OSError: [Errno 9] Bad file descriptor") is said as the
    damaged report, naming the file, not as that line alone."""
    import subprocess
    import sys

    from tracekit.ingest import ncu_rep

    real = subprocess.Popen

    report = tmp_path / "r.ncu-rep"
    report.write_bytes(b"x")
    for line, want in ((f"{report}: corrupt block header at byte 9; the report is damaged, re-profile",
                        f"{report}: corrupt block header at byte 9; the report is damaged, re-profile"),
                       ("OSError: [Errno 9] Bad file descriptor",
                        f"{report}: ncu_report failed reading it (OSError: [Errno 9] Bad file descriptor); the report "
                        "is damaged, or written by an ncu newer than the ncu_report installed")):
        script = f"import sys; print({line!r}, file=sys.stderr); sys.exit(2)"
        monkeypatch.setattr(ncu_rep.subprocess, "Popen",
                            lambda argv, script=script, **kw: real([sys.executable, "-c", script], **kw))
        with pytest.raises(InputError) as err:
            ncu_rep.start_report(report).result()
        assert str(err.value) == want
