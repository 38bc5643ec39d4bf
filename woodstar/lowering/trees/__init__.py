"""Tree strategies: three lowerings of the same TreeEnsemble IR."""

from .gemm import GemmTrees
from .perfect_tree_traversal import PerfectTreeTraversalTrees
from .tree_traversal import TreeTraversalTrees

__all__ = ["GemmTrees", "TreeTraversalTrees", "PerfectTreeTraversalTrees"]
