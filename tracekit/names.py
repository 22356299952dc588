"""Short labels for long names: the one shortener that tables and charts share.

``short_name`` turns a demangled kernel name into what a reader recognises (no return
type, template arguments or parameters). ``distinct_labels`` shortens a whole column
and guarantees that two different names never read alike: names that shorten to the
same label get the word that tells them apart (``[silu]``, ``[add]``), else the part of
the full name where they differ, else a number. ``check_run_name`` and ``derived_run_name``
say what can name a run, ``RunNames`` which name a run gets when none is asked for, and
``sql_ident`` a table's or column's name as SQL (DuckDB's and SQLite's) reads it. Pure
string work: no DuckDB, no Polars, no Altair.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from .errors import QueryError, expect

ELLIPSIS = "…"
#: what a terminal table or a diff shows for a name that is empty or blank (an NVTX range
#: pushed with no text): a blank key reads as a missing value; the data keep the name as is
UNNAMED = "(unnamed)"
RUN_ID = re.compile(r"[0-9]{1,18}")  # ASCII digits only: '²' is a name, not an id
#: the id `tracekit sweep` gives a sweep (params.sweep): diff and the sweep questions read it so
SWEEP_ID = re.compile(r"sweep-[0-9]{8}T[0-9]{6}\.[0-9]{3}Z")


def numbered(numbers: Iterable[int], one: str, many: str, shown: int | None = None) -> str:
    """``rank 3``, ``ranks 0, 2-5``: the numbers sorted, consecutive ones as a span; with
    ``shown``, the first that many spans then how many more."""
    spans: list[tuple[int, int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], n)
        else:
            spans.append((n, n))
    cut = spans if shown is None else spans[:shown]
    more = sum(b - a + 1 for a, b in spans[len(cut):])
    return ((one if len(spans) == 1 and spans[0][0] == spans[0][1] else many) + " "
            + ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in cut) + (f" and {more} more" if more else ""))


def parse_numbers(text: str, what: str, largest: int = 2**31 - 1) -> list[int]:
    """``numbered``'s spans read back: ``'0-3, 7'`` -> [0, 1, 2, 3, 7] (sorted, each once);
    a ParamError naming ``what`` (``--ranks``) and the part it cannot read, or a span past
    ``largest``."""
    from .errors import ParamError

    out: set[int] = set()
    parts = [p.strip() for p in str(text).split(",")]
    for part in parts:
        m = re.fullmatch(r"([0-9]+)(?:\s*-\s*([0-9]+))?", part)
        if m is None:
            raise ParamError(f"{what} {text!r}: {part!r} is not a number or a span such as 0-3; give e.g. 0-3,7")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi or hi > largest:
            raise ParamError(f"{what} {text!r}: {part!r} is not a span from a number to a larger one up to {largest:,}")
        if hi - lo >= 1 << 20:
            raise ParamError(f"{what} {text!r}: {part!r} spans more than {1 << 20:,} numbers")
        out.update(range(lo, hi + 1))
    return sorted(out)


#: ranks named (spans of them) before the rest are counted
SHOWN_RANKS = 8


def ranks_text(ranks: Iterable[int]) -> str:
    """``rank 3``, ``ranks 0, 2-5``: the first ``SHOWN_RANKS`` spans, then a count."""
    return numbered(ranks, "rank", "ranks", SHOWN_RANKS)


def sql_ident(name: str) -> str:
    """``name`` as an SQL identifier: double-quoted, its own double quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def short_name(name: str | None, width: int = 48) -> str:
    """A readable kernel name: no return type, template arguments or parameters; past
    ``width`` only the last ``::`` component, cut with an ellipsis if still too long."""
    if not name:
        return "?"
    s = re.sub(r"^void\s+", "", name.strip())
    depth, out = 0, []
    for ch in s:  # drop <...> and (...) groups
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = re.sub(r"(::)+", "::", "".join(out).strip()).strip(":") or name
    s = s.split("::")[-1] if text_width(s) > width else s
    return cut_end(s, width)


def escape_controls(text: str) -> str:
    """``text`` with its unprintable characters escaped as Python writes them (``\\n``,
    ``\\x1b``): it stays one line, and cannot move a terminal's cursor or change its colours."""
    if text.isprintable():  # (the common case, checked in one call: a table escapes every cell)
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@functools.lru_cache(maxsize=4096)
def _char_width(c: str) -> int:
    """The terminal columns one character takes: East Asian wide and full-width ones (CJK,
    most emoji) two, combining marks none, the rest one."""
    if unicodedata.east_asian_width(c) in "WF":
        return 2
    return 0 if unicodedata.combining(c) else 1


