#!/usr/bin/env python3
"""Training samples/s of kubetrain against PyTorch eager, same models, same run.

Trains the built-in `mlp` and `cnn` (runtime/nn/model_spec.cc) with kubetrain
(`kubetrain train --device DEVICE`) and the same architectures in PyTorch eager
mode (SGD, momentum 0.9, the same batch sizes) one after the other on the same
device, and prints one table row per (model, batch size):

  model batch kubetrain_samples_s torch_samples_s ratio

kubetrain's figure is the median of its progress lines' samples/s after the
first (warm-up) line; PyTorch's is timed over --steps steps after --warmup
steps, with torch.cuda.synchronize() around the timed region.

It needs PyTorch with a usable GPU for --device cuda: without one it prints
`skipped: <reason>` and exits 0 (a CPU-only machine cannot give the figure).
With --device cpu both sides run on the CPU (argument and plumbing checks);
without PyTorch there the torch column is `-` and a `# torch skipped` line
says why.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kubetrain", required=True, help="path of the kubetrain binary")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn")
    p.add_argument("--batch-sizes", default="256", help="comma-separated batch sizes")
    p.add_argument("--steps", type=int, default=200, help="timed steps per measurement")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                   help="Fashion-MNIST IDX directory for kubetrain")
    p.add_argument("--tf32", action="store_true", help="TF32 GEMMs on both sides")
    a = p.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    for m in a.models:
        if m not in ("mlp", "cnn"):
            p.error(f"unknown model '{m}' (mlp, cnn)")
    try:
        a.batch_sizes = [int(b) for b in a.batch_sizes.split(",") if b]
    except ValueError:
        p.error(f"--batch-sizes must be integers, got '{a.batch_sizes}'")
    if not a.batch_sizes or min(a.batch_sizes) <= 0:
        p.error("--batch-sizes must be positive")
    if a.steps <= 0 or a.warmup < 0:
        p.error("--steps must be > 0 and --warmup >= 0")
    if not os.access(a.kubetrain, os.X_OK):
        p.error(f"--kubetrain {a.kubetrain} is not an executable")
    return a


def kubetrain_samples_per_second(a, model, batch):
    log_every = max(1, a.steps // 5)
    samples = (a.warmup + a.steps) * batch
    cmd = [a.kubetrain, "train", "--model", model, "--device", a.device, "--data", a.data,
           "--batch-size", str(batch), "--epochs", "1", "--train-limit", str(samples),
           "--log-every", str(log_every), "--log-format", "json", "--metrics-port", "0",
           "--eval-every-epoch", "false", "--lr", "0.01"]
    if a.tf32:
        cmd.append("--tf32")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"kubetrain failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    rates = []
    for line in r.stdout.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("kind") == "progress" and "samples/s" in j:
            rates.append(float(j["samples/s"]))
    if len(rates) < 2:
        raise RuntimeError(f"kubetrain printed {len(rates)} progress lines; need 2+")
    return statistics.median(rates[1:])


def torch_model(torch, model):
    nn = torch.nn
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                             nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
                         nn.Linear(128, 10))


def torch_samples_per_second(torch, a, model, batch):
    dev = torch.device(a.device)
    net = torch_model(torch, model).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.rand(batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    if a.device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    if a.device == "cuda":
        torch.cuda.synchronize()
    return a.steps * batch / (time.perf_counter() - t0)


def main(argv):
    a = parse_args(argv)
    torch, why = None, ""
    try:
        import torch  # noqa: PLC0415 (optional: present on the GPU machine)
    except ImportError as e:
        why = f"PyTorch is not installed ({e})"
    if torch is not None and a.device == "cuda" and not torch.cuda.is_available():
        torch, why = None, "PyTorch sees no usable GPU (torch.cuda.is_available() is False)"
    if torch is None and a.device == "cuda":
        print(f"skipped: {why}")
        return 0
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
    version = torch.__version__ if torch is not None else "-"
    print(f"# device={a.device} torch={version} steps={a.steps} warmup={a.warmup} "
          f"tf32={'on' if a.tf32 else 'off'}")
    if torch is None:
        print(f"# torch skipped: {why}")
    print("model batch kubetrain_samples_s torch_samples_s ratio")
    for model in a.models:
        for batch in a.batch_sizes:
            kt = kubetrain_samples_per_second(a, model, batch)
            if torch is None:
                print(f"{model} {batch} {kt:.0f} - -", flush=True)
                continue
            pt = torch_samples_per_second(torch, a, model, batch)
            print(f"{model} {batch} {kt:.0f} {pt:.0f} {kt / pt:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
