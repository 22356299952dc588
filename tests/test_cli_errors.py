"""Bad input is a one-line error with exit code 2, never an internal error (exit 1)."""

from __future__ import annotations

import pytest

from tracekit.cli import main as cli_main


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("tracekit: error: "), err
    assert "internal error" not in err[0] and "Traceback" not in err[0]
    return err[0]


def test_csv_of_a_nested_column_names_it(small_store, capsys):
    assert cli_main(["--db", str(small_store), "sql", "SELECT 1 AS a, [1, 2] AS l", "-f", "csv"]) == 2
    assert "'l'" in one_error_line(capsys)
    # JSON holds it
    assert cli_main(["--db", str(small_store), "sql", "SELECT 1 AS a, [1, 2] AS l", "-f", "json"]) == 0
    assert capsys.readouterr().out.strip() == '[{"a":1,"l":[1,2]}]'


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_plain_query_still_answers(small_store, capsys, fmt):
    assert cli_main(["--db", str(small_store), "query", "top-kernels", "--run", "nsys_run", "-f", fmt]) == 0