#: a character outside ASCII (found by the regex engine, not a Python loop over every character)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def text_width(text: str) -> int:
    """The terminal columns ``text`` takes (``注意力`` three characters, six columns): what
    tables measure and pad by, so that a column of CJK names stays aligned."""
    if text.isascii():
        return len(text)
    return len(text) + sum(_char_width(c) - 1 for c in _NON_ASCII.findall(text))


def _head(text: str, width: int) -> str:
    """The longest start of ``text`` that takes at most ``width`` columns."""
    if text.isascii():
        return text[: max(width, 0)]
    used = 0
    for i, c in enumerate(text):
        used += _char_width(c)
        if used > width:
            return text[:i]
    return text


def _tail(text: str, width: int) -> str:
    """The longest end of ``text`` that takes at most ``width`` columns."""
    if text.isascii():
        return text[len(text) - max(width, 0):]
    return _head(text[::-1], width)[::-1]


def without_shared_parts(labels: list[str]) -> list[str]:
    """Each label without the '/'-separated parts every label shares at its start and at its
    end (``/prof/base/rank*/x`` and ``/prof/after/rank*/x``: ``base``, ``after``): the
    columns of runs or jobs compared, named by what tells them apart. Labels all alike, or
    a part that is the root alone, are kept as they are; no label is left empty."""
    parts = [label.split("/") for label in labels]
    head = tail = 0
    if len(set(labels)) > 1:
        while all(len(p) > head + tail + 1 for p in parts) and len({p[head] for p in parts}) == 1:
            head += 1
        if head == 1 and parts[0][0] == "":  # (the root alone: the paths as they are)
            head = 0
        while all(len(p) > head + tail + 1 for p in parts) and len({p[-1 - tail] for p in parts}) == 1:
            tail += 1
    return ["/".join(p[head:len(p) - tail]) for p in parts]


def unknown_name(kind: str, kinds: str, name: str, known: list[str], listing: str, count: int | None = None) -> str:
    """The error for a ``kind`` (query, chart; ``kinds`` its plural) named ``name`` that is none
    of ``known``: the name it is but for case and ``-``/``_`` (``kernels_by_nvtx``:
    kernels-by-nvtx; ``CUDA_GPU_KERN_SUM``), else those it is closest to (``top-kernel``:
    top-kernels, ...), and the command that lists all ``count`` (default: as many as ``known``)."""
    import difflib

    low = name.strip().lower()
    close = [k for k in known if k.lower() in {low, low.replace("_", "-"), low.replace("-", "_")}][:1] or \
        difflib.get_close_matches(low.replace("_", "-"), sorted(known), n=3, cutoff=0.6)
    said = f"unknown {kind} {name!r}" + (f"; did you mean {', '.join(close[:-1]) + ' or ' if close[1:] else ''}"
                                         f"{close[-1]}?" if close else "")
    return f"{said} (`{listing}` lists all {count if count is not None else len(known)} {kinds})"


def cut_end(text: str, width: int) -> str:
    """``text`` in at most ``width`` columns, cut at the end with an ellipsis."""
    if text_width(text) <= width:
        return text
    return _head(text, width - 1) + ELLIPSIS if width > 0 else ""


def cut_sentence(text: str, width: int) -> str:
    """A sentence (or a value said in words) in at most ``width`` columns, cut at its end as
    ``cut_end`` does but not inside a number of its own: ``shared memory …``, not ``shared
    memory 213,18…``, which reads as another number (where a word is left before it; a
    number that ends a sentence, ``maximum of 16.``, is whole)."""
    cut = cut_end(text, width)
    if cut == text or not cut:
        return cut
    head = cut[:-len(ELLIPSIS)]
    nxt = text[len(head):len(head) + 2]
    inside = nxt[:1].isdigit() or (nxt[:1] in (",", ".") and nxt[1:2].isdigit())
    if inside and (m := _NUMBER_CUT.search(head)) and _WORD_CHAR.search(head, 0, m.start()):
        return head[:m.start()] + ELLIPSIS
    return cut


