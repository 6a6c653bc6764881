"""`python -m progresscast …`, the same as the `progresscast` command."""

from .cli import main

main()
