"""A timeline-recording copy of the persistent cached kernel (benchmarks/attention_cached_timeline.py).

``diag_source(src)`` edits ``kernels/_cached.py``'s source (main's at b2ef58b or cached6's): the persistent
kernel takes ``DBG`` (int64, 256 words per program) after ``dp_spare`` and records ``%globaltimer`` and
``%clock64`` at its start and end (words 0 and 2, clocks at +8; word 1 the SM, word 3 the pieces) and, per
piece (16 words from 16 + 16 * piece): the piece's start (0), before the q load (1), the end of the
unmasked cached-key loop (2), the end of the other loop (3), the end of the epilogue (4) (clocks at +8),
its kind (5: 1 whole, 2 cut + 4 if it arrived last + 16 * (pieces - 1), 8 + 16 * (pieces - 1) found
last by its check), its iterations (6: r0, r1, cached full tiles, cached tiles in 16-bit fields) and item
(7: b * 10**6 + h * 10**4 + t). Constexprs ``DQ`` (every piece reads the same 128 query rows) and ``DNP``
(cut pieces store no partial and take no counter) bound what the q loads and partial sums cost; their
outputs are wrong on purpose. Every edit must apply exactly (an assertion says which did not).
"""

from __future__ import annotations

import re


def diag_source(s: str) -> str:
    def sub(old, new, count=1):
        nonlocal s
        assert s.count(old) == count, (old[:80], s.count(old))
        s = s.replace(old, new)

    sub('''@triton.jit
def _load_nc(ptrs):''', '''@triton.jit
def _now(x):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [x], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _clk(x):
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [x], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _smid(x):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _mark(DBG, off, x):
    tl.store(DBG + off, _now(x))
    tl.store(DBG + off + 8, _clk(x))


@triton.jit
def _load_nc(ptrs):''')
    # _sk_piece signature and marks
    s = re.sub(r"(def _sk_piece\(.*?TWO_LOOPS: tl.constexpr)\):", r"\1, DBG, dbase, DQ: tl.constexpr):", s, count=1,
               flags=re.S)
    sub('''            acc += tl.dot(p.to(v.dtype), v)
        # the rest in one loop''', '''            acc += tl.dot(p.to(v.dtype), v)
        _mark(DBG, dbase + 2, r0)
        # the rest in one loop''')
    sub('''                                 Vb + offs_nl[:, None] * stride_vt) + offs_dv[None, :])
            acc += tl.dot(p.to(v.dtype), v)
    else:''', '''                                 Vb + offs_nl[:, None] * stride_vt) + offs_dv[None, :])
            acc += tl.dot(p.to(v.dtype), v)
        _mark(DBG, dbase + 3, r0)
    else:''')
    # _sk_segment signature
    a = s.index("def _sk_segment(")
    e = s.index("\n):", a)
    s = s[:e] + " DBG, dbase, DQ: tl.constexpr, DNP: tl.constexpr," + s[e:]
    sub('''    # the item holding iteration i: sequence b, head h, query block t (the per-sequence
    # figures are reloaded per piece rather than kept live across the program's loop)
''', '''    # the item holding iteration i: sequence b, head h, query block t (the per-sequence
    # figures are reloaded per piece rather than kept live across the program's loop)
    _mark(DBG, dbase + 0, i)
''')
    # the q load (whatever its keyword arguments): a mark before it; DQ reads rows 0..127 instead
    m = re.search(r"\n    q = tl\.load\(Q \+ start \* stride_qt.*?\)\n(?=    PT, pt_row)", s, flags=re.S)
    assert m, "q load"
    orig = m.group(0)[1:]
    s = s[:m.start()] + "\n    _mark(DBG, dbase + 1, i)\n    if DQ:\n        q = tl.load(Q + h * stride_qh + tl.arange(0, BLOCK_M)[:, None] * stride_qt + offs_d[None, :])\n    else:\n" + "".join("    " + ln + "\n" for ln in orig.rstrip("\n").split("\n")) + s[m.end():]
    sub('''D_QK, D_V, PAGE, BLOCK_M, BLOCK_N, HAS_TARGETS, FAST_SILU, PAGES, MAXP, TWO_LOOPS)
''', '''D_QK, D_V, PAGE, BLOCK_M, BLOCK_N, HAS_TARGETS, FAST_SILU, PAGES, MAXP, TWO_LOOPS, DBG, dbase, DQ)
''')
    # the whole item's store (whatever its keyword arguments): flag 1; DNP: cut pieces do nothing
    m = re.search(r"\n        tl\.store\(o_ptrs, \(acc \* inv_n\)[^\n]*(?:\n {17}[^\n]*)?\)\n(?=    else:\n)", s)
    assert m, "whole store"
    s = (s[:m.end()] + "        tl.store(DBG + dbase + 5, 1)\n    elif DNP:\n        tl.store(DBG + dbase + 5, 2)\n"
         + s[m.end():])
    s = re.sub(r"\n( +)arrived = tl.atomic_add\(CNT \+ item, 1, sem=\"acq_rel\"\)\n",
               lambda m: f"\n{m.group(1)}arrived = tl.atomic_add(CNT + item, 1, sem=\"acq_rel\")\n{m.group(1)}tl.store(DBG + dbase + 5, 2 + 4 * (arrived == c_last - c_first).to(tl.int64) + 16 * (c_last - c_first).to(tl.int64))\n", s, count=1)
    if "# (zero for the next launch)" in s:  # cached6: the last piece found by its check
        sub('''            tl.atomic_xchg(CNT + item, 0, sem="relaxed")  # (zero for the next launch)''',
            '''            tl.atomic_xchg(CNT + item, 0, sem="relaxed")  # (zero for the next launch)
            tl.store(DBG + dbase + 5, 8 + 16 * (c_last - c_first).to(tl.int64))''')
    sub('''\n    return seg_hi''', '''
    _mark(DBG, dbase + 4, i)
    r0i = (i - item_lo).to(tl.int64)
    r1i = (seg_hi - item_lo).to(tl.int64)
    tl.store(DBG + dbase + 6, r0i + (r1i << 16) + ((C // BLOCK_N).to(tl.int64) << 32) + (ct.to(tl.int64) << 48))
    tl.store(DBG + dbase + 7, (b * 1000000 + h * 10000 + t).to(tl.int64))
    return seg_hi''')
    # kernel
    s = s.replace("WS, CNT, scale, inv_n, num_pt, nseq, min_chunk, dp_spare,",
                  "WS, CNT, scale, inv_n, num_pt, nseq, min_chunk, dp_spare, DBG,", 1)
    a = s.index("def _hstu_cached_sk_kernel(")
    e = s.index("\n):", a)
    s = s[:e] + " DQ: tl.constexpr = False, DNP: tl.constexpr = False," + s[e:]
    sub('''    pid = tl.program_id(0)
    P = tl.num_programs(0)
    offs_b = tl.arange(0, BPOW)''', '''    pid = tl.program_id(0)
    P = tl.num_programs(0)
    gbase = pid.to(tl.int64) * 256
    _mark(DBG, gbase + 0, pid)
    tl.store(DBG + gbase + 1, _smid(pid).to(tl.int64))
    npc = 0
    offs_b = tl.arange(0, BPOW)''')
    # the two _sk_segment calls: append the diagnostic arguments, count pieces
    s, n = re.subn(r"(\n +UNIFORM, TWO_LOOPS[^\n]*)\)\n", lambda m: m.group(1) + ", DBG, gbase + 16 + 16 * tl.minimum(npc, 14), DQ, DNP)\n            npc += 1\n", s)
    assert n == 2, n
    sub('''            i = tl.where(in_dp, i, e)
            k += 1''', '''            i = tl.where(in_dp, i, e)
            k += 1
        _mark(DBG, gbase + 2, pid)
        tl.store(DBG + gbase + 3, npc.to(tl.int64))''')
    sub('''            npc += 1


def default_config''', '''            npc += 1
        _mark(DBG, gbase + 2, pid)
        tl.store(DBG + gbase + 3, npc.to(tl.int64))


def default_config''')
    # host
    sub('''    two_loops = bool(cfg.pop("TWO_LOOPS", True))''', '''    two_loops = bool(cfg.pop("TWO_LOOPS", True))
    dbg = cfg.pop("DBG")''')
    s = s.replace("1.0 / max_seq_len, num_pt, B, min_chunk, dp_spare,\n",
                  "1.0 / max_seq_len, num_pt, B, min_chunk, dp_spare, dbg,\n", 1)
    sub('''            UNIFORM=uniform, TWO_LOOPS=two_loops,''', '''            UNIFORM=uniform, TWO_LOOPS=two_loops, DQ=bool(cfg.pop("DQ", False)), DNP=bool(cfg.pop("DNP", False)),''')
    return s
