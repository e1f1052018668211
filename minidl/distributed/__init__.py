"""``minidl.distributed``: PyTorch's ``torch.distributed`` on MPI (mpi4py over MPICH).

    import minidl.distributed as dist
    dist.init_process_group("mpi")         # rank and world size from mpiexec; alone: rank 0 of 1
    dist.all_reduce(t)                     # in place, ReduceOp.SUM
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True); work.wait()

Run a script on several processes with ``mpiexec -n 2 python train.py`` (the ``[distributed]``
extra installs mpi4py and MPICH's ``mpiexec``); in tests, ``minidl.distributed.testing.run_ranks``
runs k ranks as threads of one process with the same semantics. Collectives take tensors of any
device: cuda tensors are staged through host memory (staging.py), float16 and bfloat16 travel as
float32. All ranks must make the same calls in the same order; a difference raises on every rank.

Besides the collectives of every rank (collectives.py, rooted.py: reduce, gather, scatter,
all_to_all.py), there are messages between two ranks (point_to_point.py: send, recv, isend,
irecv, batch_isend_irecv, monitored_barrier), the same calls for picklable Python objects
(objects.py) and rank helpers (ranks.py).
"""
from .collectives import (all_gather, all_gather_into_tensor, all_reduce, barrier, broadcast, reduce_scatter,
                          reduce_scatter_tensor)
from .process_group import (GroupMember, ProcessGroup, destroy_process_group, get_backend, get_rank,
                            get_world_size, group, init_process_group, is_available, is_gloo_available,
                            is_initialized, is_mpi_available, is_nccl_available, new_group)
from .reduce_op import ReduceOp
from .work import Work
from .rooted import gather, reduce, scatter
from .all_to_all import all_to_all, all_to_all_single
from .point_to_point import P2POp, batch_isend_irecv, irecv, isend, monitored_barrier, recv, send
from .objects import (all_gather_object, broadcast_object_list, gather_object, recv_object_list,
                      scatter_object_list, send_object_list)
from .ranks import (get_global_rank, get_group_rank, get_node_local_rank, get_process_group_ranks,
                    is_torchelastic_launched)

__all__ = ["GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather", "all_gather_into_tensor", "all_reduce",
           "barrier", "broadcast", "destroy_process_group", "get_backend", "get_rank", "get_world_size", "group",
           "init_process_group", "is_available", "is_gloo_available", "is_initialized", "is_mpi_available",
           "is_nccl_available", "new_group", "reduce_scatter", "reduce_scatter_tensor"]
__all__ += ["P2POp", "all_gather_object", "all_to_all", "all_to_all_single", "batch_isend_irecv",
            "broadcast_object_list", "gather", "gather_object", "get_global_rank", "get_group_rank",
            "get_node_local_rank", "get_process_group_ranks", "irecv", "is_torchelastic_launched", "isend",
            "monitored_barrier", "recv", "recv_object_list", "reduce", "scatter", "scatter_object_list", "send",
            "send_object_list"]