#: a number of its own (not part of a word, as 128 of 256x128 or 90 of sm90), its sign with it,
#: at the end of a text's cut start; a word before it, which is what a cut before it keeps
_NUMBER_CUT = re.compile(r"(?<![\w.,])[-+−]?[0-9][0-9,.]*$")
_WORD_CHAR = re.compile(r"\w")


def cut_text(text: str, width: int) -> str:
    """``text`` in at most ``width`` columns: a '/'-separated path keeps its last
    components whole (``…/hstu.layer4/hstu_attention``), other text is cut at the end."""
    if text_width(text) <= width:
        return text
    if "/" in text.rstrip("/"):
        parts = text.rstrip("/").split("/")
        keep = ""
        for p in reversed(parts[1:]):
            cand = p + ("/" + keep if keep else "")
            if text_width(cand) + 2 > width:
                break
            keep = cand
        if keep:
            return ELLIPSIS + "/" + keep
    return cut_end(text, width)


def cut_job(text: str, width: int) -> str:
    """A job's name (``tracekit.ranks``: a launcher's job id, or its ranks' path with the rank
    masked, ``/prof/base/rank*/export``, ``#N`` after it for its N-th capture) in at most ``width``
    columns. Every path-named job ends alike (``rank*/export``): what tells one from another is
    the folder above the masked rank, kept before the components after it (``…/base/rank*/export``,
    ``…/base/rank*/…``, ``…/base/…``), and the capture's ``#N``; other text, and a path whose file
    name carries the rank (``…/job_rank*``), as ``cut_text`` cuts it."""
    if text_width(text) <= width:
        return text
    number = re.search(r"#[0-9]+$", text)
    capture = number.group() if number else ""
    parts = text[:len(text) - len(capture)].rstrip("/").split("/")
    masked = next((i for i in range(len(parts) - 1, 0, -1) if "*" in parts[i]), None)
    if masked is None:
        return cut_text(text, width)
    room = width - text_width(capture)
    kept = cut_text("/".join(parts), room)
    if masked == len(parts) - 1:  # (a file name that carries the rank tells its job)
        return kept + capture
    above = parts[masked - 1]
    if kept.startswith(ELLIPSIS + "/") and f"/{above}/{parts[masked]}" in "/" + kept[2:]:
        return kept + capture
    for cand in ([above, *parts[masked:]], [above, parts[masked], ELLIPSIS], [above, ELLIPSIS]):
        if cand[-1] == ELLIPSIS and len(cand) - 1 >= len(parts) - masked + 1:
            continue  # (nothing after it to drop)
        label = ELLIPSIS + "/" + "/".join(cand)
        if text_width(label) <= room:
            return label + capture
    return cut_end(ELLIPSIS + "/" + above, room) + capture


