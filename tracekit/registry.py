"""The named-query registry: ``queries/<source>/<name>.sql`` with a documented header.

Header contract (parsed here, checked by the tests)::

    -- One-line description. More description lines may follow.
    -- @param run    TEXT     run id or name (default: latest run)
    -- @param limit  INTEGER  rows to return; 0 = all (default: 20)
    -- @column name       kernel name (demangled)
    -- @display time_pct, total_ns, instances, name
    -- @alias   cuda_gpu_kern_sum
    -- @requires kernels

``@display`` names the columns a terminal shows by default, in that order (every one
a declared ``@column``; CSV, JSON and Parquet carry all of them); ``@alias`` gives
other names the query answers to (the ``nsys stats`` report it reproduces), each with
the parameters it stands for where it has any (``nvtx_pushpop_sum(style=PushPop)``: the
name is the query with that value, and another value given with it is an error); ``@rows CTE``
says the query returns one row per row of that CTE (which takes the ORDER BY and LIMIT;
the final SELECT only looks values up for its rows), so a terminal counts that CTE.
``@traced TABLE`` marks a query about events nsys records only when told to (CUDA's
kernels, copies and API calls, NVTX ranges, OS runtime calls): asked of a run whose
capture did not trace them, it is a ``QueryError`` naming the nsys option, not an empty
answer. A query over the ranks of the run's job (``job_ranks($run)``) asks it of every
rank: one rank that did not trace them is the error, naming the ranks (a comparison
across ranks without some of them misleads). A query about kernels (``@traced
kernels``, without ``graph_execs``) asked of runs that launched CUDA graphs traced
whole (nsys ``--cuda-graph-trace=graph``) answers as nsys does, without the kernels
those graphs ran, and a ``CaptureWarning`` says so. ``@needs TABLE, ...`` (where its
``@traced`` holds several tables of one kind, some of them) says the answer has a row only
where the run holds events of every one of them (a launch call and its kernel): asked of a
run that holds none of one, its note names that table though the run holds other events of
its kind (CUDA API calls and no kernel).

Parameters are always bound as DuckDB prepared parameters (``$run``), never formatted
into the SQL. ``run`` is resolved before execution to an integer run id: by id, by
name (latest run of that name), or, when not given, the latest run of the query's
source kind (``nsys``/``ncu``); ``all`` binds NULL so a query written
``($run IS NULL OR run_id = $run)`` spans every run. A query spans runs when its
``run`` parameter offers ``'all'``; asking ``all`` of another query, or naming a run of
the wrong kind (an ncu run for an nsys query), is a ``QueryError``, not an empty answer.
The kinds of run a query reads come from its ``@requires`` tables (the schema file that
defines each: nsys, ncu, or timing for a sweep's requests); a query over all runs asked
of a store without a run of such a kind is a ``QueryError`` too (charts and
``export sweep`` go through the same check). A run of the right kind that has no rows
is an empty answer; where the run holds none of the events the query reads (its capture
traced them: a window that missed the GPU work), a ``NoneRecorded`` warning says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from .errors import CaptureWarning, NoneRecorded, ParamError, QueryError, expect, warn_from_caller
from .numbers import INT_RANGE, whole_number

if TYPE_CHECKING:
    import polars as pl

    from .table import Rows

_TYPES = {
    "TEXT": str,
    "VARCHAR": str,
    "INTEGER": int,
    "BIGINT": int,
    "DOUBLE": float,
    "BOOLEAN": bool,
}

#: a parameter type in words, for its errors (not DuckDB's names: "is not an integer", not "bigint")
_TYPE_WORDS = {"TEXT": "text", "VARCHAR": "text", "INTEGER": "an integer", "BIGINT": "an integer",
               "DOUBLE": "a number", "BOOLEAN": "true or false"}

#: what a parameter of each type takes from Python: its own type, or text (what the command
#: line gives); a TEXT one a number too (``run=3``), a number one an integral float
_ACCEPTED = {str: (str, int), int: (str, int, float), float: (str, int, float), bool: (str, bool)}


@dataclass
class Param:
    name: str
    type: str
    doc: str
    default: str | None
    #: the values a TEXT parameter takes (``(one of: a, b)`` in its doc; case-insensitive),
    #: or, with ``several``, a comma-separated list of them (``(any of: a, b)``)
    choices: tuple[str, ...] = ()
    several: bool = False
    #: the least value a number takes (``(min: 0)`` in its doc; ``limit``: 0 unless declared)
    minimum: int | None = None
    #: the largest value a number takes (``(max: 999999)`` in its doc)
    maximum: int | None = None

    def convert(self, value: Any, query: str) -> Any:
        if value is None:
            return None
        expect(value, _ACCEPTED[_TYPES[self.type]], f"{query}: parameter {self.name}")
        if self.choices:
            value = str(value).strip()  # (blanks around a choice ignored, as around a number or a run)
            given = [v.strip().lower() for v in value.split(",")] if self.several else [value.lower()]
            if not all(v in {c.lower() for c in self.choices} for v in given):
                raise ParamError(f"{query}: {self.name}={value}: choose "
                                 + (f"from {', '.join(self.choices)} (comma-separated)" if self.several
                                    else f"{', '.join(self.choices[:-1])} or {self.choices[-1]}"))
        py = _TYPES[self.type]
        try:
            if py is bool and isinstance(value, str):
                low = value.strip().lower()
                if low not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(value)
                return low in ("true", "1", "yes")
            if py is int and isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            if py in (int, float) and isinstance(value, bool):  # (a bool is an int to Python: limit=True is 1)
                raise ValueError(value)
            out = whole_number(value) if py is int and isinstance(value, str) else py(value)
            if py is int and not INT_RANGE[0] <= out <= INT_RANGE[1]:
                raise ParamError(f"{query}: parameter {self.name}={value} is out of range (64-bit integers)")
            if self.minimum is not None and out < self.minimum:
                raise ParamError(f"{query}: {self.name} must be >= {self.minimum}"
                                 + (" (0 = all rows)" if self.name == "limit" else "") + f", got {value}")
            if self.maximum is not None and out > self.maximum:
                raise ParamError(f"{query}: {self.name} must be <= {self.maximum:,}, got {value}")
            return out
        except (TypeError, ValueError) as err:
            raise ParamError(f"{query}: parameter {self.name}={value!r} is not {_TYPE_WORDS[self.type]}") from err


@dataclass
class Query:
    name: str
    source: str
    description: str
    sql: str
    params: dict[str, Param] = field(default_factory=dict)
    columns: dict[str, str] = field(default_factory=dict)
    requires: list[str] = field(default_factory=list)
    display: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    #: alias -> the parameters it fixes (``@alias name(param=value, ...)``)
    alias_params: dict[str, dict[str, str]] = field(default_factory=dict)
    rows_from: str | None = None  # @rows: the CTE whose rows the query returns
    traced: list[str] = field(default_factory=list)  # @traced: tables nsys fills only when told to
    needs: list[str] = field(default_factory=list)  # @needs: those of them the answer has no row without

    @property
    def kernel_columns(self) -> tuple[str, ...]:
        """The columns whose documentation says they hold kernel names."""
        from .table import KERNEL_NAME_COLUMNS

        return tuple(c for c, doc in self.columns.items() if c.lower() in KERNEL_NAME_COLUMNS and "kernel" in doc.lower())

    @property
    def spans_job(self) -> bool:
        """Whether the query reads every rank of the job of its run (``job_ranks($run)``)."""
        return bool(re.search(r"\bjob_ranks\(\$run\)", self.sql))

    @property
    def spans_runs(self) -> bool:
        """Whether ``run='all'`` is an answer: the ``run`` parameter's doc offers 'all'
        (and the SQL then reads ``$run IS NULL`` as every run; a test checks both agree)."""
        p = self.params.get("run")
        return p is not None and "'all'" in p.doc

    @property
    def kinds(self) -> set[str]:
        """The kinds of run the query reads (``nsys``, ``ncu``, ``timing``): those whose
        tables its ``@requires`` names, else its source folder's kind."""
        kinds = {_TABLE_KINDS[t] for t in self.requires if t in _TABLE_KINDS}
        return kinds or ({self.source} if self.source in _KIND_WORDS else set())

    @property
    def summary(self) -> str:
        """The description's first sentence (a period that ends one is followed by a
        capital or a backquote: ``e.g. hstu.request`` does not end it)."""
        text = " ".join(self.description.split())
        return _SENTENCE_END.split(text, maxsplit=1)[0].rstrip(".") + "."


