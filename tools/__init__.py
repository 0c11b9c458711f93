"""Developer tools that `make` runs (the dependency audit). No console app imports them, and
the installed distribution leaves them out (pyproject's package list)."""