def cut_stack(text: str, width: int, sep: str = ";") -> str:
    """A folded call stack (``outermost;...;innermost``) in at most ``width`` columns, cut
    from the left: the innermost frames, which say what code made the call, kept whole after
    ``…;`` (``…;read_loss (x.py:35);THPVariable_item``); where those fill less than half of
    ``width`` (a C++ frame is long), the stack's last ``width - 1`` columns instead. No
    brackets, words or numbers added: a frame's text is kept as it is."""
    if text_width(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    frames = text.split(sep)
    keep = ""
    for f in reversed(frames):
        cand = f + (sep + keep if keep else "")
        if text_width(ELLIPSIS + sep + cand) > width:
            break
        keep = cand
    if text_width(keep) < width // 2:
        return ELLIPSIS + _tail(text, width - 1)
    return ELLIPSIS + sep + keep


#: words that tell no kernel from another (namespaces, lambda decorations)
_NOISE = {"at", "native", "unnamed", "lambda", "instance", "operator", "const", "void", "anonymous", "namespace"}
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|\d+")  # identifiers split at '_' too


def _words(name: str, common: set[str]) -> list[str]:
    """The words of ``name`` in order, once each, without those in ``common`` or noise;
    numbers (vector widths, block sizes) after the names."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(name):
        if w not in common and w not in _NOISE:
            seen.setdefault(w)
    return sorted(seen, key=str.isdigit)


def distinct_labels(
    values: Sequence[str | None],
    width: int,
    shorten: Callable[[str, int], str] = cut_end,
) -> list[str]:
    """``shorten(value, width)`` for each value, then the labels that two different
    values share (or that one value's label, cut at its start, shows of another's end) are
    told apart by the first words in which the values differ
    (``vectorized_elementwise_kernel [silu_kernel]``), else by a number; all in at most
    ``width`` characters. Equal values keep equal labels; None becomes ''."""
    labels = ["" if v is None else shorten(str(v), width) for v in values]
    by_label: dict[str, set[str]] = {}
    for v, lab in zip(values, labels, strict=True):
        if v is not None:
            by_label.setdefault(lab, set()).add(str(v))
    # a label cut at its start that shows another value's end is told apart from that value too
    for lab, others in _read_alike(values, labels).items():
        by_label[lab] |= others
    taken = set(labels)
    for lab, group in by_label.items():
        if len(group) < 2:
            continue
        fixed = _tell_apart(lab, sorted(group), width, taken)
        taken.update(fixed.values())
        for i, v in enumerate(values):
            if v is not None and labels[i] == lab:
                labels[i] = fixed[str(v)]
    return _number_the_rest(values, labels, width)


def _read_alike(values: Sequence[str | None], labels: list[str]) -> dict[str, set[str]]:
    """Each label cut at its start whose visible end is the end of other values (``…/forward``
    of warmup/forward beside step/forward): those values, which it would read as."""
    texts = {str(v) for v in values if v is not None}
    ends: dict[int, dict[str, set[str]]] = {}  # length -> each end of that length -> the values that end so
    out: dict[str, set[str]] = {}
    for v, lab in zip(values, labels, strict=True):
        if v is None or not lab.startswith(ELLIPSIS) or ELLIPSIS in lab[1:]:
            continue
        end = lab[1:]
        if len(end) not in ends:
            by: dict[str, set[str]] = {}
            for t in texts:
                if len(t) >= len(end):
                    by.setdefault(t[len(t) - len(end):], set()).add(t)
            ends[len(end)] = by
        others = ends[len(end)].get(end, set()) - {str(v)}
        if others:
            out.setdefault(lab, set()).update(others)
    return out


def _number_the_rest(values: Sequence[str | None], labels: list[str], width: int) -> list[str]:
    """Labels that different values still share get a number each (one count for all)."""
    owners: dict[str, set[str]] = {}
    for v, lab in zip(values, labels, strict=True):
        if v is not None:
            owners.setdefault(lab, set()).add(str(v))
    clash = sorted({str(v) for v, lab in zip(values, labels, strict=True) if v is not None and len(owners[lab]) > 1})
    number = {v: k + 1 for k, v in enumerate(clash)}
    return [_with_suffix(lab, f" #{number[str(v)]}", width) if v is not None and str(v) in number
            else lab for v, lab in zip(values, labels, strict=True)]


def _with_suffix(label: str, suffix: str, width: int) -> str:
    """``label`` cut to leave room for ``suffix`` (itself cut to two thirds of ``width``)."""
    suffix = cut_end(suffix, max(width * 2 // 3, 1))
    if text_width(label) + text_width(suffix) > width:  # short of room: the namespace goes first
        label = label.split("::")[-1]
    return cut_end(label, max(width - text_width(suffix), 0)) + suffix


def _bracketed(label: str, words: str, width: int) -> str | None:
    """``label [words]``, the words cut inside their brackets (which stay whole); None where
    two thirds of ``width`` leave no room for a word's first two letters."""
    room = max(width * 2 // 3, 1) - 3  # (" [" and "]")
    if room < min(len(words), 2):
        return None
    return _with_suffix(label, f" [{cut_end(words, room)}]", width)


def _shared_head(label: str, names: list[str]) -> str:
    """What the labels that tell ``names`` apart start with: their shared ``label``; where it
    is the start they all share cut at the end, that start to its last whole word
    (``at::native::vectorized_elementwise_kernel`` for ``at::native::vecto…``), which cutting
    again for the words beside it marks with an ellipsis where it cuts it; a bracket of the
    names' own that the label cut open left out."""
    base = label.rstrip(ELLIPSIS)
    head = label
    if base != label and all(n.startswith(base) for n in names):
        shared = os.path.commonprefix(names)
        space = re.search(r"\s", shared[len(base):])  # (its word alone: what follows, a bracket of its own, is the names')
        end = len(base) + space.start() if space else len(shared)
        while end > len(base) and not all(end == len(n) or not (n[end].isalnum() or n[end] == "_") for n in names):
            end -= 1
        whole = re.sub(r"\W+$", "", shared[:end])
        head = whole if len(whole) > len(base) else label
    # (a label cut inside the names' own brackets, 'Kernel2 [x…': the bracket goes, the one added tells them apart)
    opened = head.rfind(" [")
    return head[:opened] if opened > 0 and head.count("[") > head.count("]") else head


def _tell_apart(label: str, names: list[str], width: int, taken: set[str]) -> dict[str, str]:
    base = _shared_head(label, names)
    common = set(_WORD.findall(names[0])).intersection(*(_WORD.findall(n) for n in names[1:]))
    common |= set(_WORD.findall(base.rstrip(ELLIPSIS)))
    words = {n: _words(n, common) for n in names}
    out = {}
    for n in names:  # each name with the fewest of its words that no other name starts with
        k = 1
        while k < len(words[n]) and any(words[m][:k] == words[n][:k] for m in names if m != n):
            k += 1
        out[n] = _bracketed(base, " ".join(words[n][:k]), width) if words[n] else None
    shared = Counter(out.values())
    told = {n: out[n] for n in names if out[n] is not None and shared[out[n]] == 1 and out[n] not in taken}
    # the rest from where they part, past what they all start with (the same words in another
    # order, Host-to-Device and Device-to-Host; parameters, "…float, int)"), where that fits
    # whole; else a kernel's name (C++ templates, with no word of its own: index_kernel_impl
    # beside index_put_kernel_impl) by the identifier it parts in; else that tail, cut
    tails = {n: _from_where_they_part(n, names, width) for n in names if n not in told}
    for pick in ({n: t for n, t in tails.items() if not t.endswith(ELLIPSIS)},
                 {n: _by_identifier(base, n, names, width) for n in names if n not in told and _CPP.search(n)},
                 {n: tails[n] for n in names if n not in told}):
        counted = Counter(pick.values())
        told.update({n: t for n, t in pick.items()
                     if n not in told and t and counted[t] == 1 and t not in taken and t not in told.values()})
    return {n: told.get(n, label) for n in names}  # the rest: numbered later


_IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")
_CPP = re.compile(r"[<(]|::")  # a demangled C++ name's templates, parameters or scopes


def _by_identifier(label: str, name: str, names: list[str], width: int) -> str:
    """``label [identifier]``: the identifier (or number) of ``name`` in which it parts from the
    other name it shares the longest start with (or the next, past a namespace or keyword); ''
    where there is none."""
    import os

    at = max(len(os.path.commonprefix([name, m])) for m in names if m != name)
    ident = next((m.group() for m in _IDENTIFIER.finditer(name)  # (a scope or keyword says nothing: the next)
                  if m.end() > at and m.group() not in _NOISE | {"c10", "std", "detail"}), "")
    return (_bracketed(label, ident, width) or "") if ident else ""


def _from_where_they_part(name: str, names: list[str], width: int) -> str:
    """``…`` and ``name`` from the start of the word where it parts from the other
    ``names`` (what they all start with left out), cut to ``width``; '' where nothing of
    it is left."""
    import os

    common = os.path.commonprefix(names)
    cut = max(common.rfind(c) for c in " _-:/<([") + 1 if len(common) < len(name) else len(common)
    rest = name[cut:]
    return cut_end(ELLIPSIS + rest, width) if rest and cut > 0 and width > 4 else ""


def check_run_name(name: str | None) -> str:
    """``name`` stripped, if it can name a run: not empty, no control characters, and
    nothing ``--run`` or ``diff`` reads as something else (an id, ``latest``, ``all``, a
    sweep id)."""
    if name is not None:
        expect(name, str, "run name")
    name = (name or "").strip()
    if not name:
        raise QueryError("a run's name cannot be empty")
    if not name.isprintable():
        raise QueryError(f"'{escape_controls(name)}' cannot name a run: it holds control characters; "
                         "choose another name")
    if SWEEP_ID.fullmatch(name):
        raise QueryError(f"{name!r} cannot name a run: it reads as a sweep id (`tracekit diff` takes it as the "
                         "sweep); choose another name")
    if RUN_ID.fullmatch(name) or name.lower() in ("latest", "all"):
        raise QueryError(f"{name!r} cannot name a run: --run reads it as "
                         f"{'a run id' if name[0].isdigit() else 'a keyword'}; choose another name")
    return name


def asked_run_name(name: str | None, own: str | os.PathLike | None = None) -> str:
    """A name asked for (``ingest --name``, ``runs rename``) checked as ``check_run_name``
    does, and not a path here that ``diff``, ``compare`` and ``report --vs`` read as a file to
    compare (one that holds something to ingest: ``diff.resolve``), while ``--run`` reads the
    name, so that one text would name two runs. ``own``: the run's own input, which the path
    may be (read as a file, it is that run)."""
    from pathlib import Path

    from .ingest import nothing_to_ingest

    name = check_run_name(name)
    path = Path(name)
    try:
        a_file = path.exists() and nothing_to_ingest(path) is None
    except OSError:  # (a name too long for a path, or one the system cannot look up: no file here)
        a_file = False
    if a_file and (own is None or path.resolve() != Path(own).resolve()):
        raise QueryError(f"{name!r} cannot name a run: it is a file here, which diff and compare read as that "
                         "file; choose another name")
    return name


def derived_run_name(*candidates: str) -> str:
    """A run's name when none is asked for: the first of ``candidates`` (a file's stem, its
    whole name) that can name a run, its control characters escaped; else ``run-`` and the
    last (a file ``3.sqlite`` is run ``3.sqlite``, a folder ``all`` run ``run-all``)."""
    for text in candidates:
        try:
            return check_run_name(escape_controls(text))
        except QueryError:
            continue
    return "run-" + escape_controls(candidates[-1].strip())


class RunNames:
    """The names one command gives the runs it adds without a name asked for (``tracekit
    ingest`` of many inputs, the files of ``tracekit diff``). A run is named after its input
    (``own``: a file's stem, a run folder's name), unless a run of the store has that name
    or another input of the same command has it too: then the name is qualified by the
    folders the input is in, as few as tell the command's inputs apart (``b/export``; both
    ``a/export`` and ``b/export`` for two inputs of one command; ``base/rank0/export`` and
    ``again/rank0/export`` for the ranks of two jobs), and by more of them, up to
    ``MAX_FOLDERS``, where the store has that name; only then numbered (``b/export-2``).
    ``inputs``: each input's own name and its folders' names, nearest first. Names are given
    in input order; a name given stays taken for the rest of the command, whether or not its
    run was then written (a serial and a threaded ingest give the same)."""

    MAX_FOLDERS = 3

    def __init__(self, inputs: Iterable[tuple[str, Sequence[str]]] = ()):
        self.inputs = [(own, _folders(folders)) for own, folders in inputs]
        # each qualification's names given by more than one input (level k: k folders)
        self.shared = [{n for n, c in Counter(_qualified(own, folders, k) for own, folders in self.inputs).items()
                        if c > 1} for k in range(self.MAX_FOLDERS + 1)]
        self.given: set[str] = set()

    def choose(self, own: str, folders: Sequence[str], taken: Callable[[str], bool]) -> str:
        """The name of a run of the input ``own`` in ``folders`` (its folders' names, nearest
        first: ``('rank0', 'base', ...)``; none for a file in the root folder);
        ``taken(name)``: whether a run of the store has that name."""
        folders = _folders(folders)
        levels = range(min(len(folders), self.MAX_FOLDERS) + 1)
        names = [_qualified(own, folders, k) for k in levels]
        # the first that no two inputs of the command share; inputs of one folder share them all
        # (export.sqlite and export.sqlite.xz): the nearest folder, then numbered
        first = next((k for k in levels if names[k] not in self.shared[k]), None)
        tried = names[first:] if first is not None else names[min(1, len(folders)):][:1]
        numbered = (f"{tried[-1]}-{n}" for n in itertools.count(2))
        name = next(n for n in itertools.chain(tried, numbered) if n not in self.given and not taken(n))
        self.given.add(name)
        return name


def _folders(folders: Sequence[str]) -> tuple[str, ...]:
    """Folder names, their control characters escaped, up to the first empty one (the root)."""
    out = []
    for f in folders:
        f = escape_controls(f.strip())
        if not f:
            break
        out.append(f)
    return tuple(out)


def _qualified(own: str, folders: tuple[str, ...], k: int) -> str:
    """``own`` qualified by its ``k`` nearest folders (``base/rank0/export``)."""
    return "/".join([*reversed(folders[:k]), own])
