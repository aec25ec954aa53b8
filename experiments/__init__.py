"""Trained-network experiments that test InfoFlow's predictions, and the regularization
diagnostic of the exact-interpolation paper (needs the ``experiments`` extra: PyTorch)."""
