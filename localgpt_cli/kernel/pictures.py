"""Pictures in a turn: the question's (`chat --image`, a piped picture, PDF pages) on the
user message, and those `read_file` returns, attached to the next request (for a model
that cannot see, read_file's result is the picture's OCR text instead).

A message carries its pictures as Ollama does, `images: [bytes]` beside `content`; the
OpenAI wire turns them into `image_url` parts (llm/openai.py). History keeps each one's
hash and size in the message's metadata (`images`), and its bytes only with
`history.keep_images`, so a photo is not copied into every conversation by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store
    from localgpt_cli.images import Picture
    from localgpt_cli.tools.picture_read import PictureRead


def attach(message: dict[str, Any], pictures: Sequence[Picture]) -> dict[str, Any] | None:
    """Put `pictures` on `message`; the metadata history stores for them (None: none)."""
    if not pictures:
        return None
    message["images"] = [p.data for p in pictures]
    return {"images": [p.ref() for p in pictures]}


def keep(store: Store, message_id: str, pictures: Sequence[Picture], keep_bytes: bool) -> None:
    """With history.keep_images, the pictures' bytes beside the message that sent them."""
    if keep_bytes:
        for p in pictures:
            store.keep_image(message_id, p.sha256, p.media_type, p.data)


def tool_result(read: PictureRead, vision: bool) -> str:
    """What read_file tells the model about a picture it read: where to look at it, or
    (a model that cannot see) the text OCR reads in it (tools/picture_read.py; a
    ToolError when it cannot)."""
    picture = read.picture
    if vision:
        return (f"{picture.describe()} is an image; it is attached to the next message "
                "for you to look at.")
    if read.text is not None:
        return read.text()
    return (f"{picture.describe()} is an image, and this model cannot see images; say so "
            "rather than guess what it shows.")


def follow_up(pictures: Sequence[Picture]) -> dict[str, Any]:
    """The user message that carries the pictures tools returned (a tool message cannot
    carry one on the OpenAI wire)."""
    names = ", ".join(p.source for p in pictures)
    return {"role": "user", "content": f"[the image(s) read_file returned: {names}]",
            "images": [p.data for p in pictures]}
