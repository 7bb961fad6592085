"""A model download as it happens: `pull` records, a progress bar per layer, or status lines.

Ollama reports a pull as a stream of events: a status (`pulling manifest`, `success`)
or a layer's digest with bytes completed of total. A terminal gets one bar per layer
and the statuses dimmed above them; a pipe gets the statuses alone, one a line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localgpt_cli.render.output import Output


class PullView:
    """Renders the events of one `models pull`; `close` stops the bars (call it in a
    `finally`, so an error does not leave the terminal's cursor hidden)."""

    def __init__(self, output: Output, model: str) -> None:
        self.out = output
        self.model = model
        self.progress: Any = None
        self.tasks: dict[str, Any] = {}
        if output.pretty:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TransferSpeedColumn,
            )

            self.progress = Progress(
                TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                TransferSpeedColumn(), console=output.console(),
            )
            self.progress.start()

    def show(self, event: dict[str, Any]) -> None:
        if self.out.json:
            self.out.record({"type": "pull", "model": self.model, **event})
        elif self.progress is not None:
            digest = event.get("digest")
            if digest and event.get("total"):
                if digest not in self.tasks:
                    self.tasks[digest] = self.progress.add_task(
                        f"pulling {digest.removeprefix('sha256:')[:12]}", total=event["total"]
                    )
                self.progress.update(self.tasks[digest], completed=event.get("completed") or 0)
            else:
                self.progress.console.print(event["status"], style="dim")
        else:
            if not event.get("digest"):
                self.out.stdout.write(f"{event['status']}\n")

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
