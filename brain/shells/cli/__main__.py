"""``python -m brain.cli``: the same as the ``brain`` command."""

from brain.cli import main

if __name__ == "__main__":
    main()
