"""`python -m localgpt_cli` runs the same command as the `localgpt` script."""

from localgpt_cli.cli.main import main

main()
