"""`python -m rein.cli`: the same as the `rein` console script."""

from rein.cli import entry

entry()
