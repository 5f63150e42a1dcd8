"""``python -m structrag``: the same command line as ``structrag``."""

from structrag.cli import main

if __name__ == "__main__":
    main()
