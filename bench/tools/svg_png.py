"""Turn Textual's SVG screenshots into PNGs that keep the character grid (braille charts included).

    python bench/tools/svg_png.py screenshots/*.svg            # writes screenshots/NAME.png beside each
    python bench/tools/svg_png.py --out DIR a.svg b.svg

Textual writes each run of text as one <text> with a textLength; rasterisers without textLength
support (rsvg) then lay out glyphs from fallback fonts (braille) at their own widths and the grid
drifts. Here every character gets its own <text> at its cell's x before ``rsvg-convert``
(apt: librsvg2-bin; fonts-firacode and fonts-dejavu-core give the glyphs) renders the PNG.
"""

from __future__ import annotations

import argparse
import html
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

TEXT = re.compile(r'<text class="([^"]+)" x="([\d.]+)" y="([\d.]+)" textLength="([\d.]+)" clip-path="([^"]+)">(.*?)</text>',
                  re.S)


def grid_svg(svg: str) -> str:
    """The same SVG with one <text> per visible character, each at its cell."""

    def split(m: re.Match) -> str:
        cls, x, y, length, clip, body = m.groups()
        chars = html.unescape(body)
        if not chars:
            return ""
        cw = float(length) / len(chars)
        out = []
        for i, ch in enumerate(chars):
            if ch in (" ", "\u00a0"):
                continue
            out.append(f'<text class="{cls}" x="{float(x) + i * cw:.2f}" y="{y}" clip-path="{clip}">{escape(ch)}</text>')
        return "".join(out)

    return TEXT.sub(split, svg)


def convert(src: Path, dst: Path) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".svg", delete=False) as tmp:
        tmp.write(grid_svg(src.read_text(encoding="utf-8")))
    try:
        subprocess.run(["rsvg-convert", "-o", str(dst), tmp.name], check=True)
    finally:
        Path(tmp.name).unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("svg", nargs="+")
    ap.add_argument("--out", help="folder for the PNGs (default: beside each SVG)")
    args = ap.parse_args()
    for name in args.svg:
        src = Path(name)
        dst = (Path(args.out) if args.out else src.parent) / (src.stem + ".png")
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            convert(src, dst)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"svg_png: {src}: {exc} (is rsvg-convert installed? apt-get install librsvg2-bin)", file=sys.stderr)
            return 1
        print(dst)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
