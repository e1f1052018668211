"""Layers as Modules. One file per family; each module's forward calls nn.functional."""
from .module import Module
