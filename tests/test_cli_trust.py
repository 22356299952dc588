"""What a demanding user meets on the command line. Each is a one-line error (exit 2)
that leaves the store as it was, or the answer asked for."""

from __future__ import annotations

import pytest
from conftest import DATA, store_state
from test_cli_errors import one_error_line

from tracekit.cli import main as cli_main


def _cli(db, *args) -> int:
    return cli_main(["--db", str(db), *args])


#: a small nsys export not in small_store (which holds capture_range and ncu_sections)
OTHER_NSYS = DATA / "nsys_odd_nvtx_cuda_only" / "export.sqlite.xz"


@pytest.mark.parametrize("cmd", [["query", "top-kernels"], ["chart", "top-kernels", "-o", "{tmp}/c.json"],
                                 ["ingest", str(OTHER_NSYS)]])
def test_a_parameter_given_twice_with_two_values_is_an_error(small_store, capsys, tmp_path, cmd):
    before = store_state(small_store)
    args = [a.replace("{tmp}", str(tmp_path)) for a in cmd]
    assert _cli(small_store, *args, "-p", "group=name", "-p", "group=family") == 2
    assert "--param group: given twice (group=name, group=family); give it once" in one_error_line(capsys)
    assert store_state(small_store) == before and not (tmp_path / "c.json").exists()
    # the same value twice is that value
    assert _cli(small_store, "query", "top-kernels", "-p", "group=family", "-p", "group=family") == 0
