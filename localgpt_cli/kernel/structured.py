"""A turn whose answer must be JSON meeting a schema (`chat --schema`): the constrained
call, the validation, one retry with the validator's words, and the fallbacks of a
server that cannot constrain output.

The request constrains the model with its wire's own mechanism (`Provider.chat(format=)`:
Ollama's `format`, the OpenAI wire's `response_format`, the in-process model's grammar).
A server that refuses the schema is asked with `format="json"` (OpenAI's `json_object`),
and one that refuses that too is asked with no constraint at all: its answer is only
validated, which the user is told once (and which this process remembers for that
server and model, so `--each` does not ask again for every input). Either way the schema
is also in the prompt, so an unconstrained model knows what to write, and the answer is
checked with `jsonschema` (structured/validate.py) before anything is printed: a model
that answers prose is sent the validator's message once, then the turn fails with exit
6, its raw answers kept in the history beside the error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from localgpt_cli.errors import InvalidInput, UnsupportedCapability
from localgpt_cli.kernel.loop import AgentLoop, _add
from localgpt_cli.kernel.normalize import Normalizer
from localgpt_cli.kernel.packets import StreamPacket
from localgpt_cli.structured.spec import StructuredSpec

ATTEMPTS = 2  # the answer, and one retry with the validator's message
FORMAT_CODE = "format_unsupported"
_UNKNOWN = "unknown"  # nothing learned yet: the schema itself
# (server, model) -> the strongest constraint it took: `--each` asks once per input, and
# a server that refused the schema for the first input need not be asked again.
_LEARNED: dict[tuple[str, str], str | None] = {}


def schema_prompt(spec: StructuredSpec) -> str:
    """The system block that tells the model what to write (a constrained server needs
    it less, an unconstrained one needs it to have a chance)."""
    return ("Answer with only one JSON value that matches this JSON Schema, with no prose "
            "and no Markdown around it:\n" + json.dumps(spec.schema, ensure_ascii=False))


def retry_prompt(problem: str) -> str:
    return (f"That answer does not match the schema: {problem}. Answer again with only the "
            "JSON value, nothing else.")


class StructuredLoop(AgentLoop):
    """The agent loop of a `--schema` turn. Tools (off unless asked for) run first,
    unconstrained; then the structured answer, validated, retried once."""

    def __init__(self, *args: Any, spec: StructuredSpec, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec = spec
        self.attempts: list[dict[str, Any]] = []  # each raw answer and what was wrong
        self.value: Any = None  # the validated answer (--schema-multi: the array)
        learned = _LEARNED.get(self._key, _UNKNOWN)
        self.constraint: str | dict[str, Any] | None = (
            spec.schema if learned == _UNKNOWN else learned)

    def run(self, messages: list[dict[str, Any]]) -> Iterator[StreamPacket]:
        from localgpt_cli.structured.validate import check

        messages.insert(0, {"role": "system", "content": schema_prompt(self.spec)})
        if self.tools:
            yield from super().run(messages)
            if self.state.reason != "stop":
                return
            answer = self.state.normalizer.answer if self.state.normalizer else ""
            messages += [{"role": "assistant", "content": answer},
                         {"role": "user", "content": "Now give that answer as the JSON."}]
        state, problem = self.state, ""
        for _ in range(ATTEMPTS):
            state.iterations += 1
            normalizer = state.normalizer = Normalizer(self.factory)
            yield from self._constrained(messages, normalizer)
            yield from normalizer.finish()
            self._count(normalizer)
            value, found = check(normalizer.answer, self.spec.schema)
            self.attempts.append({"raw": normalizer.answer, "error": found})
            if found is None:
                self.value, state.reason = self.spec.result(value), "stop"
                return
            problem = found
            if len(self.attempts) < ATTEMPTS:
                self.warn("schema_retry", f"the answer does not match the schema ({found}); "
                          "asking once more.")
            messages += [{"role": "assistant", "content": normalizer.answer},
                         {"role": "user", "content": retry_prompt(found)}]
        raise InvalidInput(f"the answer does not match the schema ({problem}), also after "
                           "a retry.", code="schema_mismatch")

    @property
    def _key(self) -> tuple[str, str]:
        return (str(getattr(self.client, "host", "")), self.model)

    def _count(self, normalizer: Normalizer) -> None:
        self.state.prompt_tokens = _add(self.state.prompt_tokens, normalizer.prompt_eval_count)
        self.state.completion_tokens = _add(self.state.completion_tokens, normalizer.eval_count)

    def _constrained(self, messages: list[dict[str, Any]],
                     normalizer: Normalizer) -> Iterator[StreamPacket]:  # fmt: skip
        """One structured call; a server that refuses the constraint is asked with a
        weaker one (the schema -> any JSON -> none), and the user told once."""
        while True:
            self.format = self.constraint  # None: streamed like any answer
            try:
                yield from self._stream(messages, normalizer, [])
                return
            except UnsupportedCapability as exc:
                if exc.code != FORMAT_CODE or self.constraint is None:
                    raise
                if isinstance(self.constraint, dict):
                    self.constraint = _LEARNED[self._key] = "json"
                    self.warn("schema_unsupported", f"{self.model}'s server refused the "
                              "JSON Schema; asking it for JSON and validating that.")
                else:
                    self.constraint = _LEARNED[self._key] = None
                    self.warn(FORMAT_CODE, f"{self.model}'s server cannot constrain its "
                              "output; its answers are validated against the schema "
                              "instead (one retry).")
