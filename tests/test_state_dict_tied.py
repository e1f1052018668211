"""state_dict / load_state_dict of models that share (tie) a parameter or a whole submodule,
as PyTorch: the shared tensor is listed under every name it is reachable by, loading needs
every one of those keys under strict=True, while parameters() yields it once."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
from minidl.zoo import GPT


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(5, 3)
        self.lm_head = nn.Linear(3, 5, bias=False)
        self.lm_head.weight = self.wte.weight


class SharedBlock(nn.Module):
    """One Linear reachable as both ``first`` and ``second``, and a BatchNorm (buffers) twice."""
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(2, 2)
        self.second = self.first
        self.norm = nn.BatchNorm1d(2)
        self.again = self.norm


def test_a_tied_parameter_is_listed_under_both_names_but_yielded_once_by_parameters():
    m = TiedLM()
    sd = m.state_dict()
    assert list(sd) == ["wte.weight", "lm_head.weight"]
    assert np.shares_memory(sd["wte.weight"].numpy(), sd["lm_head.weight"].numpy())
    assert len(list(m.parameters())) == 1
    assert [n for n, _ in m.named_parameters()] == ["wte.weight"]


def test_a_shared_submodule_is_listed_under_every_path_with_its_buffers():
    m = SharedBlock()
    assert list(m.state_dict()) == [
        "first.weight", "first.bias", "second.weight", "second.bias",
        "norm.weight", "norm.bias", "norm.running_mean", "norm.running_var", "norm.num_batches_tracked",
        "again.weight", "again.bias", "again.running_mean", "again.running_var", "again.num_batches_tracked"]
    assert len(list(m.parameters())) == 4
    assert len(list(m.modules())) == 3


def test_keys_match_pytorch_for_tied_parameters_and_shared_modules():
    torch = pytest.importorskip("torch")

    class TorchTied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = torch.nn.Embedding(5, 3)
            self.lm_head = torch.nn.Linear(3, 5, bias=False)
            self.lm_head.weight = self.wte.weight

    class TorchShared(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = torch.nn.Linear(2, 2)
            self.second = self.first
            self.norm = torch.nn.BatchNorm1d(2)
            self.again = self.norm

    assert list(TiedLM().state_dict()) == list(TorchTied().state_dict())
    assert list(SharedBlock().state_dict()) == list(TorchShared().state_dict())


def test_loading_a_state_dict_with_both_tied_keys_sets_the_shared_tensor():
    m = TiedLM()
    w = np.arange(15, dtype=np.float32).reshape(5, 3)
    result = m.load_state_dict({"wte.weight": w, "lm_head.weight": w})
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(m.wte.weight.detach().numpy(), w)
    assert m.lm_head.weight is m.wte.weight


def test_strict_loading_of_a_tied_model_needs_every_name_as_pytorch():
    m = TiedLM()
    w = np.ones((5, 3), np.float32)
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "lm_head.weight"'):
        m.load_state_dict({"wte.weight": w})
    np.testing.assert_array_equal(m.load_state_dict({"wte.weight": w}, strict=False).missing_keys,
                                  ["lm_head.weight"])
    np.testing.assert_array_equal(m.wte.weight.detach().numpy(), w)


def test_a_weight_tied_gpt_round_trips_through_a_checkpoint(tmp_path):
    md.manual_seed(0)
    model = GPT(vocab_size=7, block_size=4, n_layer=1, n_head=2, d_model=8, tie_weights=True)
    assert {"tok_emb.weight", "head.weight"} <= set(model.state_dict())
    md.save(model.state_dict(), tmp_path / "gpt.ckpt")
    md.manual_seed(1)
    other = GPT(vocab_size=7, block_size=4, n_layer=1, n_head=2, d_model=8, tie_weights=True)
    other.load_state_dict(md.load(tmp_path / "gpt.ckpt"))
    assert other.head.weight is other.tok_emb.weight
    for (name, a), b in zip(model.state_dict().items(), other.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
