"""Fixture workload ``autograd``: a few training steps of a small PyTorch model.

Captured under ``nsys profile --pytorch=autograd-nvtx -t cuda,nvtx,osrt,cublas,cudnn``
by ``tests/data/capture_fixtures.sh``: nsys turns on PyTorch's own NVTX ranges, one per
autograd operator (``aten::addmm``, ``aten::convolution_backward`` ...: long names,
nested deep, on the main thread and on autograd's backward thread), and traces the
cuBLAS and cuDNN API calls under them. The program adds its own push/pop ranges
``step`` > ``forward`` / ``backward`` / ``optimizer`` around them.

The model: a 3x3 convolution (cuDNN) and a two-layer MLP (cuBLAS), trained with SGD
with momentum for STEPS steps on one fixed batch.
"""

import torch
import torch.nn.functional as F

STEPS = 3

rng = torch.cuda.nvtx.range_push
pop = torch.cuda.nvtx.range_pop


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.fc1 = torch.nn.Linear(16 * 16 * 16, 256)
        self.fc2 = torch.nn.Linear(256, 10)

    def forward(self, x):
        x = F.relu(self.conv(x)).flatten(1)
        return self.fc2(F.relu(self.fc1(x)))


torch.manual_seed(0)
dev = torch.device("cuda")
model = Net().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(32, 3, 16, 16, device=dev)
y = torch.randint(0, 10, (32,), device=dev)

for step in range(STEPS):
    rng("step")
    rng("forward")
    loss = F.cross_entropy(model(x), y)
    pop()
    rng("backward")
    loss.backward()
    pop()
    rng("optimizer")
    opt.step()
    opt.zero_grad(set_to_none=True)
    pop()
    pop()
torch.cuda.synchronize()
print(f"autograd done: {STEPS} steps, loss {loss.item():.4f}")
