"""Model zoo: small CNNs for images (LeNet, VGG, CIFAR-style ResNets), built from minidl.nn.

    from minidl.zoo import get_model
    model = get_model("resnet8", in_channels=1, num_classes=10, norm="group")
"""
from .lenet import LeNet
from .norms import NORMS, make_norm
from .resnet import BasicBlock, ResNet, resnet8, resnet20
from .vgg import VGG, vgg_small
from .encoder import TransformerEncoderClassifier  # noqa: F401
from .gpt import GPT  # noqa: F401
from .char_lstm import CharLSTM  # noqa: F401
from .transformer import TransformerBlock, deepnorm_constants  # noqa: F401
from .vit import ViT  # noqa: F401

MODELS = {
    "lenet": LeNet,
    "vgg_small": vgg_small,
    "resnet8": resnet8,
    "resnet20": resnet20,
}


def get_model(name, **kw):
    """Build the zoo model ``name`` (see ``MODELS``) with constructor arguments ``kw``."""
    try:
        factory = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(sorted(MODELS))}") from None
    return factory(**kw)


def register_model(name, factory):
    MODELS[name] = factory
    return factory


__all__ = ["BasicBlock", "LeNet", "MODELS", "NORMS", "ResNet", "VGG", "get_model", "make_norm", "register_model",
           "resnet8", "resnet20", "vgg_small"]
