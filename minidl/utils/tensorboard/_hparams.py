"""The three summaries the HParams dashboard reads for one run, built from
``tensorboard.plugins.hparams``' messages as ``torch.utils.tensorboard`` builds them:

- the experiment: which hyperparameters exist (with their type and, when given, their discrete
  domain) and which metrics to show;
- the session start: this run's value of each hyperparameter;
- the session end: the run finished.

The metrics themselves are ordinary scalars, written next to these by ``SummaryWriter.add_hparams``.
A bool counts as a number (1.0 or 0.0), as PyTorch records it, since ``bool`` is an ``int``.
"""
import numpy as np
from google.protobuf import struct_pb2
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.plugins.hparams import metadata
from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName, Status
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionEndInfo, SessionStartInfo

from ...tensor.tensor import Tensor
from ._convert import make_np


def _summary(tag, **content):
    data = HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, **content)
    smd = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=metadata.PLUGIN_NAME,
                                                                 content=data.SerializeToString()))
    return Summary(value=[Summary.Value(tag=tag, metadata=smd)])


def _domain(values, field):
    if values is None:
        return None
    return struct_pb2.ListValue(values=[struct_pb2.Value(**{field: v}) for v in values])


def hparams(hparam_dict, metric_dict, hparam_domain_discrete=None):
    """The (experiment, session start, session end) summaries for ``hparam_dict`` (name -> int, float,
    str, bool, a one-element tensor, or None to leave it out) and the metric names of ``metric_dict``."""
    if not isinstance(hparam_dict, dict):
        raise TypeError(f"parameter: hparam_dict should be a dictionary, nothing logged; got {type(hparam_dict)}")
    if not isinstance(metric_dict, dict):
        raise TypeError(f"parameter: metric_dict should be a dictionary, nothing logged; got {type(metric_dict)}")
    hparam_domain_discrete = hparam_domain_discrete or {}
    if not isinstance(hparam_domain_discrete, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, nothing logged.")
    for k, v in hparam_domain_discrete.items():
        if k not in hparam_dict or not isinstance(v, list) or not all(isinstance(d, type(hparam_dict[k])) for d in v):
            raise TypeError(f"parameter: hparam_domain_discrete[{k}] should be a list of same type as "
                            f"hparam_dict[{k}].")
    infos, start = [], SessionStartInfo()
    for k, v in hparam_dict.items():
        if v is None:
            continue
        discrete = hparam_domain_discrete.get(k)
        if isinstance(v, Tensor):
            start.hparams[k].number_value = float(make_np(v).reshape(-1)[0])
            infos.append(HParamInfo(name=k, type=DataType.Value("DATA_TYPE_FLOAT64")))
        elif isinstance(v, (int, float, np.integer, np.floating)):
            start.hparams[k].number_value = float(v)
            infos.append(HParamInfo(name=k, type=DataType.Value("DATA_TYPE_FLOAT64"),
                                    domain_discrete=_domain(discrete, "number_value")))
        elif isinstance(v, str):
            start.hparams[k].string_value = v
            infos.append(HParamInfo(name=k, type=DataType.Value("DATA_TYPE_STRING"),
                                    domain_discrete=_domain(discrete, "string_value")))
        else:
            raise ValueError(f"hparam_dict[{k!r}] should be one of int, float, str, bool, or a minidl tensor; "
                             f"got {type(v).__name__}")
    experiment = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=k)) for k in metric_dict])
    return (_summary(metadata.EXPERIMENT_TAG, experiment=experiment),
            _summary(metadata.SESSION_START_INFO_TAG, session_start_info=start),
            _summary(metadata.SESSION_END_INFO_TAG,
                     session_end_info=SessionEndInfo(status=Status.Value("STATUS_SUCCESS"))))
