"""``python -m brain.cli``: the same as the ``brain`` command."""

from brain.cli import main

main()
