"""Orders of a graph's variables for sequential samplers (``jaxz.models.gmrf.orderings``):
random, reverse Cuthill–McKee, minimum degree. order[t] is the variable added at step t.
Graphs are (T, T) 0/1 symmetric adjacency matrices with a zero diagonal."""
import jax
import numpy as np
import scipy.sparse
import scipy.sparse.csgraph


def check_adjacency(adjacency) -> np.ndarray:
    """The adjacency as int8, or ValueError naming what is wrong with it."""
    adjacency = np.asarray(adjacency)
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1] or adjacency.shape[0] < 1:
        raise ValueError(f"adjacency must be a square (T, T) array with T >= 1, got shape {adjacency.shape}")
    if not np.all((adjacency == 0) | (adjacency == 1)):
        raise ValueError("adjacency must hold only 0 and 1")
    if not np.array_equal(adjacency, adjacency.T):
        raise ValueError("adjacency must be symmetric")
    if np.any(np.diag(adjacency) != 0):
        raise ValueError("adjacency must have a zero diagonal (no self-loops)")
    return adjacency.astype(np.int8)


def random_order(num_variables: int, rng_key) -> np.ndarray:
    """A uniformly random order; ``rng_key`` a JAX key or an integer seed."""
    if int(num_variables) < 1:
        raise ValueError(f"num_variables must be >= 1, got {num_variables}")
    if isinstance(rng_key, (int, np.integer)):
        return np.random.default_rng(int(rng_key)).permutation(int(num_variables))
    return np.asarray(jax.random.permutation(rng_key, int(num_variables)))


def reverse_cuthill_mckee(adjacency) -> np.ndarray:
    """Reverse Cuthill–McKee (scipy.sparse.csgraph): a small bandwidth, the "chain-like"
    order of seed §5."""
    adjacency = check_adjacency(adjacency)
    sparse = scipy.sparse.csr_matrix(adjacency)
    return np.asarray(scipy.sparse.csgraph.reverse_cuthill_mckee(sparse, symmetric_mode=True), np.int64)


def approximate_minimum_degree(adjacency) -> np.ndarray:
    """A fill-reducing order (seed §5, §6.3 use AMD): a plain minimum-degree elimination
    on the elimination graph — at each step eliminate a vertex of least current degree
    (ties: lowest index) and join its neighbours into a clique — returned reversed, so
    that the forward conditionals' factor (``forward_conditionals``) is the low-fill one.

    This is exact-degree minimum degree, not SuiteSparse's AMD (approximate degrees,
    element absorption): no maintained pure-Python AMD is on PyPI (scikit-sparse has no
    wheel here; suitesparse-amd and cvxopt are compiled extensions), and at T in the
    thousands the plain algorithm is cheap and its fill close to AMD's.
    """
    import heapq

    adjacency = check_adjacency(adjacency)
    neighbours = [set(np.flatnonzero(row).tolist()) for row in adjacency]
    heap = [(len(n), v) for v, n in enumerate(neighbours)]
    heapq.heapify(heap)
    eliminated = np.zeros(len(neighbours), bool)
    elimination = []
    while heap:
        degree, vertex = heapq.heappop(heap)
        if eliminated[vertex] or degree != len(neighbours[vertex]):
            continue  # a stale heap entry
        eliminated[vertex] = True
        elimination.append(vertex)
        clique = neighbours[vertex]
        for other in clique:
            neighbours[other].discard(vertex)
            neighbours[other] |= clique - {other}
            heapq.heappush(heap, (len(neighbours[other]), other))
        neighbours[vertex] = set()
    return np.asarray(elimination[::-1], np.int64)
