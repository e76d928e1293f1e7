"""The one error of `hyperjob simulate`: a scenario file whose own structure is wrong (exit 2)."""

from __future__ import annotations


class ScenarioError(ValueError):
    """A scenario that cannot run; ``path`` names the place (``spec.events[3].at``).

    ``str()`` is ``"<path>: <message>"``, the one line the CLI prints on stderr before exiting 2.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message
