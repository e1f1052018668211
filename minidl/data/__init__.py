"""Datasets and batching: Dataset, TensorDataset, DataLoader, the digits images, and the
character-level text corpus."""
from .dataloader import DataLoader, default_collate
from .dataset import Dataset, TensorDataset
from .digits import digits_arrays, load_digits, pad_to
from .text import CharCorpus, CharTokenizer, load_text

__all__ = ["CharCorpus", "CharTokenizer", "DataLoader", "Dataset", "TensorDataset", "default_collate",
           "digits_arrays", "load_digits", "load_text", "pad_to"]
