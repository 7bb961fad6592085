"""`ingest --engine ray`: the plain engine's run, its files processed by a Ray cluster.

The driver (this process) does what the plain engine does before and after: it takes the
store's lock or lease, walks, diffs against the manifest, handles moves, prunes, builds
the indexes and prints the summary (`ingest/run.py`, whose `_process` this overrides).
The changed files go through a Ray Data pipeline (`pipeline.build`): parse and chunk in
tasks, embed in an actor pool, write Lance files with lance-ray in tasks. The driver
commits what comes back (`collect.Collector`), then records it in the manifest, so the
plain engine's "written before recorded" rule holds and either engine can update a
collection the other built.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import OllamaUnreachable
from localgpt_cli.rag.ingest.batch import process
from localgpt_cli.rag.ingest.run import Ingest

if TYPE_CHECKING:
    from localgpt_cli.llm.provider import Embedder
    from localgpt_cli.rag.ingest.document import Work
    from localgpt_cli.rag.ingest.summary import Event

# How long the driver waits for the cluster (joining it, then each block of results) before
# it calls it hung, unless --ray-timeout says otherwise: a block is a few files, embedded
# on a CPU.
IDLE_SECONDS = 300.0


class RayIngest(Ingest):
    """One ingest run whose changed files are processed on a Ray cluster."""

    def __init__(
        self,
        *args: Any,
        address: str | None,
        node_client: Callable[[], Embedder],
        idle: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.address = address
        self.node_client = node_client  # an actor's embedder, built on its node
        self.idle = idle or IDLE_SECONDS

    def _process(self, work: list[Work]) -> Iterator[Event]:
        from localgpt_cli.rag.ray import pipeline, session
        from localgpt_cli.rag.ray.collect import Collector, planned
        from localgpt_cli.rag.store import fragments

        state = self.state
        if state.opts.dry_run or not work:  # nothing to parse: no cluster is joined
            yield from process(state, work)
            return
        items = planned(state, work)
        dim = yield from self._dimension()
        assert state.coll is not None
        target = fragments.prepare(state.coll, dim)
        spec = pipeline.embed_spec(state, self.node_client, embed=state.down is None)
        collector = Collector(state, items)
        with session.cluster(self.address, self.idle) as ray:
            blocks = pipeline.build(ray, items, state.opts, spec, target)
            where = self.address or "a Ray instance in this process"
            for block in session.stream(blocks, self.idle, where):
                yield from collector.take(block)
        yield from collector.finish()

    def _dimension(self) -> Generator[Event, None, int | None]:
        """The vector dimension the workers write: the collection's, else one short text
        embedded here (a model that is not there fails now, before any work); None when
        the server is down (the rows are then stored without vectors, as the plain engine
        does)."""
        state = self.state
        assert state.coll is not None
        if state.coll.dim is not None:
            return state.coll.dim
        try:
            return len(self.client.embed(state.model, ["dimension check"], batch_size=1)[0])
        except OllamaUnreachable as exc:
            state.queue.down = exc
            yield from state.check_down()
            return None
