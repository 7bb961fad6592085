"""The answer pipeline: shaper -> retriever -> reranker -> gate -> condenser -> audit,
then the prompt builder. One stage per module, each behind `stage.Stage`, each
replaceable; pipeline.py runs them and says in the `sources` packet what each did."""
