"""CosineSimilarity: x1 . x2 / (max(|x1|, eps) max(|x2|, eps)) along a dim."""
from .. import functional as F
from .module import Module


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
