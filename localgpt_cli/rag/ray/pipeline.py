"""The Ray Data pipeline of one run: files -> parse tasks -> embedding actors -> write tasks.

Every stage takes whole blocks (`batch_size=None`), so a block's files stay together
from the first stage to the last and come back as one row (`write.write_block`). Nothing
is retried inside a run (`max_retries=0`, and the cluster drops a failed block instead
of failing the run): a file whose worker died, perhaps because of that very file, fails
alone, is recorded as failed, and the next run tries it again, as the plain engine does
with a file that fails."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from localgpt_cli.rag.ray.embed import EmbedSpec, bound
from localgpt_cli.rag.ray.parse import parse_block
from localgpt_cli.rag.ray.write import write_block

if TYPE_CHECKING:
    import pyarrow as pa

    from localgpt_cli.rag.ingest.options import IngestOptions
    from localgpt_cli.rag.ingest.state import RunState
    from localgpt_cli.rag.ray.collect import Planned
    from localgpt_cli.rag.store.fragments import Target

# Files per block, at most: a lost worker costs at most this many files, and a block's
# rows are one Lance file (many small ones are compacted by the end-of-run optimize).
MAX_FILES_PER_BLOCK = 16


def embed_spec(state: RunState, client: Callable[[], Any], *, embed: bool) -> EmbedSpec:
    return EmbedSpec(
        client=client,
        model=state.model,
        store=state.store.uri,
        collection=state.name,
        batch_size=state.opts.batch_size,
        embed=embed,
    )


def build(
    ray: Any, items: list[Planned], opts: IngestOptions, spec: EmbedSpec, target: Target
) -> Iterable[pa.Table]:
    """The pipeline over `items`, as the driver iterates it: one table per block."""
    with warnings.catch_warnings():
        # Ray 2.60 names no parameter for a task's retries yet, only warns that the
        # remote arguments they go through will be renamed.
        warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
        return _build(ray, items, opts, spec, target)


def _build(
    ray: Any, items: list[Planned], opts: IngestOptions, spec: EmbedSpec, target: Target
) -> Iterable[pa.Table]:
    rows = [item.row() for item in items]
    per_block = max(1, min(MAX_FILES_PER_BLOCK, len(rows) // 32))
    ds = ray.data.from_items(rows, override_num_blocks=math.ceil(len(rows) / per_block))
    whole = {"batch_size": None, "batch_format": "pyarrow"}
    ds = ds.map_batches(parse_block, fn_kwargs={"opts": opts}, max_retries=0, **whole)
    ds = ds.map_batches(
        bound(spec),
        compute=ray.data.ActorPoolStrategy(min_size=1, max_size=_actors(ray)),
        max_task_retries=0,
        **whole,
    )
    ds = ds.map_batches(write_block, fn_kwargs={"target": target}, max_retries=0, **whole)
    return ds.iter_batches(batch_size=None, batch_format="pyarrow")


def _actors(ray: Any) -> int:
    """Embedding actors, at most: half the cluster's CPUs (the rest parse and write)."""
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, cpus // 2)
