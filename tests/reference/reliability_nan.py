# tests/reference/reliability_nan.py — how PyTorch treats NaN in relu, max, max(dim) and argmax,
# and matmul with a 0-size batch. Run with Debian's python3-torch (torch 1.13):
#     /usr/bin/python3 tests/reference/reliability_nan.py
# The printed values are pasted into tests/core/test_reduction.cpp.
import torch

nan = float("nan")
x = torch.tensor([1.0, nan, -3.0], requires_grad=True)
y = torch.relu(x)
y.sum().backward()
print("relu", y.tolist(), "grad", x.grad.tolist())  # [1, nan, 0], grad [1, 1, 0]

x = torch.tensor([1.0, nan, 3.0], requires_grad=True)
m = torch.max(x)
m.backward()
print("max", m.item(), "grad", x.grad.tolist())  # nan, grad [0, 1, 0]

m = torch.tensor([[1.0, nan, 3.0], [4.0, 2.0, nan], [5.0, 6.0, 2.0]])
for dim in (1, 0):
    v, i = torch.max(m, dim)
    print(f"max dim {dim}", v.tolist(), i.tolist(), "argmax", torch.argmax(m, dim).tolist())
print("argmax [[nan, nan, 3]]", torch.argmax(torch.tensor([[nan, nan, 3.0]]), 1).tolist())

print("matmul (0,2,3)@(3,4)", tuple(torch.matmul(torch.zeros(0, 2, 3), torch.randn(3, 4)).shape))
print("matmul (1,2,3)@(0,3,4)", tuple(torch.matmul(torch.randn(1, 2, 3), torch.zeros(0, 3, 4)).shape))