_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)\.\s+(?=[A-Z`])")
_PARAM_RE = re.compile(r"@param\s+(\w+)\s+(\w+)\s+(.*)")
_COLUMN_RE = re.compile(r"@column\s+(\w+)\s*(.*)")
_DEFAULT_RE = re.compile(r"\(default:\s*([^)]*)\)")
_CHOICES_RE = re.compile(r"\((one|any) of:\s*([^)]*)\)")
_MIN_RE = re.compile(r"\(min:\s*(-?\d+)\)")
_MAX_RE = re.compile(r"\(max:\s*(-?\d+)\)")


def parse_header(name: str, source: str, text: str) -> Query:
    desc: list[str] = []
    q = Query(name=name, source=source, description="", sql=text)
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if not s.startswith("--"):
            break
        body = s[2:].strip()
        if body.startswith("@param"):
            m = _PARAM_RE.match(body)
            if not m or m.group(2).upper() not in _TYPES:
                raise QueryError(f"queries/{source}/{name}.sql: bad @param line: {body}")
            d = _DEFAULT_RE.search(m.group(3))
            c = _CHOICES_RE.search(m.group(3))
            low = _MIN_RE.search(m.group(3))
            high = _MAX_RE.search(m.group(3))
            q.params[m.group(1)] = Param(m.group(1), m.group(2).upper(), m.group(3), d.group(1).strip() if d else None,
                                         tuple(x.strip() for x in c.group(2).split(",")) if c else (),
                                         bool(c) and c.group(1) == "any",
                                         int(low.group(1)) if low else 0 if m.group(1) == "limit" else None,
                                         int(high.group(1)) if high else None)
        elif body.startswith("@column"):
            m = _COLUMN_RE.match(body)
            if not m:
                raise QueryError(f"queries/{source}/{name}.sql: bad @column line: {body}")
            q.columns[m.group(1)] = m.group(2)
        elif body.startswith("@requires"):
            q.requires = _names(body, "@requires")
        elif body.startswith("@traced"):
            q.traced = _names(body, "@traced")
            unknown = [t for t in q.traced if t not in TRACED]
            if unknown:
                raise QueryError(f"queries/{source}/{name}.sql: @traced names {unknown[0]!r}, not one of {', '.join(TRACED)}")
        elif body.startswith("@needs"):
            q.needs = _names(body, "@needs")
        elif body.startswith("@display"):
            q.display = _names(body, "@display")
        elif body.startswith("@rows"):
            q.rows_from = body[len("@rows"):].strip()
            if not re.search(rf"\b{re.escape(q.rows_from)} AS \(", text):
                raise QueryError(f"queries/{source}/{name}.sql: @rows names no CTE of the query: {q.rows_from!r}")
        elif body.startswith("@alias"):
            for alias in re.findall(r"[^,(]+(?:\([^)]*\))?", body[len("@alias"):]):
                m = re.fullmatch(r"\s*(\w+)\s*(?:\((.*)\))?\s*", alias)
                if not m:
                    raise QueryError(f"queries/{source}/{name}.sql: bad @alias: {alias.strip()!r}")
                q.aliases.append(m.group(1))
                if m.group(2) is not None:
                    pairs = [p.partition("=") for p in m.group(2).split(",")]
                    q.alias_params[m.group(1)] = {k.strip(): v.strip() for k, _, v in pairs}
        elif body.startswith("@"):
            raise QueryError(f"queries/{source}/{name}.sql: unknown header tag: {body.split()[0]}")
        else:
            desc.append(body)
    q.description = "\n".join(desc)
    if not q.description:
        raise QueryError(f"queries/{source}/{name}.sql: header has no description")
    untraced_needs = [t for t in q.needs if t not in q.traced]
    if untraced_needs:
        raise QueryError(f"queries/{source}/{name}.sql: @needs names {', '.join(untraced_needs)}, not among its "
                         f"@traced ({', '.join(q.traced) or 'none'})")
    undeclared = [c for c in q.display if c not in q.columns]
    if undeclared:
        raise QueryError(f"queries/{source}/{name}.sql: @display names undeclared column(s) {', '.join(undeclared)}")
    for alias, fixed in q.alias_params.items():
        for k, v in fixed.items():
            if k not in q.params or not v:
                raise QueryError(f"queries/{source}/{name}.sql: @alias {alias} sets {k}={v}, not a parameter "
                                 "of the query with a value")
    return q


def _names(body: str, tag: str) -> list[str]:
    return [t.strip() for t in body[len(tag):].split(",") if t.strip()]


def sql_parameters(sql: str) -> set[str]:
    """The ``$name`` parameters a SQL text uses (comments and string literals ignored:
    one left-to-right pass, so ``--`` inside a string and ``'`` inside a comment are text)."""
    stripped = re.sub(r"'(?:[^']|'')*'|--[^\n]*", " ", sql)
    return set(re.findall(r"\$([A-Za-z_]\w*)", stripped))


def _table_kinds() -> dict[str, str]:
    """Table or view -> the kind of run whose ingest fills it, from the schema file that
    defines it: every table and view of schema_nsys.sql and schema_ncu.sql, the tables of
    schema_runs.sql (a sweep's requests; its views over ``runs``, such as rank_runs,
    belong to no kind, nor do the core tables, ``runs`` among them), those of schema_bench.sql
    (``tracekit bench`` results)."""
    out = {}
    for schema, kind, what in (("schema_nsys.sql", "nsys", "TABLE|VIEW"), ("schema_ncu.sql", "ncu", "TABLE|VIEW"),
                               ("schema_runs.sql", "timing", "TABLE"), ("schema_bench.sql", "bench", "TABLE|VIEW")):
        text = (resources.files("tracekit") / schema).read_text()
        for name in re.findall(rf"CREATE\s+(?:OR\s+REPLACE\s+)?(?:{what})\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)",
                               text, flags=re.IGNORECASE):
            out[name] = kind
    return out


class Registry:
    """The named queries, one ``.sql`` file each. A query's header is parsed when it is
    first asked for by its name (``tracekit query top-kernels`` parses one), or when
    every query is (``queries``, ``aliases``: a name that is no file's may be an alias)."""

    def __init__(self, files: dict[str, tuple[str, Any]]):
        #: name -> (source folder, the file), by name
        self._files = files
        self._parsed: dict[str, Query] = {}

    def _query(self, name: str) -> Query:
        if name not in self._parsed:
            source, f = self._files[name]
            self._parsed[name] = parse_header(name, source, f.read_text())
        return self._parsed[name]

    @cached_property
    def queries(self) -> dict[str, Query]:
        return {name: self._query(name) for name in self._files}

    @cached_property
    def aliases(self) -> dict[str, str]:
        return {a: q.name for q in self.queries.values() for a in q.aliases}

    def get(self, name: str) -> Query:
        expect(name, str, "query name", QueryError)
        if name in self._files:
            return self._query(name)
        q = self.queries.get(self.aliases.get(name, ""))
        if q is None:
            from .names import unknown_name

            raise QueryError(unknown_name("query", "queries", name, [*self.queries, *self.aliases],
                                          "tracekit queries", len(self.queries)))
        return q

    def with_alias(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with those the alias ``name`` stands for (none for a query's own
        name); a value given for one of them that differs is a ``ParamError``."""
        q = self.get(name)
        fixed = q.alias_params.get(name, {})
        for k, v in fixed.items():
            given = params.get(k)
            if given is not None and str(given).lower() != v.lower():
                raise ParamError(f"{name}: is {q.name} with {k}={v}; {k}={given} asks for another answer "
                                 f"(tracekit query {q.name} -p {k}={given})")
        return {**params, **fixed}

    def bind(self, tk, q: Query, params: dict[str, Any]) -> dict[str, Any]:
        for key in params:
            if key == "run" and key not in q.params:
                raise ParamError(f"{q.name}: --run does not apply: {q.name} answers over every run of the store "
                                 "that it reads (see `tracekit queries " + q.name + "`)")
            if key not in q.params:
                declared = ", ".join(q.params) or "none"
                raise ParamError(f"{q.name}: unknown parameter {key!r} (declared: {declared})")
        bound: dict[str, Any] = {}
        for pname, p in q.params.items():
            if pname == "run":
                bound[pname] = resolve_run(tk, params.get("run"), q.source, q.name, spans_runs=q.spans_runs)
                continue
            if pname in RUN_KINDS:  # a second run, of the kind the parameter is named after (-p ncu=RUN)
                bound[pname] = resolve_run(tk, params.get(pname), pname, q.name, spans_runs=False)
                continue
            if pname == "sweep":  # the sweep queries' sweep: its id, '' (outside any sweep) or NULL (all)
                bound[pname] = resolve_sweep(tk, params.get("sweep"), q.name)
                _check_sweep_tool(tk, q.name, bound[pname], params.get("sweep"))
                continue
            value = params.get(pname)
            if value is None:
                value = p.default
                if value is not None and value.lower() == "null":
                    value = None
            bound[pname] = p.convert(value, q.name)
        if bound.get("run") is None:  # the query spans runs: there must be runs of its kinds
            self.check_kinds(tk, q)
            if q.name in SWEEP_TIMED:
                check_sweep_timed(tk, q.name, bound["sweep"], params.get("sweep"))
        else:
            self._check_traced(tk, q, bound["run"])
            if not q.spans_job:
                check_window(tk, q.name, bound["run"], bound.get("from_ns"), bound.get("to_ns"),
                             ("-p from_ns={}", "-p to_ns={}"))
        used = sql_parameters(q.sql)
        return {k: v for k, v in bound.items() if k in used}

    @staticmethod
    def check_kinds(tk, q: Query, asker: str | None = None) -> None:
        """A query over all runs asked of a store without a run of a kind it reads is an
        error naming the kind, not an empty answer; ``asker``, the command that reads the
        query's rows (``export sweep``), is the one named."""
        name = asker or q.name
        if q.source == "ranks" and not tk.con.execute("SELECT 1 FROM rank_runs LIMIT 1").fetchall():
            raise QueryError(f"{name}: {_NO_RANKS.format(path=tk.path)}")
        for kind in sorted(q.kinds):
            found = tk.con.execute("SELECT 1 FROM runs WHERE list_contains(string_split(kind, ','), ?) LIMIT 1",
                                   [kind]).fetchall()
            if not found:
                raise QueryError(f"{name}: no {kind} run in {tk.path}; {name} needs {_a_kind(kind)} run "
                                 f"({_KIND_HINTS.get(kind, 'see `tracekit runs`')})")

    @staticmethod
    def _check_traced(tk, q: Query, run_id: int) -> None:
        """A question about events the run's capture did not trace is an error naming the
        nsys option, not an empty answer that reads as "none happened" (``check_traced``);
        of a query over the run's job, about events a rank of the job did not trace, naming
        those ranks (``untraced_ranks``)."""
        if not q.traced:
            return
        if not q.spans_job:
            check_traced(tk, q.name, run_id, q.traced)
            return
        missing = untraced_ranks(tk, run_id, q.traced)
        if not missing:
            return
        (what, option), ranks = next(iter(missing.items()))
        name = _run_name(tk, run_id)
        job = len(job_runs(tk, run_id))
        many = len(ranks) > 1
        s = "s" if many else ""
        said = f"rank{s} {listed([str(k) for _, k in ranks])}", f"run{s} {listed([str(r) for r, _ in ranks])}"
        told = traced_said(tk, *(r for r, _ in ranks))
        if len(ranks) == job:
            lacks = (f"was captured without {what} tracing on every rank ({said[0]}: {said[1]})" if told else
                     f"has no {what} events on any rank ({said[0]}: {said[1]}), and their exports (nsys before "
                     "2023.3) do not say whether they were traced")
            raise QueryError(f"{q.name}: the job of run {run_id} ({name}) {lacks}; capture its ranks with {option}"
                             f"{CAPTURE_ADVICE.get(what, '')}{retell(told, many=True)}")
        raise QueryError(f"{q.name}: {said[0]} of the job of run {run_id} ({name}) {untraced_words(what, told, many=many)} "
                         f"({said[1]}), so the job's {job} ranks cannot all be compared; "
                         f"capture every rank with {option}{CAPTURE_ADVICE.get(what, '')}{retell(told, many=many)}")

    @staticmethod
    def note_whole_graphs(tk, q: Query, bound: dict[str, Any]) -> None:
        """A ``CaptureWarning`` where ``q``, a query about kernels (``@traced kernels``,
        without ``graph_execs``), answered of runs (the run, its job's ranks, or every run)
        that launched CUDA graphs traced whole: nsys records such a launch as one op
        (``graph_execs``) and not the kernels it ran, so kernel times and counts leave
        them out (nsys's own reports too); GPU busy time counts them. ``bound``: the
        query's parameters; where it asked a window (``from_ns``, ``to_ns``: ops ending
        after, starting before), only the launches in it count (outside it, no kernel of
        theirs could have been answered)."""
        if "kernels" not in q.traced or "graph_execs" in q.traced:
            return
        run_id = bound.get("run")
        runs = None if run_id is None else ([r for r, _, _ in job_runs(tk, run_id)] or [run_id]
                                            if q.spans_job else [run_id])
        window = {k: bound.get(k) if k in q.params else None for k in ("from_ns", "to_ns")}
        launches, graphs, gpu_ns, which = tk.con.execute(
            "SELECT count(*), count(DISTINCT (run_id, graph_id)), sum(dur_ns), list(DISTINCT run_id ORDER BY run_id) "
            "FROM graph_execs WHERE ($runs IS NULL OR list_contains($runs, run_id)) "
            "AND ($from_ns IS NULL OR end_ns > $from_ns) AND ($to_ns IS NULL OR start_ns < $to_ns)",
            {"runs": runs, **window}).fetchall()[0]
        if not launches:
            return
        who = (f"run {which[0]} ({_run_name(tk, which[0])})" if len(which) == 1
               else f"runs {listed([str(r) for r in which])}")
        made = f"{launches:,} launch{'es' if launches > 1 else ''} of {graphs:,} CUDA graph{'s' if graphs > 1 else ''}"
        if any(v is not None for v in window.values()):
            made += " in the window asked"
        warn_from_caller(CaptureWarning(
            f"{who} made {made} traced whole (nsys --cuda-graph-trace=graph), {gpu_ns / 1e6:,.3f} ms on the GPU: "
            "nsys did not trace the kernels they ran apiece, so kernel times and counts leave them out (GPU busy "
            "time counts them: gpu-utilization); capture with --cuda-graph-trace=node to see them"))

    @staticmethod
    def note_points_left_out(tk, q: Query, bound: dict[str, Any]) -> None:
        """A ``CaptureWarning`` where ``q``, a query of one sweep's points, answered of a sweep
        with points that have no ok run in the store, where the sweep's manifest or its runs
        say why (``sweep_points.left_out``): a failed capture (a batch too large for the GPU's
        memory, most often) leaves nothing to ingest, so the table would hold one point fewer
        without a word."""
        sweep = bound.get("sweep") if "sweep" in q.params else None
        if not sweep:  # (NULL: every sweep; '': the runs outside any)
            return
        from .sweep_points import left_out

        total, lines = left_out(tk.con, sweep)
        if lines:
            n = len(lines)
            warn_from_caller(CaptureWarning(  # (one text for every query of the sweep: a report says it once)
                f"sweep {sweep}: {n} of its {total} points {'has' if n == 1 else 'have'} no ok run in the store, so no "
                "row: " + "; ".join(lines)))

    @staticmethod
    def note_ranks_missing(tk, q: Query, bound: dict[str, Any]) -> None:
        """A ``CaptureWarning`` where ``q``, a question across the ranks of its run's job
        (``spans_job``), answered of a job with ranks not in the store (as ``jobs`` counts them:
        below the launcher's world size or the highest rank ingested): profiling a subset of the
        ranks is common, so the answer is given, but its slowest rank or median may be another's.
        One text for every such query of the job (a report asks three: said once)."""
        from .names import ranks_text

        run_id = bound.get("run")
        if run_id is None or not q.spans_job:
            return
        got = tk.con.execute(
            f"{_CAPTURES} SELECT c.job, list(c.rank ORDER BY c.rank), "
            "max(TRY_CAST(json_extract_string(u.params, '$.world_size') AS BIGINT)) "
            "FROM _captures c JOIN runs u USING (run_id) "
            "WHERE c.read AND c.job = (SELECT job FROM _captures WHERE run_id = ?) GROUP BY c.job", [run_id]).fetchall()
        if not got:
            return
        job, ranks, world = got[0]
        upto = max(world or 0, ranks[-1] + 1)
        n = upto - len(ranks)
        if n <= 0:
            return
        which = (ranks_text(sorted(set(range(upto)) - set(ranks))) if upto <= MISSING_LISTED
                 else f"{n:,} ranks")
        size = f" (world size {world:,})" if world is not None else ""
        warn_from_caller(CaptureWarning(
            f"job {job}: {which} not ingested{size}: its questions across ranks (rank-summary, stragglers, "
            f"rank-ranges) compare the {len(ranks):,} in the store, and a rank left out may be the slowest; ingest "
            f"{'its export' if n == 1 else 'their exports'} to compare every rank (tracekit query jobs)"))

    @staticmethod
    def note_latency_under_ncu(tk, q: Query, bound: dict[str, Any], shown: list[tuple[str, str]]) -> None:
        """A ``CaptureWarning`` where ``q``, a query of timed requests (``SWEEP_TIMED``), shows
        runs that timed them under ncu (``shown``: the rows' run and tool): ncu serialises the
        launches and replays each kernel it profiles, so the requests' latency is mostly the
        profiler's (3.5-4.1x the untraced on the H200, tests/data/hstu_sweep_tools); the
        latest sweep timed under none is named. ``tracekit sweep --tool none,nsys,ncu`` ends
        with its ncu sweep, the latest."""
        if q.name not in SWEEP_TIMED:
            return
        runs = {run for run, tool in shown if tool == "ncu"}
        if not runs:
            return
        sweep = bound.get("sweep")
        why = "which serialises the launches and replays each kernel it profiles"
        if sweep and len(runs) == len({run for run, _ in shown}):
            said = f"sweep {sweep} was captured under ncu, {why}: its requests' latency is mostly the profiler's"
        else:  # (runs outside a sweep, or sweeps mixed: those of the rows)
            n = len(runs)
            said = (f"{'runs' if n > 1 else 'run'} {listed(sorted(runs))} timed {'their' if n > 1 else 'its'} "
                    f"requests under ncu, {why}: {'their' if n > 1 else 'its'} latency is mostly the profiler's")
        outside = tk.con.execute("SELECT count(*) FROM runs WHERE list_contains(?, name) AND "
                                 f"{_SWEEP_SQL} = ''", [sorted(runs)]).fetchall()[0][0]
        if outside == len(runs):  # (runs outside a sweep: captured so)
            said += "; the latency untraced: tracekit capture --tool none"
        else:
            untraced = tk.con.execute(f"SELECT {_SWEEP_SQL} FROM sweep_runs WHERE {_SWEEP_SQL} <> '' AND "
                                      "json_extract_string(params, '$.tool') = 'none' ORDER BY run_id DESC LIMIT 1"
                                      ).fetchall()
            said += (f"; the latest sweep timed untraced: {untraced[0][0]}" if untraced  # (one text for every query)
                     else "; the latency untraced: tracekit sweep --tool none")
        warn_from_caller(CaptureWarning(said))

    @staticmethod
    def note_none_happened(tk, q: Query, bound: dict[str, Any], rows: int) -> None:
        """A ``NoneRecorded`` warning where ``q``, asked of one run, reads events the run's
        capture traced and recorded none of (``none_recorded``)."""
        run_id = bound.get("run")
        if run_id is None:
            return
        if q.spans_job:  # (a rank without GPU work in a comparison of the job's ranks reads as an idle rank)
            missed = ranks_without_cuda(tk, run_id, q.traced)
            if missed:
                ranks, runs = listed([str(k) for _, k in missed]), listed([str(r) for r, _ in missed])
                many = len(missed) > 1
                warn_from_caller(NoneRecorded(
                    f"run {run_id} ({_run_name(tk, run_id)}): {'ranks' if many else 'rank'} {ranks} of its job "
                    f"({'runs' if many else 'run'} {runs}) {no_cuda_words(many)}"))
            return
        text = none_recorded(tk, run_id, q.traced, rows, q.needs)
        if text is not None:
            warn_from_caller(NoneRecorded(f"run {run_id} ({_run_name(tk, run_id)}) {text}"))

    def run(self, tk, name: str, /, *, graphs_shown: bool = False, **params: Any) -> pl.DataFrame:
        """The query's result as a Polars DataFrame; a query about kernels of runs that
        launched CUDA graphs traced whole warns that it leaves their kernels out
        (``note_whole_graphs``), unless the caller shows those launches itself
        (``graphs_shown``: the timeline draws them)."""
        import duckdb

        q = self.get(name)
        try:
            bound = self.bind(tk, q, self.with_alias(name, params))
            df = tk.frame(tk.con.sql(q.sql, params=bound))
        except duckdb.Error as err:
            raise tk.db_error(err, q.name) from err
        if not graphs_shown and "run" in bound:
            self.note_whole_graphs(tk, q, bound)
        self.note_points_left_out(tk, q, bound)
        self.note_ranks_missing(tk, q, bound)
        if {"run", "tool"} <= set(df.columns):
            self.note_latency_under_ncu(tk, q, bound, list(zip(df["run"], df["tool"], strict=True)))
        self.note_none_happened(tk, q, bound, df.height)
        return df

    def fetch(self, tk, name: str, /, *, points_said: bool = False, **params: Any) -> Rows:
        """The query's result as Python rows (no Polars, no Arrow: what a terminal table
        needs), with the number of rows the query has in all when ``limit`` cut it.
        ``points_said``: the caller has said which of the sweep's points failed (``tracekit
        sweep``'s own table), so ``note_points_left_out`` does not again."""
        import duckdb

        from .table import Rows

        q = self.get(name)
        bound = self.bind(tk, q, self.with_alias(name, params))
        try:
            rows = Rows.from_relation(tk.con.sql(q.sql, params=bound))
            rows.kernel_columns = q.kernel_columns
            limit = bound.get("limit")
            if limit and len(rows.rows) == limit:  # counted only when the limit may have cut
                rows.total = self._count(tk, q, bound)
        except duckdb.Error as err:
            raise tk.db_error(err, q.name) from err
        if "run" in bound:
            self.note_whole_graphs(tk, q, bound)
        if not points_said:
            self.note_points_left_out(tk, q, bound)
        self.note_ranks_missing(tk, q, bound)
        if {"run", "tool"} <= set(rows.columns):
            at = rows.columns.index("run"), rows.columns.index("tool")
            self.note_latency_under_ncu(tk, q, bound, [(r[at[0]], r[at[1]]) for r in rows.rows])
        self.note_none_happened(tk, q, bound, len(rows.rows))
        return rows

    def _count(self, tk, q: Query, bound: dict[str, Any]) -> int:
        sql = count_sql(q)
        used = sql_parameters(sql)
        return tk.con.execute(sql, {k: v for k, v in {**bound, "limit": 0}.items() if k in used}).fetchall()[0][0]

    def total(self, tk, name: str, shown: int, /, **params: Any) -> int:
        """The rows query ``name`` has in all (its limit lifted), where the ``shown`` rows
        it returned for ``params`` may be fewer: ``shown`` itself when no limit cut them."""
        import duckdb

        q = self.get(name)
        bound = self.bind(tk, q, params)
        limit = bound.get("limit")
        if not limit or shown < limit:
            return shown
        try:
            return self._count(tk, q, bound)
        except duckdb.Error as err:
            raise tk.db_error(err, q.name) from err


#: a query's last ORDER BY (no parentheses) and its LIMIT $limit (0 = all), as every
#: named query ends
_LIMIT = r"LIMIT CASE WHEN \$limit = 0 THEN NULL ELSE \$limit END"
_ORDER_LIMIT = re.compile(rf"\nORDER BY [^()]*?\n{_LIMIT}\s*;?\s*$")


#: an ORDER BY and LIMIT $limit anywhere (the ``@rows`` CTE's)
_ANY_ORDER_LIMIT = re.compile(rf"\n[ \t]*ORDER BY [^()]*?\n[ \t]*{_LIMIT}")
#: the final SELECT of a query written WITH ... (its CTE bodies indented)
_FINAL_SELECT = re.compile(r"^SELECT\b", re.MULTILINE)


def count_sql(q: Query) -> str:
    """The SQL that counts the rows the query has in all (limit 0), without the sorts
    that only order them: the ``@rows`` CTE alone where the query names one (its
    look-ups skipped), else the query without its final ORDER BY and LIMIT."""
    if q.rows_from is not None:
        finals = list(_FINAL_SELECT.finditer(q.sql))
        if finals:
            head = _ANY_ORDER_LIMIT.sub("\n", q.sql[: finals[-1].start()])
            return f"{head}SELECT count(*) FROM {q.rows_from}"
    return f"SELECT count(*) FROM (\n{_unordered(q.sql)}\n)"


def _unordered(sql: str) -> str:
    """A named query without its final ORDER BY and LIMIT, to count its rows: DuckDB keeps
    the sort under an expression LIMIT (nvtx-ranges over 12 M ranges: 0.8 s to count
    what the first page took 12 ms to fetch). The query as it is where it ends otherwise."""
    cut = _ORDER_LIMIT.sub("\n", sql.rstrip())
    return cut if cut != sql.rstrip() else sql.rstrip().rstrip(";")


_UM_OPTIONS = "nsys profile --cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true"
#: store table -> the events nsys traces into it only when told, and the option (@traced)
TRACED = {"nvtx_ranges": ("NVTX", "nsys -t nvtx"), "osrt_calls": ("OS runtime", "nsys -t osrt"),
          "gpu_metrics": ("GPU metrics", "nsys profile --gpu-metrics-devices=all"),
          **dict.fromkeys(("cpu_samples", "cpu_sample_frames"), ("CPU sample", "nsys profile --sample=process-tree")),
          **dict.fromkeys(("gpu_memory", "gpu_memory_pools"), ("CUDA memory usage",
                                                               "nsys profile --cuda-memory-usage=true")),
          "api_frames": ("CUDA API backtrace", "nsys profile --cudabacktrace=all --sample=process-tree"),
          "python_samples": ("Python sample", "nsys profile --python-sampling=true, exported with "
                                              "`nsys export --type sqlite --include-blobs=true`"),
          # (both options: nsys's um_sum and um_total_sum read both kinds of fault)
          **{f"um_{side}_faults": (f"Unified Memory {side.upper()} page fault", _UM_OPTIONS) for side in ("cpu", "gpu")},
          **{t: ("CUDA", "nsys -t cuda") for t in ("kernels", "api_calls", "memcpy", "memset", "graph_execs", "syncs")}}


#: store table of ``TRACED`` -> its events in words, and the table that holds them under a view
EVENTS = {"kernels": ("kernels", "_kernels"), "api_calls": ("CUDA API calls", "_api_calls"),
          "memcpy": ("memory copies", "memcpy"), "memset": ("memsets", "memset"),
          "graph_execs": ("CUDA graph launches", "graph_execs"), "syncs": ("CUDA synchronizations", "syncs"),
          "nvtx_ranges": ("NVTX ranges", "nvtx_ranges"), "osrt_calls": ("OS runtime calls", "osrt_calls"),
          "gpu_metrics": ("GPU metric samples", "gpu_metrics"), "cpu_samples": ("CPU samples", "cpu_samples"),
          "cpu_sample_frames": ("CPU sample stacks", "cpu_sample_frames"),
          "gpu_memory": ("GPU memory allocations", "gpu_memory"), "gpu_memory_pools": ("memory pools", "gpu_memory_pools"),
          "api_frames": ("CUDA API call stacks", "api_frames"), "python_samples": ("Python samples", "python_samples"),
          "um_cpu_faults": ("Unified Memory CPU page faults", "um_cpu_faults"),
          "um_gpu_faults": ("Unified Memory GPU page faults", "um_gpu_faults")}


#: how ``tracekit capture`` has nsys trace each kind of event, for the errors that ask for it
CAPTURE_ADVICE = {"NVTX": " (tracekit capture does)", "OS runtime": " (tracekit capture does)",
                  "CUDA": " (tracekit capture does)", "GPU metrics": " (tracekit capture --gpu-metrics does)",
                  "CPU sample": " (tracekit capture --cpu-samples does)",
                  "CUDA memory usage": " (tracekit capture --cuda-memory-usage does)",
                  "CUDA API backtrace": " (tracekit capture --cuda-backtrace does)",
                  "Python sample": " (tracekit capture --python-samples does)",
                  **dict.fromkeys(("Unified Memory CPU page fault", "Unified Memory GPU page fault"),
                                  " (tracekit capture --um-faults -- CMD does)")}


def untraced(tk, run_id: int, tables: list[str] | tuple[str, ...] = tuple(TRACED)) -> list[tuple[str, str]]:
    """The kinds of event among ``tables``' (``TRACED``) that the run's capture did not
    trace, as (what, nsys option), in ``tables``' order. The run's ``meta.traced``,
    written at ingest, lists the tables it traced; a kind is traced where it lists one
    of that kind's tables (a run ingested before CUDA was recorded whole lists the CUDA
    tables its export had, always one), and a run whose meta says nothing is taken as
    traced."""
    rows = tk.con.execute(f"SELECT {_TRACED_SQL} FROM runs WHERE run_id = ?", [run_id]).fetchall()
    return _untraced(rows[0][0] if rows else None, tables)


def no_cuda_words(many: bool = False) -> str:
    """What a run (``many``: several, the ranks of a job) without any CUDA event, though its
    capture traced CUDA, holds, and why (``none_recorded``)."""
    if many:
        return ("hold no CUDA event at all (no API call, kernel or copy), though their captures traced CUDA: their "
                "windows (nsys --delay, --duration, --capture-range) held none of the program's GPU work, or the "
                "work ran in processes nsys did not follow")
    return ("holds no CUDA event at all (no API call, kernel or copy), though its capture traced CUDA: the capture's "
            "window (nsys --delay, --duration, --capture-range) held none of the program's GPU work, or the work ran "
            "in a process nsys did not follow")


#: what a run without any CUDA event holds (``no_cuda_words``)
NO_CUDA_EVENT = no_cuda_words()


#: the store tables of CUDA's events (``TRACED``)
CUDA_EVENTS = tuple(t for t, (what, _) in TRACED.items() if what == "CUDA")


def no_cuda_event(tk, run_id: int, tables: list[str] | tuple[str, ...] = CUDA_EVENTS) -> bool:
    """Whether ``tables`` (a query's ``@traced``; default: CUDA's) hold CUDA events and the run
    holds none at all, though its capture traced CUDA (a question of a run that did not trace
    it is refused before): the capture's window missed the program's GPU work, the usual
    mistake behind an empty kernel table."""
    return bool(set(tables) & set(CUDA_EVENTS)) and not _holds(tk, run_id, CUDA_EVENTS)


def ranks_without_cuda(tk, run_id: int, tables: list[str] | tuple[str, ...]) -> list[tuple[int, int]]:
    """The ranks (run id, rank) of the job of run ``run_id`` that traced CUDA and hold no
    CUDA event at all, where ``tables`` (a query's ``@traced``) hold CUDA events: a query a
    table for the whole job (a thousand ranks), each asked only of the ranks the tables
    before it had no row of (kernels: of every rank, as a rule)."""
    if not set(tables) & set(CUDA_EVENTS):
        return []
    left = {rid: rank for rid, rank, traced in job_runs(tk, run_id) if not _untraced(traced, CUDA_EVENTS)}
    for t in CUDA_EVENTS:
        if not left:
            break
        for (rid,) in tk.con.execute(f"SELECT DISTINCT run_id FROM {EVENTS[t][1]} "
                                     "WHERE run_id IN (SELECT unnest(?::BIGINT[]))", [list(left)]).fetchall():
            left.pop(rid, None)
    return list(left.items())


def none_recorded(tk, run_id: int, tables: list[str] | tuple[str, ...], rows: int,
                  needs: list[str] | tuple[str, ...] = ()) -> str | None:
    """Why a question about ``tables`` (``TRACED``' store tables: a query's ``@traced``) of
    the run answered as it did (``rows``) though its capture traced them (``bind`` refuses one
    about events it did not), which the answer alone does not say; None where nothing is to
    be said. Where the run holds no CUDA event at all (``no_cuda_event``), ``NO_CUDA_EVENT``
    whatever the answer: an answer of zeros (no finding, no busy time) would read as a fact of
    the program. Otherwise, where the answer has no row, the kinds of event of which the run
    holds none (memsets, OS runtime calls): none happened in its window. A table of ``needs``
    (a query's ``@needs``: the answer has no row without its events) counts as a kind of its
    own: a run with CUDA API calls and no kernel answers a question about launches and their
    kernels with no row because it holds no kernel. The text is the run's, not a query's: a
    command that asks several questions of the run says it once."""
    if no_cuda_event(tk, run_id, tables):
        return NO_CUDA_EVENT
    if rows:
        return None
    kinds: dict[str, list[str]] = {}  # kind of event (a needed table: the table) -> the tables of that kind
    for t in tables:
        kinds.setdefault(t if t in needs else TRACED[t][0], []).append(t)
    none = [ts for ts in kinds.values() if not _holds(tk, run_id, ts)]
    if not none:
        return None
    traced = list(dict.fromkeys(TRACED[ts[0]][0] for ts in none))
    return (f"holds no {listed([EVENTS[t][0] for ts in none for t in ts], 'or')}: its capture traced "
            f"{listed(traced)} and recorded none")


def traced_said(tk, *run_ids: int) -> bool:
    """Whether the runs' exports said what their captures traced (``untraced``'s "not
    traced" is then known); false where one is an export of nsys before 2023.3, where a
    kind of event without a table may have been traced with none happening."""
    rows = tk.con.execute("SELECT json_extract(meta, '$.traced_said') FROM runs WHERE run_id IN "
                          "(SELECT unnest(?::BIGINT[]))", [list(run_ids)]).fetchall()
    return all(said is None or json.loads(said) is not False for (said,) in rows)


def untraced_words(what: str, said: bool = True, verb: bool = True, many: bool = False) -> str:
    """How a run lacks events of a kind (``untraced``), in words: "was captured without X
    tracing", or where its export did not say what was traced (``traced_said``), that it
    holds none; ``verb``: with "was"/"has" (after the run), or without (a list's item);
    ``many``: of several runs (ranks): "were", "have", "their exports"."""
    if said:
        return f"{('were ' if many else 'was ') if verb else ''}captured without {what} tracing"
    return (f"{('have ' if many else 'has ') if verb else ''}no {what} events, and "
            f"{'their exports' if many else 'its export'} (nsys before 2023.3) {'do' if many else 'does'} not say "
            "whether they were traced")


def retell(said: bool, many: bool = False) -> str:
    """What tells, after the advice to capture with an option, where an export did not say
    what its capture traced (``traced_said``); "" where it did."""
    if said:
        return ""
    return (f", or re-export {'their' if many else 'its'} .nsys-rep with nsys 2023.3 or later (nsys export -t sqlite) "
            "to tell")


def check_traced(tk, label: str, run_id: int, tables: list[str] | tuple[str, ...],
                 advice: str | None = None) -> None:
    """``QueryError`` (``label: run N (name) was captured without X tracing; capture with
    OPTION`` and ``advice``; ``untraced_words``) where the run's capture did not trace
    events of ``tables`` (``untraced``): a question about them would read as "none
    happened"."""
    missing = untraced(tk, run_id, tables)
    if missing:
        what, option = missing[0]
        said = traced_said(tk, run_id)
        raise QueryError(f"{label}: run {run_id} ({_run_name(tk, run_id)}) {untraced_words(what, said)}; "
                         f"capture with {option}{CAPTURE_ADVICE.get(what, '') if advice is None else advice}"
                         f"{retell(said)}")


#: the span of a run's events: the first start and the last end of anything it traced (the
#: tables, not the views that name their rows: a span over 2 M kernels then takes milliseconds)
_SPAN = """
SELECT min(lo), max(hi) FROM (
    SELECT min(start_ns) AS lo, max(end_ns) AS hi FROM _api_calls WHERE run_id = $run
    UNION ALL SELECT min(start_ns), max(end_ns) FROM nvtx_ranges WHERE run_id = $run
    UNION ALL SELECT min(ts_ns), max(ts_ns) FROM nvtx_marks WHERE run_id = $run
    UNION ALL SELECT min(start_ns), max(end_ns) FROM _kernels WHERE run_id = $run
    UNION ALL SELECT min(start_ns), max(end_ns) FROM memcpy WHERE run_id = $run
    UNION ALL SELECT min(start_ns), max(end_ns) FROM memset WHERE run_id = $run
    UNION ALL SELECT min(start_ns), max(end_ns) FROM graph_execs WHERE run_id = $run
    UNION ALL SELECT min(start_ns), max(end_ns) FROM osrt_calls WHERE $osrt AND run_id = $run
    UNION ALL SELECT min(start_ns), max(end_ns) FROM um_gpu_faults WHERE run_id = $run
    UNION ALL SELECT min(ts_ns), max(ts_ns) FROM um_cpu_faults WHERE run_id = $run
    UNION ALL SELECT min(ts_ns), max(ts_ns) FROM gpu_memory WHERE run_id = $run
    UNION ALL SELECT min(ts_ns), max(ts_ns) FROM python_samples WHERE run_id = $run
)
"""


def check_window(tk, label: str, run_id: int, start_ns: int | None, end_ns: int | None,
                 spelled: tuple[str, str], osrt: bool = True, inclusive: bool = False) -> None:
    """A one-line error where a window of time (an event is in it where it ends after
    ``start_ns`` and starts before ``end_ns``, or at them where ``inclusive``; None:
    unbounded) lies wholly outside the span of the run's events, so that nothing can be
    in it: the window as the command spells its options (``spelled``), and the run's
    span in ns, their unit. A window that overlaps the span, even in part, is fine; so is
    any window of a run without events, and an empty window (the query says so).
    ``osrt``: the OS runtime calls count in the span (what the answer may hold)."""
    empty = start_ns is not None and end_ns is not None and (start_ns > end_ns if inclusive else start_ns >= end_ns)
    if (start_ns is None and end_ns is None) or empty:  # (a window of one instant is none where inclusive)
        return
    first, last = tk.con.execute(_SPAN, {"run": run_id, "osrt": osrt}).fetchall()[0]
    if first is None:
        return
    if inclusive:
        outside = (end_ns is not None and end_ns < first) or (start_ns is not None and start_ns > last)
    else:
        outside = (end_ns is not None and end_ns <= first) or (start_ns is not None and start_ns >= last)
    if not outside:
        return
    asked = " ".join(opt.format(v) for opt, v in zip(spelled, (start_ns, end_ns), strict=True) if v is not None)
    raise QueryError(f"{label}: {asked} (ns) is outside run {run_id} ({_run_name(tk, run_id)})'s capture, whose "
                     f"events span {first} to {last} ns; choose a window inside it (`tracekit query nvtx-ranges` "
                     "prints times on this clock)")


def _run_name(tk, run_id: int) -> str:
    return tk.con.execute("SELECT name FROM runs WHERE run_id = ?", [run_id]).fetchall()[0][0]


#: the most ranks below which a job's missing ranks are listed, not counted (queries/ranks/jobs.sql's bound)
MISSING_LISTED = 1_048_576

#: rank_captures read once in a statement that reads it more than once (the view is its costly part)
_CAPTURES = "WITH _captures AS MATERIALIZED (SELECT * FROM rank_captures)"


def job_runs(tk, run_id: int) -> list[tuple[int, int, list[str] | None]]:
    """(run id, rank, the tables its capture traced: ``untraced``) of each rank of the job
    run ``run_id`` is a rank of, by rank (the ranks ``job_ranks`` gives a query); none
    for a run without a rank."""
    return [(int(r), int(k), traced) for r, k, traced in tk.con.execute(
        f"{_CAPTURES} SELECT c.run_id, c.rank, {_TRACED_SQL} FROM _captures c JOIN runs USING (run_id) "
        "WHERE c.read AND c.job = (SELECT job FROM _captures WHERE run_id = ?) ORDER BY c.rank, c.run_id",
        [run_id]).fetchall()]


def captures_said(tk, run_ids: list[int]) -> list[tuple[str, str]]:
    """What the runs ``run_ids`` (just ingested) did to the jobs they are ranks of, a line a
    job (``rank_captures``): ``("note", ...)`` where they began another capture of a job in the
    store (one path captured again), which is a job of its own, ``JOB#2``; ``("warning",
    ...)`` where they took the place of a rank's earlier run of the same capture (ingested
    again: exported again, or with other parameters)."""
    from .names import numbered, ranks_text

    ids = [list(run_ids)]
    out: list[tuple[str, str]] = []
    rows = tk.con.execute(  # (new runs are their capture's latest: a run id is given once)
        f"{_CAPTURES} SELECT n.job, n.rank, n.run_id, max(o.run_id) FROM _captures n JOIN _captures o "
        "ON o.job = n.job AND o.rank = n.rank AND o.run_id < n.run_id "
        "WHERE n.run_id IN (SELECT unnest(?::BIGINT[])) AND n.latest GROUP BY ALL ORDER BY n.job, n.rank", ids
    ).fetchall()
    jobs: dict[str, list[tuple[int, int, int]]] = {}
    for job, rank, new, old in rows:
        jobs.setdefault(job, []).append((int(rank), int(new), int(old)))
    for job, got in jobs.items():
        out.append(("warning", f"job {job}: {ranks_text([k for k, _, _ in got])} ingested again from the same "
                    f"capture: {numbered(sorted(n for _, n, _ in got), 'run', 'runs')} take the place of "
                    f"{numbered(sorted(o for _, _, o in got), 'run', 'runs')} in the job's views (rank-summary, "
                    "stragglers, diff --jobs)"))
    rows = tk.con.execute(  # the captures of every job of several of which a new run began one
        f"{_CAPTURES}, n AS (SELECT unnest(?::BIGINT[]) AS run_id), "
        "began AS (SELECT given_job FROM _captures GROUP BY given_job, job "
        "  HAVING min(run_id) IN (SELECT run_id FROM n)), "
        "several AS (SELECT given_job FROM _captures WHERE given_job IN (SELECT given_job FROM began) "
        "  GROUP BY given_job HAVING max(nth) > 1) "
        "SELECT c.given_job, c.job, c.nth, list(c.run_id ORDER BY c.run_id), "
        "bool_or(c.run_id IN (SELECT run_id FROM n)) FROM _captures c "
        "WHERE c.read AND c.given_job IN (SELECT given_job FROM several) GROUP BY ALL ORDER BY c.given_job, c.nth", ids
    ).fetchall()
    captures: dict[str, list[tuple[int, list[int], bool]]] = {}
    for given, _, nth, runs, new in rows:
        captures.setdefault(given, []).append((int(nth), [int(r) for r in runs], bool(new)))
    for given, caps in captures.items():
        said = ", ".join(f"{numbered(runs, 'run', 'runs')} {f'its #{nth}' if nth > 1 else 'the job'}"
                         f"{' (just ingested)' if new else ''}" for nth, runs, new in caps)
        i = next(i for i, (_, _, new) in enumerate(caps) if new)
        a, b = (caps[i - 1], caps[i]) if i else (caps[0], caps[1])
        out.append(("note", f"job {given}: captured {len(caps)} times, each capture a job of its own, numbered in "
                    f"the order ingested: {said}; `tracekit diff --jobs {a[1][0]} {b[1][0]}` compares two"))
    return out


def untraced_ranks(tk, run_id: int, tables: list[str] | tuple[str, ...] = tuple(TRACED)
                   ) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """The kinds of event among ``tables``' that a rank of the job of run ``run_id`` did
    not trace (``untraced``), in ``tables``' order, each with those ranks' (run id, rank)."""
    out: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for rid, rank, traced in job_runs(tk, run_id):
        for kind in _untraced(traced, tables):
            out.setdefault(kind, []).append((rid, rank))
    return {kind: out[kind] for kind in dict.fromkeys(TRACED[t] for t in tables) if kind in out}


#: a run's meta.traced (the tables its capture traced), NULL where its meta says nothing
_TRACED_SQL = ("CASE WHEN json_extract(runs.meta, '$.traced') IS NOT NULL "
               "THEN json_extract_string(runs.meta, '$.traced[*]') END")


def _untraced(traced: list[str] | None, tables: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    kinds = list(dict.fromkeys(TRACED[t] for t in tables))
    if traced is None:
        return []
    listed = set(traced)
    return [k for k in kinds if not listed & {t for t, kind in TRACED.items() if kind == k}]


def listed(items: list[str], word: str = "and") -> str:
    """``1``, ``1 and 3``, ``1, 2 and 3`` (``word``: another conjunction)."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {word} " + items[-1]


def _holds(tk, run_id: int, tables: list[str] | tuple[str, ...]) -> bool:
    """Whether the run has a row in any of ``tables`` (``EVENTS``' store tables)."""
    return any(tk.con.execute(f"SELECT 1 FROM {EVENTS[t][1]} WHERE run_id = ? LIMIT 1", [run_id]).fetchall()
               for t in tables)


_KIND_WORDS = {"nsys": "an nsys", "ncu": "an ncu", "timing": "a timing", "bench": "a bench"}
#: the kinds a run reference resolves within (an id of another kind is an error); a query
#: parameter named after one of them is a run of that kind (kernel-headroom's ``ncu``)
RUN_KINDS = ("nsys", "ncu", "bench")
_KIND_HINTS = {"nsys": "ingest an nsys export: tracekit ingest FILE.sqlite",
               "ncu": "ingest an ncu report: tracekit ingest FILE.ncu-rep",
               "timing": "ingest the run folders of a sweep of the HSTU workload, `tracekit sweep --bs 1,8 --nc "
                         "128,1024`: tracekit ingest runs/*; a program's sweep (--grid) times no request: its points, "
                         "tracekit query sweep-points",
               "bench": "ingest the JSON `tracekit bench attention --json FILE` writes: tracekit ingest FILE"}
#: table or view -> kind of run (``_table_kinds``)
_TABLE_KINDS = _table_kinds()
#: a store without a run that is a rank of a job, asked a question about jobs
_NO_RANKS = ("no multi-rank run in {path}; ingest each rank's export with its rank (a file or folder named "
             "rank3 or _r3_, its launcher's RANK as nsys recorded it, or --param rank=3)")


def _a_kind(kind: str) -> str:
    """'an nsys' for a run of kind nsys, and of nsys,timing (a capture that timed requests too)."""
    first = kind.split(",")[0]
    return _KIND_WORDS.get(first, f"a {first}")


def resolve_run(tk, value: Any, source: str, qname: str, spans_runs: bool = True) -> int | None:
    """Resolve a run reference (id, name, 'latest', 'all') to a run id (None = all runs).

    For a query of source ``nsys``/``ncu``/``bench`` the run must be of that kind: a name picks the
    latest run of that name and kind, an id of another kind is an error naming both.
    ``all`` is an error when the query does not span runs (``spans_runs``)."""
    expect(value, (str, int, type(None)), f"{qname}: run", QueryError)
    con = tk.con
    kinded = source in RUN_KINDS
    if isinstance(value, str) and value.strip().lower() == "all":
        if not spans_runs:
            raise QueryError(f"{qname}: --run all: {qname} answers for one "
                             "run at a time (its totals and shares would mix runs); give a run id or name "
                             "(see `tracekit runs`)")
        return None
    if isinstance(value, str) and not value.strip():  # (--run "$RUN" with RUN unset: not the latest run)
        raise QueryError(f"{qname}: --run {value!r}: an empty run reference; give a run id or name, or latest "
                         "(see `tracekit runs`)")
    if value is None or (isinstance(value, str) and value.strip().lower() == "latest"):
        if source == "ranks":  # the latest run that is a rank of a job
            row = con.execute("SELECT max(run_id) FROM rank_runs").fetchall()[0]
        elif kinded:
            row = con.execute(
                "SELECT max(run_id) FROM runs WHERE list_contains(string_split(kind, ','), ?)", [source]
            ).fetchall()[0]
        else:
            row = con.execute("SELECT max(run_id) FROM runs").fetchall()[0]
        if row[0] is None:
            if source == "ranks":
                raise QueryError(f"{qname}: {_NO_RANKS.format(path=tk.path)}")
            what = f"{source} " if kinded else ""
            raise QueryError(f"{qname}: no {what}run in {tk.path}; ingest one first (tracekit ingest FILE)")
        return int(row[0])
    text = str(value).strip()
    found: list[tuple[int, str, str]] = []
    if re.fullmatch(r"[0-9]{1,18}", text):  # ASCII digits only: '²' is a name, not an id
        found = con.execute("SELECT run_id, name, kind FROM runs WHERE run_id = ?", [int(text)]).fetchall()
    if not found:
        found = con.execute("SELECT run_id, name, kind FROM runs WHERE name = ? ORDER BY run_id DESC",
                            [text]).fetchall()
    if not found:
        raise QueryError(f"{qname}: no run {text!r} in {tk.path}; see `tracekit runs`")
    if kinded:
        fitting = [r for r in found if source in r[2].split(",")]
        if not fitting:
            run_id, name, kind = found[0]
            raise QueryError(f"run {run_id} ({name}) is {_a_kind(kind)} run; {qname} needs {_a_kind(source)} run "
                             "(see `tracekit runs`)")
        found = fitting
    return int(found[0][0])


#: a run's sweep id (params.sweep; '' outside any sweep), as the macro in_sweep reads it
_SWEEP_SQL = "coalesce(json_extract_string(params, '$.sweep'), '')"


#: the query of a sweep's points captured under each profiler (under none: the HSTU workload's
#: timed requests; a program's sweep under none ingests nothing)
SWEEP_QUERIES = {"nsys": "sweep-points", "ncu": "sweep-ncu", "none": "sweep-latency"}
#: the sweep queries that read the points of one profiler: the profiler
SWEEP_QUERY_TOOL = {"sweep-points": "nsys", "sweep-kernels": "nsys", "sweep-ncu": "ncu"}


def _check_sweep_tool(tk, qname: str, sweep: str | None, value: Any) -> None:
    """A sweep whose points were captured under another profiler than the one ``qname``
    reads (``SWEEP_QUERY_TOOL``) is an error naming the query that reads them
    (``SWEEP_QUERIES``), and, where the sweep asked was the latest, the latest sweep the query
    does read."""
    tool = SWEEP_QUERY_TOOL.get(qname)
    if tool is None or not sweep:
        return
    tools = {t for (t,) in tk.con.execute(f"SELECT DISTINCT json_extract_string(params, '$.tool') FROM runs "
                                          f"WHERE {_SWEEP_SQL} = ?", [sweep]).fetchall()}
    others = sorted(t for t in tools & set(SWEEP_QUERIES) if t != tool)
    if tool in tools or not others:
        return
    latest = value is None or str(value).strip().lower() == "latest"
    said = f"{qname}: sweep {sweep}{' (the latest)' if latest else ''} was captured under {others[0]}, not {tool}: " \
        f"tracekit query {SWEEP_QUERIES[others[0]]} -p sweep={sweep}"
    if latest:
        ours = tk.con.execute(f"SELECT {_SWEEP_SQL} FROM runs WHERE {_SWEEP_SQL} <> '' AND "
                              "json_extract_string(params, '$.tool') = ? ORDER BY run_id DESC LIMIT 1", [tool]).fetchall()
        if ours:
            said += f"; the latest sweep under {tool}: tracekit query {qname} -p sweep={ours[0][0]}"
    raise QueryError(said)


#: the sweep queries that read the points' timed requests (sweep_runs: the HSTU workload's, a benchmark log's)
SWEEP_TIMED = ("sweep-latency", "sweep-requests")


def check_sweep_timed(tk, label: str, sweep: str | None, value: Any,
                      ask: str = "tracekit query {label} -p sweep={sweep}") -> None:
    """A question about timed requests (``SWEEP_TIMED``, ``export sweep``: ``label``) of a
    sweep (``sweep``, as ``resolve_sweep`` gives it for the ``value`` asked) without an ok run
    that timed any is an error that says why, not an empty answer: a program's sweep
    (``--grid``) times none (the query of its points named), the points' runs failed or were
    not ingested (``sweep_points.left_out``), or none was ingested; where the sweep was the
    latest or the runs outside any, the latest sweep that timed requests is named (asked as
    ``ask`` says)."""
    from .sweep_points import left_out

    if tk.con.execute("SELECT 1 FROM sweep_runs WHERE in_sweep(params, ?) LIMIT 1", [sweep]).fetchall():
        return
    said = f"{label}: no ok run that timed requests " + {None: "in the store", "": "outside a sweep"}.get(
        sweep, f"in {sweep}")
    asked_latest = value is None or str(value).strip().lower() == "latest"
    run = _sweep_run(tk.con, str(value).strip()) if sweep == "" and not asked_latest else None
    if run is not None:  # (the run asked is no point of a sweep: said first, then that its fellows timed none)
        said = (f"{label}: run {run[0]} ({run[1]}) is {_a_kind(run[2])} run outside any sweep, and no ok run outside "
                "a sweep timed requests")
    if sweep:
        grid, tool = tk.con.execute(
            "SELECT bool_or(json_extract_string(params, '$.sweep_grid') IS NOT NULL), "
            f"any_value(json_extract_string(params, '$.tool')) FROM runs WHERE {_SWEEP_SQL} = ?",
            [sweep]).fetchall()[0]
        if grid:
            said += (f": a program's sweep (--grid) times no request; its points: tracekit query "
                     f"{SWEEP_QUERIES.get(tool or '', 'sweep-points')} -p sweep={sweep}")
        else:
            said += ": " + ("; ".join(left_out(tk.con, sweep)[1])
                            or "none of its runs in the store is ok with timed requests (tracekit runs)")
    latest = tk.con.execute(f"SELECT {_SWEEP_SQL} FROM sweep_runs WHERE {_SWEEP_SQL} <> '' "
                            "ORDER BY run_id DESC LIMIT 1").fetchall()
    if latest and (asked_latest or sweep == "") and latest[0][0] != sweep:
        said += f"; the latest sweep that did: {ask.format(label=label, sweep=latest[0][0])}"
    elif not sweep:
        said += ("; ingest the HSTU workload's run folders (tracekit sweep, tracekit capture) or its benchmark logs "
                 "(benchmark_bs8_nc1024.log)")
    raise QueryError(said)


def resolve_sweep(tk, value: Any, qname: str, said: str | None = None) -> str | None:
    """Resolve the sweep queries' ``sweep`` parameter to what the macro ``in_sweep`` takes:
    a sweep id, ``''`` for the runs outside any sweep (``tracekit
    capture`` runs), or None for every run (``all``).

    ``latest`` (the default) is the sweep of the latest run ingested from one, and the runs
    outside any sweep where no run is; a sweep id names that sweep; a run id or name the
    sweep that run is a point of (a run outside any sweep: the runs outside any sweep).
    ``said`` is how an error names the value (default: ``QUERY: sweep=``)."""
    expect(value, (str, int, type(None)), f"{qname}: sweep", QueryError)
    said = f"{qname}: sweep=" if said is None else said
    con = tk.con
    text = "latest" if value is None else str(value).strip()
    if not text:
        raise QueryError(f"{said}{value!r}: an empty sweep; give a sweep id, a run of it, latest or all")
    if text.lower() == "all":
        return None
    if text.lower() == "latest":
        row = con.execute(f"SELECT {_SWEEP_SQL} FROM runs WHERE {_SWEEP_SQL} <> '' "
                          "ORDER BY run_id DESC LIMIT 1").fetchall()
        return row[0][0] if row else ""
    if con.execute(f"SELECT 1 FROM runs WHERE {_SWEEP_SQL} = ? LIMIT 1", [text]).fetchall():
        return text
    run = _sweep_run(con, text)
    if run is None:
        raise QueryError(f"{said}{text}: no sweep or run {text!r} in {tk.path}; give a sweep id "
                         "(the sweep= of its runs' parameters, `tracekit runs`), a run of it, latest or all")
    return run[3]


def _sweep_run(con, text: str) -> tuple[int, str, str, str] | None:
    """(run_id, name, kind, sweep id or '') of the run that the sweep parameter ``text``
    names where it names no sweep: a run id, else a name (its latest run); None for none."""
    found = []
    if re.fullmatch(r"[0-9]{1,18}", text):
        found = con.execute(f"SELECT run_id, name, kind, {_SWEEP_SQL} FROM runs WHERE run_id = ?",
                            [int(text)]).fetchall()
    if not found:
        found = con.execute(f"SELECT run_id, name, kind, {_SWEEP_SQL} FROM runs WHERE name = ? "
                            "ORDER BY run_id DESC LIMIT 1", [text]).fetchall()
    return found[0] if found else None


def _walk(node, prefix=""):
    for child in node.iterdir():
        if child.is_dir() and not child.name.startswith(("_", ".")):
            yield from _walk(child, prefix + child.name + "/")
        elif child.name.endswith(".sql"):
            yield prefix, child


@lru_cache(maxsize=1)
def get_registry() -> Registry:
    files: dict[str, tuple[str, Any]] = {}
    for prefix, f in _walk(resources.files("tracekit.queries")):
        source = prefix.strip("/") or "misc"
        name = f.name[: -len(".sql")]
        if name in files:
            raise QueryError(f"query name {name!r} defined twice ({files[name][0]}, {source})")
        files[name] = (source, f)
    return Registry(dict(sorted(files.items())))
