"""Answers a script can parse: `--schema`'s JSON Schemas (the concise form, a file or
inline JSON) and the validation of an answer against them (`jsonschema`, imported only
when a schema is used)."""
