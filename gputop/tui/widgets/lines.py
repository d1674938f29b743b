"""``Lines``: the base of every gputop widget. It renders pre-built lines through the Line API
(``render_line`` -> cached ``Strip``) and refreshes only the rows that changed, so an unchanged
panel costs nothing per frame and a changed one costs one strip per changed row. Panels also skip
rebuilding their lines when what they show did not change (a frame on an idle GPU touches almost
nothing).

A line is a Rich ``Text``, a ``(str, style)`` pair (one style for the whole row: chart rows), or a
``(str, style, (c0, c1, style2), ...)`` row with spans (cells c0..c1 also in ``style2``: a chart's shaded
verdict window, the device panel's label, bar and value; in order, not overlapping, None ignored); pairs
and rows with spans render without building a ``Text``.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget


def span_segments(text: str, spans, plain, spanned) -> tuple[list[Segment], int]:
    """The segments of ``text`` up to its last span: in style ``plain``, each ``(c0, c1, extra)`` span in
    ``spanned(extra)`` (None spans skipped); and the column they end at."""
    segs: list[Segment] = []
    pos = 0
    for span in spans:
        if span is None:
            continue
        c0, c1, extra = span
        c0, c1 = max(pos, min(c0, len(text))), max(pos, min(c1, len(text)))
        if c0 > pos:
            segs.append(Segment(text[pos:c0], plain))
        if c1 > c0:
            segs.append(Segment(text[c0:c1], spanned(extra)))
        pos = c1
    return segs, pos

class Lines(Widget):
    """A widget that shows a list of Rich Text lines (one per row), cropped to its width.

    Only the rows whose text changed are refreshed, and each row's Strip is cached until then.
    """

    DEFAULT_CSS = "Lines { height: auto; }"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lines: list[Text] = []
        self._strips: list[Strip | None] = []
        self._final: dict[int, Strip] = {}  # row -> its strip after the app's line filters (full width)
        self._row_styles: dict[tuple, tuple] = {}  # (style, filters, bg) -> final (text, padding) styles
        self._filters: tuple = ()
        self._strip_width = -1
        self._width = 0
        self._base = None  # the widget's Rich style, looked up once per change (it is costly)
        self._bg = None  # its background colour (for line filters)
        self._plain: bool | None = None  # see _plain_box
        self.wh = (0, 0)  # (width, height), kept from the last resize: ``size`` is a costly property

    def set_lines(self, lines: list) -> bool:
        """Replace the lines (``Text`` or ``(str, style)``); refresh only the rows that changed.
        True if any changed."""
        old = self._lines
        if lines == old:
            return False
        self._lines = lines
        if len(lines) != len(old):
            self._reset_strips()
            auto = self.styles.height is not None and self.styles.height.is_auto
            self.refresh(layout=auto)
            return True
        changed = [y for y, (a, b) in enumerate(zip(old, lines)) if a != b]
        for y in changed:
            self._strips[y] = None
            self._final.pop(y, None)
        if len(changed) > len(lines) // 2:
            self.refresh()
        else:  # one region from the first to the last changed row: unchanged rows in it are cached
            self.refresh(Region(0, changed[0], self.wh[0], changed[-1] - changed[0] + 1))
        return True

    def _reset_strips(self) -> None:
        self._strips = [None] * len(self._lines)
        self._final.clear()
        self._row_styles.clear()

    @property
    def plain(self) -> str:
        return "\n".join(t[0] if isinstance(t, tuple) else t.plain for t in self._lines)

    @property
    def rows(self) -> int:
        """How many lines it holds (its height, when that is auto)."""
        return len(self._lines)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines)

    def on_resize(self) -> None:
        self.wh = (self.size.width, self.size.height)
        self._reset_strips()
        self._base = self._bg = self._plain = None
        self.rebuild()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = self._bg = self._plain = None
        self._reset_strips()

    def rebuild(self) -> None:
        """Recompute the lines for the current size (widgets whose lines depend on width)."""

    def render_lines(self, crop: Region) -> list[Strip]:
        """Our cached strips, filtered, without Textual's generic styles cache when nothing needs it.

        Textual renders every widget that overlaps the bounding box of a frame's changed rows, so
        an unchanged panel between two changed ones is asked for all its rows; here that is a list
        of cached strips (``Strip.apply_filter`` and ``crop`` cache their results too).
        """
        self._width = self.size.width  # once per render, not once per line (it is a property chain)
        if not self._plain_box():
            return super().render_lines(crop)
        filters = tuple(self.app.get_line_filters())
        if self._bg is None:
            self._bg = self.background_colors[1]
        if filters != self._filters:
            self._filters = filters
            self._final.clear()
        bg, x0, x1 = self._bg, crop.x, crop.right
        full = x0 == 0 and x1 == self._width
        final = self._final
        out = []
        lines = self._lines
        for y in range(crop.y, crop.bottom):
            strip = final.get(y) if full else None
            if strip is None and full and y < len(lines) and isinstance(lines[y], tuple):
                strip = final[y] = self._plain_row(lines[y], filters, bg)
            if strip is None:
                strip = self.render_line(y)
                for f in filters:
                    strip = strip.apply_filter(f, bg)
                strip = strip.crop(x0, x1)
                if full:
                    final[y] = strip
            out.append(strip)
        return out

    def _plain_row(self, row: tuple, filters: tuple, bg) -> Strip:
        """The final strip of a ``(str, style)`` or ``(str, style, (c0, c1, style2), ...)`` row in one step: its
        styles (the row's, its spans', the padding's) go through the widget's style and the line filters once
        per style, not once per row."""
        text, style = row[0], row[1]
        width = self._width
        if len(text) > width:
            text = text[:width]
        text_style, pad_style = self._final_styles(style, filters, bg)
        segs, pos = span_segments(text, row[2:], text_style, lambda extra: self._final_styles(
            f"{style} {extra}" if style else extra, filters, bg)[0])
        if pos < len(text):
            segs.append(Segment(text[pos:], text_style))
        if len(text) < width:
            segs.append(Segment(" " * (width - len(text)), pad_style))
        return Strip(segs, width)

    def _final_styles(self, style: str, filters: tuple, bg) -> tuple:
        """(text style, padding style) of a row in ``style`` after the widget's style and the line filters."""
        styles = self._row_styles
        key = (style, filters, bg)
        pair = styles.get(key)
        if pair is None:  # the styles render_line and the filters give a one-cell row and its padding
            if self._base is None:
                self._base = self.rich_style
            probe = Strip([Segment("x", self.app.console.get_style(style) if style else None)])
            probe = probe.crop_extend(0, 2, None).apply_style(self._base)
            for f in filters:
                probe = probe.apply_filter(f, bg)
            segs = list(probe)
            pair = styles[key] = (segs[0].style, segs[-1].style)
        return pair

    def _plain_box(self) -> bool:
        """No border, padding, outline, tint or opacity: the content rows are the widget's rows."""
        if self._plain is None:
            st = self.styles
            self._plain = (not any(e[0] for e in st.border) and not any(e[0] for e in st.outline)
                           and st.gutter == (0, 0, 0, 0) and st.opacity == 1.0 and st.text_opacity == 1.0 and not st.tint.a
                           and not self.border_title and not self.border_subtitle)
        return self._plain

    def render_line(self, y: int) -> Strip:
        width = self._width
        if width != self._strip_width:
            self._strip_width = width
            self._reset_strips()
        if self._base is None:
            self._base = self.rich_style
        if y >= len(self._lines):
            return Strip.blank(width, self._base)
        strip = self._strips[y]
        if strip is None:
            text = self._lines[y]
            console = self.app.console
            if isinstance(text, tuple):  # one style for the row (and one for each of its spans)
                row, style = text[0], text[1]
                base = console.get_style(style) if style else None
                segs, pos = span_segments(row, text[2:], base,
                                          lambda extra: (base or Style.null()) + console.get_style(extra))
                if pos < len(row) or not segs:
                    segs.append(Segment(row[pos:], base))
            else:
                segs = text_segments(text, console)
                if text.style:
                    segs = list(Segment.apply_style(segs, console.get_style(text.style)))
            strip = Strip(segs).crop_extend(0, width, None).apply_style(self._base)
            self._strips[y] = strip
        return strip


def text_segments(text: Text, console) -> list[Segment]:
    """``list(text.render(console, end=""))`` for the Texts the panels build (spans in order, none
    overlapping: ``Text.assemble`` and ``append``), without Rich's general span bookkeeping."""
    spans = text.spans
    plain = text.plain
    if not spans:
        return [Segment(plain)]
    get_style = console.get_style
    base = get_style(text.style) if text.style else Style.null()
    segs = []
    pos = 0
    for sp in spans:
        if sp.start < pos or sp.end < sp.start:  # overlapping or out of order: Rich's way
            return list(text.render(console, end=""))
        if sp.start > pos:
            segs.append(Segment(plain[pos:sp.start], base))
        if sp.end > sp.start:
            segs.append(Segment(plain[sp.start:sp.end], base + get_style(sp.style, default=Style.null())))
        pos = sp.end
    if pos < len(plain):
        segs.append(Segment(plain[pos:], base))
    return segs

