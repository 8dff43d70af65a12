"""``python -m brain.shells.cli``: the same as the ``brain`` command."""

from brain.shells.cli import main

if __name__ == "__main__":
    main()
