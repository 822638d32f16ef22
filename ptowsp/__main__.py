"""`python -m ptowsp` is `wspc`."""

from .cli import main

main()
