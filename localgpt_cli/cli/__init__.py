"""Click commands, one module per subcommand. Parsing and wiring only."""
