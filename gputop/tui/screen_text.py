"""The screen as plain text (the tests, and bench/tools/tui_screens.py's .txt copies), through Textual's public
``App.export_screenshot``: its SVG holds every run of text with the column it starts at (Rich's ``export_svg``
writes ``x`` as column × the cell width and each text's row as its ``clip-path``); runs of blanks are not
written, so they are blanks here too."""

from __future__ import annotations

import html
import re

from rich.cells import cell_len

CELL_W = 20 * 0.61  # Rich's export_svg: char_height 20, font_aspect_ratio 0.61
TEXT = re.compile(r'<text class="[^"]*" x="([0-9.e+-]+)" y="[^"]*" textLength="[^"]*" '
                  r'clip-path="url\(#[^)]*-line-(\d+)\)">(.*?)</text>')
LINE = re.compile(r'<clipPath id="[^"]*-line-\d+">')  # one per row but the last


def svg_text(svg: str, width: int) -> str:
    """The text of an SVG screenshot ``width`` columns wide: each row padded to the width with blanks, one
    line each (as Rich's ``export_text`` of the same render)."""
    rows: list[list[tuple[int, str]]] = [[] for _ in range(len(LINE.findall(svg)) + 1)]
    for x, row, text in TEXT.findall(svg):
        rows[int(row)].append((round(float(x) / CELL_W), html.unescape(text.replace("&#160;", " "))))
    lines = []
    for runs in rows:
        line, col = [], 0
        for start, text in sorted(runs):
            line.append(" " * (start - col) + text)
            col = start + cell_len(text)
        line.append(" " * (width - col))
        lines.append("".join(line))
    return "\n".join(lines)
