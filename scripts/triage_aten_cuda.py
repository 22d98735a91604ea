"""Triage of what the quick CUDA audit flagged in native ATen (device run 2026-11-29 18:02).

Each probe runs in a fresh subprocess (a device-side assert kills the CUDA context) and prints
what CPU and CUDA do, so each flag can be classified: an ATen CUDA bug (recorded in
stridewise/audit/known.py), a CPU-oracle bug, or a legitimate CPU/CUDA difference.
"""
import subprocess
import sys

PROBES = {
    # index value 2**32+1 into a dim of size 2: does CUDA wrap it to 1 (32-bit truncation)?
    "index_select_2p32": """
x = torch.arange(8., device=D).reshape(2, 4)
print(torch.index_select(x, 0, torch.tensor([2**32 + 1], device=D)).tolist())""",
    "index_select_2p32_3d": """
x = torch.arange(12., device=D).reshape(3, 2, 2)
print(torch.index_select(x, 1, torch.tensor([2**32 + 1], device=D)).tolist())""",
    "index_add_2p32": """
x = torch.zeros(2, 3, device=D)
print(x.index_add_(0, torch.tensor([2**32 + 1], device=D), torch.ones(1, 3, device=D)).tolist())""",
    "embedding_2p32": """
w = torch.arange(8., device=D).reshape(4, 2)
print(torch.nn.functional.embedding(torch.tensor([2**32 + 3], device=D), w).tolist())""",
    "index_reduce_prod_half_stepidx": """
s = torch.rand(2, 1, device=D).half(); src = torch.rand(2, 1, device=D).half()
base = torch.tensor([0, 1, 0, 1, 1, 0, 0], device=D)
idx = base.as_strided((2,), (3,), 1)
print(s.index_reduce(0, idx, src, 'prod', include_self=True).tolist())""",
    "index_reduce_prod_half_contig": """
s = torch.rand(2, 1, device=D).half(); src = torch.rand(2, 1, device=D).half()
print(s.index_reduce(0, torch.tensor([1, 0], device=D), src, 'prod').tolist())""",
    # known.py's TRUNC32_MAX_INDICES: index_select takes its small-index kernel up to 16 indices
    "index_select_2p32_17idx": """
x = torch.arange(8., device=D).reshape(2, 4)
print(torch.index_select(x, 0, torch.tensor([2**32 + 1] + [0] * 16, device=D))[0].tolist())""",
    "index_reduce_2p32_include_self": """
x = torch.ones(2, 3, device=D)
print(x.index_reduce_(0, torch.tensor([2**32 + 1], device=D), torch.full((1, 3), 5., device=D), 'amax').tolist())""",
    "index_put_noaccum_expanded_self": """
s = torch.arange(3, dtype=torch.uint8, device=D).reshape(3, 1).expand(3, 3)
m = torch.tensor([True, False, True], device=D)
print(s.index_put_((m,), torch.tensor([1, 2, 3], dtype=torch.uint8, device=D), accumulate=False).tolist())""",
    "index_put_accum_expanded_self": """
s = torch.arange(3, dtype=torch.uint8, device=D).reshape(3, 1).expand(3, 3)
m = torch.tensor([True, False, True], device=D)
print(s.index_put_((m,), torch.tensor([1, 2, 3], dtype=torch.uint8, device=D), accumulate=True).tolist())""",
    "index_put_out_compound_mask": """
g = torch.Generator().manual_seed(0)
sb = torch.randn(64, generator=g).to(D); vb = torch.randn(64, generator=g).to(D)
mb = torch.tensor([False, True, False, True, False, False, False, True, False, True], device=D)
self_ = sb.as_strided((4, 1, 3), (2, 9, 0), 4)
mask = mb.as_strided((3,), (3,), 1)
vals = vb.as_strided((4, 1, 2), (1, 4, 8), 7)
ob = torch.full((64,), 7.0, device=D)
out = ob.as_strided((4, 1, 3), (2, 9, 9), 4)
r = torch.ops.aten.index_put.out(self_, [None, None, mask], vals, True, out=out)
print('out', out.tolist())
ref = torch.ops.aten.index_put_(self_.clone(), [None, None, mask], vals, True)
print('ref', ref.tolist())
print('func', torch.ops.aten.index_put(self_, [None, None, mask], vals, True).tolist())
oc = torch.empty(4, 1, 3, device=D)
torch.ops.aten.index_put.out(self_, [None, None, mask], vals, True, out=oc)
print('contig_out', oc.tolist())
oc2 = torch.empty(4, 1, 3, device=D)
torch.ops.aten.index_put.out(self_, [None, None, mask], vals.contiguous(), True, out=oc2)
print('contig_vals', oc2.tolist())
torch.ops.aten.index_put.out(self_.contiguous(), [None, None, mask], vals, True, out=oc2)
print('contig_self', oc2.tolist())""",
}


def main():
    for name, body in PROBES.items():
        for dev in ("cpu", "cuda"):
            code = f"import torch\nD = {dev!r}\n{body}\ntorch.cuda.synchronize() if D == 'cuda' else None"
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
            err = (p.stderr.strip().splitlines() or [""])[-1][:300]
            print(f"[{name}] {dev}: rc={p.returncode} {p.stdout.strip()} {err if p.returncode else ''}",
                  flush=True)


if __name__ == "__main__":
    main()
