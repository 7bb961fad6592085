"""`localgpt chat`'s parsed flags, in a module of their own.

`cli/turn.py` (the request path) and `cli/answer.py` (the pipeline's options) both read
them; with the type here, neither has to import the other, not even for type hints.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChatFlags:
    """`localgpt chat`'s flags as click parsed them, one typed object instead of 23
    parameters. The field names are click's parameter names (`pass_flags` builds this
    from them), so an option added to the command is a field added here."""

    prompt: tuple[str, ...]
    model: str | None
    system: str | None
    options: tuple[tuple[str, str], ...]  # -o KEY VALUE, parsed by llm/options.py
    think: bool | None
    hide_thinking: bool
    no_stream: bool
    timeout: float | None
    continue_: bool
    cid: str | None
    no_save: bool
    window: int | None
    # tools
    tools: str | None  # --tools GROUPS (None: the tools.groups setting)
    no_tools: bool
    only_tools: tuple[str, ...]
    functions: tuple[str, ...]
    max_iterations: int
    approve: bool
    allow_folders: tuple[str, ...]  # --allow-folder: roots of the file tools for this command
    # the knowledge base
    rag: bool | None
    k: int
    threshold: float | None
    theta: float | None
    collection: str | None
    files: tuple[str, ...]
    pages: str | None  # --pages N-M of the -f PDFs (cli/attachments.py)
    images: tuple[str, ...]  # --image FILE ("-": stdin)
    ocr: bool  # --ocr: a model without vision gets the pictures' OCR text
    lock: bool
    # the answer pipeline (cli/answer.py)
    pipeline: str | None
    reranker: str
    gate: str
    condense: bool | None
    explain: bool
    # answers a script can parse (cli/structured_flags.py)
    schema: str | None
    schema_multi: str | None
    each: bool  # one structured answer per stdin line (cli/each.py)
    null: bool  # -0: the inputs are NUL-separated
    # templates (cli/template_flags.py)
    template: str | None
    params: tuple[tuple[str, str], ...]  # -P NAME VALUE
    save: str | None
