"""The monitor page: the page, its panels, the GPU strip, the live verdict, and what it shows as plain data (``view``)."""
