"""A parse tree drawn with matplotlib, its tags over the sentence's words
("English constituency parsing")."""

from matplotlib.axes import Axes

from aiayn.tasks.grammar import Tree, is_leaf
from aiayn.tasks.parsing import tree_tags


def draw_tree(ax: Axes, tree: Tree, sentence: str, title: str = "") -> None:
    """Draw a tree of tags over the words of ``sentence``, root at the top."""
    below = sentence.split()
    depth = _height(tree)

    def place(node: Tree, level: int, leaf: list[int]) -> tuple[float, float]:
        if is_leaf(node):
            x = float(leaf[0])
            leaf[0] += 1
            y_tag = -depth
            ax.text(x, y_tag, node[0], ha="center", va="center", fontsize=8)
            if x < len(below):
                word = below[int(x)]
                ax.text(x, y_tag - 0.8, word, ha="center", va="top", fontsize=8)
            return x, y_tag
        points = [place(child, level + 1, leaf) for child in node[1]]
        x, y = sum(p[0] for p in points) / len(points), -level
        for px, py in points:
            ax.plot([x, px], [y - 0.2, py + 0.2], color="0.5", linewidth=0.8)
        ax.text(x, y, node[0], ha="center", va="center", fontsize=8, weight="bold")
        return x, y

    n = len(tree_tags(tree))
    place(tree, 0, [0])
    ax.set_xlim(-0.7, max(n, len(below)) - 0.3)
    ax.set_ylim(-depth - 2.2, 0.6)
    ax.set_title(title)
    ax.axis("off")


def _height(tree: Tree) -> int:
    """Edges from the root to the deepest tag."""
    if is_leaf(tree):
        return 0
    return 1 + max(_height(child) for child in tree[1])
