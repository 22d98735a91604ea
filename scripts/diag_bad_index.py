"""Minimal CUDA bad-index path (the demo's last step), in both check modes: exits 0 only when
each mode raised a catchable error naming the value and the context still runs kernels after.
Run under cuda-gdb for a backtrace if it dies."""
import torch

import stridewise

x = torch.randn(4, 16, 384, device="cuda")
idx = torch.full((4, 1, 1), 16, dtype=torch.int64, device="cuda").expand(4, 1, 384)
for mode in ("sync", "deferred"):
    stridewise.set_cuda_check_mode(mode)
    caught = None
    with stridewise.use(include=["gather"]):
        try:
            torch.gather(x, 1, idx)
            print(mode, "launched", flush=True)
            stridewise.check_errors(sync=True)
        except RuntimeError as e:
            caught = str(e)
    print(mode, "caught:", caught, flush=True)
    assert caught and "index 16" in caught and "dimension 1" in caught, (mode, caught)
    assert torch.ones(3, device="cuda").sum().item() == 3.0
print("context usable;", stridewise.stats()["gather"], flush=True)
