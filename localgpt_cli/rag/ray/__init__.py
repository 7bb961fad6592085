"""`ingest --engine ray`: the changed files of an ingest run processed on a Ray cluster.

Imported only when that engine is asked for (the `[ray]` extra: ray, and LanceDB's
lance-ray, with which the workers write the table). The modules, in the order a run
uses them: `engine` (the run: the plain engine's, whose file processing it replaces),
`session` (joining or starting the cluster, its deadlines), `pipeline` (the Ray Data
pipeline), its stages `parse` (tasks), `embed` (the actor pool) and `write` (tasks,
lance-ray), and `collect` (the driver committing and recording what comes back).
"""
