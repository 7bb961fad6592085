"""The ingest pipeline: walk -> compare with the manifest -> parse -> chunk -> embed -> store.

`run.Ingest.run()` is a generator of plain-dict events, so the CLI (or a test) renders them
as it likes and the pipeline imports nothing that draws:
- `plan`: how many files were found and how many must be (re)processed;
- `progress`: one file processed (`files`, `chunks` increments), or a phase name;
- `warning`: something a person should know (not UTF-8, embed input cut, Ollama down);
- `document`: one file that changed or failed, after its rows were committed
  (the record the README's output contract documents; built by `document.document_event`);
- `summary`: the last event (the record the README's output contract documents).

Memory stays bounded whatever the corpus: one document is parsed at a time in each
worker, a bounded window of parsed ones waits to be taken in order, and chunks wait in
memory only until the next commit (`commit_rows`). Small documents are committed
together because a LanceDB commit costs tens of milliseconds; a group commit is atomic, so
a crash still leaves each document either old or new. The manifest is written after the
commit it describes (see manifest.py for why that order makes a killed run converge).

The modules, in the order a run uses them:
- `options`: what the run was asked to do, and what a document's rows depend on;
- `collection`: the collection written, its embedding model, a re-index;
- `backlog`: chunks an earlier run stored without vectors, embedded first;
- `plan`: walking, classifying files against the manifest, moves, what is gone/pruned;
- `parsing`: one file parsed and cut into chunks (in this process or a worker's);
- `pool` and `worker`: worker processes that parse on every core, results in order;
- `document`: one file -> chunks waiting for vectors, and the `document` event;
- `batch`: embeddings sent in full batches across documents, and group commits;
- `run`: the run itself, its end (pending count, index upkeep) and its summary;
- `state` and `summary`: what those parts share, and the counts they keep.
"""
