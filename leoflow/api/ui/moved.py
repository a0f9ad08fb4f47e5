"""A page that lives at another URL: raised by a page's view, answered with a 303."""

from __future__ import annotations


class Redirect(Exception):
    """A mapped task's page, for one, is the list of its items."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url
