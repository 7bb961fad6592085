"""The request path of `localgpt chat`: parsed flags -> typed `TurnRequest` -> a turn shown.

`chat` (the question on the command line or piped in) and the REPL (one question per
line) both build their requests and run their turns here, so neither imports the other.
The kernel stays free of click: it receives a `TurnRequest`, never the flags.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localgpt_cli.cli.app import App
from localgpt_cli.cli.chat_flags import ChatFlags
from localgpt_cli.errors import EXIT_INTERRUPTED, InvalidInput, NotFound, UsageError

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store
    from localgpt_cli.history.types import Conversation
    from localgpt_cli.images import Picture
    from localgpt_cli.kernel.answer.pipeline import AnswerOptions
    from localgpt_cli.kernel.grounding import ContextFile, Retriever
    from localgpt_cli.kernel.request import Toolbox, TurnRequest
    from localgpt_cli.structured.spec import StructuredSpec
    from localgpt_cli.templates import Template


ONCE = frozenset({"format_unsupported", "schema_unsupported"})


def pass_flags(command: Callable[[App, ChatFlags], None]) -> Callable[..., None]:
    """Hand the command its flags as one `ChatFlags` (click passes them as keywords)."""

    @functools.wraps(command)
    def with_flags(app: App, **flags: Any) -> None:
        command(app, ChatFlags(**flags))

    return with_flags


@dataclass
class TurnOutcome:
    code: int
    conversation_id: str | None
    previews: list[dict[str, Any]] = field(default_factory=list)  # shown to the user
    message_id: str | None = None  # the stored answer (what /remember marks)


@dataclass
class ChatTurns:
    """One `localgpt chat`: what all its turns share, and how one is run and shown."""

    app: App
    flags: ChatFlags
    model: str  # resolved: `qwen3` -> the one `qwen3:*` installed
    system: str | None
    window: int
    options: dict[str, Any]
    files: list[ContextFile]
    conversation_id: str | None = None  # the one -c/--cid continues
    store: Store | None = None
    retriever: Retriever | None = None
    toolbox: Toolbox | None = None
    answer: AnswerOptions | None = None
    search: Any = None  # search_documents' search, for tools switched on later by /tools
    pictures: list[Picture] = field(default_factory=list)  # for the first question only
    structured: StructuredSpec | None = None  # --schema / --schema-multi
    said: set[str] = field(default_factory=set)  # warnings said once per command
    template: Template | None = None  # -t: --each fills its prompt once per input

    @property
    def kept(self) -> bool:
        """Whether the turns outlive this process (not --no-save, not an in-memory
        history): `apply` and `history last-preview` find only what was kept."""
        return self.store is not self.app.memory_history()

    def request(
        self, prompt: str, stdin_text: str | None = None, conversation_id: str | None = None
    ) -> TurnRequest:
        """The typed request for one turn: this chat's flags, with the turn's prompt, piped
        text and conversation."""
        from localgpt_cli.kernel.facts import MemoryFact
        from localgpt_cli.kernel.memory import memory_settings
        from localgpt_cli.kernel.request import TurnRequest
        from localgpt_cli.project_memory import ProjectMemory

        flags = self.flags
        pictures, self.pictures = self.pictures, []
        return TurnRequest(
            model=self.model,
            provider=self.app.settings.provider,
            prompt=prompt,
            system=self.system,
            stdin_text=stdin_text,
            options=self.options,
            think=flags.think,
            stream=not flags.no_stream,
            conversation_id=conversation_id,
            window=self.window,
            max_iterations=flags.max_iterations,
            files=self.files,
            answer=self.answer,
            memory=memory_settings(self.app.settings.values, self.app.settings.sources),
            project_memory=[MemoryFact(f.text, f.important) for f in ProjectMemory(
                self.app.settings.home_dir).facts_for(self.app.settings.collection)],
            images=pictures, keep_images=bool(self.app.settings.values["history.keep_images"]),
            structured=self.structured,
        )

    def warn(self, code: str, message: str) -> None:
        """A warning; the ones about a server (it cannot constrain output) once per command,
        not once per `--each` input."""
        if code in ONCE and code in self.said:
            return
        self.said.add(code)
        self.app.output.warn(code, message)

    def run(self, request: TurnRequest, renderer: Any = None) -> TurnOutcome:
        """Run one turn through a renderer (the output mode's, unless given); the exit code
        is 130 when interrupted."""
        from localgpt_cli.kernel.session import Turn
        from localgpt_cli.render.chat import chat_renderer
        from localgpt_cli.render.explain import explain_packet

        app = self.app
        refuse_unusable(app)  # the REPL's /model may have chosen another provider
        turn = Turn(app.client, app.catalog, request, store=self.store,
                    toolbox=self.toolbox, retriever=self.retriever, warn=self.warn)
        if renderer is None and request.structured is not None and not app.output.json:
            from localgpt_cli.render.structured import StructuredRenderer

            renderer = StructuredRenderer(app.output, lambda: getattr(turn.loop, "attempts", []))
        elif renderer is None:
            renderer = chat_renderer(app.output, self.flags.hide_thinking, self.flags.explain,
                                     kept=self.kept)
        try:
            for packet in turn:
                renderer.packet(packet)
                # like the sources table: --json's packet already carries it
                if self.flags.explain and not app.output.json:
                    explain_packet(app.output.stderr, packet)
        except KeyboardInterrupt:
            for packet in turn.abort():
                renderer.packet(packet)
            renderer.close()
            return TurnOutcome(EXIT_INTERRUPTED, turn.conversation_id, message_id=turn.message_id)
        except BrokenPipeError:
            # The reader of stdout left (`| head -1`): stop the model and store the answer as
            # far as it got (`aborted`, or as it ended if `done` came first); main.py exits 141.
            turn.abort()
            raise
        renderer.close()
        if turn.store_error is not None:  # shown, not stored: exit with the history's code
            if app.output.json:  # the renderer said it otherwise (its `error` packet)
                app.output.stderr.write(f"localgpt: error: the answer was not stored: "
                                        f"{turn.store_error}\n")
            return TurnOutcome(turn.store_error.exit_code, turn.conversation_id)
        if turn.error is not None:
            if app.output.json:
                app.output.stderr.write(f"localgpt: error: {turn.error}\n")
            return TurnOutcome(turn.error.exit_code, turn.conversation_id,
                               message_id=turn.message_id)
        previews = turn.loop.state.previews if turn.loop else []
        return TurnOutcome(0, turn.conversation_id, previews, turn.message_id)


def open_chat(app: App, flags: ChatFlags) -> tuple[ChatTurns, TurnRequest | None]:
    """The chat the flags describe, and the question given on the command line or piped
    in (None: the REPL asks). Whatever can be refused is refused here, before a model is
    called: contradicting flags, unreadable files, binary stdin, no conversation to
    continue, a picture that is not one or a model that cannot see it (attachments.py)."""
    from localgpt_cli.cli.answer import answer_options
    from localgpt_cli.cli.attachments import attached, is_pdf
    from localgpt_cli.cli.template_flags import with_template
    from localgpt_cli.llm.options import parse_options
    from localgpt_cli.structured.spec import structured_spec

    flags, template = with_template(flags)  # the command line wins over the template
    if flags.continue_ and flags.cid:
        raise UsageError("Use either -c/--continue or --cid, not both.")
    app.set_flag("model", flags.model)
    app.set_flag("timeout", flags.timeout)
    app.set_flag("window", flags.window)
    app.set_flag("collection", flags.collection)
    if flags.lock and not flags.files:
        raise UsageError("--lock uses only the files named with -f/--file; name at least one.")
    options = parse_options(flags.options)
    structured = structured_spec(flags.schema, flags.schema_multi)
    paged = is_pdf if flags.pages else lambda path: False  # read by pdf_pages below
    files = [read_context_file(app, p) for p in flags.files if not paged(p)]
    text, piped, pictures = _question(app, flags, template, structured is not None)
    continuing = flags.continue_ or bool(flags.cid)
    store, conversation = _history(app, flags, continuing)
    settings = app.settings
    turns = ChatTurns(
        app, flags, model=_model(app, conversation, store),
        system=flags.system or settings.system,
        window=settings.window, options=options, files=files,
        conversation_id=conversation.id if conversation else None, store=store,
    )  # fmt: skip
    turns.pictures, attached_files = attached(app, flags, turns.model, pictures)
    turns.files.extend(attached_files)
    refuse_unusable(app)
    turns.structured, turns.template = structured, template
    turns.answer = answer_options(app, flags)
    turns.retriever, turns.toolbox, turns.search = _knowledge(app, flags)
    asked = (text or piped or pictures) and not flags.each
    question = turns.request(text, piped, turns.conversation_id) if asked else None
    return turns, question


def _question(
    app: App, flags: ChatFlags, template: Template | None, structured: bool
) -> tuple[str, str | None, list[Picture]]:
    """The question's text, its piped text and its pictures (`--image`, a piped picture),
    a template filled in with them."""
    from localgpt_cli.cli.attachments import image_files

    text = " ".join(flags.prompt).strip()
    if (flags.each or flags.null) and not structured:
        raise UsageError("--each and -0 answer each input with --schema or --schema-multi; "
                         "give one.")
    if flags.each and (flags.images or flags.pages):
        raise UsageError("--each answers each stdin input alone; --image and --pages go with "
                         "one question (drop --each).")
    pictures = image_files(flags)
    # --each reads stdin input by input; `--image -` reads it as a picture
    piped = None if flags.each or "-" in flags.images else stdin_text(app)
    if piped is not None and not isinstance(piped, str):  # a picture was piped in
        pictures, piped = [*pictures, piped], None
    if template is not None:  # a missing -P is refused here, also before --each's inputs
        from localgpt_cli.templates import fill

        filled = fill(template, dict(flags.params), text, piped)
        text, piped = (text, piped) if flags.each else filled  # --each: per input (each.py)
    return text, piped, pictures


def refuse_unusable(app: App) -> None:
    """A provider that cannot run here (a llamacpp profile whose file is missing, or
    without the extra) is one line and exit 6 before anything is loaded, asked or stored,
    not four stage fallbacks, an error and a conversation stored on every try."""
    problem = getattr(app.client, "problem", None)  # only an in-process model has one
    found = problem() if problem is not None else None
    if found is not None:
        raise found


def _history(app: App, flags: ChatFlags, continuing: bool) -> tuple[Store, Conversation | None]:
    """Where this chat's turns are stored, and the conversation -c/--cid continues.

    --no-save keeps the turns in this process's memory (the REPL remembers them, nothing
    is written); continuing with --no-save copies the stored conversation into memory,
    so the new turns follow it without being added to it.
    """
    app.save = not flags.no_save
    if not flags.no_save:
        store = app.history()
        assert store is not None
        return store, _continued(store, flags.cid) if continuing else None
    memory = app.memory_history()
    if not continuing:
        return memory, None
    stored = app.history(readonly=True)
    conversation = _continued(stored, flags.cid)
    if stored is not None and stored is not memory:
        memory.import_conversation(conversation, stored.messages(conversation.id))
    return memory, conversation


def _continued(store: Store | None, cid: str | None) -> Conversation:
    """The conversation -c (the latest) or --cid (a unique id prefix) continues."""
    conversation = None if store is None else store.resolve(cid) if cid else store.latest()
    if conversation is None:
        raise NotFound("There is no conversation to continue yet.",
                       hint="Start one with: localgpt chat \"…\"")
    return conversation


def _model(app: App, conversation: Conversation | None, store: Store | None) -> str:
    """The model to ask: flag, env or config; continuing keeps the conversation's model,
    on the provider its last answer came from, unless a model or provider was chosen."""
    settings = app.settings
    model = settings.model
    chosen = settings.sources["model"] != "default" or settings.sources["provider"] != "default"
    if conversation is not None and store is not None and not chosen:
        model = conversation.model  # continuing keeps the conversation's model
        answered = [m for m in store.messages(conversation.id, last=20) if m.role == "assistant"]
        last = answered[-1].metadata if answered else {}
        provider = last.get("provider")
        if provider and provider != settings.provider:
            if provider not in (*settings.profiles, "ollama"):
                raise InvalidInput(
                    f"The conversation was on provider {provider!r}, which is not configured "
                    "any more.", hint="Continue it on another with --provider NAME or -m.")
            app.set_flag("provider", provider)
        model = last.get("model") or model
    return app.catalog.resolve(model, app.output.warn)  # qwen3 -> the one qwen3:* installed


def _knowledge(app: App, flags: ChatFlags) -> tuple[Retriever | None, Toolbox | None, Any]:
    """The retriever, the tools and search_documents' search of this chat (each may be
    None)."""
    from localgpt_cli.cli.retrieval import knowledge_base
    from localgpt_cli.cli.toolbox import chat_groups

    # with a schema the model answers, it does not call, unless tools are asked for
    asked = bool(flags.tools or flags.only_tools or flags.functions)
    no_tools = flags.no_tools or (bool(flags.schema or flags.schema_multi) and not asked)
    tools_on, groups, where = chat_groups(app, flags.tools, no_tools)
    # --lock, or neither retrieval nor tools: the knowledge base is not opened at all
    has_kb = (not flags.lock and (flags.rag is not False or tools_on)
              and knowledge_base(app, flags.rag))  # fmt: skip
    retriever = None
    if has_kb and flags.rag is not False:
        from localgpt_cli.cli.retrieval import chat_retriever

        retriever = chat_retriever(app, k=flags.k, threshold=flags.threshold,
                                   collection=app.settings.collection, theta=flags.theta)
    search = None
    if has_kb:
        from localgpt_cli.cli.retrieval import tool_search

        search = tool_search(app)
    toolbox = None
    if tools_on:
        from localgpt_cli.cli.toolbox import build_toolbox

        toolbox = build_toolbox(app, only=flags.only_tools, functions=flags.functions,
                                approve=flags.approve, groups=groups, where=where,
                                search=search, allow_folders=flags.allow_folders)
    return retriever, toolbox, search


def stdin_text(app: App) -> str | Picture | None:
    """Piped stdin, if any: attached to the prompt as context (a picture, known by its
    first bytes, is returned as one: cli/attachments.py).

    Read as bytes and decoded the way ingest decodes a file (rag/decode.py), so a Latin-1
    log or a UTF-16 export is text with a warning instead of a crash; bytes that are not
    text at all (a NUL byte: an executable, an image) are refused before anything is
    sent or stored, since the model could only answer about mojibake.
    """
    from localgpt_cli.cli.attachments import piped_picture
    from localgpt_cli.images import sniff
    from localgpt_cli.rag.decode import decode_text
    from localgpt_cli.rag.filetypes import SNIFF_BYTES, looks_binary
    from localgpt_cli.redact import redact, summary

    stream = sys.stdin
    if stream is None or stream.closed:
        return None
    try:
        if stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    data = stream.buffer.read(SNIFF_BYTES)  # `cat /dev/zero |` is refused, not read forever
    if sniff(data[:16]) is not None:
        return piped_picture(data, stream.buffer)
    if looks_binary(data):
        raise InvalidInput(
            f"stdin is binary (a NUL byte in its first {SNIFF_BYTES // 1024} KiB), not text; "
            "nothing was sent.",
            hint="Pipe text, or attach a document with -f FILE.",
        )
    text, warning = decode_text(data + stream.buffer.read())
    if warning:
        app.output.warn("stdin_encoding", f"stdin: {warning}")
    text, found = redact(text)  # a piped .env or log goes to the model and the history
    if found:
        app.output.warn("secret_redacted", f"stdin: redacted {summary(found)} before the "
                        "model saw it")
    return text if text.strip() else None


def read_context_file(app: App, path: str) -> ContextFile:
    """A --file as text: PDFs, DOCX and HTML through the same parsers as ingest, a PDF's
    pages without a usable text layer read by OCR (`cli/ocr.py`'s settings for chat)."""
    from localgpt_cli.cli.ocr import chat_ocr
    from localgpt_cli.kernel.grounding import ContextFile
    from localgpt_cli.rag.filetypes import detect_type
    from localgpt_cli.rag.parse import parse_file

    if (detect_type(Path(path)) or ("",))[0] == "image":  # a picture is not a text file
        raise InvalidInput(
            f"{path} is a picture, not a text file; nothing was sent.",
            hint=f"Show it to a vision model with --image {path}, or send its text (OCR) "
            f"with --image {path} --ocr.",
        )
    doc = parse_file(Path(path), ocr=chat_ocr(app))
    return ContextFile(path=path, text="\n\n".join(s.text for s in doc.sections))
