"""minidl's own data sets -- the digits images, the procedurally drawn colour shapes and the
character-level text corpus -- and, for the imports that have always worked, the batching
tools of ``minidl.utils.data`` (Dataset, TensorDataset, DataLoader, default_collate), which is
where they live."""
from ..utils.data import DataLoader, Dataset, TensorDataset, default_collate
from .digits import digits_arrays, load_digits, pad_to
from .shapes import SHAPE_NAMES, load_shapes, shapes_arrays
from .text import CharCorpus, CharTokenizer, load_text

__all__ = ["CharCorpus", "CharTokenizer", "DataLoader", "Dataset", "SHAPE_NAMES", "TensorDataset", "default_collate",
           "digits_arrays", "load_digits", "load_shapes", "load_text", "pad_to", "shapes_arrays"]
