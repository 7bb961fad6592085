"""Chat packets -> what the user sees, in each output mode.

The same packet iterator feeds all three: NDJSON writes each packet as is; plain text
writes only the answer to stdout (so `answer=$(localgpt chat …)` holds the answer alone)
and the rest to stderr; pretty mode draws thinking dimmed and the answer as Markdown.
"""

from __future__ import annotations

import json
from typing import Any

from localgpt_cli.kernel.packets import StreamPacket
from localgpt_cli.render.output import Output


def tool_line(name: str, arguments: dict[str, Any], result: str | None = None) -> str:
    """`calculator(expression="5+5") -> 10`, the one-line trace of a tool call."""
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    line = f"{name}({args})"
    if result is not None:
        flat = " ".join(result.split())
        line += f" -> {flat[:117] + '...' if len(flat) > 120 else flat}"
    return line


def source_line(result: dict[str, Any]) -> str:
    """`[1] notes/vpn.md:2 (chunk 3, score 0.812)`: one source in the list after an answer."""
    from localgpt_cli.render.tables import quote_path

    where = quote_path(result["path"])
    if result.get("page") is not None:
        where += f":{result['page']}"
    return f"[{result['rank']}] {where} (chunk {result['chunk']}, score {result['score']:.3f})"


class JSONChatRenderer:
    def __init__(self, output: Output) -> None:
        self.output = output

    def packet(self, p: StreamPacket) -> None:
        self.output.record(p)  # type: ignore[arg-type]

    def close(self) -> None:
        pass


class PlainChatRenderer:
    """Answer text to stdout as it streams; thinking, tools and sources to stderr."""

    def __init__(self, output: Output, hide_thinking: bool = False,
                 explain: bool = False, kept: bool = True) -> None:  # fmt: skip
        self.out = output.stdout
        self.explain = explain
        self.kept = kept  # whether the history keeps this turn's previews (not --no-save)
        self.err = output.stderr
        self.hide_thinking = hide_thinking
        self.last = ""
        self._thinking = False
        self.sources: list[dict[str, Any]] = []
        self.previews: list[dict[str, Any]] = []
        self._pending: dict[str, StreamPacket] = {}

    def packet(self, p: StreamPacket) -> None:
        kind, payload = p["type"], p["payload"]
        if kind == "token":
            self._end_thinking()
            self.out.write(payload)
            self.out.flush()
            self.last = payload
        elif kind == "thought":
            if not self.hide_thinking:
                self._thinking = True
                self.err.write(payload)
                self.err.flush()
        elif kind == "tool_start":
            self._pending[payload["call_id"]] = p
        elif kind == "tool_result":
            start = self._pending.pop(payload["call_id"], None)
            args = start["payload"]["arguments"] if start else {}
            mark = "" if payload["ok"] else " (failed)"
            self._end_thinking()
            self.err.write(f"{tool_line(payload['name'], args, payload['result'])}{mark}\n")
            if payload.get("preview"):
                self.previews.append(payload["preview"])
        elif kind == "sources":
            self.sources = payload["results"]
            if self.explain:
                from localgpt_cli.render.explain import explain_lines

                self.err.write("".join(f"{line}\n" for line in explain_lines(payload)))
        elif kind == "error":
            self._end_thinking()
            self.err.write(f"localgpt: error: {payload['message']}\n")
        elif kind == "done":
            self._end_thinking()
            if self.last and not self.last.endswith("\n"):
                self.out.write("\n")
            self._write_previews()
            self.out.flush()
            if self.sources:
                self.err.write("Sources:\n")
                for r in self.sources:
                    self.err.write(f"  {source_line(r)}\n")

    def _end_thinking(self) -> None:
        if self._thinking:
            self.err.write("\n")
            self._thinking = False

    def _write_previews(self) -> None:
        """Each preview framed on stdout after the answer (a blank line between)."""
        from localgpt_cli.render.preview import plain_block

        for preview in self.previews:
            self.out.write(("\n" if self.last else "") + plain_block(preview, self.kept))
            self.last = "\n"
        self.previews = []

    def close(self) -> None:
        self.out.flush()
        self.err.flush()


