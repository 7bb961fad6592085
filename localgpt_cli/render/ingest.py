"""Ingest events for people and scripts: records, a progress bar, or only what failed.

`localgpt ingest` hands every event of the run to an `IngestView`; the view decides by
output mode what shows: NDJSON records with --json, a progress bar and a summary on a
terminal, and nothing but errors in a pipe (a cron job mails whatever it prints) unless
it is a dry run, whose plan is what was asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from localgpt_cli.render.tables import chunks, display_path

if TYPE_CHECKING:
    from localgpt_cli.render.output import Output


class IngestView:
    """Renders ingest events: records with --json, a progress bar on a terminal, and
    nothing but errors in a pipe (a cron job mails whatever it prints) unless it is a dry
    run, whose plan is what was asked for."""

    def __init__(self, output: Output, dry_run: bool) -> None:
        self.out = output
        self.dry_run = dry_run
        self.progress: Any = None
        self.task: Any = None
        self.chunks = 0

    def show(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        out = self.out
        if kind == "warning":
            if out.json or out.pretty:
                out.warn(event["code"], event["message"])
            return
        if out.json:
            if kind in ("document", "summary"):
                out.record(event)
            return
        if kind == "document" and event["status"] == "failed":
            self._print_error(event)
            self._advance({"files": 1})
        if not out.pretty:
            if self.dry_run and kind in ("document", "summary"):
                line = self._line(event) if kind == "document" else summary_line(event)
                out.stdout.write(line + "\n")
                out.stdout.flush()
            return
        if kind == "plan":
            self._start(event)
        elif kind == "progress":
            self._advance(event)
        elif kind == "document" and (self.dry_run or event["status"] in ("moved", "removed")):
            self._print(self._line(event))
        elif kind == "summary":
            self.close()
            self._print(summary_line(event))

    def _start(self, plan: dict[str, Any]) -> None:
        if not plan["to_process"] or self.dry_run:  # a dry run only lists
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files  {task.fields[chunks]}"),
            TimeRemainingColumn(),
            console=self.out.console(),
            transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task("ingesting", total=plan["to_process"],
                                           chunks=chunks(0))

    def _advance(self, event: dict[str, Any]) -> None:
        if self.progress is None:
            return
        self.chunks += event.get("chunks", 0)
        if event.get("phase") == "optimizing":
            self.progress.update(self.task, description="optimizing")
        self.progress.update(self.task, advance=event.get("files", 0),
                             chunks=chunks(self.chunks))

    def _line(self, event: dict[str, Any]) -> str:
        verb = event["status"] if not self.dry_run else f"would be {event['status']}"
        extra = f" (from {display_path(event['from'])})" if event.get("from") else ""
        return f"{verb:<20} {display_path(event['path'])}{extra}"

    def _print(self, text: str) -> None:
        target = self.progress.console if self.progress is not None else self.out.console()
        target.print(text, markup=False, highlight=False)

    def _print_error(self, event: dict[str, Any]) -> None:
        message = event["message"]
        if self.progress is not None:
            self.progress.console.print(f"failed: {message}", style="red", markup=False)
        else:
            self.out.stderr.write(f"localgpt: error: {message}\n")
            self.out.stderr.flush()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def summary_line(s: dict[str, Any]) -> str:
    """The run's summary event as one line: what changed, then chunk counts and time."""
    parts = [f"{s[k]} {k}" for k in ("added", "updated", "moved", "removed", "failed") if s[k]]
    parts.append(f"{s['unchanged']} unchanged")
    if s["pending_embeddings"]:
        parts.append(f"{chunks(s['pending_embeddings'])} pending embeddings")
    head = "Dry run: would be " if s["dry_run"] else ""
    tail = f" ({chunks(s['chunks'])}, {s['embedded']} embedded, {s['ms'] / 1000:.1f} s)"
    return head + ", ".join(parts) + ("" if s["dry_run"] else tail)
