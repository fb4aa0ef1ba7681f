#!/usr/bin/python3
"""Reference values for nn/init (tests/nn/test_init.cpp), from PyTorch's torch.nn.init.

Run at development time with Debian's python3-torch (torch 1.13):
    /usr/bin/python3 tests/reference/make_init_reference.py
It writes tests/reference/init_reference.json beside itself; the tests read that file and never
need torch.

  fans   torch.nn.init._calculate_fan_in_and_fan_out for 2-D, 3-D and 4-D (conv-like) shapes.
  gains  torch.nn.init.calculate_gain for every nonlinearity it knows, with and without param.
  draws  the exact range each initialiser draws from: the tensor's own uniform_/normal_ is
         replaced by a recorder, so the bound (uniform) or std (normal) is the one torch computes
         and passes on. The C++ test draws the same shape and checks its values against it.
"""
import json
import os

import torch
import torch.nn.init as init


def fans(shape):
    fan_in, fan_out = init._calculate_fan_in_and_fan_out(torch.empty(shape))
    return {"shape": list(shape), "fan_in": fan_in, "fan_out": fan_out}


def recorded(fn, shape, **kwargs):
    """The (low, high) of uniform_ or the (mean, std) of normal_ that fn(t, **kwargs) calls."""
    t = torch.empty(shape)
    calls = []
    t.uniform_ = lambda a, b: calls.append({"dist": "uniform", "low": a, "high": b}) or t
    t.normal_ = lambda m, s: calls.append({"dist": "normal", "mean": m, "std": s}) or t
    getattr(init, fn)(t, **kwargs)
    assert len(calls) == 1, (fn, calls)
    return {"fn": fn, "shape": list(shape), "kwargs": kwargs, **calls[0]}


out = {
    "torch_version": torch.__version__,
    "fans": [fans(s) for s in [(3, 5), (7, 1), (4, 2, 5), (16, 8, 3, 3), (6, 4, 2, 3, 5)]],
    "gains": [{"nonlinearity": n, "param": p, "gain": init.calculate_gain(n, p)}
              for n, p in [("linear", None), ("conv1d", None), ("conv2d", None), ("conv3d", None),
                           ("conv_transpose1d", None), ("conv_transpose2d", None),
                           ("conv_transpose3d", None), ("sigmoid", None), ("tanh", None),
                           ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2),
                           ("leaky_relu", 0.0), ("leaky_relu", 5 ** 0.5), ("selu", None)]],
    "draws": [
        recorded("xavier_uniform_", (256, 256)),
        recorded("xavier_uniform_", (64, 32, 3), gain=init.calculate_gain("relu")),
        recorded("xavier_normal_", (256, 128)),
        recorded("xavier_normal_", (32, 16, 3, 3), gain=5 / 3),
        recorded("kaiming_uniform_", (256, 256)),
        recorded("kaiming_uniform_", (128, 512), a=5 ** 0.5),  # nn.Linear(512, 128)'s weight
        recorded("kaiming_uniform_", (32, 16, 3, 3), mode="fan_out", nonlinearity="relu"),
        recorded("kaiming_normal_", (256, 128)),
        recorded("kaiming_normal_", (32, 16, 3, 3), a=0.2, mode="fan_out"),
        recorded("kaiming_normal_", (128, 256), nonlinearity="tanh"),
    ],
}

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "init_reference.json")
with open(path, "w") as f:  # one entry a line
    f.write('{"torch_version": %s,\n' % json.dumps(out["torch_version"]))
    f.write(",\n".join(' "%s": [\n  %s]' % (k, ",\n  ".join(json.dumps(e) for e in out[k]))
                       for k in ("fans", "gains", "draws")))
    f.write("\n}\n")
print("wrote", path)