class PrettyChatRenderer:
    """Rich: thinking dimmed as it streams, the answer as live Markdown, sources last."""

    def __init__(self, output: Output, hide_thinking: bool = False,
                 explain: bool = False, kept: bool = True) -> None:  # fmt: skip
        self.console = output.console()
        self.explain = explain
        self.kept = kept  # whether the history keeps this turn's previews (not --no-save)
        self.err_console = output.err_console()
        self.hide_thinking = hide_thinking
        self.answer: list[str] = []
        self.live: Any = None
        self.sources: list[dict[str, Any]] = []
        self.previews: list[dict[str, Any]] = []
        self._pending: dict[str, StreamPacket] = {}
        self._thinking = False

    def _markdown(self) -> Any:
        from rich.markdown import Markdown

        from localgpt_cli.render.terminal import visible

        # visible before layout, so that Live measures the lines it redraws as drawn
        return Markdown(visible("".join(self.answer)))

    def packet(self, p: StreamPacket) -> None:
        kind, payload = p["type"], p["payload"]
        if kind == "token":
            self._end_thinking()
            self.answer.append(payload)
            if self.live is None:
                from rich.live import Live

                self.live = Live(
                    self._markdown(),
                    console=self.console,
                    refresh_per_second=8,
                    vertical_overflow="visible",
                )
                self.live.start()
            else:
                self.live.update(self._markdown())
        elif kind == "thought":
            if not self.hide_thinking:
                self._thinking = True
                self.console.print(payload, end="", style="dim italic", markup=False)
        elif kind == "tool_start":
            self._pending[payload["call_id"]] = p
        elif kind == "tool_result":
            self._end_thinking()
            start = self._pending.pop(payload["call_id"], None)
            args = start["payload"]["arguments"] if start else {}
            style = "dim" if payload["ok"] else "dim red"
            self.err_console.print(
                tool_line(payload["name"], args, payload["result"]), style=style, markup=False
            )
            if payload.get("preview"):
                self.previews.append(payload["preview"])
        elif kind == "sources":
            self.sources = payload["results"]
            if self.explain:
                from localgpt_cli.render.explain import explain_lines

                for line in explain_lines(payload):
                    self.err_console.print(line, style="dim", markup=False)
        elif kind == "error":
            self._stop_live()
            self.err_console.print(f"error: {payload['message']}", style="red", markup=False)
        elif kind == "done":
            self._end_thinking()
            self._stop_live()
            if payload["reason"] == "aborted":
                self.err_console.print("[stopped]", style="dim", markup=False)
            self._print_previews()
            if self.sources:
                self.console.print("Sources", style="bold")
                for r in self.sources:
                    self.console.print(f"  {source_line(r)}", style="cyan", markup=False)

    def _end_thinking(self) -> None:
        if self._thinking:
            self.console.print()
            self._thinking = False

    def _print_previews(self) -> None:
        from localgpt_cli.render.preview import panel

        for preview in self.previews:
            self.console.print(panel(preview, self.kept))
        self.previews = []

    def _stop_live(self) -> None:
        if self.live is not None:
            self.live.update(self._markdown())
            self.live.stop()
            self.live = None

    def close(self) -> None:
        self._stop_live()


def chat_renderer(
    output: Output, hide_thinking: bool = False, explain: bool = False, kept: bool = True
) -> Any:
    """The renderer for the output mode; `explain` adds the sources table on stderr (the
    NDJSON packet already carries it); `kept` False (--no-save, or an in-memory history)
    makes a preview's footer say that `apply` and `last-preview` will not find it."""
    if output.json:
        return JSONChatRenderer(output)
    if output.pretty:
        return PrettyChatRenderer(output, hide_thinking, explain, kept)
    return PlainChatRenderer(output, hide_thinking, explain, kept)
