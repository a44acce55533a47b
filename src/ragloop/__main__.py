"""`python -m ragloop`: the command line."""

from ragloop.apps.cli import main

main()
