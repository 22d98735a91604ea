"""python3 -m stridewise.audit [args]: the same as python3 -m stridewise audit [args]."""
import sys

if __name__ == "__main__":
    from stridewise.audit.cli import main

    sys.exit(main(sys.argv[1:]))
