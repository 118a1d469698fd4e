"""A SpreadsheetBench tool: what a workbook in the working directory holds.

``[tools] python = ["skillvc.tasks.skillopt.tools.spreadsheet"]`` beside ``code = true`` (the
``python`` tool that runs code in the rollout's scratch directory, where the item's input
workbooks are and where the output workbooks must be written). This tool only reads.
"""

from __future__ import annotations

from pathlib import Path

ROWS = 12
COLUMNS = 12


def preview_workbook(name: str, workdir: Path) -> str:
    """Each sheet of a workbook in the working directory: its size and its first rows' values."""
    import openpyxl

    path = (workdir / name).resolve()
    if not path.is_relative_to(workdir.resolve()) or not path.is_file():
        raise ValueError(f"no workbook {name!r} in the working directory")
    book = openpyxl.load_workbook(path, data_only=True, read_only=True)
    try:
        out = []
        for sheet in book.worksheets:
            out.append(f"## {sheet.title} ({sheet.max_row} rows x {sheet.max_column} columns)")
            rows = sheet.iter_rows(max_row=ROWS, max_col=COLUMNS, values_only=True)
            out.extend(f"{i}: {list(row)}" for i, row in enumerate(rows, start=1))
        return "\n".join(out)
    finally:
        book.close()
