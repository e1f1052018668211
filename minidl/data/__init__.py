"""Datasets and batching: Dataset, TensorDataset, DataLoader, and the digits images."""
from .dataloader import DataLoader, default_collate
from .dataset import Dataset, TensorDataset
from .digits import digits_arrays, load_digits, pad_to

__all__ = ["DataLoader", "Dataset", "TensorDataset", "default_collate", "digits_arrays", "load_digits", "pad_to"]
