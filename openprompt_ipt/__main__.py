"""``python -m openprompt_ipt ...``: the same as the ``openprompt-ipt`` console command."""
import sys

from .commands import main

if __name__ == "__main__":
    sys.exit(main())
