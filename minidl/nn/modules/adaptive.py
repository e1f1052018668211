"""AdaptiveLogSoftmaxWithLoss: the adaptive softmax of Grave et al., "Efficient softmax
approximation for GPUs" (2016), as ``torch.nn.AdaptiveLogSoftmaxWithLoss``.

The classes, sorted by frequency, are split by ``cutoffs`` c_1 < ... < c_k < n_classes into a
shortlist [0, c_1) and k clusters [c_i, c_{i+1}). The head, a Linear(in_features, c_1 + k),
scores the shortlist classes and one entry per cluster; cluster i has its own small network
(Linear(in, in // div_value ** (i + 1)) then Linear(that, c_{i+1} - c_i), no biases), so rare
classes cost a narrower projection. The log-probability of a class is

    shortlist class y:        log p(y) = log_softmax(head(x))[y]
    class y in cluster i:     log p(y) = log_softmax(head(x))[c_1 + i] + log_softmax(tail_i(x))[y - c_i]

(the probability of the cluster times that of the class within it). ``forward`` evaluates a
row's cluster network only for the rows whose target lies in it and returns (output, loss):
the target log-probabilities and their negated mean. Everything is a composition of
differentiable ops (linear, log_softmax, gather, index_copy), so autograd gives the gradients.
"""
from collections import namedtuple

from ...ops.softmax import log_softmax
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        factory = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, **factory),
                                        Linear(hsz, osz, bias=False, **factory)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        targ_dim = target_.ndim
        if targ_dim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.ndim != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{list(input_.shape)}")
        elif targ_dim == 0:
            if input_.ndim != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{list(input_.shape)}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        is_batched = targ_dim > 0
        input = input_ if is_batched else input_.unsqueeze(0)
        target = target_ if is_batched else target_.unsqueeze(0)

        batch_size = target.shape[0]
        output = input.new_zeros(batch_size)
        gather_inds = target.new_zeros(batch_size)
        used_rows = 0
        cutoff_values = [0] + self.cutoffs
        for i in range(len(cutoff_values) - 1):
            low, high = cutoff_values[i], cutoff_values[i + 1]
            mask = (target >= low) & (target < high)
            rows = mask.nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            if i == 0:
                gather_inds = gather_inds.index_copy(0, rows, target[mask])
            else:
                cluster_logprob = log_softmax(self.tail[i - 1](input.index_select(0, rows)), 1)
                local = cluster_logprob.gather(1, (target[mask] - low).unsqueeze(1))
                gather_inds = gather_inds.index_fill(0, rows, self.shortlist_size + i - 1)
                output = output.index_copy(0, rows, local.squeeze(1))
            used_rows += rows.numel()
        if used_rows != batch_size:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{target.min().item()}, {target.max().item()}] were found. ")
        head_logprob = log_softmax(self.head(input), 1)
        output = output + head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        if not is_batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input, head_output):
        """(B, n_classes) log-probabilities: the shortlist's from the head, each cluster's as its
        own log_softmax plus the head's log-probability of the cluster."""
        from ...ops.join import cat
        head_logprob = log_softmax(head_output, 1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = log_softmax(self.tail[i](input), 1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, 1)

    def log_prob(self, input):
        """Log-probabilities of every class, (B, n_classes) for (B, in_features) input (or unbatched)."""
        is_batched = input.ndim > 1
        x = input if is_batched else input.unsqueeze(0)
        out = self._get_full_log_prob(x, self.head(x))
        return out if is_batched else out.squeeze(0)

    def predict(self, input):
        """The most likely class of each row: the head's argmax when it is a shortlist class
        (no cluster network is run then), else the argmax over all classes."""
        is_batched = input.ndim > 1
        x = input if is_batched else input.unsqueeze(0)
        head_output = self.head(x)
        output = head_output.argmax(1)
        outside = output >= self.shortlist_size
        if bool(outside.any()):
            if bool(outside.all()):
                output = self._get_full_log_prob(x, head_output).argmax(1)
            else:
                log_prob = self._get_full_log_prob(x[outside], head_output[outside])
                output = output.clone()
                output[outside] = log_prob.argmax(1)
        return output if is_batched else output.squeeze(0)
