"""txl's checkpoints in PyTorch: `txl.load(path)` returns the model as a torch.nn.Module with its
vocabulary; see docs/python.md."""
