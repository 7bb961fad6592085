"""A worker process of `pool.py`: `python -m localgpt_cli.rag.ingest.worker`.

It reads the run's options, then (number, path, readable, document id) tasks from stdin,
and writes (number, `Parsed`) to what was its stdout, pickled (`pickle.dumps`: see
pool.PROTOCOL) and framed by `multiprocessing.connection`. Its fd 1 is pointed at
stderr, so that a parser printing something cannot corrupt the answers. It ends at a
None task or at the end of its input (its parent is gone).
"""

from __future__ import annotations

import os
import pickle
from multiprocessing.connection import Connection


def serve() -> None:
    from localgpt_cli.rag.ingest.parsing import parse_chunk

    inbox = Connection(os.dup(0), writable=False)
    outbox = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    try:
        opts = inbox.recv()
        while (task := inbox.recv()) is not None:
            number, path, readable, doc_id = task
            parsed = parse_chunk(opts, path, readable, doc_id)
            outbox.send_bytes(pickle.dumps((number, parsed), pickle.HIGHEST_PROTOCOL))
    except (EOFError, BrokenPipeError):
        pass  # the run is over, or its process gone


if __name__ == "__main__":
    serve()
