"""Communication topologies: who may send to whom in a round, as a directed adjacency matrix.

``adjacency(name, n, hub)[i][j]`` is True when agent ``i`` may send to agent ``j``:

- ``none``: no edges (independent answers);
- ``complete``: everyone to everyone (broadcast);
- ``star``: the ``hub`` to every other agent and every other agent to the hub (synthesis);
- ``ring``: each agent to its two neighbours on a cycle;
- ``clusters``: complete inside contiguous groups of ``max(2, n // 2)`` agents, nothing across
  (clustered exploration: groups stay independent of each other);
- ``pipeline``: agent ``i`` to agent ``i + 1`` (a chain that refines an answer step by step).
"""

from __future__ import annotations

import numpy as np

from orchestra_rl.errors import OrchestraError

__all__ = ["COMMUNICATING", "TOPOLOGIES", "adjacency", "cluster_size"]

#: Every topology, and those that carry messages (what a policy chooses among).
TOPOLOGIES: tuple[str, ...] = ("none", "complete", "star", "ring", "clusters", "pipeline")
COMMUNICATING: tuple[str, ...] = TOPOLOGIES[1:]


def cluster_size(n: int) -> int:
    """Agents per cluster: pairs up to four agents, two halves beyond."""
    return max(2, n // 2)


def adjacency(name: str, n: int, hub: int = 0) -> np.ndarray:
    """The ``n x n`` boolean send matrix of topology ``name`` (no self loops)."""
    if n < 1:
        raise OrchestraError(f"a topology needs at least one agent, got n={n}")
    if not 0 <= hub < n:
        raise OrchestraError(f"hub {hub} is not an agent of a swarm of {n}")
    a = np.zeros((n, n), dtype=bool)
    idx = np.arange(n)
    if name == "none":
        pass
    elif name == "complete":
        a[:] = True
    elif name == "star":
        a[hub, :] = True
        a[:, hub] = True
    elif name == "ring":
        a[idx, (idx + 1) % n] = True
        a[idx, (idx - 1) % n] = True
    elif name == "clusters":
        size = cluster_size(n)
        group = idx // size
        a = group[:, None] == group[None, :]
    elif name == "pipeline":
        a[idx[:-1], idx[1:]] = True
    else:
        raise OrchestraError(f"unknown topology {name!r}; known: {', '.join(TOPOLOGIES)}")
    np.fill_diagonal(a, False)
    return a
