"""`python -m quipu` is the `quipu` command."""

from quipu.surfaces.cli.app import main

main()
