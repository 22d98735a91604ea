"""Minimal CUDA bad-index path (what `demo` does last), for a debugger backtrace."""
import torch

import stridewise

x = torch.randn(4, 16, 384, device="cuda")
idx = torch.full((4, 1, 1), 16, dtype=torch.int64, device="cuda").expand(4, 1, 384)
with stridewise.use(include=["gather"]):
    torch.gather(x, 1, idx)
    print("launched", flush=True)
    try:
        stridewise.check_errors(sync=True)
    except RuntimeError as e:
        print("caught:", e, flush=True)
print(torch.ones(3, device="cuda").sum().item(), stridewise.stats(), flush=True)
