"""Layout-only containers (and the main screen) that paint their background and nothing else."""

from __future__ import annotations

from rich.style import Style as RichStyle
from textual.containers import Container, Vertical
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import ContentSwitcher


class Blank:
    """A layout-only container: paints its background and nothing else.

    Textual renders every widget that overlaps the bounding box of a frame's changed rows, so a
    plain container would run its styles cache over every row of the screen at each frame; this
    returns one cached blank strip (background only, as Textual paints padding).
    """

    _blank_style: RichStyle | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        if self._blank_style is None:
            self._blank_style = RichStyle.from_color(bgcolor=self.background_colors[1].rich_color)
        return [Strip.blank(crop.width, self._blank_style)] * crop.height

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._blank_style = None


class Box(Blank, Container):
    pass


class Column(Blank, Vertical):
    pass


class Pages(Blank, ContentSwitcher):
    pass


class MainScreen(Blank, Screen):
    pass
