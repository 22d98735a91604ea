"""``python3 -m stridewise <command> [args]``.

Commands:
  demo   the seed case and a layout matrix, bitwise against native, with timings
  audit  forwards to stridewise.audit.cli (audit a gather implementation)
  dump   forwards to stridewise.dump.cli (record / compare tensors)
  info   versions, library path and build info, devices
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import List, Optional, Sequence


def _forward(name: str, rest: List[str]) -> int:
    module = f"stridewise.{name}.cli"
    try:
        cli = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name in (f"stridewise.{name}", module):
            print(f"stridewise {name}: not available in this checkout ({module} is missing)",
                  file=sys.stderr)
            return 2
        raise
    rc = cli.main(rest)
    return int(rc or 0)


def _info() -> int:
    import platform

    import torch

    import stridewise

    info = stridewise.build_info()
    print(f"stridewise      {stridewise.__version__}")
    print(f"torch           {torch.__version__} (CUDA {torch.version.cuda or 'none'})")
    print(f"python          {platform.python_version()} ({sys.executable})")
    print(f"library         {stridewise.library_path()}")
    print(f"built for       torch {info.get('torch_version', '?')}, "
          f"{info.get('build_type', '?')} build, CUDA kernels "
          f"{'yes' if info.get('cuda') else 'no'} (core compiled with nvcc: "
          f"{'yes' if info.get('core_cuda') else 'no'}, sm {info.get('cuda_architectures', '?')})")
    print(f"ops             supported {stridewise.supported_ops()}, enabled {stridewise.enabled()}")
    print(f"CUDA check mode {stridewise.get_cuda_check_mode()} "
          f"(STRIDEWISE_CUDA_CHECK={os.environ.get('STRIDEWISE_CUDA_CHECK', '')!r})")
    print(f"cpu             {torch.get_num_threads()} torch threads")
    if torch.cuda.is_available():
        for d in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(d)
            print(f"cuda:{d}          {p.name}, sm_{p.major}{p.minor}, "
                  f"{p.total_memory / 2**30:.0f} GiB")
    else:
        print("cuda            not available")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(__doc__.strip())
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd == "demo":
        from stridewise import demo

        return demo.main(rest)
    if cmd in ("audit", "dump"):
        return _forward(cmd, rest)
    if cmd == "info":
        return _info()
    print(f"unknown command {cmd!r}\n\n{__doc__.strip()}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
