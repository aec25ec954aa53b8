"""Trained-network experiments that test InfoFlow's predictions (needs the
``experiments`` extra: PyTorch)."""
